package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/impair"
	"github.com/fastnet-engine/fastnet/udpdriver"
)

// demoOptions are the flags of the demo.
type demoOptions struct {
	clients  int
	duration time.Duration
	wait     time.Duration // the --wait window
	imp      impair.Config // its Seed is --seed, also the messages' seed
}

// After the clients stop sending, each waits for the echoes of what it sent
// for as long as its connection makes progress: until --wait passes with no
// echo arriving and no packet acknowledged either way, and never longer than
// demoMaxWaits times --wait in all. Under heavy impairment the last
// fragments of a large message can take several resend intervals (up to
// MaxResendInterval, 5 s by default) to get through, so the window is what
// matters, not a fixed deadline.
const demoMaxWaits = 10

// maxLatencySamples bounds the echo latencies a client keeps.
const maxLatencySamples = 1 << 16

func demoCommand() *command {
	return &command{
		name:    "demo",
		summary: "run a server and clients over a lossy, jittery relay and check every message",
		usage:   "demo [--clients N] [--duration D] [--wait D] [--loss P] [--delay D] [--jitter D] [--dup P] [--reorder P] [--mtu BYTES] [--seed N]",
		details: `
Runs a Fastnet server and --clients clients in this process, over real
loopback UDP through a relay that loses, delays, jitters, duplicates and
reorders datagrams in both directions and drops those longer than --mtu bytes
(a path MTU; the connections find it by MTU estimation, D19).

For --duration each client sends numbered reliable messages of 16-300 bytes on
channel 1, 300-4000 bytes on channel 2 (many above the MTU) and 4-32 KiB on
channel 3, and 64-byte unreliable position updates, 30 a second, on channel 0.
The server checks every message and echoes it; the client checks the echoes.
Then the clients wait for their last echoes and close gracefully: they wait
while echoes or acknowledgements keep arriving, and give up once --wait passes
without either (or after ten times --wait in all); the report then says how
many echoes were still on their way.

Heavy impairment can end connections instead: a reliable packet that stays
unacknowledged for the connection timeout (20 s) closes its connection
(D14), and until MTU estimation has grown the payload MTU from its initial
32 bytes a 32 KiB message travels as a thousand packets, each needing its
own acknowledgement. With a 200 ms round trip that happens from about 25 %
loss each way (an ack lost on the way back is repeated in later ack
packets, N29, but a packet still needs one of its copies through within the
timeout); the report then says "peer is not acknowledging".

Progress goes to standard error (one updated line on a terminal, a line a
second otherwise). The report on standard output gives the messages sent and
delivered per kind, the round-trip time, the resends, the unreliable
messages their senders dropped for waiting longer than 100ms ("unreliable
expired", D30), the payload MTU reached and how many MTU estimations are
over, and a verdict: every reliable message arrived intact and in order, both ways, and every unreliable one at most once and intact. Exits 0 when
the verdict passes, 1 otherwise, including when the clients stopped waiting
before everything arrived.`,
		flags: func(fs *flag.FlagSet) func(context.Context, []string, *stdio) int {
			var o demoOptions
			fs.IntVar(&o.clients, "clients", 4, "run `N` clients, 1..100")
			fs.DurationVar(&o.duration, "duration", 8*time.Second, "the clients send for `D`")
			fs.DurationVar(&o.wait, "wait", 15*time.Second, "after sending, a client waits for its last echoes until `D` passes with nothing arriving")
			fs.Float64Var(&o.imp.Loss, "loss", 0.05, "lose a datagram with probability `P`, each way, 0..0.5")
			fs.DurationVar(&o.imp.Delay, "delay", 20*time.Millisecond, "delay each datagram by `D`, each way, 0..5s")
			fs.DurationVar(&o.imp.Jitter, "jitter", 5*time.Millisecond, "vary each delay by up to `D` either way, 0..5s")
			fs.Float64Var(&o.imp.Dup, "dup", 0.01, "duplicate a datagram with probability `P`")
			fs.Float64Var(&o.imp.Reorder, "reorder", 0.02, "hold a datagram back behind later ones with probability `P`")
			fs.IntVar(&o.imp.MTU, "mtu", 1472, "drop datagrams longer than `BYTES`, 576..65507 (0: none)")
			fs.Uint64Var(&o.imp.Seed, "seed", 1, "seed the relay's random choices and the messages with `N`")
			return func(ctx context.Context, args []string, s *stdio) int {
				bad := func(format string, a ...any) int { return usageError(s, "demo", format, a...) }
				prob := func(p float64) bool { return p >= 0 && p < 1 }
				switch {
				case len(args) > 0:
					return bad("unexpected argument %q", args[0])
				case o.clients < 1 || o.clients > 100:
					return bad("--clients %d: want 1..100", o.clients)
				case o.duration <= 0 || o.duration > maxFlagDuration:
					return bad("--duration %v: want more than 0, at most %v", o.duration, maxFlagDuration)
				case o.wait <= 0 || o.wait > 10*time.Minute:
					return bad("--wait %v: want more than 0, at most 10m", o.wait)
				case !prob(o.imp.Loss) || o.imp.Loss > 0.5:
					return bad("--loss %v: want 0..0.5", o.imp.Loss)
				case !prob(o.imp.Dup):
					return bad("--dup %v: want a probability below 1", o.imp.Dup)
				case !prob(o.imp.Reorder):
					return bad("--reorder %v: want a probability below 1", o.imp.Reorder)
				case o.imp.Delay < 0 || o.imp.Jitter < 0 || o.imp.Delay > 5*time.Second || o.imp.Jitter > 5*time.Second:
					return bad("--delay and --jitter: want 0..5s")
				case o.imp.MTU != 0 && (o.imp.MTU < 576 || o.imp.MTU > 65507):
					return bad("--mtu %d: want 576..65507, or 0", o.imp.MTU)
				}
				return demo(ctx, s, o)
			}
		},
	}
}

// demoClient is one client of the demo and what it saw.
type demoClient struct {
	index int
	seed  uint64
	start time.Time

	c      *conn // used by the client's own goroutine only
	echoes *checker
	sent   [numReliable]atomic.Int64
	bytes  atomic.Int64 // reliable bytes sent
	pos    atomic.Int64 // position updates sent

	mu   sync.Mutex
	err  error // why it failed, if it did
	live *conn // c, for the other goroutines, once connected
	lat  []time.Duration
	// gaveUp says the client stopped waiting for its last echoes with
	// missing of them outstanding, idle after no progress for that long,
	// waited in all.
	gaveUp       bool
	missing      int
	idle, waited time.Duration
}

// demoServer is the server side of the demo.
type demoServer struct {
	mu    sync.Mutex
	conns []*demoServerConn
}

// demoServerConn is one connection of the demo's server.
type demoServerConn struct {
	c     *conn
	check *checker
}

// demoGrace is how long, beyond sending and draining, the demo may take to
// connect and close before it is declared stalled.
const demoGrace = 20 * time.Second

// demo is the demo command. A demo that does not finish in time fails
// rather than hang, whatever holds it up.
func demo(ctx context.Context, s *stdio, o demoOptions) int {
	result := make(chan int, 1)
	go func() { result <- runDemo(ctx, s, o) }()
	limit := o.duration + demoMaxWaits*o.wait + demoGrace
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case code := <-result:
		return code
	case <-timer.C:
		s.printf("verdict: FAIL: the demo did not finish within %v: it stalled", limit)
		return exitFailure
	}
}

// runDemo runs the demo and reports.
func runDemo(ctx context.Context, s *stdio, o demoOptions) int {
	l, err := udpdriver.Listen(ctx, "127.0.0.1:0", udpdriver.Config{})
	if err != nil {
		s.errorf("fastnet demo: %v", err)
		return exitFailure
	}
	srvAddr := netipUnmap(l.Addr().(*net.UDPAddr).AddrPort())
	r, err := impair.Listen(ctx, "127.0.0.1:0", srvAddr.String(), o.imp)
	if err != nil {
		l.Close()
		s.errorf("fastnet demo: %v", err)
		return exitFailure
	}
	s.printf("fastnet demo: %d clients for %v, through a relay with %s", o.clients, o.duration, describeImpairment(o.imp))

	srv := &demoServer{}
	var srvWG sync.WaitGroup
	acceptCtx, stopAccept := context.WithCancel(context.Background())
	srvWG.Go(func() {
		for {
			c, err := l.Accept(acceptCtx)
			if err != nil {
				return
			}
			sc := &demoServerConn{c: c, check: newChecker(o.imp.Seed, -1)}
			srv.mu.Lock()
			srv.conns = append(srv.conns, sc)
			srv.mu.Unlock()
			srvWG.Go(func() { sc.serve() })
		}
	})

	start := time.Now()
	clients := make([]*demoClient, o.clients)
	var cliWG sync.WaitGroup
	for i := range clients {
		cl := &demoClient{index: i, seed: o.imp.Seed, start: start, echoes: newChecker(o.imp.Seed, i)}
		clients[i] = cl
		cliWG.Go(func() { cl.run(ctx, r.Addr().String(), o.duration, o.wait) })
	}
	finished := make(chan struct{})
	go func() {
		cliWG.Wait()
		close(finished)
	}()

	showProgress(s, start, finished, clients, srv)

	stopAccept()
	l.Close()
	srvWG.Wait()
	r.Close()
	return report(s, o, time.Since(start), clients, srv, r.Stats())
}

func netipUnmap(ap netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

func describeImpairment(imp impair.Config) string {
	mtu := "any size"
	if imp.MTU > 0 {
		mtu = fmt.Sprintf("datagrams up to %d bytes", imp.MTU)
	}
	return fmt.Sprintf("loss %s, delay %v ± %v, duplication %s, reordering %s, %s",
		pct(imp.Loss), imp.Delay, imp.Jitter, pct(imp.Dup), pct(imp.Reorder), mtu)
}

func pct(p float64) string { return strings.TrimSuffix(fmt.Sprintf("%.1f", 100*p), ".0") + "%" }

// serve checks and echoes the messages of one connection until it ends.
func (sc *demoServerConn) serve() {
	ctx := context.Background()
	for {
		m, err := sc.c.Receive(ctx)
		if err != nil {
			return
		}
		sc.check.add(m.Channel, m.Reliable, m.Data)
		sc.c.Send(ctx, m.Channel, m.Data, m.Reliable) // fails only once the connection ended
	}
}

// lastStats returns the connection's statistics, those it ended with once
// it has ended.
func (sc *demoServerConn) lastStats() fastnet.Stats { return sc.c.Stats() }

// run is the life of one client: connect, send for d, wait for the echoes
// of everything sent while they make progress (see demoMaxWaits), close.
func (cl *demoClient) run(ctx context.Context, addr string, d, wait time.Duration) {
	if err := cl.life(ctx, addr, d, wait); err != nil {
		cl.mu.Lock()
		cl.err = err
		cl.mu.Unlock()
	}
}

// failure returns why the client failed, or nil.
func (cl *demoClient) failure() error {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.err
}

func (cl *demoClient) life(ctx context.Context, addr string, d, wait time.Duration) error {
	c, err := udpdriver.Dial(ctx, addr, udpdriver.Config{})
	if err != nil {
		return fmt.Errorf("connect: %s", reason(err))
	}
	cl.c = c
	cl.mu.Lock()
	cl.live = c
	cl.mu.Unlock()
	received := make(chan struct{})
	go func() {
		defer close(received)
		for {
			m, err := c.Receive(context.Background())
			if err != nil {
				return
			}
			_, at := cl.echoes.add(m.Channel, m.Reliable, m.Data)
			if m.Channel == posChannel && at > 0 {
				lat := time.Since(cl.start) - at
				cl.mu.Lock()
				if len(cl.lat) < maxLatencySamples {
					cl.lat = append(cl.lat, lat)
				}
				cl.mu.Unlock()
			}
		}
	}()

	var failed error
	if err := cl.send(ctx, d); err != nil {
		failed = fmt.Errorf("send: %s", reason(err))
	}

	// Wait for the echoes of every reliable message sent, while they or
	// the acknowledgements of either side make progress.
	if failed == nil && ctx.Err() == nil {
		failed = cl.drain(ctx, c, wait)
	}
	c.Close()
	<-received
	if failed != nil {
		return failed
	}
	if err := c.Err(); err != nil && !isLocalClose(err) {
		return fmt.Errorf("connection lost: %s", reason(err))
	}
	return nil
}

// drain waits until every reliable message the client sent has been echoed
// back, the connection fails, ctx is done, or the wait gives up: when wait
// passes with no echo arriving and no acknowledgement sent or received, or
// after demoMaxWaits times wait in all. Giving up is recorded, not an error.
func (cl *demoClient) drain(ctx context.Context, c *conn, wait time.Duration) error {
	begin := time.Now()
	last := begin // when progress was last seen
	var seen uint64
	for {
		st := cl.echoes.state()
		missing := 0
		for i := range st.received {
			missing += max(0, int(cl.sent[i].Load())-st.received[i])
		}
		if missing == 0 || st.errs > 0 {
			return nil
		}
		now := time.Now()
		cs := c.Stats()
		progress := uint64(st.total()) + cs.AcksSent + cs.AcksReceived
		if progress != seen {
			seen, last = progress, now
		}
		if now.Sub(last) >= wait || now.Sub(begin) >= demoMaxWaits*wait {
			cl.mu.Lock()
			cl.gaveUp, cl.missing = true, missing
			cl.idle, cl.waited = now.Sub(last), now.Sub(begin)
			cl.mu.Unlock()
			return nil
		}
		select {
		case <-c.Done():
			return fmt.Errorf("connection lost: %s", reason(c.Err()))
		case <-ctx.Done():
			return nil // interrupted: close as usual
		case <-time.After(min(10*time.Millisecond, wait)):
		}
	}
}

// isLocalClose reports whether err says this side closed the connection.
func isLocalClose(err error) bool {
	var lc *fastnet.LocalCloseError
	return errors.As(err, &lc)
}

// send sends the client's traffic for d: on each tick, whatever the rates
// of reliableKinds and posPerSecond make due.
func (cl *demoClient) send(ctx context.Context, d time.Duration) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var buf []byte
	begin := time.Now()
	for {
		elapsed := time.Since(begin)
		if elapsed > d {
			elapsed = d
		}
		t := elapsed.Seconds()
		for ch := 1; ch <= numReliable; ch++ {
			due := int64(t * reliableKinds[ch-1].perSecond)
			for cl.sent[ch-1].Load() < due {
				seq := uint32(cl.sent[ch-1].Load())
				buf = appendReliable(buf[:0], cl.seed, cl.index, ch, seq)
				if err := cl.c.Send(ctx, ch, buf, true); err != nil {
					return err
				}
				cl.sent[ch-1].Add(1)
				cl.bytes.Add(int64(len(buf)))
			}
		}
		for due := int64(t * posPerSecond); cl.pos.Load() < due; {
			buf = appendPosition(buf[:0], cl.seed, cl.index, uint32(cl.pos.Load()), time.Since(cl.start))
			if err := cl.c.Send(ctx, posChannel, buf, false); err != nil {
				return err
			}
			cl.pos.Add(1)
		}
		if elapsed >= d {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil // interrupted: stop sending, finish as usual
		case <-tick.C:
		}
	}
}

// lastStats returns the client's statistics, those its connection ended
// with once it has ended, or none before it connected.
func (cl *demoClient) lastStats() fastnet.Stats {
	cl.mu.Lock()
	c := cl.live
	cl.mu.Unlock()
	if c == nil {
		return fastnet.Stats{}
	}
	return c.Stats()
}

// totals adds up what the clients and the server saw.
type totals struct {
	relSent, relServer, relEcho          int
	relBytes                             int64
	posSent, posServer, posEcho          int
	errs                                 []string      // what went wrong, if anything did
	damaged                              bool          // a message was corrupt, duplicated, out of order or lost with its connection
	gaveUp                               int           // clients that stopped waiting for their last echoes
	rtt, minRTT                          time.Duration // mean smoothed RTT and least min RTT of the clients
	resentClients, resentServer          uint64
	expiredClients, expiredServer        uint64                         // unreliable messages dropped at the sender for waiting too long (Stats.UnreliableExpired)
	mtuUp, mtuUpMin, mtuDown, mtuDownMin int                            // payload MTU client→server and server→client, max and min
	mtuEnds, mtuDone, mtuSearching       int                            // connection ends seen, those whose MTU estimation finished, those still searching
	latency                              time.Duration                  // median position echo latency
	dropped                              [fastnet.NumDropReasons]uint64 // packets dropped on receipt, by reason
}

// countMTU counts one connection end's MTU estimation (D19).
func (t *totals) countMTU(st fastnet.Stats) {
	t.mtuEnds++
	switch {
	case st.MTUSearching:
		t.mtuSearching++
	case st.MTUEstimations > 0:
		t.mtuDone++
	}
}

func collect(clients []*demoClient, srv *demoServer) totals {
	var t totals
	byClient := map[int]checkerState{}
	srv.mu.Lock()
	conns := slices.Clone(srv.conns)
	srv.mu.Unlock()
	for _, sc := range conns {
		st := sc.check.state()
		if st.errs > 0 {
			t.errs = append(t.errs, fmt.Sprintf("server, from client %d: %d errors, first: %s", st.client, st.errs, st.firstErr))
			t.damaged = true
		}
		if st.client >= 0 {
			byClient[st.client] = st
		}
		ss := sc.lastStats()
		t.resentServer += ss.PacketsResent
		t.expiredServer += ss.UnreliableExpired
		for i, n := range ss.Dropped {
			t.dropped[i] += n
		}
		t.countMTU(ss)
		if ss.PayloadMTU > 0 {
			t.mtuDown = max(t.mtuDown, ss.PayloadMTU)
			if t.mtuDownMin == 0 || ss.PayloadMTU < t.mtuDownMin {
				t.mtuDownMin = ss.PayloadMTU
			}
		}
	}
	var lat []time.Duration
	nrtt := 0
	for _, cl := range clients {
		if err := cl.failure(); err != nil {
			t.errs = append(t.errs, fmt.Sprintf("client %d: %v", cl.index, err))
			t.damaged = true
		}
		cl.mu.Lock()
		if cl.gaveUp {
			t.gaveUp++
			t.errs = append(t.errs, fmt.Sprintf("client %d: stopped waiting with %d echoes still on their way, after %v with nothing arriving (%v in all; --wait sets it)",
				cl.index, cl.missing, cl.idle.Round(time.Millisecond), cl.waited.Round(time.Millisecond)))
		}
		cl.mu.Unlock()
		echo := cl.echoes.state()
		if echo.errs > 0 {
			t.errs = append(t.errs, fmt.Sprintf("client %d, echoes: %d errors, first: %s", cl.index, echo.errs, echo.firstErr))
			t.damaged = true
		}
		got := byClient[cl.index]
		for ch := range numReliable {
			sent := int(cl.sent[ch].Load())
			t.relSent += sent
			t.relServer += got.received[ch]
			t.relEcho += echo.received[ch]
			if got.received[ch] != sent || echo.received[ch] != sent {
				t.errs = append(t.errs, fmt.Sprintf("client %d, channel %d: %d sent, %d delivered to the server, %d echoes delivered back",
					cl.index, ch+1, sent, got.received[ch], echo.received[ch]))
			}
		}
		t.relBytes += cl.bytes.Load()
		t.posSent += int(cl.pos.Load())
		t.posServer += got.posCount
		t.posEcho += echo.posCount
		st := cl.lastStats()
		if st.RTT > 0 && st.MinRTT > 0 {
			t.rtt += st.RTT
			nrtt++
			if t.minRTT == 0 || st.MinRTT < t.minRTT {
				t.minRTT = st.MinRTT
			}
		}
		t.resentClients += st.PacketsResent
		t.expiredClients += st.UnreliableExpired
		for i, n := range st.Dropped {
			t.dropped[i] += n
		}
		t.countMTU(st)
		if st.PayloadMTU > 0 {
			t.mtuUp = max(t.mtuUp, st.PayloadMTU)
			if t.mtuUpMin == 0 || st.PayloadMTU < t.mtuUpMin {
				t.mtuUpMin = st.PayloadMTU
			}
		}
		cl.mu.Lock()
		lat = append(lat, cl.lat...)
		cl.mu.Unlock()
	}
	if nrtt > 0 {
		t.rtt /= time.Duration(nrtt)
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		t.latency = lat[len(lat)/2]
	}
	return t
}

// showProgress reports progress on standard error until finished is
// closed: one line rewritten in place on a terminal, otherwise a line a
// second.
func showProgress(s *stdio, start time.Time, finished <-chan struct{}, clients []*demoClient, srv *demoServer) {
	term := isTerminal(s.err)
	every := time.Second
	if term {
		every = 250 * time.Millisecond
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-finished:
			if term {
				s.mu.Lock()
				fmt.Fprint(s.err, "\r\033[K")
				s.mu.Unlock()
			}
			return
		case <-tick.C:
		}
		t := collect(clients, srv)
		line := fmt.Sprintf("%5.1fs  reliable %d sent, %d echoed  unreliable %d sent, %d echoed  rtt %v  mtu %d  resends %d",
			time.Since(start).Seconds(), t.relSent, t.relEcho, t.posSent, t.posEcho, round(t.rtt), t.mtuUpMin, t.resentClients+t.resentServer)
		s.mu.Lock()
		if term {
			fmt.Fprintf(s.err, "\r\033[K%s", line)
		} else {
			fmt.Fprintln(s.err, line)
		}
		s.mu.Unlock()
	}
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// report prints the closing report and returns the exit status.
func report(s *stdio, o demoOptions, took time.Duration, clients []*demoClient, srv *demoServer, rs impair.Stats) int {
	t := collect(clients, srv)
	ratio := func(n, of int) string {
		if of == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f%%", 100*float64(n)/float64(of))
	}
	s.printf("")
	s.printf("%-22s %10s %22s %22s", "", "sent", "delivered to server", "echoes delivered back")
	s.printf("%-22s %10d %22d %22d", "reliable messages", t.relSent, t.relServer, t.relEcho)
	s.printf("%-22s %10d %14d (%6s) %14d (%6s)", "unreliable messages", t.posSent, t.posServer, ratio(t.posServer, t.posSent), t.posEcho, ratio(t.posEcho, t.posSent))
	s.printf("")
	s.printf("reliable data:         %.1f MB each way, channels 1-3", float64(t.relBytes)/1e6)
	s.printf("round-trip time:       %v smoothed (mean of the clients), %v least; position echoes took %v (median)", round(t.rtt), round(t.minRTT), round(t.latency))
	s.printf("packets resent:        %d by the clients, %d by the server", t.resentClients, t.resentServer)
	s.printf("unreliable expired:    %d at the clients, %d at the server (waited longer than %v to be sent, D30)",
		t.expiredClients, t.expiredServer, fastnet.DefaultUnreliableMaxDelay)
	s.printf("payload MTU reached:   %s client to server, %s server to client (relay limit: %s)",
		span(t.mtuUpMin, t.mtuUp), span(t.mtuDownMin, t.mtuDown), mtuLimit(o.imp.MTU))
	s.printf("MTU estimation:        finished at %d of %d connection ends, still searching at %d", t.mtuDone, t.mtuEnds, t.mtuSearching)
	s.printf("packets dropped:       %s", describeDrops(t.dropped))
	s.printf("relay:                 %d datagrams: %d lost, %d too big, %d duplicated, %d held back, %d overflowed",
		rs.Datagrams, rs.Lost, rs.TooBig, rs.Duplicated, rs.Reordered, rs.Overflow)
	s.printf("took:                  %v", took.Round(100*time.Millisecond))
	s.printf("")
	if len(t.errs) > 0 || t.relSent == 0 {
		switch {
		case t.gaveUp > 0 && !t.damaged && t.relSent > 0:
			// The connections were alive and the checks found nothing
			// wrong: the run was cut short, not broken.
			s.printf("verdict: FAIL: incomplete: %d of %d clients stopped waiting before every echo arrived; nothing arrived damaged, duplicated or out of order",
				t.gaveUp, len(clients))
		default:
			s.printf("verdict: FAIL")
		}
		if t.relSent == 0 {
			s.printf("  no reliable message was sent")
		}
		for i, e := range t.errs {
			if i == 10 {
				s.printf("  ... and %d more", len(t.errs)-i)
				break
			}
			s.printf("  %s", e)
		}
		return exitFailure
	}
	s.printf("verdict: PASS: all %d reliable messages arrived intact and in order, both ways; unreliable ones at most once and intact", t.relSent)
	return exitOK
}

// span shows a range of values, or one value if they are equal.
func span(lo, hi int) string {
	if lo == hi {
		return fmt.Sprint(lo)
	}
	return fmt.Sprintf("%d-%d", lo, hi)
}

func mtuLimit(mtu int) string {
	if mtu == 0 {
		return "none"
	}
	return fmt.Sprintf("%d-byte datagrams, a payload MTU of %d", mtu, mtu-2)
}

// describeDrops lists the packets the endpoints dropped on receipt, by
// reason (D23).
func describeDrops(d [fastnet.NumDropReasons]uint64) string {
	var parts []string
	for i, n := range d {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, fastnet.DropReason(i)))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
