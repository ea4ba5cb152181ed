package fastnet_test

import (
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/fastnet/fastnettest"
)

// A path that carries nothing for a while, as a radio link handing over
// or a route converging does, then carries again what it did: a bulk
// transfer that used the link well before is back near its share within
// a few seconds, as a NewReno sender after a retransmission timeout is
// (RFC 5681: the threshold held at half of what was in flight, the window
// regrown in slow start), rather than regrowing its window by one datagram
// a round trip from its floor (D30, N76).
func TestCongestionRecoversAfterOutage(t *testing.T) {
	const mbit = 1_000_000 / 8
	for _, tc := range []struct {
		name   string
		path   ccPath
		outage time.Duration
	}{
		{"20mbit-200ms-1s", ccPath{20 * mbit, 200 * time.Millisecond, 500_000}, time.Second},
		{"20mbit-200ms-3s", ccPath{20 * mbit, 200 * time.Millisecond, 500_000}, 3 * time.Second},
		{"20mbit-100ms-2s", ccPath{20 * mbit, 100 * time.Millisecond, 250_000}, 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ccControllerOnly
			cfg.Timeout = time.Minute
			s := newCCSim(t, 7, tc.path, cfg, 1, 1<<30)
			s.connect()
			f := s.flows[0]
			s.run(8*time.Second, 100*time.Millisecond)
			got := f.got
			s.run(2*time.Second, 100*time.Millisecond)
			before := float64(f.got-got) / (float64(tc.path.rate) * 2)

			cut := fastnettest.Link{Loss: 1}
			s.net.SetLink(f.addr, s.srvAddr, cut)
			s.net.SetLink(s.srvAddr, f.addr, cut)
			s.run(tc.outage, 100*time.Millisecond)
			s.net.SetLink(f.addr, s.srvAddr, fastnettest.Link{Bottleneck: s.up, MTU: 1500 - 28})
			s.net.SetLink(s.srvAddr, f.addr, fastnettest.Link{Bottleneck: s.down, MTU: 1500 - 28})

			// The resends of D14 have backed off during the outage: the
			// first seconds go to them. Measured from 5 s to 15 s after.
			s.run(5*time.Second, 100*time.Millisecond)
			got = f.got
			s.run(10*time.Second, 100*time.Millisecond)
			after := float64(f.got-got) / (float64(tc.path.rate) * 10)
			st, _ := f.ep.Stats(f.h)
			t.Logf("before the outage %.1f %% of the link; from 5 s to 15 s after it %.1f %%; window now %d bytes, slow start %v",
				100*before, 100*after, st.CongestionWindow, st.SlowStart)
			if after < 0.7*before {
				t.Errorf("from 5 s to 15 s after a %v outage: %.1f %% of the link, against %.1f %% before it; want at least 70 %% of that", tc.outage, 100*after, 100*before)
			}
		})
	}
}
