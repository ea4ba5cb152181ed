package fastnet_test

// What the transport knows about the path (D29): the hint that estimation
// probes first (N43), a transport that cannot set the don't-fragment bit
// (N45), and the resend floor under the estimator's resets.

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/fastnet/fastnettest"
)

// pathInfo returns an MTUConfig.Path that records the peers it is asked
// about and answers info.
func pathInfo(info fastnet.PathInfo, asked *[]netip.AddrPort) func(netip.AddrPort) fastnet.PathInfo {
	return func(peer netip.AddrPort) fastnet.PathInfo {
		*asked = append(*asked, peer)
		return info
	}
}

// TestPathHint checks D29 and N43 through two endpoints on a 1500-byte
// path (50 ms RTT): each side's transport says the path carries 1498
// bytes of payload; each side is asked once, about its peer, when its
// estimation starts; both reach 1498 within a second of connecting; and
// the whole estimation sends at most 300 KB of probes each way
// (Stats.MTUProbeBytes), where D19's search alone sends more than a
// megabyte (mtu package, table 3).
func TestPathHint(t *testing.T) {
	const path = 1500
	largest := path - 2
	var asked [2][]netip.AddrPort
	cfg := func(side int) fastnet.Config {
		return fastnet.Config{MTU: fastnet.MTUConfig{Path: pathInfo(fastnet.PathInfo{PayloadMTU: largest}, &asked[side])}}
	}
	link := mtuLink(path, 0)
	s := newSim(t, simSetup{Seed: 29, Cli: cfg(cliSide), Srv: cfg(srvSide), Up: link, Down: link})
	s.connect(10 * time.Second)
	start := s.net.Now()
	full := func() bool {
		return s.stats(cliSide).PayloadMTU == largest && s.stats(srvSide).PayloadMTU == largest
	}
	if !s.runUntil(full, time.Second) {
		t.Fatalf("payload MTU not %d within 1 s of connecting: client %d, server %d", largest, s.stats(cliSide).PayloadMTU, s.stats(srvSide).PayloadMTU)
	}
	reached := s.net.Now().Sub(start)
	s.run(5 * time.Second)
	for side := range 2 {
		st := s.stats(side)
		if len(asked[side]) != 1 || asked[side][0] != addrOf(1-side) {
			t.Errorf("%s: Path asked about %v, want once about its peer %v", sideName(side), asked[side], addrOf(1-side))
		}
		if st.PayloadMTU != largest || st.MTUHint != largest || st.MTULimited != "" {
			t.Errorf("%s: PayloadMTU %d, MTUHint %d, MTULimited %q; want %d, %d, none", sideName(side), st.PayloadMTU, st.MTUHint, st.MTULimited, largest, largest)
		}
		if st.MTUEstimations != 1 || st.MTUSearching || st.MTUProbeBytes == 0 || st.MTUProbeBytes > 300_000 {
			t.Errorf("%s: %d estimations (searching %v), %d probe bytes; want one finished, at most 300 KB", sideName(side), st.MTUEstimations, st.MTUSearching, st.MTUProbeBytes)
		}
		t.Logf("%s: %d probes, %d probe bytes", sideName(side), st.MTUProbes, st.MTUProbeBytes)
	}
	t.Logf("both at %d after %v", largest, reached)
}

// TestPathHintWrong checks that D19's rounds stay the check of the hint
// (N43): a hint above the path fails and the search goes on below it, a
// hint below the path passes and the search goes on above it; both end
// within 1 % of the largest payload that fits, never above it.
func TestPathHintWrong(t *testing.T) {
	const path = 1280
	largest := path - 2
	for _, hint := range []int{1472, 1000} {
		var asked []netip.AddrPort
		cfg := fastnet.Config{MTU: fastnet.MTUConfig{Path: pathInfo(fastnet.PathInfo{PayloadMTU: hint}, &asked)}}
		link := mtuLink(path, 0)
		s := newSim(t, simSetup{Seed: uint64(hint), Cli: cfg, Srv: cfg, Up: link, Down: link})
		s.connect(10 * time.Second)
		s.run(30 * time.Second)
		for side := range 2 {
			st := s.stats(side)
			if !within1pct(st.PayloadMTU, largest) || st.MTUHint != hint {
				t.Errorf("hint %d, %s: PayloadMTU %d, MTUHint %d; want within 1 %% of %d, never above", hint, sideName(side), st.PayloadMTU, st.MTUHint, largest)
			}
		}
	}
}

// TestNoDontFragment checks N45: a transport that cannot set the
// don't-fragment bit toward the peer keeps that side's payload MTU at
// InitialPayloadMTU, sends no probe, and says why in Stats.MTULimited; its
// responder still answers the peer, which estimates as usual. With
// estimation disabled, MTULimited says that.
func TestNoDontFragment(t *testing.T) {
	const path = 1500
	var asked []netip.AddrPort
	srv := fastnet.Config{MTU: fastnet.MTUConfig{Path: pathInfo(fastnet.PathInfo{PayloadMTU: 1498, NoDontFragment: "test system"}, &asked)}}
	cli := fastnet.Config{MTU: fastnet.MTUConfig{Disabled: true}, InitialPayloadMTU: 100}
	link := mtuLink(path, 0)
	s := newSim(t, simSetup{Seed: 45, Cli: cli, Srv: srv, Up: link, Down: link})
	s.connect(10 * time.Second)
	s.run(10 * time.Second)
	st := s.stats(srvSide)
	if st.PayloadMTU != fastnet.DefaultPayloadMTU || st.MTUProbes != 0 || st.MTUHint != 0 || st.MTULimited != "no don't-fragment bit: test system" {
		t.Errorf("server: PayloadMTU %d, %d probes, MTUHint %d, MTULimited %q; want %d, none, 0, the reason",
			st.PayloadMTU, st.MTUProbes, st.MTUHint, st.MTULimited, fastnet.DefaultPayloadMTU)
	}
	if cs := s.stats(cliSide); cs.MTULimited != "estimation disabled" || cs.PayloadMTU != 100 {
		t.Errorf("client: MTULimited %q, PayloadMTU %d; want \"estimation disabled\", 100", cs.MTULimited, cs.PayloadMTU)
	}
	// The other way round: the server estimates, the client's responder
	// answers, though the client cannot estimate.
	s = newSim(t, simSetup{Seed: 46, Cli: srv, Srv: fastnet.Config{}, Up: link, Down: link})
	s.connect(10 * time.Second)
	s.run(20 * time.Second)
	if st := s.stats(srvSide); !within1pct(st.PayloadMTU, path-2) {
		t.Errorf("server estimating against a client without the bit: PayloadMTU %d, want within 1 %% of %d", st.PayloadMTU, path-2)
	}
	if st := s.stats(cliSide); st.PayloadMTU != fastnet.DefaultPayloadMTU || st.MTULimited == "" {
		t.Errorf("client without the bit: PayloadMTU %d, MTULimited %q", st.PayloadMTU, st.MTULimited)
	}
}

// TestSetPathMTUHint checks the endpoint's method: it reaches an
// estimating connection (Stats.MTUHint), and says false for a handle that
// does not estimate.
func TestSetPathMTUHint(t *testing.T) {
	link := mtuLink(1500, 0)
	s := newSim(t, simSetup{Seed: 43, Cli: fastnet.Config{MTU: fastnet.MTUConfig{Disabled: true}}, Up: link, Down: link})
	s.connect(10 * time.Second)
	if !s.ep[srvSide].SetPathMTUHint(s.h[srvSide], 1400) {
		t.Fatal("SetPathMTUHint on an estimating connection: false")
	}
	if got := s.stats(srvSide).MTUHint; got != 1400 {
		t.Errorf("MTUHint %d after SetPathMTUHint(1400)", got)
	}
	if s.ep[cliSide].SetPathMTUHint(s.h[cliSide], 1400) {
		t.Error("SetPathMTUHint on a connection with estimation disabled: true")
	}
	if s.ep[srvSide].SetPathMTUHint(s.h[srvSide]+1000, 1400) {
		t.Error("SetPathMTUHint on an unknown handle: true")
	}
}

// TestMTUResetFloor checks that the estimator's resets go three resend
// RTTs apart, floored by MinResendRTT (D14), not three smoothed RTTs: on a
// path of microseconds whose responder never acknowledges a reset, the
// resets are at least 3 x MinResendRTT apart once the first RTT sample
// has come, where three smoothed RTTs would send all ten in well under a
// millisecond.
func TestMTUResetFloor(t *testing.T) {
	link := fastnettest.Link{Delay: 5 * time.Microsecond}
	s := newSim(t, simSetup{Seed: 14, Up: link, Down: link})
	var resets []clock.Time
	s.net.Filter = func(from, to netip.AddrPort, b []byte) bool {
		ch, _ := wireChannel(b)
		if ch != wireMTUClient {
			return true
		}
		if from == cliAddr && len(b) == 3 && b[2] == 0 {
			resets = append(resets, s.net.Now())
		}
		// The server's answers on -4 never arrive.
		return from == cliAddr
	}
	s.connect(10 * time.Second)
	s.run(5 * time.Second)
	floor := 3 * s.cfg[cliSide].MinResendRTT
	if len(resets) < 3 {
		t.Fatalf("%d resets sent", len(resets))
	}
	for i := 2; i < len(resets); i++ {
		if gap := resets[i].Sub(resets[i-1]); gap < floor {
			t.Fatalf("resets %d and %d %v apart, want at least %v (3 x MinResendRTT); RTT %v", i-1, i, gap, floor, s.stats(cliSide).RTT)
		}
	}
	t.Logf("%d resets, RTT %v", len(resets), s.stats(cliSide).RTT)
}

// TestPathHintRefreshedOnRestart checks that an estimation restarted early
// because large packets stopped getting through (N16) asks the transport
// again (N43): a kernel that learned the smaller path from a router's ICMP
// message gives the new hint, and the estimation starts from it.
func TestPathHintRefreshedOnRestart(t *testing.T) {
	const from, to = 1500, 1280
	kernel := from - 2
	calls := 0
	path := func(netip.AddrPort) fastnet.PathInfo { calls++; return fastnet.PathInfo{PayloadMTU: kernel} }
	cfg := fastnet.Config{MTU: fastnet.MTUConfig{Path: path, Period: time.Hour}}
	s := newSim(t, simSetup{Seed: 16, Cli: cfg, Srv: cfg, Up: mtuLink(from, 0), Down: mtuLink(from, 0)})
	tr := &mtuTraffic{sizes: []int{30, 3000, 20000}, channels: 2}
	tick := func() { tr.tick(s) }
	s.connect(10 * time.Second)
	runTicking(s, 50*time.Millisecond, 5*time.Second, tick, never)
	if m := s.stats(cliSide).PayloadMTU; m != from-2 {
		t.Fatalf("client payload MTU %d before the shrink, want %d", m, from-2)
	}
	before := calls
	kernel = to - 2
	s.net.SetPath(cliAddr, srvAddr, mtuLink(to, 0))
	shrunk := func() bool { return s.stats(cliSide).MTURestarts > 0 && s.stats(cliSide).PayloadMTU == to-2 }
	if !runTicking(s, 50*time.Millisecond, 20*time.Second, tick, shrunk) {
		t.Fatalf("client: %d early restarts, payload MTU %d; want a restart and %d", s.stats(cliSide).MTURestarts, s.stats(cliSide).PayloadMTU, to-2)
	}
	if calls == before || s.stats(cliSide).MTUHint != to-2 {
		t.Fatalf("Path asked %d times after the shrink, hint %d; want asked again, hint %d", calls-before, s.stats(cliSide).MTUHint, to-2)
	}
}

// TestPathHintAssumed checks N84: with a hint from the system, a
// connection sends at min(hint, 546) from its first packet, before any
// probe has been answered, and the estimation then reaches what the path
// carries. On a path smaller than the hint but not than 576 bytes, the
// assumed size passes and the estimation finds the path's own within 1 %.
// A path below 576 bytes, which IPv4 does not allow, whose system claims
// more, loses the packets cut at the assumed size: the connection ends
// with ErrPathMTU, not silently.
func TestPathHintAssumed(t *testing.T) {
	for _, tc := range []struct {
		name       string
		path, hint int
		fails      bool
	}{
		{"path as the system says", 1500, 1498, false},
		{"a smaller path than the system says", 1000, 1498, false},
		{"a small hint", 576, 574, false},
		{"a path below 576 bytes", 500, 1498, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			largest := tc.path - 2
			var asked []netip.AddrPort
			cfg := fastnet.Config{MTU: fastnet.MTUConfig{Path: pathInfo(fastnet.PathInfo{PayloadMTU: tc.hint}, &asked)}}
			link := mtuLink(tc.path, 0)
			s := newSim(t, simSetup{Seed: uint64(tc.path), Cli: cfg, Srv: cfg, Up: link, Down: link})
			s.connect(10 * time.Second)
			if got, want := s.stats(cliSide).PayloadMTU, min(tc.hint, 546); got != want {
				t.Errorf("payload MTU %d once connected, want %d", got, want)
			}
			s.send(cliSide, 1, payload(1, 20_000), true)
			s.run(30 * time.Second)
			if tc.fails {
				if !errors.Is(s.ended[cliSide], fastnet.ErrPathMTU) {
					t.Fatalf("client ended with %v, want ErrPathMTU", s.ended[cliSide])
				}
				return
			}
			if !s.settled() || s.ended[cliSide] != nil {
				t.Fatalf("not settled: %s, client %v", s.led[srvSide].firstMissing(), s.ended[cliSide])
			}
			for side := range 2 {
				if st := s.stats(side); !within1pct(st.PayloadMTU, largest) {
					t.Errorf("%s: payload MTU %d, want within 1 %% of %d, never above", sideName(side), st.PayloadMTU, largest)
				}
			}
		})
	}
}
