package fastnet

import (
	"testing"
	"time"
)

// One lost ack packet is no loss (N81): its entries are repeated after the
// new ones of the next ack packet (N29), which is taken whole before the
// loss check; and unreliable packets sent in between do not count in the
// distance, which is in reliable packets (R, D7).
func TestCongestionLostAckIsNoLoss(t *testing.T) {
	for _, tc := range []struct {
		name  string
		after []bool // reliable or not, sent after the packet whose ack is lost
	}{
		{"reliable", []bool{true, true, true}},
		{"unreliable between", []bool{false, false, false, true}},
	} {
		p := newPair(t, Config{}, Config{})
		p.step = time.Microsecond
		send := func(s string, reliable bool) { p.cli.Send(p.now, p.ch, 1, []byte(s), reliable) }
		send("w", true)
		p.settle(1) // an RTT sample (N82)
		dropped := false
		p.drop = func(from Role, b []byte) bool {
			if from == Server && isAck(b) && !dropped {
				dropped = true
				return true
			}
			return false
		}
		send("a", true)
		p.flush()
		p.drop = nil
		for i, r := range tc.after {
			send(string(rune('b'+i)), r)
		}
		p.settle(2 + len(tc.after))
		st, _ := p.cli.Stats(p.ch)
		if !dropped || st.CongestionEvents != 0 {
			t.Errorf("%s: ack dropped %v, %d window reductions, window %d; want none", tc.name, dropped, st.CongestionEvents, st.CongestionWindow)
		}
	}
}

// A sender whose unreliable messages all expired is idle, and parked like
// any idle sender (N25, N80).
func TestCongestionExpiredSendersParked(t *testing.T) {
	p := newPair(t, Config{}, Config{})
	p.cli.liveReceivers, p.cli.liveCap = 2, 2
	c := p.cli.conns[p.ch]
	c.liveSenders = 2
	for ch := 1; ch <= 50; ch++ {
		p.cli.Send(p.now, p.ch, ch, make([]byte, 10), false)
	}
	p.now = p.now.Add(200 * time.Millisecond)
	p.flush()
	if c.senders > c.liveSenders {
		t.Errorf("%d senders kept, want at most %d", c.senders, c.liveSenders)
	}
}

// The pacer's bucket never holds more than its capacity (N79): at a fixed
// rate of 2 kB/s, twenty 1 kB messages queued at once do not go at once.
func TestCongestionNoInitialBurst(t *testing.T) {
	cfg := Config{InitialPayloadMTU: 1200, MTU: MTUConfig{Disabled: true}, Congestion: CongestionConfig{FixedRate: 2000}}
	p := newPair(t, cfg, cfg)
	p.srvMsgs = 0
	for range 20 {
		p.cli.Send(p.now, p.ch, 1, make([]byte, 1000), false)
	}
	p.flush() // no time passes
	if p.srvMsgs > 5 {
		t.Errorf("%d messages of 1 kB at once at 2 kB/s", p.srvMsgs)
	}
}

// With congestion control off, nothing is paced and nothing expires at the
// sender: the engine as before D30.
func TestCongestionDisabledNoExpiry(t *testing.T) {
	cfg := Config{Congestion: CongestionConfig{Disabled: true}}
	p := newPair(t, cfg, cfg)
	p.cli.Send(p.now, p.ch, 1, []byte("state"), false)
	p.now = p.now.Add(150 * time.Millisecond)
	p.flush()
	st, _ := p.cli.Stats(p.ch)
	if st.UnreliableExpired != 0 || p.srvMsgs != 1 {
		t.Errorf("%d expired, %d delivered; want 0 and 1", st.UnreliableExpired, p.srvMsgs)
	}
}
