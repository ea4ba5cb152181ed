package urp

import (
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// equateEmpty makes a nil Data equal to an empty one.
var equateEmpty = cmpopts.EquateEmpty()

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// brand64 is a brand that fills R2U_WELC's field with no NUL.
var brand64 = strings.Repeat("0123456789abcdef", 4)

// golden is every packet of Tables 2 and 3 with its bytes, little-endian
// as the specification says ("incoming data is assumed to be little
// ending"). Each is checked both ways. R2U_MADE is the packet the text
// calls R2U_MAKE (U1); R2U_VALS is a key and a value, nothing more (U2).
var golden = []struct {
	name string
	p    Packet
	hex  string
}{
	{"U2R_MAKE", Packet{ID: U2RMake}, "80"},
	{"U2R_JOIN", Packet{ID: U2RJoin, GID: 0x01020304, Password: 0xdeadbeef}, "81 04030201 efbeadde"},
	{"U2R_QUIT", Packet{ID: U2RQuit}, "82"},
	{"U2R_BROD to all", Packet{ID: U2RBrod, UID: 0, Data: []byte("hi")}, "83 00000000 02000000 6869"},
	{"U2R_BROD excluding", Packet{ID: U2RBrod, UID: 0x0a0b0c0d, Data: []byte{0, 0xff}}, "83 0d0c0b0a 02000000 00ff"},
	{"U2R_SEND", Packet{ID: U2RSend, UID: 42, Data: []byte("abc")}, "84 2a000000 03000000 616263"},
	{"U2R_SEND empty", Packet{ID: U2RSend, UID: 7}, "84 07000000 00000000"},
	{"U2R_SETS", Packet{ID: U2RSets, Control: Respond | Notify, Key: KeyGroupFlags, Value: 0x0c}, "85 03 02000000 0c000000"},
	{"U2R_SETS reserved bits", Packet{ID: U2RSets, Control: 0xfc, Key: KeyGroupPass, Value: 0xfffffffe}, "85 fc 01000000 feffffff"},
	{"U2R_GETS", Packet{ID: U2RGets, Key: KeyGroupMax}, "86 03000000"},
	{"U2R_KICK", Packet{ID: U2RKick, UID: 0x11223344}, "87 44332211"},
	{"R2U_WELC", Packet{ID: R2UWelc, Version: 1, Revision: 0, UID: 7, Brand: "fastnet"},
		"00 0100 0000 07000000 666173746e6574" + strings.Repeat("00", 57)},
	{"R2U_WELC brand of 64 bytes, no NUL", Packet{ID: R2UWelc, Version: 0x0b02, Revision: 0x0304, UID: 0xffffffff, Brand: brand64},
		"00 020b 0403 ffffffff " + hex.EncodeToString([]byte(brand64))},
	{"R2U_TEXT", Packet{ID: R2UText, UID: 5, Data: []byte("abc")}, "01 05000000 03000000 616263"},
	{"R2U_MADE created", Packet{ID: R2UMade, Status: StatMade, GID: 0x99}, "02 01 99000000"},
	{"R2U_MADE failed", Packet{ID: R2UMade, Status: StatPass, GID: 0x12345678}, "02 11 78563412"},
	{"R2U_JOIN", Packet{ID: R2UJoin, UID: 0x100}, "03 00010000"},
	{"R2U_LEFT", Packet{ID: R2ULeft, UID: 0x100}, "04 00010000"},
	{"R2U_STAT", Packet{ID: R2UStat, Role: Host}, "05 03"},
	{"R2U_VALS", Packet{ID: R2UVals, Key: KeyGroupPass, Value: 0xcafebabe}, "06 01000000 bebafeca"},
}

func dirOf(id ID) Direction {
	if id.ToRelay() {
		return ToRelay
	}
	return ToUser
}

func TestGolden(t *testing.T) {
	for _, tt := range golden {
		t.Run(tt.name, func(t *testing.T) {
			want := unhex(t, tt.hex)
			got := Append(nil, tt.p)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Append (-want +got):\n%s", diff)
			}
			if n := EncodedLen(tt.p); n != len(want) {
				t.Errorf("EncodedLen = %d, want %d", n, len(want))
			}
			p, n, err := Parse(want, dirOf(tt.p.ID), 1<<10)
			if err != nil || n != len(want) {
				t.Fatalf("Parse = %d, %v; want %d, nil", n, err, len(want))
			}
			if diff := cmp.Diff(tt.p, p, equateEmpty); diff != "" {
				t.Errorf("Parse (-want +got):\n%s", diff)
			}
			// The other direction does not know the identifier (U5).
			other := ToUser
			if dirOf(tt.p.ID) == ToUser {
				other = ToRelay
			}
			if _, _, err := Parse(want, other, 1<<10); err != ErrUnknownPacket {
				t.Errorf("Parse in the wrong direction: %v, want ErrUnknownPacket", err)
			}
		})
	}
}

// TestParsePrefixes checks that every proper prefix of a packet is
// ErrShort with a need beyond it, and exactly the packet's length once
// the header is there.
func TestParsePrefixes(t *testing.T) {
	for _, tt := range golden {
		b := unhex(t, tt.hex)
		header := fixedSize(tt.p.ID)
		for i := range len(b) {
			_, n, err := Parse(b[:i], dirOf(tt.p.ID), 1<<10)
			if err != ErrShort || n <= i || n > len(b) {
				t.Errorf("%s: Parse of %d bytes = %d, %v; want ErrShort and a need in %d..%d", tt.name, i, n, err, i+1, len(b))
			}
			if i >= header && n != len(b) {
				t.Errorf("%s: Parse of %d bytes (header complete) needs %d, want %d", tt.name, i, n, len(b))
			}
		}
	}
}

// TestParseErrors checks the identifiers of neither table and a message
// above the limit, which is refused from its header alone (U5, U6).
func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		dir  Direction
		hex  string
		max  int
		want error
	}{
		{"0x88 to relay", ToRelay, "88", 10, ErrUnknownPacket},
		{"0xff to relay", ToRelay, "ff00000000", 10, ErrUnknownPacket},
		{"0x07 to user", ToUser, "07", 10, ErrUnknownPacket},
		{"R2U id to relay", ToRelay, "0503", 10, ErrUnknownPacket},
		{"U2R id to user", ToUser, "80", 10, ErrUnknownPacket},
		{"broadcast above the limit", ToRelay, "83 00000000 0b000000", 10, ErrMessageTooLong},
		{"send of 4 GiB", ToRelay, "84 00000000 ffffffff", 10, ErrMessageTooLong},
		{"text above the limit", ToUser, "01 00000000 0b000000", 10, ErrMessageTooLong},
		{"negative limit", ToUser, "01 00000000 01000000", -1, ErrMessageTooLong},
		{"at the limit", ToRelay, "83 00000000 0a000000 00000000000000000000", 10, nil},
		{"zero limit, empty message", ToRelay, "84 01000000 00000000", 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := Parse(unhex(t, tt.hex), tt.dir, tt.max)
			if !errors.Is(err, tt.want) {
				t.Errorf("Parse = %v, want %v", err, tt.want)
			}
		})
	}
}

// TestAppendUnknown checks that an unknown identifier encodes to nothing,
// and that a brand above 64 bytes is cut.
func TestAppendUnknown(t *testing.T) {
	if b := Append([]byte{1}, Packet{ID: 0x42}); len(b) != 1 || EncodedLen(Packet{ID: 0x42}) != 0 {
		t.Errorf("unknown id appended %x", b)
	}
	b := Append(nil, Packet{ID: R2UWelc, Brand: brand64 + "xyz"})
	p, _, err := Parse(b, ToUser, 0)
	if len(b) != welcSize || err != nil || p.Brand != brand64 {
		t.Errorf("a brand of 67 bytes: %d bytes, brand %q, %v", len(b), p.Brand, err)
	}
}

func TestNames(t *testing.T) {
	tests := []struct{ got, want string }{
		{U2RBrod.String(), "U2R_BROD"},
		{R2UMade.String(), "R2U_MADE"},
		{ID(0x42).String(), "ID(0x42)"},
		{Host.String(), "HOST"},
		{Role(9).String(), "Role(9)"},
		{StatFull.String(), "STAT_FULL"},
		{Status(0x30).String(), "Status(0x30)"},
		{KeyGroupFlags.String(), "GROUP_FLAGS"},
		{Key(9).String(), "Key(9)"},
		{EventJoinFailed.String(), "join-failed"},
		{GotValue.String(), "value"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
	for id := range 256 {
		if ID(id).Known() != (fixedSize(ID(id)) != 0) {
			t.Errorf("%v: Known and fixedSize disagree", ID(id))
		}
	}
}
