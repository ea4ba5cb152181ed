package fastnet

import (
	"testing"
	"time"
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
