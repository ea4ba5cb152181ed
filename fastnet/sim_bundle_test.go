package fastnet_test

import (
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/fastnet/fastnettest"
)

// Two bundle-capable endpoints negotiate bundles both ways once connected
// (D24), and through loss with the query's retries (N69).
func TestSimBundlesNegotiated(t *testing.T) {
	for _, link := range []fastnettest.Link{{Delay: 20 * time.Millisecond}, {Delay: 20 * time.Millisecond, Loss: 0.2}} {
		s := newSim(t, simSetup{Seed: 3, Up: link, Down: link})
		s.connect(5 * time.Second)
		s.run(5 * time.Second)
		for side := range 2 {
			if to, from := fastnet.BundlesNegotiated(s.ep[side], s.h[side]); !to || !from {
				t.Errorf("loss %v: %s: negotiated to %v, from %v; want both", link.Loss, sideName(side), to, from)
			}
		}
	}
}

// An endpoint with NoBundles behaves as a strict 1.0 peer: it never
// answers, so nothing is negotiated either way, and the other side gives
// up after bundleAsks queries, each dropped as an unknown literal (N69).
func TestSimBundlesStrictPeer(t *testing.T) {
	link := fastnettest.Link{Delay: 20 * time.Millisecond}
	for strict := range 2 {
		var cfg [2]fastnet.Config
		cfg[strict].NoBundles = true
		s := newSim(t, simSetup{Seed: 4, Cli: cfg[cliSide], Srv: cfg[srvSide], Up: link, Down: link})
		s.connect(5 * time.Second)
		s.run(15 * time.Second)
		for side := range 2 {
			if to, from := fastnet.BundlesNegotiated(s.ep[side], s.h[side]); to || from {
				t.Errorf("strict %s: %s negotiated to %v, from %v", sideName(strict), sideName(side), to, from)
			}
		}
		if got := s.stats(strict).Dropped[fastnet.DropBadControl]; got != 6 {
			t.Errorf("strict %s: got %d queries, want 6", sideName(strict), got)
		}
	}
}
