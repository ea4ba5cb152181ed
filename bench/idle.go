package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/udpdriver"
)

// W5, many idle connections, on fastnet-udp: Workload.Messages clients,
// each a socket and endpoint of its own in this process (a swarm), dial one
// udpdriver server, at most Workload.Dials handshakes at a time, each tried
// again after a refusal or a timeout. Once every client is connected,
// every MTU estimation of both sides has finished and the last connection
// is Workload.Settle old, the server measures its own CPU time over
// Workload.Window, in which the connections only exchange heartbeats, and
// its memory per connection.
//
// The two sides agree on the window in the protocol itself, on one
// connection (the control): the client sends "estimated" once each of its
// connections has finished its estimation; the server, once it has that
// and each of its own has finished, sends "window", measures, and sends
// "done". Nothing else is sent on any connection.

// Metrics of W5. Sizes are in kB (1,000 bytes), of UDP payloads.
const (
	Conns          = "conns"        // connections asked for
	ConnectSeconds = "connect_s"    // from the first dial until every client is connected
	DialRetries    = "dial_retries" // handshakes refused or timed out and tried again
	Redials        = "redials"      // connections that ended before the window and were made again
	// ClientEstimateSeconds is the time from the first dial until every
	// client's MTU estimation had finished; ServerEstimateSeconds from
	// the server's listening (a few milliseconds earlier) until every
	// server connection's had; EstimateSeconds the later of the two.
	ClientEstimateSeconds = "est_client_s"
	ServerEstimateSeconds = "est_server_s"
	EstimateSeconds       = "estimate_s"
	// EstimateConnMax is the longest estimation of one client, from its
	// connection to its end.
	EstimateConnMax = "est_conn_max_s"
	// MTUUp and MTUDown are the kB of channels -3 and -4 (probes, resets
	// and replies, D19) from client to server and from server to client,
	// per connection, as the clients sent and received them: the mean,
	// and the largest of one connection (Max).
	MTUUp      = "mtu_c2s_kb"
	MTUUpMax   = "mtu_c2s_kb_max"
	MTUDown    = "mtu_s2c_kb"
	MTUDownMax = "mtu_s2c_kb_max"
	// ServerProbes is the mean of the server connections' Stats.MTUProbes.
	ServerProbes = "srv_probes"
	// ClientMTU and ServerMTU are the smallest payload MTU an estimation
	// ended with, on each side.
	ClientMTU = "client_mtu_min"
	ServerMTU = "server_mtu_min"
	// IdleCPU is the server process's CPU time over the window, in % of
	// one core; IdleUser and IdleSystem split it into user and system
	// time.
	IdleCPU    = "idle_cpu_pct"
	IdleUser   = "idle_user_pct"
	IdleSystem = "idle_sys_pct"
	// IdleClientCPU is this process's (the swarm's) over the window, as
	// the control connection's messages bound it.
	IdleClientCPU = "idle_client_cpu_pct"
	// IdleDatagrams is the datagrams each server connection sent and
	// received per second in the window; IdleWakeups the server
	// process's context switches per second (voluntary, then
	// involuntary: IdleWakeupsForced).
	IdleDatagrams     = "idle_dgrams_conn_s"
	IdleWakeups       = "idle_ctxsw_s"
	IdleWakeupsForced = "idle_ctxsw_forced_s"
	// RSSPerConn and HeapPerConn are the server's resident memory and
	// live Go heap (after a collection) per connection, over what the
	// listening server had before the first client.
	RSSPerConn  = "rss_kb_conn"
	HeapPerConn = "heap_kb_conn"
	// ServerLive and ClientLive count the connections still up on each
	// side after the window.
	ServerLive = "srv_live"
	ClientLive = "client_live"
	// SetupDrops and IdleDrops are the datagrams the kernel dropped at
	// the server's socket, its queue full, until every estimation had
	// ended and in the window (Linux).
	SetupDrops = "srv_drops_setup"
	IdleDrops  = "srv_drops_idle"
)

// udpdriverBacklog is udpdriver's default Backlog.
const udpdriverBacklog = 128

// The control messages.
var (
	estimatedMessage = []byte("estimated")
	windowMessage    = []byte("window")
)

// pollEvery is how often each side reads its connections' statistics
// before the window (never during it).
const pollEvery = 200 * time.Millisecond

// idleServer is the server role of W5.
func idleServer(ctx context.Context, w Workload, o Options, ready func(string)) (Metrics, error) {
	n := w.Messages
	cfg := udpdriver.Config{
		Engine: fastnet.Config{
			// Room for every client, and for a few whose handshakes
			// were tried again while the first one was still known.
			MaxConnections: n + n/4 + 64,
			MinResendRTT:   o.MinResendRTT,
		},
		// Room for every handshake under way to be validated before
		// Accept takes the first: W5 measures how fast the engine
		// admits clients, not how often the accepting goroutine runs.
		Backlog:      max(2*w.Dials, udpdriverBacklog),
		SocketBuffer: o.SocketBuffer,
		NoOffload:    o.NoOffload,
	}
	l, err := udpdriver.Listen(ctx, "127.0.0.1:0", cfg)
	if err != nil {
		return nil, err
	}
	defer l.Close()
	rss0, heap0 := memory()
	port := uint16(l.Addr().(*net.UDPAddr).Port)
	drops0, _ := udpDrops(port)
	ready(l.Addr().String())
	start := time.Now()

	var (
		mu       sync.Mutex
		conns    []*udpdriver.Conn
		accepted time.Time // when the last was
	)
	go func() {
		for {
			c, err := l.Accept(ctx)
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			accepted = time.Now()
			mu.Unlock()
		}
	}()
	snapshot := func() []*udpdriver.Conn {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clip(conns)
	}

	// Until every connection's estimation has finished and the client
	// says so of its own.
	var (
		control   *udpdriver.Conn
		estimated = map[*udpdriver.Conn]bool{}
		lastEst   time.Duration
	)
	for {
		live, done := 0, 0
		for _, c := range snapshot() {
			if c.Err() != nil {
				continue
			}
			live++
			if !estimated[c] {
				if st := c.Stats(); estimationDone(st) {
					estimated[c] = true
					lastEst = time.Since(start)
				}
			}
			if estimated[c] {
				done++
			}
			if control == nil && c.Queued() > 0 {
				m, err := c.Receive(ctx)
				if err != nil {
					return nil, err
				}
				if string(m.Data) != string(estimatedMessage) {
					return nil, fmt.Errorf("the client said %q", m.Data)
				}
				control = c
			}
		}
		mu.Lock()
		settled := time.Since(accepted) >= w.Settle
		mu.Unlock()
		if control != nil && live >= n && done == live && settled {
			break
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%d connections, %d estimated, client done %v: %w", live, done, control != nil, ctx.Err())
		case <-time.After(pollEvery):
		}
	}
	all := snapshot()
	m := Metrics{ServerEstimateSeconds: lastEst.Seconds()}
	drops1, dropsOK := udpDrops(port)
	var probes float64
	mtuMin := 0
	for _, c := range all {
		st := c.Stats()
		probes += float64(st.MTUProbes)
		if mtuMin == 0 || st.PayloadMTU < mtuMin {
			mtuMin = st.PayloadMTU
		}
	}
	m[ServerProbes] = probes / float64(len(all))
	m[ServerMTU] = float64(mtuMin)
	rss1, heap1 := memory()
	if rss1 > 0 && rss0 > 0 {
		m[RSSPerConn] = float64(int64(rss1)-int64(rss0)) / float64(len(all)) / 1e3
	}
	m[HeapPerConn] = float64(int64(heap1)-int64(heap0)) / float64(len(all)) / 1e3

	// The window.
	packets := func() []uint64 {
		p := make([]uint64, len(all))
		for i, c := range all {
			st := c.Stats()
			p[i] = st.PacketsSent + st.PacketsReceived
		}
		return p
	}
	p0 := packets()
	if err := control.Send(ctx, 0, windowMessage, true); err != nil {
		return nil, err
	}
	stopProfile := func() {}
	if o.CPUProfile != "" {
		if stopProfile, err = startCPUProfile(serverProfile(o, "fastnet-udp", w)); err != nil {
			return nil, err
		}
	}
	_, vol0, inv0, _ := procStatus()
	user0, sys0, cpuOK := processCPUSplit()
	t0 := time.Now()
	select {
	case <-ctx.Done():
		stopProfile()
		return nil, fmt.Errorf("in the window: %w", ctx.Err())
	case <-time.After(w.Window):
	}
	user1, sys1, _ := processCPUSplit()
	_, vol1, inv1, statusOK := procStatus()
	drops2, _ := udpDrops(port)
	took := time.Since(t0)
	stopProfile()
	p1 := packets()
	liveAfter := 0
	for _, c := range all {
		if c.Err() == nil {
			liveAfter++
		}
	}
	if err := control.Send(ctx, 0, doneMessage, true); err != nil {
		return nil, err
	}
	pct := func(d time.Duration) float64 { return 100 * d.Seconds() / took.Seconds() }
	if cpuOK {
		m[IdleUser], m[IdleSystem] = pct(user1-user0), pct(sys1-sys0)
		m[IdleCPU] = m[IdleUser] + m[IdleSystem]
	}
	if statusOK {
		m[IdleWakeups] = float64(vol1-vol0) / took.Seconds()
		m[IdleWakeupsForced] = float64(inv1-inv0) / took.Seconds()
	}
	var datagrams uint64
	for i := range all {
		if p1[i] >= p0[i] { // a connection that ended reads zero
			datagrams += p1[i] - p0[i]
		}
	}
	m[IdleDatagrams] = float64(datagrams) / float64(len(all)) / took.Seconds()
	if dropsOK {
		m[SetupDrops], m[IdleDrops] = float64(drops1-drops0), float64(drops2-drops1)
	}
	m[ServerLive] = float64(liveAfter)
	<-ctx.Done() // the client closes first
	return m, nil
}

// memory returns the process's resident memory (0 if unknown) and its live
// Go heap, after a collection.
func memory() (rss, heap uint64) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	rss, _, _, _ = procStatus()
	return rss, ms.HeapAlloc
}

// idleClient is the client role of W5.
func idleClient(ctx context.Context, w Workload, o Options, addr string) (Metrics, error) {
	n := w.Messages
	if err := raiseFileLimit(n + 256); err != nil {
		return nil, err
	}
	server, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil, err
	}
	s, err := newSwarm(server, fastnet.Config{MinResendRTT: o.MinResendRTT})
	if err != nil {
		return nil, err
	}
	defer s.close()
	start := time.Now()

	// Dial, at most w.Dials at a time, each client from a goroutine of
	// its own that connects it again if the server refuses it after its
	// handshake, until every client is connected.
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	estimates := make(chan estimation, 1)
	go func() { estimates <- watchEstimations(dctx, s, n, start, o.Progress) }()
	var (
		wg   sync.WaitGroup
		sem  = make(chan struct{}, max(w.Dials, 1))
		errc = make(chan error, 1)
	)
	defer wg.Wait()
	for i := range n {
		c, err := s.add(uint64(i))
		if err != nil {
			return nil, fmt.Errorf("client %d: %w", i, err)
		}
		wg.Go(func() {
			if err := c.keepConnected(dctx, sem); err != nil {
				select {
				case errc <- fmt.Errorf("client %d: %w", i, err):
				default:
				}
			}
		})
	}
	for s.up.Load() < int64(n) {
		select {
		case err := <-errc:
			return nil, err
		case <-ctx.Done():
			return nil, fmt.Errorf("%d of %d clients connected: %w", s.up.Load(), n, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
	m := Metrics{Conns: float64(n), ConnectSeconds: time.Since(start).Seconds()}

	est := <-estimates
	if est.err != nil {
		return nil, est.err
	}
	cancel() // no more redials
	wg.Wait()
	s.mu.Lock()
	m[DialRetries], m[Redials] = float64(s.retries), float64(s.redials)
	s.mu.Unlock()
	m[ClientEstimateSeconds] = est.last.Seconds()
	m[EstimateConnMax] = est.longest.Seconds()
	m[ClientMTU] = float64(est.mtuMin)

	var control *swarmClient
	s.each(func(i int, c *swarmClient) {
		if i == 0 {
			control = c
		}
	})
	if err := control.send(estimatedMessage); err != nil {
		return nil, err
	}
	var (
		cpu0       time.Duration
		t0         time.Time
		sent0, rc0 traffic
	)
	for waiting := true; waiting; {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the server's window: %w", ctx.Err())
		case ev := <-control.messages:
			switch string(ev.Data) {
			case string(windowMessage):
				cpu0, t0 = processCPU(), time.Now()
				sent0, rc0 = s.traffic()
			case string(doneMessage):
				if t0.IsZero() {
					return nil, errors.New(`the server said "done" before "window"`)
				}
				sent1, rc1 := s.traffic()
				took := time.Since(t0).Seconds()
				if cpu0 >= 0 {
					m[IdleClientCPU] = 100 * (processCPU() - cpu0).Seconds() / took
				}
				for k, name := range classNames {
					m["idle_c2s_"+name] = float64(sent1.packets[k]-sent0.packets[k]) / float64(n) / took
					m["idle_s2c_"+name] = float64(rc1.packets[k]-rc0.packets[k]) / float64(n) / took
				}
				waiting = false
			default:
				return nil, fmt.Errorf("the server said %q", ev.Data)
			}
		}
	}

	var up, down, upMax, downMax float64
	live := 0
	var ended error
	s.each(func(_ int, c *swarmClient) {
		sent, received, ok, err := c.counts()
		u, d := float64(sent.bytes[classMTU])/1e3, float64(received.bytes[classMTU])/1e3
		up, down = up+u, down+d
		upMax, downMax = max(upMax, u), max(downMax, d)
		if ok {
			live++
		} else if ended == nil {
			ended = err
		}
	})
	m[MTUUp], m[MTUDown] = up/float64(n), down/float64(n)
	m[MTUUpMax], m[MTUDownMax] = upMax, downMax
	m[ClientLive] = float64(live)
	if live < n {
		return nil, fmt.Errorf("%d of %d connections ended before the window's end, the first: %v", n-live, n, ended)
	}
	return m, nil
}

// estimation is what watchEstimations found.
type estimation struct {
	last    time.Duration // from the start until the last estimation ended
	longest time.Duration // the longest of one connection
	mtuMin  int           // the smallest payload MTU one ended with
	err     error
}

// watchEstimations reads the statistics of the swarm's clients every
// pollEvery until n are connected and each has finished its MTU
// estimation.
func watchEstimations(ctx context.Context, s *swarm, n int, start time.Time, progress io.Writer) estimation {
	var (
		est   estimation
		done  = map[*swarmClient]bool{}
		count int
	)
	reported := start
	for {
		now := time.Now()
		if progress != nil && now.Sub(reported) >= 5*time.Second {
			reported = now
			s.mu.Lock()
			retries, redials := s.retries, s.redials
			s.mu.Unlock()
			fmt.Fprintf(progress, "W5 at %.0f s: %d of %d connected (%d handshakes and %d connections tried again), %d estimated\n",
				now.Sub(start).Seconds(), s.up.Load(), n, retries, redials, count)
		}
		s.each(func(_ int, c *swarmClient) {
			if done[c] {
				return
			}
			st, up, connected := c.stats()
			if !up {
				return
			}
			if estimationDone(st) {
				done[c] = true
				count++
				est.last = now.Sub(start)
				est.longest = max(est.longest, now.Sub(connected))
				if est.mtuMin == 0 || st.PayloadMTU < est.mtuMin {
					est.mtuMin = st.PayloadMTU
				}
			}
		})
		if count >= n {
			return est
		}
		select {
		case <-ctx.Done():
			est.err = fmt.Errorf("%d of %d clients estimated: %w", count, n, ctx.Err())
			if errors.Is(ctx.Err(), context.Canceled) {
				est.err = fmt.Errorf("%d of %d clients estimated when dialing stopped", count, n)
			}
			return est
		case <-time.After(pollEvery):
		}
	}
}

// IdleMicrosPerDatagram is the server's CPU time in the window per
// datagram it sent or received, in µs (derived).
const IdleMicrosPerDatagram = "idle_us_dgram"

// deriveIdle adds W5's derived metrics.
func deriveIdle(m Metrics) {
	m[EstimateSeconds] = max(m[ClientEstimateSeconds], m[ServerEstimateSeconds])
	if d := m[IdleDatagrams] * m[Conns]; d > 0 {
		m[IdleMicrosPerDatagram] = m[IdleCPU] / 100 * 1e6 / d
	}
}

// printIdle writes the figures of each W5 row in a table of its own.
func printIdle(out io.Writer, results []*result) {
	for _, r := range results {
		if r.w.Name != "W5" || len(r.runs) == 0 {
			continue
		}
		f := func(metric, format string) string {
			s, ok := r.spread(metric)
			if !ok {
				return "?"
			}
			if len(r.runs) == 1 {
				return fmt.Sprintf(format, s.med)
			}
			return fmt.Sprintf(format+" ["+format+"-"+format+"]", s.med, s.lo, s.hi)
		}
		fmt.Fprintf(out, "\n%s W5, %d idle connections, median [min-max] of %d runs. Targets: every client connects; "+
			"MTU estimation costs at most 300 kB a connection each way and ends within seconds; the idle server spends at most 5 %% of a core.\n\n",
			r.system, r.w.Messages, len(r.runs))
		fmt.Fprintln(out, "| figure | value |")
		fmt.Fprintln(out, "| --- | --- |")
		row := func(name, value string) { fmt.Fprintf(out, "| %s | %s |\n", name, value) }
		row("until every client was connected", f(ConnectSeconds, "%.1f")+" s, "+f(DialRetries, "%.0f")+fmt.Sprintf(" handshakes tried again (%d at a time), ", r.w.Dials)+
			f(Redials, "%.0f")+" connections ended and made again before the window")
		row("until every MTU estimation had ended, from the first dial", f(EstimateSeconds, "%.1f")+" s (clients' "+f(ClientEstimateSeconds, "%.1f")+
			" s, server's "+f(ServerEstimateSeconds, "%.1f")+" s; one client's at most "+f(EstimateConnMax, "%.1f")+" s)")
		row("MTU estimation bytes a connection, client to server (channels -3, -4)", f(MTUUp, "%.1f")+" kB, at most "+f(MTUUpMax, "%.1f")+" kB")
		row("MTU estimation bytes a connection, server to client", f(MTUDown, "%.1f")+" kB, at most "+f(MTUDownMax, "%.1f")+" kB")
		row("smallest payload MTU reached, client / server", f(ClientMTU, "%.0f")+" / "+f(ServerMTU, "%.0f"))
		row("server MTU probes a connection", f(ServerProbes, "%.1f"))
		row("datagrams dropped at the server's socket, until the estimations ended / in the window", f(SetupDrops, "%.0f")+" / "+f(IdleDrops, "%.0f"))
		settle := ""
		if r.w.Settle > 0 {
			settle = fmt.Sprintf(" from when the last connection was %v old", r.w.Settle)
		}
		row(fmt.Sprintf("idle server CPU over %v%s, %% of one core", r.w.Window, settle), f(IdleCPU, "%.2f")+" (user "+f(IdleUser, "%.2f")+", system "+f(IdleSystem, "%.2f")+")")
		row("server datagrams a connection a second, in and out", f(IdleDatagrams, "%.2f"))
		row("server CPU a datagram", f(IdleMicrosPerDatagram, "%.1f")+" µs")
		row("server context switches a second, voluntary / involuntary", f(IdleWakeups, "%.0f")+" / "+f(IdleWakeupsForced, "%.0f"))
		row("datagrams a connection a second at the clients, client to server / server to client",
			"heartbeats "+f("idle_c2s_heartbeat", "%.2f")+" / "+f("idle_s2c_heartbeat", "%.2f")+
				", MTU "+f("idle_c2s_mtu", "%.2f")+" / "+f("idle_s2c_mtu", "%.2f")+
				", other "+f("idle_c2s_other", "%.2f")+" / "+f("idle_s2c_other", "%.2f"))
		row("server memory a connection, RSS / live Go heap", f(RSSPerConn, "%.1f")+" / "+f(HeapPerConn, "%.1f")+" kB")
		row("client process (the swarm) CPU in the window, % of one core", f(IdleClientCPU, "%.1f"))
		row("connections up after the window, server / client", f(ServerLive, "%.0f")+" / "+f(ClientLive, "%.0f"))
	}
}

// estimationDone reports whether a connection's MTU estimation has ended
// with a result: an estimation that measured nothing or was refused (its
// resets unanswered by a server busy with others, N53) ends at the MTU it
// had and tries again after a second or more (N44, N157), and the idle
// window must not begin before those retries are over.
func estimationDone(st fastnet.Stats) bool {
	return !st.MTUSearching && !st.MTURetrying && st.MTUEstimations > 0 && st.PayloadMTU > fastnet.DefaultPayloadMTU
}
