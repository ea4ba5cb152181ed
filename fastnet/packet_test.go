package fastnet

import (
	"encoding/hex"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Golden vectors of the basic packet (spec "Basic Packet Format", D1): a
// big-endian i16 channel id, then the payload.
func TestPacketGolden(t *testing.T) {
	tests := []struct {
		name    string
		ch      int16
		payload string
		hex     string
	}{
		{"message channel 0", 0, "aa", "0000aa"},
		{"highest channel", 32767, "", "7fff"},
		{"channel -1", -1, "01", "ffff01"},
		{"ack channel -5", -5, "", "fffb"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := unhex(t, tt.hex)
			got := append(appendPacketHeader(nil, tt.ch), unhex(t, tt.payload)...)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("encode (-want +got):\n%s", diff)
			}
			ch, p, err := parsePacket(want)
			if err != nil || ch != tt.ch || hex.EncodeToString(p) != tt.payload {
				t.Errorf("parsePacket = %d, %x, %v; want %d, %s", ch, p, err, tt.ch, tt.payload)
			}
		})
	}
	if _, _, err := parsePacket([]byte{0}); err == nil {
		t.Error("parsePacket of 1 byte succeeded")
	}
}

// Golden vectors of the channel -1 literals (D15, D18), both ways.
func TestControlGolden(t *testing.T) {
	tests := []struct {
		name string
		c    control
		wire string // the payload, as text with the id in hex where needed
		hex  string
	}{
		{"query fastnet", control{kind: ctlQueryFastnet}, "query:fastnet", ""},
		{"fastnet yes", control{kind: ctlFastnetYes}, "query:fastnet=yes", ""},
		{"query version", control{kind: ctlQueryVersion}, "query:version", ""},
		{"version", control{kind: ctlVersion, text: "1.0"}, "query:version=1.0", ""},
		{"connect", control{kind: ctlConnect}, "connect?", ""},
		{"connected", control{kind: ctlConnected, id: 0xdeadbeef}, "", "636f6e6e6563746564deadbeef"},
		{"connected id 0", control{kind: ctlConnected, id: 0}, "", "636f6e6e656374656400000000"},
		{"abort with reason", control{kind: ctlAbort, text: "server full"}, "abortserver full", ""},
		{"abort empty", control{kind: ctlAbort}, "abort", ""},
		{"disconnect", control{kind: ctlDisconnect, text: "bye ☺"}, "disconnectbye ☺", ""},
		{"disconnect empty", control{kind: ctlDisconnect}, "disconnect", ""},
		{"query bundle", control{kind: ctlQueryBundle}, "", "71756572793a6578743a62756e646c65"},
		{"bundle yes", control{kind: ctlBundleYes}, "", "71756572793a6578743a62756e646c653d796573"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := []byte(tt.wire)
			if tt.hex != "" {
				want = unhex(t, tt.hex)
			}
			if diff := cmp.Diff(want, appendControl(nil, tt.c)); diff != "" {
				t.Errorf("encode (-want +got):\n%s", diff)
			}
			got, err := parseControl(want)
			if err != nil {
				t.Fatalf("parseControl: %v", err)
			}
			if diff := cmp.Diff(tt.c, got, cmp.AllowUnexported(control{})); diff != "" {
				t.Errorf("decode (-want +got):\n%s", diff)
			}
		})
	}
}

func TestControlRejects(t *testing.T) {
	for _, p := range []string{"", "query", "query:fastnet ", "connect", "connected", "connected\x00\x00\x00", "connected\x00\x00\x00\x00\x00", "CONNECT?", "hello", "query:ext:bundl", "query:ext:bundle=", "query:ext:bundle=no", "query:ext:bundle=yes\x00"} {
		if c, err := parseControl([]byte(p)); err == nil {
			t.Errorf("parseControl(%q) = %+v, want an error", p, c)
		}
	}
}

func TestControlReasonText(t *testing.T) {
	// Invalid UTF-8 is repaired and a trailing NUL removed, so the
	// application always gets valid text.
	c, err := parseControl([]byte("abortbad\xffbyte\x00"))
	if err != nil {
		t.Fatal(err)
	}
	if c.text != "bad\uFFFDbyte" {
		t.Errorf("reason = %q", c.text)
	}
	// Long reasons are cut at a rune boundary.
	long := make([]byte, 0, maxReason+4)
	for len(long) < maxReason+3 {
		long = append(long, "é"...)
	}
	out := appendControl(nil, control{kind: ctlDisconnect, text: string(long)})
	if n := len(out) - len(litDisconnect); n > maxReason {
		t.Errorf("reason of %d bytes sent", n)
	}
	back, _ := parseControl(out)
	if back.text == "" || back.text[len(back.text)-2:] != "é" {
		t.Errorf("cut reason does not end on a whole rune: %q", back.text[len(back.text)-4:])
	}
}

// Golden vectors of heartbeats (D16): exactly one big-endian i16.
func TestHeartbeatGolden(t *testing.T) {
	tests := []struct {
		v   int16
		hex string
	}{
		{1, "0001"}, {32767, "7fff"}, {-1, "ffff"}, {-32768, "8000"},
	}
	for _, tt := range tests {
		if got := hex.EncodeToString(appendHeartbeat(nil, tt.v)); got != tt.hex {
			t.Errorf("appendHeartbeat(%d) = %s, want %s", tt.v, got, tt.hex)
		}
		v, err := parseHeartbeat(unhex(t, tt.hex))
		if err != nil || v != tt.v {
			t.Errorf("parseHeartbeat(%s) = %d, %v", tt.hex, v, err)
		}
	}
	for _, bad := range []string{"", "00", "000000"} {
		if _, err := parseHeartbeat(unhex(t, bad)); err == nil {
			t.Errorf("parseHeartbeat(%q) succeeded", bad)
		}
	}
}
