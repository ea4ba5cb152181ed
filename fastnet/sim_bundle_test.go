package fastnet_test

import (
	"net/netip"
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

// sendBursts sends n rounds of 16 small messages each way, reliable and
// unreliable on four channels, 10 ms apart, then runs until settled.
func sendBursts(t *testing.T, s *sim, n int) {
	t.Helper()
	id := uint32(0)
	for range n {
		for i := range 16 {
			for side := range 2 {
				id++
				if err := s.send(side, i%4, payload(id, 20+i), i%3 != 0); err != nil {
					t.Fatal(err)
				}
			}
		}
		s.run(10 * time.Millisecond)
	}
	if !s.runUntil(s.settled, 2*time.Minute) {
		t.Fatalf("not settled: %s", s.led[srvSide].firstMissing())
	}
}

// Bundle-capable endpoints bundle what is ready together, and every
// reliable message still arrives exactly once and in order through loss,
// duplication and reordering (the ledgers check each delivery).
func TestSimBundlesDelivery(t *testing.T) {
	link := fastnettest.Link{Delay: 15 * time.Millisecond, Jitter: 5 * time.Millisecond, Loss: 0.1, Dup: 0.05, Reorder: 0.05}
	for seed := range uint64(4) {
		s := newSim(t, simSetup{Seed: seed, Up: link, Down: link})
		s.connect(5 * time.Second)
		// Each side asks with its heartbeats and bundles once the peer
		// echoed one that went in a bundle (N156): through the loss,
		// that can take a few.
		if !s.runUntil(func() bool {
			to0, _ := fastnet.BundlesNegotiated(s.ep[0], s.h[0])
			to1, _ := fastnet.BundlesNegotiated(s.ep[1], s.h[1])
			return to0 && to1
		}, 10*time.Second) {
			t.Fatalf("seed %d: bundles not negotiated", seed)
		}
		sendBursts(t, s, 50)
		for side := range 2 {
			st := s.stats(side)
			if st.BundlesSent == 0 || st.BundledPackets < 2*st.BundlesSent || st.BundlesReceived == 0 {
				t.Errorf("seed %d %s: %d bundles of %d packets sent, %d received", seed, sideName(side), st.BundlesSent, st.BundledPackets, st.BundlesReceived)
			}
			if d := st.Dropped[fastnet.DropBundleUnnegotiated] + st.Dropped[fastnet.DropBundleMalformed] + st.Dropped[fastnet.DropBundleNested]; d != 0 {
				t.Errorf("seed %d %s: %d bundles dropped", seed, sideName(side), d)
			}
		}
	}
}

// Against a peer with NoBundles nothing is ever bundled, and everything
// arrives all the same.
func TestSimBundlesNeverToStrictPeer(t *testing.T) {
	link := fastnettest.Link{Delay: 15 * time.Millisecond, Loss: 0.05}
	for strict := range 2 {
		var cfg [2]fastnet.Config
		cfg[strict].NoBundles = true
		s := newSim(t, simSetup{Seed: 9, Cli: cfg[cliSide], Srv: cfg[srvSide], Up: link, Down: link})
		s.net.Filter = func(from, to netip.AddrPort, b []byte) bool {
			if len(b) >= 2 && b[0] == 0xff && b[1] == 0xfa {
				t.Errorf("strict %s: a bundle on the wire from %v", sideName(strict), from)
			}
			return true
		}
		s.connect(5 * time.Second)
		sendBursts(t, s, 20)
		for side := range 2 {
			if st := s.stats(side); st.BundlesSent != 0 {
				t.Errorf("strict %s: %s sent %d bundles", sideName(strict), sideName(side), st.BundlesSent)
			}
		}
	}
}
