package fastnet

import (
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/coalesce"
)

// N87 (D30, N76): within the window's floor of two full packets, small
// reliable packets are weighed at their size. Before any ack, on a
// 9,000-byte payload MTU with the initial window of 14,600 bytes, a queue
// of 64-byte messages fills the floor, about 150 packets; weighed as full
// ones, it stopped at 75, and the rest waited for acks.
func TestSmallPacketsFillTheFloor(t *testing.T) {
	cfg := Config{InitialPayloadMTU: 9000, MTU: MTUConfig{Disabled: true}}
	p := newPair(t, cfg, cfg)
	msg := make([]byte, 64)
	for range 400 {
		if err := p.cli.Send(p.now, p.ch, 1, msg, true); err != nil {
			t.Fatal(err)
		}
	}
	// Transmit without delivering anything, so that nothing is acked;
	// time passes for the pacer, not enough for a resend.
	buf := make([]byte, 1<<16)
	for range 20 {
		for {
			if _, ok := p.cli.PollTransmit(p.now, buf); !ok {
				break
			}
		}
		p.now = p.now.Add(10 * time.Microsecond)
		p.cli.HandleTimeout(p.now)
	}
	st, _ := p.cli.Stats(p.ch)
	full := 9000 + wireOverhead
	perPacket := 82 + wireOverhead // the message encoded: flags, length, payload, MD5
	if want := 2*full/perPacket - 1; st.InFlightPackets < want {
		t.Errorf("%d packets in flight before any ack, want at least %d", st.InFlightPackets, want)
	}
	if cc := st.InFlightPackets * perPacket; cc > 2*full {
		t.Errorf("%d bytes in flight for the controller, past the floor of %d", cc, 2*full)
	}
	if st.PacketsResent != 0 || st.CongestionWindow > 2*full {
		t.Fatalf("the window, %d, is not below the floor: the test tests nothing", st.CongestionWindow)
	}
}

// N87: a reliable packet that does not fit the window holds its turn:
// small packets of another channel, which would fit the floor at their
// size, do not go before it, and it goes first once acks make room. Two
// channels: one sends messages cut at the full payload MTU, the other
// 64-byte ones.
func TestLargePacketHoldsItsTurn(t *testing.T) {
	cfg := Config{InitialPayloadMTU: 9000, MTU: MTUConfig{Disabled: true}}
	p := newPair(t, cfg, cfg)
	for range 4 {
		if err := p.cli.Send(p.now, p.ch, 1, make([]byte, 20000), true); err != nil {
			t.Fatal(err)
		}
	}
	for range 300 {
		if err := p.cli.Send(p.now, p.ch, 2, make([]byte, 64), true); err != nil {
			t.Fatal(err)
		}
	}
	buf := make([]byte, 1<<16)
	var sizes []int // the chunk sizes sent, in order
	transmit := func() {
		for {
			n, ok := p.cli.PollTransmit(p.now, buf)
			if !ok {
				break
			}
			sizes = append(sizes, chunkSizes(t, buf[:n.N])...)
		}
	}
	for range 20 { // time passes for the pacer, not enough for a resend
		transmit()
		p.now = p.now.Add(100 * time.Microsecond)
		p.cli.HandleTimeout(p.now)
	}
	big, small := 0, 0
	for _, n := range sizes {
		if n > 1000 {
			big++
		} else {
			small++
		}
	}
	// The first large chunk goes alone into an empty window, then the
	// small channel's turn, its share of a bundle (N122); the second large
	// one does not fit, and holds the small ones back with it.
	share := (9000 + 2) / 2 / (turnOverhead + coalesce.EncodedLen(64))
	if big != 1 || small > share {
		t.Errorf("before any ack: %d large and %d small chunks sent, want 1 and at most %d", big, small, share)
	}
}

// chunkSizes returns the sizes of the data chunks in datagram d, a lone
// packet or a bundle of them.
func chunkSizes(t *testing.T, d []byte) []int {
	t.Helper()
	ch, payload, err := parsePacket(d)
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	one := func(ch int16, payload []byte) {
		if ch >= 0 && len(payload) >= 7 {
			out = append(out, len(payload)-7)
		}
	}
	if ch != chBundle {
		one(ch, payload)
		return out
	}
	for len(payload) > 0 {
		inner, rest, ok := cutBundle(payload)
		if !ok {
			t.Fatal("bad bundle")
		}
		payload = rest
		ich, ipayload, err := parsePacket(inner)
		if err != nil {
			t.Fatal(err)
		}
		one(ich, ipayload)
	}
	return out
}
