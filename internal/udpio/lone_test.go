package udpio

import (
	"bytes"
	"net/netip"
	"testing"
)

// TestLone checks which batches lone hands to writeOne whole: a lone
// message, or a run for one destination that offload would send as one
// entry (all of one size but a shorter last) and that fits maxOneWrite.
// Any other batch takes the general path, and packWrite must then make
// more than one entry of it, or one too large for writeOne. That the
// control message cuts the buffer right is TestLoneWrite's to check, on
// loopback.
func TestLone(t *testing.T) {
	a := netip.MustParseAddrPort("127.0.0.1:9")
	b := netip.MustParseAddrPort("127.0.0.1:10")
	mk := func(sizes ...int) []Message {
		ms := make([]Message, len(sizes))
		for i, n := range sizes {
			ms[i] = Message{Buf: bytes.Repeat([]byte{byte(i + 1)}, n), Addr: a}
		}
		return ms
	}
	many := make([]int, maxSegments+1)
	for i := range many {
		many[i] = 8
	}
	tests := []struct {
		name string
		msgs []Message
		gso  bool
		want int
	}{
		{"lone", mk(64), true, 1},
		{"lone without offload", mk(64), false, 1},
		{"lone large", mk(60000), true, 1},
		{"lone empty", mk(0), true, 1},
		{"reply and ack", mk(80, 9), true, 2},
		{"equal run", mk(100, 100, 100), true, 3},
		{"run without offload", mk(80, 9), false, 0},
		{"shorter in the middle", mk(100, 50, 100), true, 0},
		{"longer last", mk(9, 80), true, 0},
		{"empty datagram in a run", mk(80, 0), true, 0},
		{"empty first", mk(0, 0), true, 0},
		{"over maxOneWrite", mk(1000, 1000, 1000, 1000, 1000), true, 0},
		{"over maxSegments", mk(many...), true, 0},
		{"two destinations", append(mk(80), Message{Buf: make([]byte, 9), Addr: b}), true, 0},
		{"invalid address", []Message{{Buf: []byte("x")}}, true, 0},
		{"port 0", []Message{{Buf: make([]byte, 8), Addr: netip.MustParseAddrPort("127.0.0.1:0")}, {Buf: make([]byte, 8), Addr: netip.MustParseAddrPort("127.0.0.1:0")}}, true, 0},
		{"nothing", nil, true, 0},
	}
	c := &Conn{sendOne: func([]byte, []byte, netip.AddrPort) error { return nil }}
	for _, tt := range tests {
		n, buf, _ := c.lone(tt.msgs, tt.gso)
		if n != tt.want {
			t.Errorf("%s: lone takes %d messages, want %d", tt.name, n, tt.want)
			continue
		}
		if n == 0 {
			continue
		}
		var want []byte
		for _, m := range tt.msgs {
			want = append(want, m.Buf...)
		}
		if !bytes.Equal(buf, want) {
			t.Errorf("%s: buffer of %d bytes is not the %d bytes of the messages end to end", tt.name, len(buf), len(want))
		}
	}
}
