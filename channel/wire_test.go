package channel

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

// goldenHeaders are data packet headers (D4) checked in both directions.
// -10000 is 0xffd8f0 in 24-bit two's complement (D1).
var goldenHeaders = []struct {
	name string
	h    Header
	wire string
}{
	{"first packet, reliable start", Header{Reliable: true, Start: true, Seq: 0, Rel: 1}, "03 000000 000001"},
	{"unreliable continuation", Header{Seq: 1, Rel: 0}, "00 000001 000000"},
	{"unreliable start", Header{Start: true, Seq: 2, Rel: 1}, "02 000002 000001"},
	{"reliable continuation", Header{Reliable: true, Seq: 3, Rel: 2}, "01 000003 000002"},
	{"seq 8388607, the last before the wrap", Header{Seq: MaxSeq, Rel: MaxSeq}, "00 7fffff 7fffff"},
	{"seq -10000, the first after the wrap (D5)", Header{Reliable: true, Seq: MinSeq, Rel: MinSeq}, "01 ffd8f0 ffd8f0"},
	{"seq -1", Header{Start: true, Seq: -1, Rel: 65536}, "02 ffffff 010000"},
	{"mixed", Header{Reliable: true, Start: true, Seq: 0x123456, Rel: -2}, "03 123456 fffffe"},
}

func TestGoldenHeaders(t *testing.T) {
	for _, tc := range goldenHeaders {
		t.Run(tc.name, func(t *testing.T) {
			wire := unhex(t, tc.wire)
			if diff := cmp.Diff(wire, tc.h.Append(nil)); diff != "" {
				t.Errorf("Append (-want +got):\n%s", diff)
			}
			chunk := []byte{0xaa, 0xbb}
			pkt := append(append([]byte(nil), wire...), chunk...)
			h, err := ParseHeader(pkt)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.h, h); diff != "" {
				t.Errorf("ParseHeader (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(chunk, pkt[HeaderLen:]); diff != "" {
				t.Errorf("chunk (-want +got):\n%s", diff)
			}
		})
	}
}

// TestWrapOnTheWire encodes the packet after 8388607 (D5).
func TestWrapOnTheWire(t *testing.T) {
	h := Header{Seq: MaxSeq.Next(), Rel: MaxSeq.Next()}
	if got, want := hex.EncodeToString(h.Append(nil)), "00ffd8f0ffd8f0"; got != want {
		t.Errorf("header after the wrap = %s, want %s", got, want)
	}
}

func TestParseHeaderErrors(t *testing.T) {
	tests := []struct {
		name string
		wire string
		want Header
		err  error
	}{
		{"empty", "", Header{}, ErrShort},
		{"6 bytes", "03 000000 0000", Header{}, ErrShort},
		{"header only, empty chunk", "03 000000 000001", Header{Reliable: true, Start: true, Rel: 1}, nil},
		{"reserved flag bits ignored (D4)", "ff 000005 000001", Header{Reliable: true, Start: true, Seq: 5, Rel: 1}, nil},
		{"reserved bits without the defined ones", "fc 000005 000001", Header{Seq: 5, Rel: 1}, nil},
		{"seq -10001 (D5)", "00 ffd8ef 000000", Header{}, ErrBadSeq},
		{"seq -8388608", "00 800000 000000", Header{}, ErrBadSeq},
		{"rel -10001", "00 000000 ffd8ef", Header{}, ErrBadSeq},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, err := ParseHeader(unhex(t, tc.wire))
			if !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if diff := cmp.Diff(tc.want, h); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// goldenAcks are ack pairs (D13) checked in both directions.
var goldenAcks = []struct {
	name string
	acks []Ack
	wire string
}{
	{"one", []Ack{{Channel: 0, Seq: 0}}, "0000 000000"},
	{"largest channel and seq", []Ack{{Channel: 32767, Seq: MaxSeq}}, "7fff 7fffff"},
	{"seq -10000 after the wrap", []Ack{{Channel: 5, Seq: MinSeq}}, "0005 ffd8f0"},
	{"three", []Ack{{1, 1}, {2, 258}, {256, -1}}, "0001 000001 0002 000102 0100 ffffff"},
}

func TestGoldenAcks(t *testing.T) {
	for _, tc := range goldenAcks {
		t.Run(tc.name, func(t *testing.T) {
			wire := unhex(t, tc.wire)
			var b []byte
			for _, a := range tc.acks {
				b = AppendAck(b, a)
			}
			if diff := cmp.Diff(wire, b); diff != "" {
				t.Errorf("AppendAck (-want +got):\n%s", diff)
			}
			// AppendAcks writes them in one call, after what b holds,
			// whether b has room for them or must grow.
			for _, pre := range [][]byte{nil, []byte("ab"), make([]byte, 3, 64)} {
				want := append(append([]byte(nil), pre...), wire...)
				if diff := cmp.Diff(want, AppendAcks(pre, tc.acks)); diff != "" {
					t.Errorf("AppendAcks after %x (-want +got):\n%s", pre, diff)
				}
			}
			it, err := ParseAcks(wire)
			if err != nil {
				t.Fatal(err)
			}
			var got []Ack
			for it.Next() {
				got = append(got, it.Ack())
			}
			if diff := cmp.Diff(tc.acks, got); diff != "" {
				t.Errorf("ParseAcks (-want +got):\n%s", diff)
			}
		})
	}
}

// AppendAcks, which writes two pairs at a time, appends what AppendAck
// does one pair after the other: for any number of pairs, odd or even,
// any channels and sequence numbers (of which the encoding keeps 24 bits),
// after any bytes, with room in b or none.
func TestAppendAcksIsAppendAck(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		as := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) Ack {
			return Ack{Channel: rapid.Int16().Draw(t, "channel"), Seq: Seq(rapid.Int32().Draw(t, "seq"))}
		}), 0, 40).Draw(t, "acks")
		pre := rapid.SliceOfN(rapid.Byte(), 0, 7).Draw(t, "pre")
		b := append(make([]byte, 0, len(pre)+rapid.IntRange(0, 5*len(as)+3).Draw(t, "room")), pre...)
		want := append([]byte(nil), pre...)
		for _, a := range as {
			want = AppendAck(want, a)
		}
		if got := AppendAcks(b, as); !bytes.Equal(got, want) {
			t.Fatalf("AppendAcks(%x, %v) = %x, want %x", pre, as, got, want)
		}
	})
}

// SkipChannel moves past the pairs of one channel that come next, and no
// further: what Next then gives is what it would have given after the
// acks of that channel it gives first, and the pair it stops at, if any,
// is of another channel, or of none (negative).
func TestSkipChannel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		pair := rapid.Custom(func(t *rapid.T) Ack {
			// A few channels, a negative one among them, and
			// sequence numbers valid or not.
			return Ack{
				Channel: rapid.SampledFrom([]int16{0, 1, 2, -5, 256}).Draw(t, "channel"),
				Seq:     Seq(rapid.Int32Range(int32(MinSeq)-3, int32(MinSeq)+3).Draw(t, "seq")),
			}
		})
		enc := AppendAcks(nil, rapid.SliceOfN(pair, 1, 12).Draw(t, "pairs"))
		ch := rapid.SampledFrom([]int16{0, 1, 2, 256}).Draw(t, "skip")
		it, _ := ParseAcks(enc)
		var all []Ack
		for it.Next() {
			all = append(all, it.Ack())
		}
		it, _ = ParseAcks(enc)
		it.SkipChannel(ch)
		if len(it.b) > 0 && int16(binary.BigEndian.Uint16(it.b)) == ch {
			t.Fatalf("SkipChannel(%d) stopped at a pair of its channel: %x left of %x", ch, it.b, enc)
		}
		var rest []Ack
		for it.Next() {
			rest = append(rest, it.Ack())
		}
		if len(rest) > len(all) || !slices.Equal(rest, all[len(all)-len(rest):]) {
			t.Fatalf("after SkipChannel(%d), Next gives %v; without, %v", ch, rest, all)
		}
		for _, a := range all[:len(all)-len(rest)] {
			if a.Channel != ch {
				t.Fatalf("SkipChannel(%d) skipped %v, of another channel (all: %v, after: %v)", ch, a, all, rest)
			}
		}
	})
}

func TestParseAcks(t *testing.T) {
	tests := []struct {
		name string
		wire string
		want []Ack
		err  error
	}{
		{"empty is malformed (D13)", "", nil, ErrBadAcks},
		{"4 bytes", "0000 0000", nil, ErrBadAcks},
		{"6 bytes", "0000 000000 00", nil, ErrBadAcks},
		{"negative channel skipped", "fffb 000001 0003 000002", []Ack{{3, 2}}, nil},
		{"invalid seq skipped", "0001 800000 0001 ffd8ef 0001 ffd8f0", []Ack{{1, MinSeq}}, nil},
		{"nothing valid", "8000 000000", nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			it, err := ParseAcks(unhex(t, tc.wire))
			if !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			var got []Ack
			for it.Next() {
				got = append(got, it.Ack())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseAcksNoAllocs(t *testing.T) {
	var b []byte
	for i := range 100 {
		b = AppendAck(b, Ack{Channel: int16(i), Seq: Seq(i)})
	}
	n := 0
	allocs := testing.AllocsPerRun(100, func() {
		it, _ := ParseAcks(b)
		for it.Next() {
			n += int(it.Ack().Seq)
		}
	})
	if allocs != 0 {
		t.Errorf("ParseAcks and iteration: %v allocs, want 0", allocs)
	}
}
