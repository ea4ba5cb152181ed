package fastnet_test

// Congestion control (D30, N76-N83) in virtual time: bulk reliable
// transfers through a bottleneck of a known rate, delay and tail-drop
// queue, one flow or several sharing it.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/fastnet/fastnettest"
)

// ccPath is a bottleneck both ways: a rate in bytes per second, a round
// trip, and the queue of the data direction in bytes.
type ccPath struct {
	rate  int
	rtt   time.Duration
	queue int
}

// bdp returns the path's bandwidth-delay product in bytes.
func (p ccPath) bdp() int { return int(float64(p.rate) * p.rtt.Seconds()) }

// ccFlow is one client sending a bulk transfer to the server.
type ccFlow struct {
	addr     netip.AddrPort
	ep       *fastnet.Endpoint
	h        fastnet.Handle
	start    time.Duration // when it starts sending, after the others
	total    int           // bytes to send
	queued   int           // bytes accepted by Send
	next     uint32        // the next message number to send
	want     uint32        // the next message number the server expects
	got      int           // bytes delivered to the server
	doneAt   time.Duration // when the last byte was delivered, 0 before
	ended    error
	disorder int // messages delivered out of order
	// gotAt[i] is the bytes delivered by the end of the i-th sample
	// interval.
	gotAt []int
}

// ccSim is a server and clients behind one shared bottleneck.
type ccSim struct {
	t        *testing.T
	net      *fastnettest.Network
	srv      *fastnet.Endpoint
	srvAddr  netip.AddrPort
	flows    []*ccFlow
	byAddr   map[netip.AddrPort]*ccFlow
	up, down *fastnettest.Bottleneck
	msgSize  int
	// unreliable makes the flows send unreliable messages: fill keeps
	// their send queues full whatever was delivered (N90).
	unreliable bool
}

const ccMsgSize = 1000

func newCCSim(t *testing.T, seed uint64, path ccPath, cfg fastnet.Config, flows int, total int) *ccSim {
	t.Helper()
	s := &ccSim{t: t, net: fastnettest.NewNetwork(seed), srvAddr: netip.MustParseAddrPort("10.0.0.1:7000"),
		byAddr: make(map[netip.AddrPort]*ccFlow), msgSize: ccMsgSize}
	s.net.DiscardEvents = true
	if cfg.MTU.Path == nil {
		// What the UDP driver tells the engine of a 1500-byte path
		// (D29): estimation probes it first.
		cfg.MTU.Path = func(netip.AddrPort) fastnet.PathInfo { return fastnet.PathInfo{PayloadMTU: 1500 - 28 - 2} }
	}
	scfg := cfg
	scfg.Role, scfg.Rand = fastnet.Server, s.net.Rand()
	var err error
	if s.srv, err = fastnet.NewEndpoint(scfg); err != nil {
		t.Fatal(err)
	}
	s.net.Add(s.srvAddr, s.srv)
	// The IPv4 and UDP headers count on the wire, as on a real link.
	s.up = s.net.NewBottleneck(fastnettest.BottleneckConfig{Rate: path.rate, Delay: path.rtt / 2, QueueLimit: path.queue, Overhead: 28})
	s.down = s.net.NewBottleneck(fastnettest.BottleneckConfig{Rate: path.rate, Delay: path.rtt / 2, QueueLimit: max(path.queue, path.bdp()), Overhead: 28})
	for i := range flows {
		f := &ccFlow{addr: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), 5000), total: total}
		ccfg := cfg
		ccfg.Role, ccfg.Rand = fastnet.Client, s.net.Rand()
		if f.ep, err = fastnet.NewEndpoint(ccfg); err != nil {
			t.Fatal(err)
		}
		s.net.Add(f.addr, f.ep)
		s.net.SetLink(f.addr, s.srvAddr, fastnettest.Link{Bottleneck: s.up, MTU: 1500 - 28})
		s.net.SetLink(s.srvAddr, f.addr, fastnettest.Link{Bottleneck: s.down, MTU: 1500 - 28})
		s.flows = append(s.flows, f)
		s.byAddr[f.addr] = f
	}
	s.net.OnEvent = s.onEvent
	return s
}

func (s *ccSim) elapsed() time.Duration { return s.net.Now().Sub(clock.Epoch) }

func (s *ccSim) onEvent(at clock.Time, node netip.AddrPort, ev fastnet.Event) {
	if node == s.srvAddr {
		f := s.byAddr[ev.Addr]
		switch {
		case f == nil:
		case ev.Kind == fastnet.EventMessage:
			if n := binary.BigEndian.Uint32(ev.Data); n != f.want {
				f.disorder++
			}
			f.want++
			f.got += len(ev.Data)
			if f.got >= f.total && f.doneAt == 0 {
				f.doneAt = s.elapsed()
			}
		}
		return
	}
	f := s.byAddr[node]
	switch ev.Kind {
	case fastnet.EventConnected:
		f.h = ev.Conn
	case fastnet.EventWritable:
		s.fill(f)
	case fastnet.EventDisconnected:
		f.ended = ev.Err
	}
}

// fill queues the flow's messages until its send queue is full or its
// total is queued.
func (s *ccSim) fill(f *ccFlow) {
	if f.h == 0 || f.ended != nil || s.elapsed() < f.start {
		return
	}
	msg := make([]byte, s.msgSize)
	for f.queued < f.total || s.unreliable {
		binary.BigEndian.PutUint32(msg, f.next)
		err := f.ep.Send(s.net.Now(), f.h, 1, msg, !s.unreliable)
		if errors.Is(err, fastnet.ErrQueueFull) {
			return
		}
		if err != nil {
			s.t.Fatalf("Send: %v", err)
		}
		f.next++
		f.queued += len(msg)
	}
}

// connect connects every flow, then lets the path settle.
func (s *ccSim) connect() {
	s.t.Helper()
	base := s.elapsed()
	for _, f := range s.flows {
		if _, err := f.ep.Connect(s.net.Now(), s.srvAddr); err != nil {
			s.t.Fatal(err)
		}
		f.start += base
	}
	err := s.net.RunUntilCond(func() bool {
		for _, f := range s.flows {
			if f.h == 0 {
				return false
			}
		}
		return true
	}, 10*time.Second)
	if err != nil {
		s.t.Fatalf("connect: %v", err)
	}
}

// run runs until every flow delivered its total or limit passed, sampling
// what each delivered every sample.
func (s *ccSim) run(limit, sample time.Duration) {
	s.t.Helper()
	end := s.elapsed() + limit
	for s.elapsed() < end {
		for _, f := range s.flows {
			s.fill(f)
			f.gotAt = append(f.gotAt, f.got)
		}
		if err := s.net.RunFor(sample); err != nil {
			s.t.Fatal(err)
		}
		done := true
		for _, f := range s.flows {
			if f.ended != nil {
				s.t.Fatalf("flow %v ended: %v", f.addr, f.ended)
			}
			if f.doneAt == 0 {
				done = false
			}
		}
		if done && !s.unreliable {
			return
		}
	}
}

// jain returns Jain's fairness index of xs: 1 when all are equal, 1/n when
// one has everything.
func jain(xs []float64) float64 {
	var sum, sq float64
	for _, x := range xs {
		sum += x
		sq += x * x
	}
	if sq == 0 {
		return 1
	}
	return sum * sum / (float64(len(xs)) * sq)
}

// ccResult is what a bulk run measured.
type ccResult struct {
	goodput  float64 // delivered bytes over the link's capacity in the time taken
	drops    float64 // share of the datagrams offered to the bottleneck that it dropped
	fairness float64 // Jain's index of the flows' goodputs over the time all were sending
	took     time.Duration
}

func (r ccResult) String() string {
	return fmt.Sprintf("goodput %.1f %% of the link, %.2f %% dropped at the queue, fairness %.3f, %v", 100*r.goodput, 100*r.drops, r.fairness, r.took.Round(time.Millisecond))
}

// measure returns the result of a finished run that began at from.
func (s *ccSim) measure(path ccPath, from time.Duration) ccResult {
	var r ccResult
	got := 0
	last := time.Duration(0)
	for _, f := range s.flows {
		if f.doneAt == 0 {
			s.t.Fatalf("flow %v delivered %d of %d bytes", f.addr, f.got, f.total)
		}
		if f.disorder != 0 {
			s.t.Errorf("flow %v: %d messages out of order", f.addr, f.disorder)
		}
		got += f.got
		last = max(last, f.doneAt)
	}
	r.took = last - from
	r.goodput = float64(got) / (float64(path.rate) * r.took.Seconds())
	st := s.up.Stats()
	r.drops = float64(st.Dropped) / float64(st.Offered)
	// Fairness over the time all flows were sending: up to the sample
	// before the first finished.
	first := len(s.flows[0].gotAt)
	for _, f := range s.flows {
		for i, g := range f.gotAt {
			if g >= f.total {
				first = min(first, i)
				break
			}
		}
	}
	xs := make([]float64, len(s.flows))
	for i, f := range s.flows {
		xs[i] = float64(f.gotAt[max(first-1, 0)])
	}
	r.fairness = jain(xs)
	return r
}

// ccControllerOnly is the configuration of the runs that measure the
// controller alone: payload MTU 1200 from the start and no MTU estimation,
// whose probes (D19) otherwise share the bottleneck and whose start at 32
// bytes dominates a transfer of a few megabytes (see docs/congestion.md).
var ccControllerOnly = fastnet.Config{InitialPayloadMTU: 1200, MTU: fastnet.MTUConfig{Disabled: true}}

// TestCongestionBottleneck: bulk reliable transfers through a bottleneck
// with a tail-drop queue (D30, N76-N83): everything arrives in order, the
// link is used well, its queue rarely overflows, and flows sharing it share
// it fairly. The 20 and 5 Mbit/s paths and the 70 % and 5 % targets are
// issue 20's (kernel TCP Cubic: 86-88 % and 0.6-1.3 % on the first);
// the others are its edge cases, held to not collapsing.
func TestCongestionBottleneck(t *testing.T) {
	if testing.Short() {
		t.Skip("megabytes through a simulated bottleneck")
	}
	const mbit = 1_000_000 / 8
	for _, tc := range []struct {
		name     string
		cfg      fastnet.Config
		path     ccPath
		flows    int
		total    int
		goodput  float64 // at least
		drops    float64 // at most
		fairness float64 // at least, with several flows
	}{
		{"20mbit-40ms-1bdp-1flow", ccControllerOnly, ccPath{20 * mbit, 40 * time.Millisecond, 100_000}, 1, 10 << 20, 0.7, 0.05, 0},
		{"20mbit-40ms-1bdp-4flows", ccControllerOnly, ccPath{20 * mbit, 40 * time.Millisecond, 100_000}, 4, 4 << 20, 0.7, 0.05, 0.9},
		{"5mbit-40ms-halfbdp-1flow", ccControllerOnly, ccPath{5 * mbit, 40 * time.Millisecond, 12_500}, 1, 3 << 20, 0.7, 0.05, 0},
		{"5mbit-40ms-halfbdp-4flows", ccControllerOnly, ccPath{5 * mbit, 40 * time.Millisecond, 12_500}, 4, 1 << 20, 0.7, 0.05, 0.9},
		{"20mbit-40ms-tenthbdp-1flow", ccControllerOnly, ccPath{20 * mbit, 40 * time.Millisecond, 10_000}, 1, 5 << 20, 0.45, 0.05, 0},
		{"20mbit-1ms-1flow", ccControllerOnly, ccPath{20 * mbit, time.Millisecond, 20_000}, 1, 5 << 20, 0.7, 0.05, 0},
		{"5mbit-600ms-1bdp-1flow", ccControllerOnly, ccPath{5 * mbit, 600 * time.Millisecond, 375_000}, 1, 5 << 20, 0.7, 0.05, 0},
		// The defaults: the payload MTU the system reports, up to 546
		// bytes, from the start (N84), then estimation, its probes on
		// the path. Before D30 one flow got 1 % of the link and lost 68 %
		// of its datagrams at the queue before it died.
		{"defaults-20mbit-40ms-1bdp-1flow", fastnet.Config{}, ccPath{20 * mbit, 40 * time.Millisecond, 100_000}, 1, 10 << 20, 0.7, 0.05, 0},
		{"defaults-20mbit-40ms-1bdp-4flows", fastnet.Config{}, ccPath{20 * mbit, 40 * time.Millisecond, 100_000}, 4, 4 << 20, 0.7, 0.05, 0.9},
		{"defaults-5mbit-40ms-halfbdp-1flow", fastnet.Config{}, ccPath{5 * mbit, 40 * time.Millisecond, 12_500}, 1, 3 << 20, 0.7, 0.05, 0},
		// Four estimations' probes on a 5 Mbit/s link with 12.5 kB of
		// queue: 78 % of the link, and 4.0 % of the datagrams dropped.
		// It was 64 % and 7.5 % while probes went beside a full window
		// (N89), 77 % and 5.7 % while the window forgot them once sent
		// (N92), 81 % and 6.3 % while the first round's probes, and
		// the replies to the peer's, went every 0.5 ms beside the
		// data (N94). The same without estimation (above) drops 4.8 %.
		{"defaults-5mbit-40ms-halfbdp-4flows", fastnet.Config{}, ccPath{5 * mbit, 40 * time.Millisecond, 12_500}, 4, 1 << 20, 0.7, 0.05, 0.9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newCCSim(t, 1, tc.path, tc.cfg, tc.flows, tc.total)
			s.connect()
			from := s.elapsed()
			s.run(5*time.Minute, 100*time.Millisecond)
			r := s.measure(tc.path, from)
			t.Logf("%s", r)
			if r.goodput < tc.goodput {
				t.Errorf("goodput %.1f %% of the link, want at least %.0f %%", 100*r.goodput, 100*tc.goodput)
			}
			if r.drops > tc.drops {
				t.Errorf("%.2f %% of the datagrams dropped at the queue, want at most %.0f %%", 100*r.drops, 100*tc.drops)
			}
			if tc.flows > 1 && r.fairness < tc.fairness {
				t.Errorf("fairness %.3f, want at least %.2f", r.fairness, tc.fairness)
			}
		})
	}
}

// The link's rate halves mid-transfer: the flow follows it down, and the
// queue does not stay full (D30).
func TestCongestionRateHalves(t *testing.T) {
	const mbit = 1_000_000 / 8
	path := ccPath{20 * mbit, 40 * time.Millisecond, 100_000}
	s := newCCSim(t, 3, path, ccControllerOnly, 1, 8<<20)
	s.connect()
	s.run(2*time.Second, 100*time.Millisecond)
	before := s.up.Stats()
	s.up.SetRate(path.rate / 2)
	f := s.flows[0]
	got := f.got
	s.run(3*time.Second, 100*time.Millisecond)
	after := s.up.Stats()
	drops := float64(after.Dropped-before.Dropped) / float64(after.Offered-before.Offered)
	share := float64(f.got-got) / (float64(path.rate/2) * 3)
	t.Logf("after the halving: %.1f %% of the new rate, %.2f %% dropped, queue %d bytes", 100*share, 100*drops, after.QueuedBytes)
	if share < 0.7 || drops > 0.05 {
		t.Errorf("after the rate halved: %.1f %% of the new rate, %.2f %% of the datagrams dropped; want at least 70 %% and at most 5 %%", 100*share, 100*drops)
	}
}

// Half the datagrams lost at random each way, not by congestion: the window stays
// at its minimum, but the transfer goes on and completes; the controller
// never starves the connection (D30).
func TestCongestionRandomLoss(t *testing.T) {
	const mbit = 1_000_000 / 8
	path := ccPath{20 * mbit, 40 * time.Millisecond, 100_000}
	// At 50 % each way a packet and its ack both arrive one time in
	// four, and D14's resends space out: some packet of a transfer then
	// easily stays unacked for the default 20 s Timeout, controller or
	// not. The test's Timeout is two minutes.
	cfg := ccControllerOnly
	cfg.Timeout = 2 * time.Minute
	s := newCCSim(t, 5, path, cfg, 1, 128<<10)
	for _, f := range s.flows {
		s.net.SetLink(f.addr, s.srvAddr, fastnettest.Link{Bottleneck: s.up, Loss: 0.5})
		s.net.SetLink(s.srvAddr, f.addr, fastnettest.Link{Bottleneck: s.down, Loss: 0.5})
	}
	s.connect()
	from := s.elapsed()
	s.run(5*time.Minute, 100*time.Millisecond)
	f := s.flows[0]
	if f.doneAt == 0 || f.disorder != 0 {
		t.Fatalf("delivered %d of %d bytes in 5 minutes at 50 %% loss, %d out of order", f.got, f.total, f.disorder)
	}
	t.Logf("128 KiB at 50 %% loss each way in %v", (f.doneAt - from).Round(time.Millisecond))
}

// A flood of unreliable data, which no ack times, through a bottleneck:
// the echo limiter (N90) keeps its queue short, so that what the queue
// drops is a few percent and the link still carries most of what it
// can, with one flow or four, shared fairly. With QueueDelay negative
// (the limiter off) the rate stays twice the initial window per round
// trip (N85), beyond a 5 Mbit/s link's, and its queue drops a tenth of
// what is sent; the first row is that control. On a 600 ms path that
// rate, 48.7 kB/s, is 7.8 % of a 5 Mbit/s link: the limiter only cuts
// it, and nothing is dropped.
func TestCongestionUnreliableFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("seconds of floods through a simulated bottleneck")
	}
	const mbit = 1_000_000 / 8
	off := ccControllerOnly
	off.Congestion.QueueDelay = -1
	for _, tc := range []struct {
		name    string
		cfg     fastnet.Config
		path    ccPath
		flows   int
		goodput float64 // at least
		drops   float64 // at most, or with the limiter off at least
	}{
		{"off-5mbit-40ms-halfbdp-1flow", off, ccPath{5 * mbit, 40 * time.Millisecond, 12_500}, 1, 0, 0.1},
		{"5mbit-40ms-halfbdp-1flow", ccControllerOnly, ccPath{5 * mbit, 40 * time.Millisecond, 12_500}, 1, 0.7, 0.05},
		{"5mbit-40ms-halfbdp-4flows", ccControllerOnly, ccPath{5 * mbit, 40 * time.Millisecond, 12_500}, 4, 0.7, 0.05},
		{"20mbit-40ms-1bdp-4flows", ccControllerOnly, ccPath{20 * mbit, 40 * time.Millisecond, 100_000}, 4, 0.7, 0.05},
		{"1mbit-10ms-1bdp-1flow", ccControllerOnly, ccPath{1 * mbit, 10 * time.Millisecond, 5_000}, 1, 0.7, 0.05},
		{"5mbit-600ms-1bdp-1flow", ccControllerOnly, ccPath{5 * mbit, 600 * time.Millisecond, 375_000}, 1, 0.07, 0.05},
		{"defaults-5mbit-40ms-halfbdp-1flow", fastnet.Config{}, ccPath{5 * mbit, 40 * time.Millisecond, 12_500}, 1, 0.7, 0.05},
		{"defaults-5mbit-40ms-halfbdp-4flows", fastnet.Config{}, ccPath{5 * mbit, 40 * time.Millisecond, 12_500}, 4, 0.7, 0.05},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newCCSim(t, 1, tc.path, tc.cfg, tc.flows, 0)
			s.unreliable = true
			s.connect()
			// The first seconds, while the round trip is learnt, do
			// not count.
			const warm, span = 5 * time.Second, 20 * time.Second
			s.run(warm, 100*time.Millisecond)
			got0, st0 := 0, s.up.Stats()
			for _, f := range s.flows {
				got0 += f.got
			}
			s.run(span, 100*time.Millisecond)
			got, st := -got0, s.up.Stats()
			var expired uint64
			xs := make([]float64, len(s.flows))
			for i, f := range s.flows {
				got += f.got
				xs[i] = float64(f.got - f.gotAt[len(f.gotAt)-int(span/(100*time.Millisecond))])
				cs, _ := f.ep.Stats(f.h)
				expired += cs.UnreliableExpired
			}
			goodput := float64(got) / (float64(tc.path.rate) * span.Seconds())
			drops := float64(st.Dropped-st0.Dropped) / float64(st.Offered-st0.Offered)
			t.Logf("goodput %.1f %% of the link, %.2f %% dropped at the queue, fairness %.3f, %d expired at the senders", 100*goodput, 100*drops, jain(xs), expired)
			if tc.flows > 1 && jain(xs) < 0.9 {
				t.Errorf("fairness %.3f, want at least 0.9", jain(xs))
			}
			if tc.goodput == 0 {
				if drops < tc.drops {
					t.Errorf("%.2f %% dropped at the queue with the limiter off, want at least %.0f %%", 100*drops, 100*tc.drops)
				}
				return
			}
			if goodput < tc.goodput {
				t.Errorf("goodput %.1f %% of the link, want at least %.0f %%", 100*goodput, 100*tc.goodput)
			}
			if drops > tc.drops {
				t.Errorf("%.2f %% of the datagrams dropped at the queue, want at most %.0f %%", 100*drops, 100*tc.drops)
			}
		})
	}
}

// Unreliable messages that wait longer than UnreliableMaxDelay behind a
// slow pacer are dropped at the sender, counted, and reported dropped when
// tracked; the reliable messages queued behind them on the same channel
// still get their outcomes (N80).
func TestCongestionUnreliableExpire(t *testing.T) {
	link := fastnettest.Link{Delay: 10 * time.Millisecond}
	cfg := fastnet.Config{Congestion: fastnet.CongestionConfig{FixedRate: 20_000}, UnreliableMaxDelay: 50 * time.Millisecond}
	o := newOutcomeSim(t, simSetup{Seed: 2, Cli: cfg, Srv: cfg, Up: link, Down: link})
	o.connect(5 * time.Second)
	for i := range 60 {
		if err := o.send(cliSide, 1, payload(uint32(i), 500), i%3 == 0, true); err != nil {
			t.Fatal(err)
		}
	}
	if !o.runUntil(func() bool { return len(o.outcome[cliSide]) == 60 }, 30*time.Second) {
		t.Fatalf("%d outcomes of 60", len(o.outcome[cliSide]))
	}
	counts := map[fastnet.Outcome]int{}
	for _, oc := range o.outcome[cliSide] {
		counts[oc]++
	}
	st := o.stats(cliSide)
	if counts[fastnet.OutcomeAcked] != 20 || counts[fastnet.OutcomeDropped] == 0 || uint64(counts[fastnet.OutcomeDropped]) != st.UnreliableExpired {
		t.Errorf("outcomes %v, UnreliableExpired %d; want the 20 reliable acked and the dropped unreliable ones counted", counts, st.UnreliableExpired)
	}
}

// CongestionConfig's rates bound what a connection sends (D30, N79):
// MaxRate caps the controller and FixedRate replaces it, through a link
// far faster than either.
func TestCongestionRates(t *testing.T) {
	const mbit = 1_000_000 / 8
	path := ccPath{1000 * mbit, 20 * time.Millisecond, 1 << 20}
	for _, tc := range []struct {
		name string
		cc   fastnet.CongestionConfig
		rate int
	}{
		{"max", fastnet.CongestionConfig{MaxRate: 200_000}, 200_000},
		{"fixed", fastnet.CongestionConfig{FixedRate: 300_000}, 300_000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ccControllerOnly
			cfg.Congestion = tc.cc
			s := newCCSim(t, 7, path, cfg, 1, 1<<20)
			s.connect()
			from := s.elapsed()
			s.run(time.Minute, 100*time.Millisecond)
			f := s.flows[0]
			if f.doneAt == 0 {
				t.Fatalf("delivered %d of %d bytes", f.got, f.total)
			}
			// The pacer counts datagram payloads: the chunks and their
			// headers, acks and heartbeats besides.
			got := float64(s.up.Stats().ForwardedBytes) / (f.doneAt - from).Seconds()
			t.Logf("%.0f bytes/s on the wire for a rate of %d", got, tc.rate)
			if got > 1.1*float64(tc.rate)*(1200+28+9)/1200 || got < 0.8*float64(tc.rate) {
				t.Errorf("%.0f bytes/s on the wire, want about %d of payload", got, tc.rate)
			}
		})
	}
}

// Config.Validate refuses congestion settings that cannot work.
func TestCongestionConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  fastnet.Config
		ok   bool
	}{
		{"defaults", fastnet.Config{}, true},
		{"disabled", fastnet.Config{Congestion: fastnet.CongestionConfig{Disabled: true}}, true},
		{"max rate", fastnet.Config{Congestion: fastnet.CongestionConfig{MaxRate: 1 << 20}}, true},
		{"negative fixed rate", fastnet.Config{Congestion: fastnet.CongestionConfig{FixedRate: -1}}, false},
		{"tiny max rate", fastnet.Config{Congestion: fastnet.CongestionConfig{MaxRate: 10}}, false},
		{"min window above initial", fastnet.Config{Congestion: fastnet.CongestionConfig{InitialWindow: 4000, MinWindow: 5000}}, false},
		{"min window below two packets", fastnet.Config{Congestion: fastnet.CongestionConfig{MinWindow: 10}}, false},
		{"negative unreliable delay", fastnet.Config{UnreliableMaxDelay: -time.Millisecond}, false},
		{"echo limiter off", fastnet.Config{Congestion: fastnet.CongestionConfig{QueueDelay: -1}}, true},
		{"queue delay over a second", fastnet.Config{Congestion: fastnet.CongestionConfig{QueueDelay: 2 * time.Second}}, false},
	} {
		tc.cfg.Role = fastnet.Client
		if err := tc.cfg.Validate(); (err == nil) != tc.ok {
			t.Errorf("%s: Validate() = %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}

// A server with 1,000 clients, joining 5 ms apart, each sending 32 KiB
// reliably through one 20 Mbit/s bottleneck: no connection ends, every
// message arrives in order, and the link stays used. With more flows than
// the path holds windows of two datagrams (a 200 kB pipe, 1,000 windows
// of 2.5 kB), the queue drops most datagrams, as it would for as many TCP
// flows (N83).
func TestCongestionManyClients(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 simulated clients")
	}
	const mbit = 1_000_000 / 8
	path := ccPath{20 * mbit, 40 * time.Millisecond, 100_000}
	s := newCCSim(t, 1, path, ccControllerOnly, 1000, 32<<10)
	for i, f := range s.flows {
		f.start = time.Duration(i) * 5 * time.Millisecond
	}
	s.connect()
	from := s.elapsed()
	s.run(5*time.Minute, 100*time.Millisecond)
	r := s.measure(path, from)
	t.Logf("%s", r)
	if r.goodput < 0.6 {
		t.Errorf("goodput %.1f %% of the link, want at least 60 %%", 100*r.goodput)
	}
}

// Channels share the pacer's budget (D30, N80): a channel flooding
// unreliable messages far beyond a fixed rate does not hold up another
// channel's reliable messages, whose every message arrives within a few
// round trips of the rate, while the flood's excess is dropped at the
// sender rather than sent late.
func TestCongestionChannelsShare(t *testing.T) {
	link := fastnettest.Link{Delay: 10 * time.Millisecond}
	cfg := fastnet.Config{Congestion: fastnet.CongestionConfig{FixedRate: 50_000}}
	s := newSim(t, simSetup{Seed: 3, Cli: cfg, Srv: cfg, Up: link, Down: link, KeepMessages: true})
	s.connect(5 * time.Second)
	for i := range 50 {
		for j := range 20 {
			s.send(cliSide, 1, payload(uint32(1000+i*20+j), 200), false)
		}
		s.send(cliSide, 2, payload(uint32(i), 100), true)
		s.run(20 * time.Millisecond)
	}
	if !s.runUntil(s.settled, 10*time.Second) {
		t.Fatalf("not settled: %s", s.led[srvSide].firstMissing())
	}
	rel := s.messagesOn(srvSide, 2)
	flood := s.messagesOn(srvSide, 1)
	st := s.stats(cliSide)
	t.Logf("%d reliable, %d of 1000 unreliable delivered, %d expired at the sender", len(rel), len(flood), st.UnreliableExpired)
	if len(rel) != 50 {
		t.Errorf("%d reliable messages of 50 delivered", len(rel))
	}
	if st.UnreliableExpired == 0 || len(flood)+int(st.UnreliableExpired) > 1000 {
		t.Errorf("%d unreliable delivered and %d expired of 1000: want the excess dropped at the sender", len(flood), st.UnreliableExpired)
	}
	// The rate carries about 50 kB/s of the 200 kB/s offered: most of
	// the flood is too late to send.
	if len(flood) > 400 {
		t.Errorf("%d unreliable messages delivered through a rate that carries about 250", len(flood))
	}
}

// A connection that receives far more than it sends still sends (N79):
// its acks use up its pacer's tokens but never put the bucket in debt, so
// its own messages go out while it acks a bulk transfer coming the other
// way.
func TestCongestionAcksDoNotStarveData(t *testing.T) {
	cfg := fastnet.Config{MTU: fastnet.MTUConfig{Disabled: true}}
	s := newCCSim(t, 1, ccPath{10 * 125_000, 100 * time.Millisecond, 125_000}, cfg, 1, 40<<20)
	var srvH fastnet.Handle
	got := 0
	s.net.OnEvent = func(at clock.Time, node netip.AddrPort, ev fastnet.Event) {
		if node == s.srvAddr && ev.Kind == fastnet.EventConnected {
			srvH = ev.Conn
		}
		if node == s.flows[0].addr && ev.Kind == fastnet.EventMessage && ev.Channel == 2 {
			got++
		}
		s.onEvent(at, node, ev)
	}
	s.connect()
	if err := s.net.RunUntilCond(func() bool { return srvH != 0 }, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	for range 200 {
		s.fill(s.flows[0])
		if err := s.srv.Send(s.net.Now(), srvH, 2, make([]byte, 20), true); err != nil {
			t.Fatal(err)
		}
		if err := s.net.RunFor(50 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.net.RunFor(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	if got < 195 {
		t.Errorf("the server's 200 messages: %d delivered while it acked a bulk transfer", got)
	}
}

// Resends and first sends take turns for the pacer (N80): while every
// packet of one channel is lost (a middlebox dropping it) and its resends
// come due again and again, another channel's new messages still go. At a
// fixed 20 kB/s, channel 2's 20 kB take 8 s beside channel 1's resends;
// without the turns, 38 of its 40 messages had arrived after 30 s.
func TestCongestionResendsShareWithNewData(t *testing.T) {
	link := fastnettest.Link{Delay: 10 * time.Millisecond}
	cfg := ccControllerOnly
	cfg.Congestion = fastnet.CongestionConfig{FixedRate: 20_000}
	cfg.Timeout = time.Minute
	s := newSim(t, simSetup{Seed: 5, Cli: cfg, Srv: cfg, Up: link, Down: link, KeepMessages: true})
	s.connect(5 * time.Second)
	s.net.Filter = func(from, to netip.AddrPort, b []byte) bool {
		return from != cliAddr || len(b) < 2 || binary.BigEndian.Uint16(b) != 1
	}
	s.send(cliSide, 1, payload(1, 60_000), true) // 50 packets, every one lost
	s.run(500 * time.Millisecond)                // their resends come due
	start := s.net.Now()
	for i := range 40 {
		s.send(cliSide, 2, payload(uint32(100+i), 500), true)
	}
	if !s.runUntil(func() bool { return len(s.messagesOn(srvSide, 2)) == 40 }, 12*time.Second) {
		t.Fatalf("%d of 40 messages on channel 2 in 12 s while channel 1's resends wait", len(s.messagesOn(srvSide, 2)))
	}
	t.Logf("channel 2's 20 kB in %v beside channel 1's resends", s.net.Now().Sub(start))
}

// An unreliable stream the application paces itself, a game's 60 updates
// a second, does not wait for the pacer: its heartbeats keep D16's
// interval, and the peer sends about as many datagrams as with the echo
// limiter off (N90). A flood, more than the pacer lets go, brings them
// forward.
func TestEchoLimiterPacedStream(t *testing.T) {
	link := fastnettest.Link{Delay: 20 * time.Millisecond}
	peerSent := func(cc fastnet.CongestionConfig, flood bool) uint64 {
		cfg := fastnet.Config{Congestion: cc}
		s := newSim(t, simSetup{Seed: 4, Cli: cfg, Srv: cfg, Up: link, Down: link, Loose: true})
		s.connect(5 * time.Second)
		before := s.stats(srvSide).PacketsSent
		for i := range 600 {
			n := 1
			if flood {
				n = 400 // 80 kB a tick, beyond twice the window per round trip
			}
			for j := range n {
				if err := s.send(cliSide, 1, payload(uint32(i*n+j), 200), false); err != nil && !errors.Is(err, fastnet.ErrQueueFull) {
					t.Fatal(err)
				}
			}
			s.run(time.Second / 60)
		}
		return s.stats(srvSide).PacketsSent - before
	}
	off := fastnet.CongestionConfig{QueueDelay: -1}
	on, base := peerSent(fastnet.CongestionConfig{}, false), peerSent(off, false)
	t.Logf("server datagrams in 10 s of a 60 Hz stream: %d, %d with the limiter off", on, base)
	// The first tenth of a second, at the 32-byte payload MTU, a
	// message of 200 bytes is seven packets, and the pacer does hold
	// some back: a few heartbeats come early then.
	if on > base+base/10 {
		t.Errorf("the server sent %d datagrams with the echo limiter on, %d off: want about the same", on, base)
	}
	// A flood's heartbeats go four datagrams' time at the pacing rate
	// apart, each echoed.
	flood := peerSent(fastnet.CongestionConfig{}, true)
	t.Logf("server datagrams in 10 s of a flood: %d", flood)
	if flood < base+base/5 {
		t.Errorf("the server sent %d datagrams while the client flooded, %d for a paced stream: want its echoes more", flood, base)
	}
	// And under a low MaxRate, no more heartbeats and echoes than data:
	// the limiter's heartbeats keep to four datagrams' time at the rate.
	capped := peerSent(fastnet.CongestionConfig{MaxRate: 10_000}, true)
	cappedOff := peerSent(fastnet.CongestionConfig{MaxRate: 10_000, QueueDelay: -1}, true)
	t.Logf("server datagrams in 10 s of a flood capped at 10 kB/s: %d, %d with the limiter off", capped, cappedOff)
	if capped > cappedOff+cappedOff/2 {
		t.Errorf("the server sent %d datagrams for a flood capped at 10 kB/s, %d with the limiter off", capped, cappedOff)
	}
}

// Three unreliable floods share a 5 Mbit/s link and a fourth starts 5 s
// later: within a few seconds it has its share, as the echo limiter's
// cuts, in proportion to each flow's rate, and its growth, the same for
// each, even the flows out (N90).
func TestCongestionUnreliableLateFlow(t *testing.T) {
	const mbit = 1_000_000 / 8
	path := ccPath{5 * mbit, 40 * time.Millisecond, 12_500}
	s := newCCSim(t, 1, path, ccControllerOnly, 4, 0)
	s.unreliable = true
	s.flows[3].start = 5 * time.Second
	s.connect()
	s.run(10*time.Second, 100*time.Millisecond)
	got0 := make([]int, 4)
	for i, f := range s.flows {
		got0[i] = f.got
	}
	s.run(5*time.Second, 100*time.Millisecond)
	xs := make([]float64, 4)
	for i, f := range s.flows {
		xs[i] = float64(f.got - got0[i])
	}
	t.Logf("delivered from 5 s to 10 s after the late flow started: %v, fairness %.3f", xs, jain(xs))
	if j := jain(xs); j < 0.9 {
		t.Errorf("fairness %.3f between three flows and one 5 s late, want at least 0.9", j)
	}
}

// One bulk flow on a 5 Mbit/s link with 12.5 kB of queue, with the
// defaults: its MTU estimation, whose probes the window counts for a
// round trip beside the data (N92), reaches the path's 1,470 bytes and
// ends within 2.5 seconds and 200 KB of probes. While the window forgot
// each probe once sent, a round's probes overflowed the queue and failed
// rounds were measured again: after 2 s the estimation was still searching,
// 143 KB of probes sent. (It ended within 2 s with a first round four times
// as fast, which N94 keeps for idle connections.)
func TestProbesShareTheWindow(t *testing.T) {
	const mbit = 1_000_000 / 8
	path := ccPath{5 * mbit, 40 * time.Millisecond, 12_500}
	s := newCCSim(t, 1, path, fastnet.Config{}, 1, 3<<20)
	s.connect()
	s.run(2500*time.Millisecond, 100*time.Millisecond)
	f := s.flows[0]
	st, _ := f.ep.Stats(f.h)
	t.Logf("after 2.5 s: MTU %d, searching %v, %d probes, %d bytes", st.PayloadMTU, st.MTUSearching, st.MTUProbes, st.MTUProbeBytes)
	if st.PayloadMTU != 1470 || st.MTUSearching || st.MTUProbeBytes > 200_000 {
		t.Errorf("after 2.5 s: MTU %d, searching %v, %d probe bytes; want 1470, done, at most 200 KB", st.PayloadMTU, st.MTUSearching, st.MTUProbeBytes)
	}
}

// Four unreliable floods on a 5 Mbit/s link while their MTU estimations,
// and the server's, run: the server's rounds of probes queue on the path
// back to each client, behind which the echoes come late, and the echo
// limiter leaves those echoes out rather than cut for a queue its flow
// did not build (N93). Over the first ten seconds the link carries most of
// what it can; reading them as queue, it carried 62 % with the system's
// 1,470-byte path and 33 % with a 9,214-byte interface in front of it.
func TestUnreliableFloodDuringEstimation(t *testing.T) {
	const mbit = 1_000_000 / 8
	path := ccPath{5 * mbit, 40 * time.Millisecond, 12_500}
	for _, tc := range []struct {
		hint    int
		goodput float64
	}{{1470, 0.75}, {9214, 0.45}} {
		t.Run(fmt.Sprint(tc.hint), func(t *testing.T) {
			cfg := fastnet.Config{}
			cfg.MTU.Path = func(netip.AddrPort) fastnet.PathInfo { return fastnet.PathInfo{PayloadMTU: tc.hint} }
			s := newCCSim(t, 1, path, cfg, 4, 0)
			s.unreliable = true
			s.connect()
			const span = 10 * time.Second
			s.run(span, 100*time.Millisecond)
			got := 0
			for _, f := range s.flows {
				got += f.got
			}
			goodput := float64(got) / (float64(path.rate) * span.Seconds())
			st := s.up.Stats()
			t.Logf("hint %d: goodput %.1f %% of the link in the first 10 s, %.2f %% dropped at the queue", tc.hint, 100*goodput, 100*float64(st.Dropped)/float64(st.Offered))
			if goodput < tc.goodput {
				t.Errorf("goodput %.1f %% of the link in the first 10 s, want at least %.0f %%", 100*goodput, 100*tc.goodput)
			}
		})
	}
}

// tapNode records the packets its endpoint sends: the channel, payload
// size and time of each, bundles opened (D24).
type tapNode struct {
	*fastnet.Endpoint
	sent []tapped
}

type tapped struct {
	at    clock.Time
	ch    int16
	size  int  // payload bytes, after the channel id
	alone bool // in a datagram of its own, not in a bundle
}

func (n *tapNode) PollTransmit(now clock.Time, buf []byte) (fastnet.Transmit, bool) {
	tx, ok := n.Endpoint.PollTransmit(now, buf)
	if !ok {
		return tx, ok
	}
	p := buf[:tx.N]
	ch := int16(binary.BigEndian.Uint16(p))
	if ch != -6 {
		n.sent = append(n.sent, tapped{now, ch, len(p) - 2, true})
		return tx, ok
	}
	for p = p[2:]; len(p) >= 2; {
		l := int(binary.BigEndian.Uint16(p))
		inner := p[2 : 2+l]
		n.sent = append(n.sent, tapped{now, int16(binary.BigEndian.Uint16(inner)), l - 2, false})
		p = p[2+l:]
	}
	return tx, ok
}

// N94: beside data, the estimator's packets go D19's interval apart even
// in the first round, whose 400 small probes an idle connection sends
// four times as often, and the responder's counts go no closer together
// alone: the estimator keeps a round's largest count, and the peer's
// first round otherwise drew a reply datagram every 0.5 ms onto the path
// the data fills. The server's estimation still counts every probe: it
// ends at the path's MTU.
func TestProbesBesideData(t *testing.T) {
	for _, tc := range []struct {
		name string
		busy bool
		// own is the client's MTUConfig.ProbeInterval, with its
		// estimation off: it times the client's estimator, never its
		// counts to the server's (a review found counts held 400 ms,
		// past the server's final wait, and the server's estimation
		// ending at 497 bytes).
		own time.Duration
	}{{"idle", false, 0}, {"busy", true, 0}, {"busy-own-interval-400ms", true, 400 * time.Millisecond}} {
		busy := tc.busy
		t.Run(tc.name, func(t *testing.T) {
			n := fastnettest.NewNetwork(1)
			n.DiscardEvents = true
			srvAddr, cliAddr := netip.MustParseAddrPort("10.0.0.1:7000"), netip.MustParseAddrPort("10.0.0.2:5000")
			path := func(netip.AddrPort) fastnet.PathInfo { return fastnet.PathInfo{PayloadMTU: 1470} }
			cfg := fastnet.Config{Role: fastnet.Server, Rand: n.Rand()}
			cfg.MTU.Path = path
			srv, err := fastnet.NewEndpoint(cfg)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Role, cfg.Rand = fastnet.Client, n.Rand()
			if tc.own != 0 {
				cfg.MTU.ProbeInterval, cfg.MTU.Disabled = tc.own, true
				cfg.InitialPayloadMTU = 1200
			}
			ep, err := fastnet.NewEndpoint(cfg)
			if err != nil {
				t.Fatal(err)
			}
			cli := &tapNode{Endpoint: ep}
			n.Add(srvAddr, srv)
			n.Add(cliAddr, cli)
			n.SetPath(cliAddr, srvAddr, fastnettest.Link{Delay: 10 * time.Millisecond, MTU: 1472})
			var h, sh fastnet.Handle
			msg := make([]byte, 1000)
			fill := func() {
				for busy && h != 0 && ep.Send(n.Now(), h, 1, msg, true) == nil {
				}
			}
			n.OnEvent = func(_ clock.Time, node netip.AddrPort, ev fastnet.Event) {
				if node != cliAddr {
					if ev.Kind == fastnet.EventConnected {
						sh = ev.Conn
					}
					return
				}
				switch ev.Kind {
				case fastnet.EventConnected:
					h = ev.Conn
					fill()
				case fastnet.EventWritable:
					fill()
				}
			}
			if _, err := ep.Connect(n.Now(), srvAddr); err != nil {
				t.Fatal(err)
			}
			if err := n.RunFor(3 * time.Second); err != nil {
				t.Fatal(err)
			}
			// The smallest gaps between the client's probes (channel -4,
			// beyond the 1-byte resets) and between the counts it sent
			// alone in reply to the server's (-3, 4 bytes).
			minGap := func(ch int16, ok func(tapped) bool) time.Duration {
				g, last := time.Duration(-1), clock.Time(0)
				for _, p := range cli.sent {
					if p.ch != ch || !ok(p) {
						continue
					}
					if last != 0 && (g < 0 || p.at.Sub(last) < g) {
						g = p.at.Sub(last)
					}
					last = p.at
				}
				return g
			}
			probeGap := minGap(-4, func(p tapped) bool { return p.size > 1 })
			replyGap := minGap(-3, func(p tapped) bool { return p.size == 4 && p.alone })
			st, _ := srv.Stats(sh)
			t.Logf("smallest gap between probes %v, between counts sent alone %v; server's MTU %d, searching %v", probeGap, replyGap, st.PayloadMTU, st.MTUSearching)
			const interval = fastnet.DefaultMTUProbeInterval
			if busy && (tc.own == 0 && probeGap < interval || replyGap < interval) {
				t.Errorf("beside data: probes %v apart, counts %v apart; want at least %v", probeGap, replyGap, interval)
			}
			if !busy && (probeGap >= interval || replyGap >= interval) {
				t.Errorf("idle: probes %v apart, counts %v apart; want the first round's probes, and their counts, closer than %v", probeGap, replyGap, interval)
			}
			if st.PayloadMTU != 1470 || st.MTUSearching {
				t.Errorf("server's estimation: MTU %d, searching %v; want 1470, done", st.PayloadMTU, st.MTUSearching)
			}
		})
	}
}

// Four flows with the defaults on a 5 Mbit/s link with 12.5 kB of queue,
// at five round trips from 40 to 45.2 ms: the 5 % target for drops at the
// queue holds at each, not only at the one round trip of
// TestCongestionBottleneck (N94: 3.5-4.1 %; 5.4-6.6 % before).
func TestCongestionDefaultsRoundTrips(t *testing.T) {
	if testing.Short() {
		t.Skip("megabytes through a simulated bottleneck")
	}
	const mbit = 1_000_000 / 8
	for i := range 5 {
		path := ccPath{5 * mbit, 40*time.Millisecond + time.Duration(i)*1300*time.Microsecond, 12_500}
		t.Run(path.rtt.String(), func(t *testing.T) {
			s := newCCSim(t, 1, path, fastnet.Config{}, 4, 1<<20)
			s.connect()
			from := s.elapsed()
			s.run(5*time.Minute, 100*time.Millisecond)
			r := s.measure(path, from)
			t.Logf("%s", r)
			if r.goodput < 0.7 || r.drops > 0.05 || r.fairness < 0.9 {
				t.Errorf("%s; want at least 70 %%, at most 5 %% dropped, fairness at least 0.9", r)
			}
		})
	}
}
