package coalesce

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// pattern returns n bytes of a fixed pattern (i mod 251), the long payloads
// of the golden vectors.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i % 251)
	}
	return b
}

// golden are encodings checked in both directions (D2, D3). The checksums
// were computed independently of this package (MD5 from a reference
// implementation, the short form by hand: "abc" ends in 0x63 = 01100011,
// reversed 11000110, inverted 00111001 = 0x39).
var golden = []struct {
	name     string
	reliable bool
	payload  []byte
	wire     string // hex; spaces are ignored
}{
	{"empty unreliable: empty checksum (D3)", false, []byte{}, "00 00"},
	{"empty reliable", true, []byte{}, "01 00"},
	{"one byte 0x01", true, []byte{0x01}, "01 01 01 7f"},
	{"one byte 0xff", false, []byte{0xff}, "00 01 ff 00"},
	{"abc: reversed and inverted", false, []byte("abc"), "00 03 616263 39b979"},
	{"15 bytes: last short checksum", true, pattern(15),
		"01 0f 000102030405060708090a0b0c0d0e 8f4fcf2faf6fef1f9f5fdf3fbf7fff"},
	{"16 bytes: first MD5 checksum", false, pattern(16),
		"00 10 000102030405060708090a0b0c0d0e0f 1ac1ef01e96caf1be0d329331a4fc2a8"},
	{"16 ASCII bytes", true, []byte("0123456789abcdef"),
		"01 10 30313233343536373839616263646566 4032af8d61035123906e58e067140cc5"},
	{"255 bytes: 1-byte length", false, pattern(255),
		"00 ff" + hex.EncodeToString(pattern(255)) + "158fbd8552a4d0bfe0a8667be32f9892"},
	{"256 bytes: 2-byte length (flags 0x40)", true, pattern(256),
		"41 0100" + hex.EncodeToString(pattern(256)) + "f37caf20c55a8b74b224b3164409ad2d"},
	{"65535 bytes: 2-byte length", false, pattern(65535),
		"40 ffff" + hex.EncodeToString(pattern(65535)) + "89378be93d51bbd3a9aa65e920103692"},
	{"65536 bytes: 3-byte length (flags 0x80)", true, pattern(65536),
		"81 010000" + hex.EncodeToString(pattern(65536)) + "9cc60713923528a1dd94e1c1ab0ebc9e"},
}

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

func TestGoldenMessages(t *testing.T) {
	for _, tc := range golden {
		t.Run(tc.name, func(t *testing.T) {
			wire := unhex(t, tc.wire)
			// Encode to the bytes.
			got := AppendMessage(nil, tc.payload, tc.reliable)
			if !bytes.Equal(got, wire) {
				t.Errorf("AppendMessage: got %d bytes, want %d; first difference at %d", len(got), len(wire), firstDiff(got, wire))
			}
			if n := EncodedLen(len(tc.payload)); n != len(wire) {
				t.Errorf("EncodedLen(%d) = %d, want %d", len(tc.payload), n, len(wire))
			}
			// Decode from the bytes.
			m, err := ParseMessage(wire, 1<<20)
			if err != nil {
				t.Fatalf("ParseMessage: %v", err)
			}
			want := Message{Reliable: tc.reliable, Payload: tc.payload}
			if diff := cmp.Diff(want, m); diff != "" {
				t.Errorf("ParseMessage (-want +got):\n%s", diff)
			}
			h, err := ParseHeader(wire[:min(len(wire), MaxHeaderLen)], 1<<20)
			if err != nil {
				t.Fatalf("ParseHeader: %v", err)
			}
			if h.EncodedLen() != len(wire) || h.Len != len(tc.payload) || h.Reliable != tc.reliable {
				t.Errorf("ParseHeader = %+v (EncodedLen %d), want Len %d, EncodedLen %d", h, h.EncodedLen(), len(tc.payload), len(wire))
			}
		})
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestFourByteLength encodes a 16 MiB payload, the smallest that needs a
// 4-byte length field (flags 0xC0, D2), and checks its header, its MD5 and
// the way back.
func TestFourByteLength(t *testing.T) {
	if testing.Short() {
		t.Skip("16 MiB payload")
	}
	p := pattern(1 << 24)
	b := AppendMessage(nil, p, false)
	if got, want := hex.EncodeToString(b[:5]), "c001000000"; got != want {
		t.Errorf("header = %s, want %s", got, want)
	}
	if got, want := hex.EncodeToString(b[len(b)-16:]), "3fa26ae9e0a7aa835755bee5ed80ff95"; got != want {
		t.Errorf("MD5 = %s, want %s", got, want)
	}
	m, err := ParseMessage(b, 1<<24)
	if err != nil || !bytes.Equal(m.Payload, p) {
		t.Fatalf("ParseMessage: %v", err)
	}
	if _, err := ParseMessage(b, 1<<24-1); !errors.Is(err, ErrTooLarge) {
		t.Errorf("ParseMessage with max one below: %v, want ErrTooLarge", err)
	}
}

// TestDecodeOnly covers what only a decoder sees: length fields longer than
// needed and reserved flag bits, both accepted (D2).
func TestDecodeOnly(t *testing.T) {
	tests := []struct {
		name string
		wire string
		want Message
	}{
		{"2-byte length for 3 bytes", "40 0003 616263 39b979", Message{false, []byte("abc")}},
		{"3-byte length for 3 bytes", "81 000003 616263 39b979", Message{true, []byte("abc")}},
		{"4-byte length for 3 bytes", "c0 00000003 616263 39b979", Message{false, []byte("abc")}},
		{"4-byte length for 0 bytes", "c1 00000000", Message{true, []byte{}}},
		{"reserved bits 0x02..0x20 ignored", "3f 03 616263 39b979", Message{true, []byte("abc")}},
		{"reserved bits with 2-byte length", "7e 0001 01 7f", Message{false, []byte{1}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ParseMessage(unhex(t, tc.wire), 100)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, m); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name   string
		wire   string
		maxLen int
		want   error
	}{
		{"empty", "", 100, ErrShort},
		{"flags only", "00", 100, ErrShort},
		{"length field cut", "c0 0000", 100, ErrShort},
		{"payload cut", "00 03 6162", 100, ErrShort},
		{"checksum cut", "00 03 616263 39b9", 100, ErrShort},
		{"one trailing byte", "00 03 616263 39b979 00", 100, ErrTrailing},
		{"short checksum wrong", "00 03 616263 39b978", 100, ErrChecksum},
		{"short checksum not reversed", "00 03 616263 79b939", 100, ErrChecksum},
		{"MD5 wrong", "00 10 000102030405060708090a0b0c0d0e0f 1ac1ef01e96caf1be0d329331a4fc2a9", 100, ErrChecksum},
		{"above max", "00 04 61626364 00000000", 3, ErrTooLarge},
		{"4 GiB claim", "c0 ffffffff", 1 << 30, ErrTooLarge},
		{"negative max admits only empty", "00 01 01 7f", -1, ErrTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseMessage(unhex(t, tc.wire), tc.maxLen)
			if !errors.Is(err, tc.want) {
				t.Errorf("ParseMessage = %v, want %v", err, tc.want)
			}
		})
	}
}

// TestParseHeaderPrefix checks that a header is read from a prefix of the
// message, as a receiver waiting for more packets needs, and that a claimed
// length is refused before anything else is looked at.
func TestParseHeaderPrefix(t *testing.T) {
	tests := []struct {
		name string
		b    string
		max  int
		want Header
		err  error
	}{
		{"flags and 1-byte length", "01 05", 10, Header{Reliable: true, Len: 5, HeaderLen: 2}, nil},
		{"4-byte length with nothing after", "c0 00 00 01 00", 1000, Header{Len: 256, HeaderLen: 5}, nil},
		{"length field incomplete", "80 00 01", 1000, Header{}, ErrShort},
		{"huge claim", "c0 7f ff ff ff", 1 << 20, Header{}, ErrTooLarge},
		{"exactly max", "40 01 00", 256, Header{Len: 256, HeaderLen: 3}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, err := ParseHeader(unhex(t, tc.b), tc.max)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if diff := cmp.Diff(tc.want, h); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestEncodedLenBoundaries(t *testing.T) {
	tests := []struct{ n, want int }{
		{0, 2}, {1, 4}, {15, 32}, {16, 34}, {255, 273}, {256, 275},
		{65535, 65554}, {65536, 65556}, {1<<24 - 1, 1<<24 + 19}, {1 << 24, 1<<24 + 21},
	}
	for _, tc := range tests {
		if got := EncodedLen(tc.n); got != tc.want {
			t.Errorf("EncodedLen(%d) = %d, want %d", tc.n, got, tc.want)
		}
	}
}

// TestShortChecksumIsReversedBits checks D3's definition directly on the bit
// string: the checksum of p, read as one bit string, is p's bit string
// reversed and inverted.
func TestShortChecksumIsReversedBits(t *testing.T) {
	bitsOf := func(b []byte) string {
		var s strings.Builder
		for _, c := range b {
			for i := 7; i >= 0; i-- {
				s.WriteByte('0' + c>>i&1)
			}
		}
		return s.String()
	}
	for n := 0; n <= ShortChecksumMax; n++ {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(i*37 + 11)
		}
		in, sum := bitsOf(p), bitsOf(AppendChecksum(nil, p))
		var want strings.Builder
		for i := len(in) - 1; i >= 0; i-- {
			want.WriteByte(in[i] ^ 1)
		}
		if sum != want.String() {
			t.Errorf("n=%d: checksum bits %s, want %s", n, sum, want.String())
		}
		if !VerifyChecksum(p, AppendChecksum(nil, p)) {
			t.Errorf("n=%d: VerifyChecksum rejects its own checksum", n)
		}
	}
}

func TestVerifyNoAllocs(t *testing.T) {
	for _, n := range []int{0, 15, 16, 64, 1200, 65536} {
		b := AppendMessage(nil, pattern(n), true)
		allocs := testing.AllocsPerRun(100, func() {
			if _, err := ParseMessage(b, 1<<20); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("ParseMessage of %d bytes: %v allocs, want 0", n, allocs)
		}
		payload, buf := pattern(n), make([]byte, 0, len(b))
		allocs = testing.AllocsPerRun(100, func() { buf = AppendMessage(buf[:0], payload, false) })
		if allocs != 0 {
			t.Errorf("AppendMessage into a large enough buffer: %v allocs, want 0", allocs)
		}
	}
}
