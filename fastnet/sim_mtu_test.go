package fastnet_test

// MTU estimation (D19) seen from outside two real endpoints on the
// simulated network: convergence on paths of every common size and loss,
// with and without traffic, a path that shrinks mid-connection (N16 in
// docs/protocol.md), a peer that does not take part, and a peer whose
// responder lies.
//
// fastnettest's Link.MTU is the largest datagram a link carries, counted as
// the bytes an endpoint hands to the transport (the UDP payload: channel id
// and packet payload). The payload MTU counts the bytes after the 2-byte
// channel id (D12), so on a path of MTU P the largest payload that fits is
// P-2, and that is what an estimation converges to.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/fastnet/fastnettest"
	"github.com/fastnet-engine/fastnet/mtu"
)

// The MTU estimation channels (spec "Determining Payload MTU"): the server
// estimates on -3, the client on -4, and each side's responder answers the
// peer's probes on the peer's channel.
const (
	wireMTUServer = -3
	wireMTUClient = -4
)

// estimationChannel is the channel side estimates on.
func estimationChannel(side int) int16 {
	if side == srvSide {
		return wireMTUServer
	}
	return wireMTUClient
}

// addrOf is the address of side.
func addrOf(side int) netip.AddrPort {
	if side == srvSide {
		return srvAddr
	}
	return cliAddr
}

// wireChannel returns the channel id of a datagram, and false if it is too
// short to have one.
func wireChannel(b []byte) (int16, bool) {
	if len(b) < 2 {
		return 0, false
	}
	return int16(binary.BigEndian.Uint16(b)), true
}

// mtuLink is one direction of a path whose largest datagram is pathMTU
// bytes, losing loss of its datagrams, with a 50 ms round trip.
func mtuLink(pathMTU int, loss float64) fastnettest.Link {
	return fastnettest.Link{MTU: pathMTU, Loss: loss, Delay: 25 * time.Millisecond}
}

// within1pct reports whether the payload MTU m is at most largest, the
// largest payload the path carries, and within 1 % of it (D19).
func within1pct(m, largest int) bool {
	return m <= largest && (largest-m)*100 <= largest
}

// mtuChange is one EventMTUChanged.
type mtuChange struct {
	at  clock.Time
	mtu int
}

func (c mtuChange) String() string { return fmt.Sprintf("%d@%v", c.mtu, c.at.Sub(clock.Epoch)) }

// mtuWatch sees every EventMTUChanged of a sim as it happens. An MTU above
// a side's ceiling fails the test at once, so "never above" holds at every
// moment, not only at the end; reached records when a side first reported
// an MTU within 1 % of the largest payload its path carries.
type mtuWatch struct {
	s *sim
	// ceiling is the largest MTU each side may report; largest the largest
	// payload of the path it sends on, the target of the estimation.
	ceiling, largest [2]int
	changes          [2][]mtuChange
	reached          [2]clock.Time
	// onConnected, if set, runs at each side's Connected event.
	onConnected func(side int)
	// probed, if set, holds every size side's estimator has probed: an
	// MTU must be one of them.
	probed *[2]map[int]bool
}

// watchMTU installs an mtuWatch on s whose ceiling and target are the
// largest payloads of the paths the client and the server send on.
func watchMTU(s *sim, cliLargest, srvLargest int) *mtuWatch {
	w := &mtuWatch{s: s}
	w.setPath(cliLargest, srvLargest)
	s.net.OnEvent = func(at clock.Time, node netip.AddrPort, ev fastnet.Event) {
		s.onEvent(at, node, ev)
		side := cliSide
		if node == srvAddr {
			side = srvSide
		}
		switch ev.Kind {
		case fastnet.EventConnected:
			if w.onConnected != nil && ev.Conn == s.h[side] {
				w.onConnected(side)
			}
		case fastnet.EventMTUChanged:
			w.changed(side, at, ev)
		}
	}
	return w
}

// setPath sets each side's ceiling and target to the largest payload of
// its path, and forgets when the old target was reached.
func (w *mtuWatch) setPath(cliLargest, srvLargest int) {
	w.ceiling = [2]int{cliLargest, srvLargest}
	w.largest = w.ceiling
	w.reached = [2]clock.Time{}
}

func (w *mtuWatch) changed(side int, at clock.Time, ev fastnet.Event) {
	s := w.s
	if ev.Conn != s.h[side] {
		s.fail("%s: EventMTUChanged for unknown connection %d", sideName(side), ev.Conn)
		return
	}
	if ev.MTU > w.ceiling[side] {
		s.fail("%s: EventMTUChanged to %d, above %d, the largest payload its path carries (D19)", sideName(side), ev.MTU, w.ceiling[side])
	}
	if w.probed != nil && !w.probed[side][ev.MTU] {
		s.fail("%s: EventMTUChanged to %d, a size never probed", sideName(side), ev.MTU)
	}
	w.changes[side] = append(w.changes[side], mtuChange{at, ev.MTU})
	if w.reached[side] == 0 && within1pct(ev.MTU, w.largest[side]) {
		w.reached[side] = at
	}
}

// converged reports whether both sides have reached their targets.
func (w *mtuWatch) converged() bool { return w.reached[0] != 0 && w.reached[1] != 0 }

// last returns the MTU side last reported, 0 if none.
func (w *mtuWatch) last(side int) int {
	if c := w.changes[side]; len(c) > 0 {
		return c[len(c)-1].mtu
	}
	return 0
}

// highest returns the largest MTU side reported, 0 if none.
func (w *mtuWatch) highest(side int) int {
	m := 0
	for _, c := range w.changes[side] {
		m = max(m, c.mtu)
	}
	return m
}

// mtuTraffic sends one message from each live side per tick, cycling
// through sizes and channels; with unreliable set, every third message is
// unreliable. Ids are unique, so the ledgers tell every message apart.
type mtuTraffic struct {
	sizes      []int
	channels   int
	unreliable bool
	sides      []int // the sides that send; both if empty
	count      [2]uint32
	refused    int // Sends refused with ErrQueueFull
}

// send sends side's next message.
func (tr *mtuTraffic) send(s *sim, side int) {
	if s.h[side] == 0 || s.ended[0] != nil || s.ended[1] != nil {
		return
	}
	tr.count[side]++
	n := tr.count[side]
	size := tr.sizes[int(n)%len(tr.sizes)]
	reliable := !tr.unreliable || n%3 != 0
	err := s.send(side, int(n)%tr.channels, payload(uint32(side)<<24|n, size), reliable)
	switch {
	case errors.Is(err, fastnet.ErrQueueFull):
		tr.refused++
	case err != nil:
		s.t.Fatalf("%s: Send: %v", sideName(side), err)
	}
}

func (tr *mtuTraffic) tick(s *sim) {
	sides := tr.sides
	if len(sides) == 0 {
		sides = []int{cliSide, srvSide}
	}
	for _, side := range sides {
		tr.send(s, side)
	}
}

// runTicking runs s until done holds (true) or limit has passed (false),
// calling tick at the start and every period of virtual time.
func runTicking(s *sim, period, limit time.Duration, tick func(), done func() bool) bool {
	s.t.Helper()
	end := s.net.Now().Add(limit)
	for s.net.Now() < end {
		if tick != nil {
			tick()
		}
		next := min(s.net.Now().Add(period), end)
		if s.runUntil(done, next.Sub(s.net.Now())) {
			return true
		}
		if s.net.Now() < next {
			// Nothing was left to happen: let the clock pass.
			if err := s.net.RunUntil(next); err != nil {
				s.t.Fatalf("%v", err)
			}
		}
	}
	return done()
}

func never() bool { return false }

// D19: "Sizes double while they pass, then a binary search between the last
// pass and the first failure narrows to within 1 %, never above the
// transport's maximum packet size minus 2." On paths of 576, 1280, 1500 and
// 9000 bytes, losing 0, 5 or 20 % of the datagrams each way, with a 50 ms
// round trip, each side's payload MTU ends within 1 % of the largest
// payload the path carries, and no EventMTUChanged of either side is ever
// above it. MaxPacketSize is the Datagram default, 9216, so the ceiling of
// the estimation (9214) lies above every path: the path, not the
// configuration, stops it. Each subtest has its own fixed seed and
// replays exactly. The 1 % is not certain at heavy loss: over 200 seeds
// per path at 20 % loss, 2 or 3 estimations in 200 end lower, when a size
// that fits fails all of its confirmations (see the mtu package's table 2).
func TestMTUConvergence(t *testing.T) {
	for _, pathMTU := range []int{576, 1280, 1500, 9000} {
		for _, loss := range []int{0, 5, 20} {
			t.Run(fmt.Sprintf("path%d/loss%d", pathMTU, loss), func(t *testing.T) {
				t.Parallel()
				cfg := fastnet.Config{MaxPacketSize: fastnet.DefaultMaxPacketSize}
				link := mtuLink(pathMTU, float64(loss)/100)
				s := newSim(t, simSetup{Seed: uint64(pathMTU*100 + loss), Cli: cfg, Srv: cfg, Up: link, Down: link})
				largest := pathMTU - 2
				for side := range 2 {
					if c := s.cfg[side]; c.MaxPacketSize-2 <= largest || c.InitialPayloadMTU != fastnet.DefaultPayloadMTU {
						t.Fatalf("%s: MaxPacketSize %d, InitialPayloadMTU %d: the path must be the limit", sideName(side), c.MaxPacketSize, c.InitialPayloadMTU)
					}
				}
				w := watchMTU(s, largest, largest)
				s.connect(10 * time.Second)
				start := s.net.Now()
				for side := range 2 {
					if st := s.stats(side); !st.MTUSearching || st.MTUEstimations != 0 {
						t.Fatalf("%s once connected: MTUSearching %v, MTUEstimations %d; want an estimation under way, none finished",
							sideName(side), st.MTUSearching, st.MTUEstimations)
					}
				}
				if !s.runUntil(w.converged, 2*time.Minute) {
					t.Fatalf("not within 1 %% of %d after 2 minutes: client %d, server %d (changes %v, %v)",
						largest, s.stats(cliSide).PayloadMTU, s.stats(srvSide).PayloadMTU, w.changes[cliSide], w.changes[srvSide])
				}
				// Let the estimations finish: a pass may still raise the
				// MTU, never above the path.
				s.run(time.Minute)
				for side := range 2 {
					st := s.stats(side)
					if last := w.last(side); st.PayloadMTU != last || !within1pct(last, largest) {
						t.Errorf("%s: Stats.PayloadMTU %d, last EventMTUChanged %d; want both the same and within 1 %% of %d",
							sideName(side), st.PayloadMTU, last, largest)
					}
					if st.MTURestarts != 0 {
						t.Errorf("%s: %d early re-estimations on a path that never changed (N16)", sideName(side), st.MTURestarts)
					}
					if st.MTUSearching || st.MTUEstimations != 1 || st.MTUProbes == 0 {
						t.Errorf("%s after the estimation: MTUSearching %v, MTUEstimations %d, MTUProbes %d; want false, 1, some",
							sideName(side), st.MTUSearching, st.MTUEstimations, st.MTUProbes)
					}
				}
				if s.ended[cliSide] != nil || s.ended[srvSide] != nil {
					t.Fatalf("connection ended: %v, %v", s.ended[cliSide], s.ended[srvSide])
				}
				t.Logf("largest payload %d: client %d within 1 %% after %v (%d changes), server %d after %v (%d changes)",
					largest, w.last(cliSide), w.reached[cliSide].Sub(start), len(w.changes[cliSide]),
					w.last(srvSide), w.reached[srvSide].Sub(start), len(w.changes[srvSide]))
			})
		}
	}
}

// Stats.MTUSearching, MTUEstimations and MTUProbes describe this side's
// estimation (D19) only: with estimation off here, they stay zero even
// while the peer estimates (its probes are answered), and PayloadMTU stays
// at InitialPayloadMTU.
func TestMTUStatsWithEstimationOff(t *testing.T) {
	off := fastnet.Config{InitialPayloadMTU: 1200, MTU: fastnet.MTUConfig{Disabled: true}}
	on := fastnet.Config{}
	tests := []struct {
		name     string
		cli, srv fastnet.Config
	}{
		{"both off", off, off},
		{"client off", off, on},
		{"server off", on, off},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSim(t, simSetup{Seed: 7, Cli: tt.cli, Srv: tt.srv})
			s.connect(10 * time.Second)
			s.run(5 * time.Second)
			for side, cfg := range [2]fastnet.Config{tt.cli, tt.srv} {
				st := s.stats(side)
				if !cfg.MTU.Disabled {
					if st.MTUEstimations == 0 || st.MTUProbes == 0 {
						t.Errorf("%s estimates: MTUEstimations %d, MTUProbes %d; want some of both", sideName(side), st.MTUEstimations, st.MTUProbes)
					}
					continue
				}
				if st.MTUSearching || st.MTUEstimations != 0 || st.MTUProbes != 0 || st.PayloadMTU != cfg.InitialPayloadMTU {
					t.Errorf("%s with estimation off: MTUSearching %v, MTUEstimations %d, MTUProbes %d, PayloadMTU %d; want false, 0, 0, %d",
						sideName(side), st.MTUSearching, st.MTUEstimations, st.MTUProbes, st.PayloadMTU, cfg.InitialPayloadMTU)
				}
			}
		})
	}
}

// D19 with traffic: "Each size that passes becomes that direction's
// payload MTU at once, so packets grow while the search goes on." On a
// 1500-byte path losing 5 % each way, both sides send reliable and
// unreliable messages of 1 byte to 12 kB on four channels from their
// Connected event on. Every reliable message arrives intact and in order
// (the ledgers), no datagram but a probe is ever larger than the path (the
// filter sees every datagram before the link drops it), both MTUs converge
// within 1 %, and once they have, each side receives data packets of the
// other's full payload MTU (Stats.PeerPayloadMTU).
func TestMTUConvergenceWithTraffic(t *testing.T) {
	const pathMTU = 1500
	largest := pathMTU - 2
	link := mtuLink(pathMTU, 0.05)
	s := newSim(t, simSetup{Seed: 15005, Up: link, Down: link})
	w := watchMTU(s, largest, largest)
	tr := &mtuTraffic{sizes: []int{1, 40, 300, 1400, 5000, 12000}, channels: 4, unreliable: true}
	w.onConnected = func(side int) { tr.send(s, side) }
	s.net.Filter = func(from, to netip.AddrPort, b []byte) bool {
		if ch, _ := wireChannel(b); len(b) > pathMTU && ch != wireMTUServer && ch != wireMTUClient {
			s.fail("%v sent a channel %d datagram of %d bytes on a %d-byte path", from, ch, len(b), pathMTU)
		}
		return true
	}
	s.connect(10 * time.Second)
	start := s.net.Now()
	tick := func() { tr.tick(s) }
	if !runTicking(s, 50*time.Millisecond, 2*time.Minute, tick, w.converged) {
		t.Fatalf("not within 1 %% of %d after 2 minutes: client %d, server %d", largest, s.stats(cliSide).PayloadMTU, s.stats(srvSide).PayloadMTU)
	}
	runTicking(s, 50*time.Millisecond, 20*time.Second, tick, never)
	if !s.runUntil(s.settled, time.Minute) || s.ended[cliSide] != nil || s.ended[srvSide] != nil {
		t.Fatalf("not settled: ended %v, %v; missing at the server %s, at the client %s",
			s.ended[cliSide], s.ended[srvSide], s.led[srvSide].firstMissing(), s.led[cliSide].firstMissing())
	}
	for side := range 2 {
		st, peer := s.stats(side), s.stats(1-side)
		if !within1pct(st.PayloadMTU, largest) || st.PayloadMTU != w.last(side) {
			t.Errorf("%s: payload MTU %d, last EventMTUChanged %d; want within 1 %% of %d", sideName(side), st.PayloadMTU, w.last(side), largest)
		}
		if peer.PeerPayloadMTU != st.PayloadMTU {
			t.Errorf("%s received data packets of up to %d payload bytes; want the %s's payload MTU, %d", sideName(1-side), peer.PeerPayloadMTU, sideName(side), st.PayloadMTU)
		}
		if led := s.led[side]; led.pendingRel != 0 || led.unrel == 0 || led.delivered < 100 {
			t.Errorf("%s: %d messages delivered (%d unreliable), %d reliable ones missing", sideName(side), led.delivered, led.unrel, led.pendingRel)
		}
	}
	if tr.refused != 0 {
		t.Errorf("%d Sends refused with ErrQueueFull", tr.refused)
	}
	t.Logf("within 1 %%: client after %v, server after %v; delivered %d and %d messages",
		w.reached[cliSide].Sub(start), w.reached[srvSide].Sub(start), s.led[srvSide].delivered, s.led[cliSide].delivered)
}

// N16 (docs/protocol.md) and D19: a path that shrinks mid-connection. Both
// sides converge on a 1500-byte path (1 % loss each way, MTU.Period 30 s)
// while reliable messages flow both ways; then the path shrinks to 1280 or
// 576 bytes. Within one Period of the shrink each side's estimate is within
// 1 % of the new path, and no EventMTUChanged after the shrink is above it
// (the MTU in use stays above the new path until a round refutes it, as it
// must: nothing tells an endpoint sooner that the path shrank).
// The run then ends, within bounded virtual time, in one of the two
// outcomes N16 allows, and the test logs which:
//
//   - "large": the messages (up to 20 kB) are cut into packets the new path
//     drops. Reliable packets already sent keep their sequence numbers and
//     size (D12), so they can never arrive: their loss while heartbeats
//     still arrive restarts the estimation early (Stats.MTURestarts), and
//     the connection ends with ErrPathMTU once they have gone
//     unacknowledged for Config.Timeout (the peer hears the reason in its
//     "disconnect", D18).
//   - "small": every message (up to 500 bytes) fits the new path in one
//     packet, so nothing is lost: the shrink is found by the periodic
//     re-estimation (no early restart), and the connection recovers: every
//     reliable message is delivered, and large messages sent afterwards are
//     cut to the new estimate and delivered too.
//
// Which outcome a run gets does not depend on the seed or on timing but on
// whether a reliable packet larger than the new path was sent between the
// shrink and the new estimate; each case is therefore deterministic. The
// periodic re-estimation starts Period after the end of the last one, so a
// shrink is found within Period plus one estimation; the shrink here comes
// 10 s after the convergence, once the first estimation is over, which
// makes the bound Period itself.
func TestMTUShrinkMidConnection(t *testing.T) {
	const (
		from   = 1500
		period = 30 * time.Second
	)
	large := []int{30, 900, 3000, 20000}
	small := []int{10, 200, 500}
	cases := []struct {
		name    string
		to      int
		sizes   []int
		recover bool
	}{
		{"to1280/large", 1280, large, false},
		{"to576/large", 576, large, false},
		{"to1280/small", 1280, small, true},
		{"to576/small", 576, small, true},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cfg := fastnet.Config{MTU: fastnet.MTUConfig{Period: period}}
			link := mtuLink(from, 0.01)
			s := newSim(t, simSetup{Seed: uint64(100 + i), Cli: cfg, Srv: cfg, Up: link, Down: link})
			w := watchMTU(s, from-2, from-2)
			tr := &mtuTraffic{sizes: c.sizes, channels: 3}
			tick := func() { tr.tick(s) }
			s.connect(10 * time.Second)
			if !runTicking(s, 50*time.Millisecond, time.Minute, tick, w.converged) {
				t.Fatalf("not within 1 %% of %d after a minute: client %d, server %d", from-2, s.stats(cliSide).PayloadMTU, s.stats(srvSide).PayloadMTU)
			}
			runTicking(s, 50*time.Millisecond, 10*time.Second, tick, never)
			if s.ended[cliSide] != nil || s.ended[srvSide] != nil {
				t.Fatalf("ended before the shrink: %v, %v", s.ended[cliSide], s.ended[srvSide])
			}

			shrink := s.net.Now()
			largest := c.to - 2
			s.net.SetPath(cliAddr, srvAddr, mtuLink(c.to, 0.01))
			w.setPath(largest, largest)
			if !runTicking(s, 50*time.Millisecond, period, tick, w.converged) {
				t.Fatalf("%v after the shrink to %d: client %d (reached %v), server %d (reached %v); want both within 1 %% of %d",
					period, c.to, w.last(cliSide), w.reached[cliSide] != 0, w.last(srvSide), w.reached[srvSide] != 0, largest)
			}
			var restarts [2]uint64
			for side := range 2 {
				restarts[side] = s.stats(side).MTURestarts
			}
			t.Logf("shrink to %d at %v: within 1 %% after %v (client %d) and %v (server %d); early restarts %v",
				c.to, shrink.Sub(clock.Epoch), w.reached[cliSide].Sub(shrink), w.last(cliSide), w.reached[srvSide].Sub(shrink), w.last(srvSide), restarts)

			limit := period + s.cfg[cliSide].Timeout + 10*time.Second
			if c.recover {
				for side := range 2 {
					if restarts[side] != 0 {
						t.Errorf("%s: %d early restarts, though no packet was lost to the shrink", sideName(side), restarts[side])
					}
				}
				// Large messages sent now are cut to the new estimate.
				tr.sizes = large
				runTicking(s, 50*time.Millisecond, 5*time.Second, tick, never)
				if !s.runUntil(s.settled, limit) || s.ended[cliSide] != nil || s.ended[srvSide] != nil {
					t.Fatalf("hung or ended after the shrink: ended %v, %v; missing at the server %s, at the client %s",
						s.ended[cliSide], s.ended[srvSide], s.led[srvSide].firstMissing(), s.led[cliSide].firstMissing())
				}
				for side := range 2 {
					if st := s.stats(1 - side); st.PeerPayloadMTU > largest {
						t.Errorf("%s received a data packet of %d payload bytes through a path of %d", sideName(1-side), st.PeerPayloadMTU, c.to)
					}
				}
				t.Logf("outcome: recovered, all %d + %d reliable messages delivered", s.led[srvSide].delivered, s.led[cliSide].delivered)
				return
			}
			for side := range 2 {
				if restarts[side] == 0 {
					t.Errorf("%s: no early restart, though its large packets were lost (N16)", sideName(side))
				}
			}
			ended := func() bool { return s.ended[cliSide] != nil && s.ended[srvSide] != nil }
			if !runTicking(s, 50*time.Millisecond, limit, tick, ended) {
				t.Fatalf("neither recovered nor closed %v after the shrink: ended %v, %v; missing %s", limit, s.ended[cliSide], s.ended[srvSide], s.led[srvSide].firstMissing())
			}
			first := cliSide
			if s.endAt[srvSide] < s.endAt[cliSide] {
				first = srvSide
			}
			if err := s.ended[first]; !errors.Is(err, fastnet.ErrPathMTU) {
				t.Fatalf("%s ended first with %v; want ErrPathMTU", sideName(first), err)
			}
			var pc *fastnet.PeerClosedError
			if err := s.ended[1-first]; !errors.Is(err, fastnet.ErrPathMTU) && !(errors.As(err, &pc) && pc.Reason == fastnet.ErrPathMTU.Error()) {
				t.Fatalf("%s ended with %v; want ErrPathMTU, its own or its peer's", sideName(1-first), err)
			}
			t.Logf("outcome: closed with ErrPathMTU by the %s %v after the shrink (%v)", sideName(first), s.endAt[first].Sub(shrink), s.ended[1-first])
		})
	}
}

// D19: "A peer that never answers the reset leaves the MTU where it is."
// The peer here takes no part in MTU estimation: every datagram on
// channels -3 and -4 is dropped on its way to it and it sends none, as an
// implementation without estimation, which ignores those channels, would
// behave. The estimating side (the client in one case, the server in the
// other) sends resets, ten per estimation and again every MTU.Period, never
// a probe; it reports no EventMTUChanged, its payload MTU stays at
// InitialPayloadMTU and no data packet is larger; reliable messages flow
// both ways meanwhile, all delivered, and the connection stays up.
func TestMTUPeerWithoutSupport(t *testing.T) {
	const period = 15 * time.Second
	cases := []struct {
		name    string
		side    int // the side that estimates
		initial int
	}{
		{"client/initial32", cliSide, fastnet.DefaultPayloadMTU},
		{"client/initial200", cliSide, 200},
		{"server/initial32", srvSide, fastnet.DefaultPayloadMTU},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var cfg [2]fastnet.Config
			cfg[c.side] = fastnet.Config{InitialPayloadMTU: c.initial, MTU: fastnet.MTUConfig{Period: period}}
			cfg[1-c.side] = fastnet.Config{MTU: fastnet.MTUConfig{Disabled: true}}
			link := mtuLink(1500, 0.02)
			s := newSim(t, simSetup{Seed: uint64(200 + i), Cli: cfg[cliSide], Srv: cfg[srvSide], Up: link, Down: link})
			w := watchMTU(s, 0, 0)
			var resets, probes, others, tooBig int
			s.net.Filter = func(from, to netip.AddrPort, b []byte) bool {
				ch, _ := wireChannel(b)
				if ch == wireMTUServer || ch == wireMTUClient {
					switch {
					case from != addrOf(c.side) || ch != estimationChannel(c.side):
						others++
					case len(b) == 3 && b[2] == 0:
						resets++
					default:
						probes++
					}
					return false
				}
				if from == addrOf(c.side) && ch >= 0 && len(b) > c.initial+2 {
					tooBig++
				}
				return true
			}
			tr := &mtuTraffic{sizes: []int{10, 100, 1000, 3000}, channels: 2}
			s.connect(10 * time.Second)
			runTicking(s, 200*time.Millisecond, 2*period+5*time.Second, func() { tr.tick(s) }, never)
			if !s.runUntil(s.settled, time.Minute) || s.ended[cliSide] != nil || s.ended[srvSide] != nil {
				t.Fatalf("not settled: ended %v, %v; missing %s, %s", s.ended[cliSide], s.ended[srvSide], s.led[srvSide].firstMissing(), s.led[cliSide].firstMissing())
			}
			st := s.stats(c.side)
			switch {
			case len(w.changes[c.side]) != 0 || len(w.changes[1-c.side]) != 0:
				t.Errorf("EventMTUChanged: %v, %v; want none", w.changes[c.side], w.changes[1-c.side])
			case st.PayloadMTU != c.initial:
				t.Errorf("payload MTU %d; want InitialPayloadMTU %d", st.PayloadMTU, c.initial)
			case st.MTURestarts != 0:
				t.Errorf("%d early restarts", st.MTURestarts)
			}
			// Three estimations in 2*period+5s, each ten resets (D19).
			if resets < 3*mtu.DefaultResetTries || probes != 0 || others != 0 || tooBig != 0 {
				t.Errorf("%d resets, %d probes, %d datagrams of the peer on -3/-4, %d data packets above the initial MTU; want 30 or more resets and nothing else",
					resets, probes, others, tooBig)
			}
			if s.led[cliSide].delivered == 0 || s.led[srvSide].delivered == 0 {
				t.Errorf("nothing delivered")
			}
			t.Logf("%d resets sent, payload MTU stayed %d, %d + %d messages delivered", resets, st.PayloadMTU, s.led[srvSide].delivered, s.led[cliSide].delivered)
		})
	}
}

// D19 against a responder that lies. The client estimates on a 1500-byte
// path (5 % loss each way, MTU.Period 20 s) while it sends reliable
// messages; every count the server's responder sends back on channel -4 is
// rewritten in flight, or counts are forged for probes the server never
// received:
//
//   - "above sent": each count plus 100, more probes than a round ever
//     sends. The estimator ignores counts above the probes sent so far, so
//     no round, not even the first, gets a count: the MTU stays at 32, with
//     no EventMTUChanged.
//   - "negative": each count with its top bit set, a negative i32 in the
//     specification's reading and above any number of probes in the
//     estimator's unsigned one: ignored the same way.
//   - "inflated": each count plus 10. Most stay within the probes sent by
//     the time they arrive and are believed, but a probe above the path
//     earns no count to inflate: the MTU never exceeds the largest payload
//     the path carries, and still ends within 1 % of it.
//   - "forged": the peer sends, for every probe the client sends (those the
//     path drops included), a count of the probes sent in the round so
//     far, which no estimator can tell from an honest one: the count is a
//     bare number, and nothing in it proves the probes arrived. The
//     estimate may then exceed the path, but never MaxPacketSize-2 and
//     only ever to a size that was probed. A lie costs only the liar's
//     connection: packets cut above the path are lost, and the connection
//     ends (D14, N16) rather than hang.
//
// In every case the estimate is only ever one of the sizes probed, and the
// run ends in bounded virtual time: all reliable messages delivered or,
// when the estimate exceeded the path, the connection closed.
func TestMTUHostileResponder(t *testing.T) {
	const (
		pathMTU = 1500
		period  = 20 * time.Second
	)
	largest := pathMTU - 2
	cases := []struct {
		name    string
		rewrite func(uint32) uint32 // applied to every count; nil keeps them
		forge   bool                // inject counts for every probe
		grows   bool                // the MTU may grow
	}{
		{"above sent", func(c uint32) uint32 { return c + mtu.ProbesPerRound }, false, false},
		{"negative", func(c uint32) uint32 { return c | 1<<31 }, false, false},
		{"inflated", func(c uint32) uint32 { return c + 10 }, false, true},
		{"forged", nil, true, true},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cli := fastnet.Config{MTU: fastnet.MTUConfig{Period: period}}
			srv := fastnet.Config{MTU: fastnet.MTUConfig{Disabled: true}}
			link := mtuLink(pathMTU, 0.05)
			s := newSim(t, simSetup{Seed: uint64(300 + i), Cli: cli, Srv: srv, Up: link, Down: link})
			maxPayload := s.cfg[cliSide].MaxPacketSize - 2
			w := watchMTU(s, largest, largest)
			if c.forge {
				w.ceiling[cliSide] = maxPayload
			}
			probed := [2]map[int]bool{{}, {}}
			w.probed = &probed
			var rewritten, round, injected int
			var forged []uint32
			s.net.Filter = func(from, to netip.AddrPort, b []byte) bool {
				if ch, _ := wireChannel(b); ch != wireMTUClient {
					return true
				}
				switch {
				case from == cliAddr && len(b) == 3 && b[2] == 0:
					round = 0
				case from == cliAddr:
					round++
					probed[cliSide][len(b)-2] = true
					if c.forge {
						forged = append(forged, uint32(round))
					}
				case len(b) == 6 && c.rewrite != nil:
					binary.BigEndian.PutUint32(b[2:], c.rewrite(binary.BigEndian.Uint32(b[2:])))
					rewritten++
				}
				return true
			}
			// The forged counts go out between steps, from the server's
			// address, as a peer would send them.
			inject := func() {
				for _, n := range forged {
					s.net.Inject(srvAddr, cliAddr, binary.BigEndian.AppendUint32([]byte{0xff, 0xfc}, n))
					injected++
				}
				forged = forged[:0]
			}
			until := func(cond func() bool) func() bool {
				return func() bool { inject(); return cond() }
			}
			tr := &mtuTraffic{sizes: []int{10, 300, 1400, 3000}, channels: 2, sides: []int{cliSide}}
			s.connect(10 * time.Second)
			runTicking(s, 250*time.Millisecond, period+10*time.Second, func() { tr.tick(s) }, until(never))

			high := w.highest(cliSide)
			switch {
			case !c.grows && (len(w.changes[cliSide]) != 0 || s.stats(cliSide).PayloadMTU != fastnet.DefaultPayloadMTU):
				t.Errorf("MTU changes %v, payload MTU %d; want none, and %d", w.changes[cliSide], s.stats(cliSide).PayloadMTU, fastnet.DefaultPayloadMTU)
			case !c.grows && rewritten < mtu.ProbesPerRound/2:
				t.Errorf("only %d counts rewritten", rewritten)
			case c.grows && high <= 2*fastnet.DefaultPayloadMTU:
				t.Errorf("MTU changes %v: the counts were not believed at all", w.changes[cliSide])
			case c.rewrite != nil && c.grows && !within1pct(w.last(cliSide), largest):
				t.Errorf("MTU changes %v; want the last within 1 %% of %d", w.changes[cliSide], largest)
			}

			bound := s.cfg[cliSide].Timeout + period
			if high > largest {
				// Only forged counts get here: data cut above the path is
				// lost, and the connection must end, not hang. The liar
				// confirms the MTU in use at every re-estimation (N16),
				// so the lost packets are not larger than the payload MTU:
				// the reason is ErrNotAcknowledging (D14), or ErrPathMTU
				// had a re-estimation lowered it.
				if !s.runUntil(until(func() bool { return s.ended[cliSide] != nil }), bound) {
					t.Fatalf("estimate %d above the path, and the connection neither ended nor delivered within %v", high, bound)
				}
				if err := s.ended[cliSide]; !errors.Is(err, fastnet.ErrNotAcknowledging) && !errors.Is(err, fastnet.ErrPathMTU) {
					t.Fatalf("ended with %v; want ErrNotAcknowledging or ErrPathMTU", err)
				}
				t.Logf("%d counts forged; estimate %d (path %d, ceiling %d); closed at %v: %v",
					injected, high, largest, maxPayload, s.endAt[cliSide].Sub(clock.Epoch), s.ended[cliSide])
				return
			}
			if !s.runUntil(until(s.settled), bound) || s.ended[cliSide] != nil || s.ended[srvSide] != nil {
				t.Fatalf("not settled within %v: ended %v, %v; missing %s", bound, s.ended[cliSide], s.ended[srvSide], s.led[srvSide].firstMissing())
			}
			t.Logf("%d counts rewritten; MTU changes %v; %d messages delivered", rewritten, w.changes[cliSide], s.led[srvSide].delivered)
		})
	}
}

// D19: "Each size that passes becomes that direction's payload MTU at
// once." Estimator.AppendPayload runs the estimator's timeout itself, so
// it can end a round's final wait; when that round passes and is the
// estimation's last, AppendPayload then has nothing to send, and the
// endpoint (mtuPoll in fastnet/mtu.go), which applies the estimator's MTU
// only when AppendPayload returns a payload, loses the change. The
// endpoint keeps sending with the previous size, and reports the lost one
// only when the next estimation sends its first reset, a Period later,
// whatever the path has become meanwhile. It happens whenever a datagram
// arrives at or after a final wait's deadline before the timeout fires:
// in the simulator, which delivers arrivals before deadlines at the same
// instant, and in any driver that reads a datagram before its timer.
//
// On a 576-byte path losing 5 % each way, with MTU.Period 10 s, for twenty
// seeds: every EventMTUChanged comes within a second of that side's last
// probe (a round just ended), never out of an idle estimator, and each
// side's payload MTU is within 1 % of 574 once its first estimation is over
// (no probe for 5 s). Without the fix about one estimation in six at this
// loss keeps a size more than 1 % below the path until the next period.
func TestMTUChangeTakesEffectAtOnce(t *testing.T) {
	const (
		pathMTU = 576
		period  = 10 * time.Second
		quiet   = 5 * time.Second // no probe for this long: the estimation is over
	)
	largest := pathMTU - 2
	for seed := uint64(1); seed <= 20; seed++ {
		cfg := fastnet.Config{MTU: fastnet.MTUConfig{Period: period}}
		link := mtuLink(pathMTU, 0.05)
		s := newSim(t, simSetup{Seed: 400 + seed, Cli: cfg, Srv: cfg, Up: link, Down: link})
		w := watchMTU(s, largest, largest)
		var probes [2][]clock.Time // when each side sent its probes
		s.net.Filter = func(from, to netip.AddrPort, b []byte) bool {
			side := cliSide
			if from == srvAddr {
				side = srvSide
			}
			if ch, _ := wireChannel(b); ch == estimationChannel(side) && len(b) > 3 {
				probes[side] = append(probes[side], s.net.Now())
			}
			return true
		}
		s.connect(10 * time.Second)
		// The first estimation is over once a side has sent no probe for
		// quiet; the next one starts period after it.
		var first [2]int
		over := func() bool {
			for side := range 2 {
				p := probes[side]
				if first[side] == 0 && len(p) > 0 && s.net.Now().Sub(p[len(p)-1]) >= quiet {
					first[side] = s.stats(side).PayloadMTU
				}
			}
			return first[cliSide] != 0 && first[srvSide] != 0
		}
		if !s.runUntil(over, time.Minute) {
			t.Fatalf("seed %d: the first estimations did not end within a minute", seed)
		}
		s.run(period)
		for side := range 2 {
			if !within1pct(first[side], largest) {
				t.Errorf("seed %d: %s: payload MTU %d after its first estimation; want within 1 %% of %d", seed, sideName(side), first[side], largest)
			}
			for _, c := range w.changes[side] {
				i, _ := slices.BinarySearch(probes[side], c.at+1)
				if i == 0 || c.at.Sub(probes[side][i-1]) > time.Second {
					t.Errorf("seed %d: %s: EventMTUChanged to %d at %v, with no probe in the second before it",
						seed, sideName(side), c.mtu, c.at.Sub(clock.Epoch))
				}
			}
		}
	}
}
