package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/fastnet-engine/fastnet/fastnet"
)

// Workload is one of the workloads of docs/workloads.md, with its counts. It
// travels to the server process as JSON, so both roles run the same one.
type Workload struct {
	// Name is W1, W2, W3 or W4.
	Name string
	// Title says what the workload measures.
	Title string
	// Warmup is the number of unmeasured round trips first (W1).
	Warmup int
	// Messages is the number of measured messages (W1: round trips).
	Messages int
	// Size is the length of each message in bytes.
	Size int
	// Silence ends W4: the server stops counting after this long without a
	// message.
	Silence time.Duration
	// WarmUp bounds how long a system may wait after connecting, before it
	// measures, for its connection to settle (fastnet: MTU estimation).
	WarmUp time.Duration
	// Window is how long W5 measures the server once its connections are
	// idle.
	Window time.Duration
	// Dials bounds W5's handshakes under way at once.
	Dials int
	// Settle is how long W5's last connection must have been up before
	// the window begins: a client's heartbeats go out every
	// ConnectRetry, not every second, for its first ValidationTimeout
	// (N33), which is not the idle state.
	Settle time.Duration
}

// workloads returns the workloads, with the counts of docs/workloads.md or
// reduced ones for a smoke run. W5's Messages is its number of connections.
func workloads(quick bool) []Workload {
	w := []Workload{
		{Name: "W1", Title: "echo latency", Warmup: 1000, Messages: 20000, Size: 64},
		{Name: "W2", Title: "small reliable throughput", Messages: 200000, Size: 64},
		{Name: "W3", Title: "1 KiB reliable throughput", Messages: 100000, Size: 1024},
		{Name: "W4", Title: "unreliable rate", Messages: 1000000, Size: 64, Silence: time.Second},
		{Name: "W4K", Title: "unreliable rate, 1 KiB (W3's baseline)", Messages: 300000, Size: 1024, Silence: time.Second},
		{Name: "W5", Title: "many idle connections", Messages: 10000, Window: 15 * time.Second, Dials: defaultDials,
			Settle: fastnet.DefaultValidationTimeout + time.Second},
	}
	for i := range w {
		w[i].WarmUp = 5 * time.Second
	}
	if quick {
		for i := range w {
			w[i].WarmUp = time.Second
		}
		w[0].Warmup, w[0].Messages = 100, 2000
		w[1].Messages = 20000
		w[2].Messages = 10000
		w[3].Messages, w[3].Silence = 50000, 200*time.Millisecond
		w[4].Messages, w[4].Silence = 20000, 200*time.Millisecond
		w[5].Messages, w[5].Window, w[5].Settle = 500, 3*time.Second, 0
	}
	return w
}

// defaultDials is W5's bound on handshakes under way at once: well below
// the server's bound on unvalidated connections (fastnet.Config's
// MaxUnvalidated, 1024), so that none is dropped to make room.
const defaultDials = 256

// Metrics are the measurements of one run, by name. Client and server each
// report theirs, and the harness adds the derived ones and CPU times.
type Metrics map[string]float64

// The metrics the harness knows. A system reports, for
//   - W1: P50 and P99 (client);
//   - W2 and W3: Rate, messages per second from the first send to the last
//     receipt (either side);
//   - W4: Sent and SendSeconds (client), Received and ReceiveSeconds (from
//     the first to the last receipt, server).
//
// The harness derives Rate and Loss for W4 and adds CPU times.
const (
	P50            = "p50_us"
	P99            = "p99_us"
	Rate           = "rate"
	Sent           = "sent"
	SendSeconds    = "send_s"
	Received       = "received"
	ReceiveSeconds = "recv_s"
	Loss           = "loss_pct"
	SendRate       = "send_rate"
	ClientCPU      = "cpu_client_ms"
	ServerCPU      = "cpu_server_ms"
)

// Options are settings of the systems under test, given on the command
// line and passed to the server process.
type Options struct {
	// SocketBuffer, if positive, is the receive and send buffer size asked
	// for every UDP socket; otherwise the operating system's default stays.
	SocketBuffer int
	// CPUProfile, if set, makes each server process write a CPU profile to
	// CPUProfile-SYSTEM-WORKLOAD.server (the last run's stays).
	CPUProfile string
	// MinResendRTT, if positive, replaces the engine's default floor of
	// the resend RTT (fastnet.Config.MinResendRTT, D14) in the fastnet
	// systems, for measuring that default.
	MinResendRTT time.Duration
	// NoOffload turns UDP segmentation offload (GSO and GRO) off in the
	// systems that use the project's socket layer (udpio-batch64 and
	// fastnet-udp), for measuring what it brings.
	NoOffload bool
	// ListenAny binds fastnet-udp's servers to the unspecified IPv4
	// address, as servers usually are, so that they read and set each
	// datagram's local address (N149); the clients dial 127.0.0.1.
	ListenAny bool
	// PayloadMTU, if positive, is the fastnet systems' payload MTU, with
	// MTU estimation off (fastnet.MTUConfig.Disabled), as on a path whose
	// MTU is known: 1200 measures them at an Internet path's size, where
	// a bundle holds 12 small messages rather than loopback's 96.
	PayloadMTU int
	// Progress, if set, receives the client's progress in a long run
	// (W5); it stays in the client's process.
	Progress io.Writer `json:"-"`
}

// A System is one implementation under test; it gives one row of the
// table per workload it supports. Its server role runs in a process of its
// own, started by the harness; its client role runs in the harness's
// process.
type System interface {
	// Name identifies the system on the command line and in the table.
	Name() string
	// Supports reports whether the system implements the workload.
	Supports(w Workload) bool
	// Server listens on 127.0.0.1, passes its address to ready, serves one
	// run of w and returns the server's measurements. ctx is done once the
	// client has finished; a server with nothing left to measure returns
	// then.
	Server(ctx context.Context, w Workload, o Options, ready func(addr string)) (Metrics, error)
	// Client runs one run of w against the server at addr and returns the
	// client's measurements.
	Client(ctx context.Context, w Workload, o Options, addr string) (Metrics, error)
}

// systems returns every system the command knows, in table order.
func systems() []System {
	return append([]System{
		rawUDP{batch: 1},
		rawUDP{batch: 64},
		rawAcked{},
		udpioSystem{batch: 64},
		udpioSystem{batch: 64, acked: true},
		fastnetSystem{tcp: false},
		fastnetSystem{tcp: true},
		rawTCP{},
	}, peerSystems()...)
}

func findSystem(name string) System {
	for _, s := range systems() {
		if s.Name() == name {
			return s
		}
	}
	return nil
}

// serverCommand is the hidden first argument that makes the binary play a
// server; the second argument is a childSpec in JSON.
const serverCommand = "__fastnet_bench_server"

type childSpec struct {
	System   string
	Workload Workload
	Options  Options
}

// serveChild is the server process: it runs the server role of the system
// and workload in spec and reports on stdout, one line each, "ready ADDR"
// and then "result JSON". Closing its stdin tells it the client finished.
func serveChild(spec string, stdin io.Reader, stdout io.Writer) error {
	var cs childSpec
	if err := json.Unmarshal([]byte(spec), &cs); err != nil {
		return err
	}
	sys := findSystem(cs.System)
	if sys == nil {
		return fmt.Errorf("unknown system %q", cs.System)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		io.Copy(io.Discard, stdin)
		cancel()
	}()
	if cs.Options.CPUProfile != "" && cs.Workload.Window == 0 {
		// A workload with a window profiles only the window.
		stop, err := startCPUProfile(serverProfile(cs.Options, cs.System, cs.Workload))
		if err != nil {
			return err
		}
		defer stop()
	}
	m, err := sys.Server(ctx, cs.Workload, cs.Options, func(addr string) {
		fmt.Fprintf(stdout, "ready %s\n", addr)
	})
	if err != nil {
		return err
	}
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "result %s\n", b)
	return err
}

// serverProfile is the file of a server's CPU profile.
func serverProfile(o Options, system string, w Workload) string {
	return fmt.Sprintf("%s-%s-%s.server", o.CPUProfile, system, w.Name)
}

// measure runs one run of w on sys: the server in a new process of exe,
// the client here. It returns the client's and server's metrics merged,
// with CPU times and derived metrics added.
func measure(ctx context.Context, exe string, sys System, w Workload, o Options, stderr io.Writer) (Metrics, error) {
	spec, err := json.Marshal(childSpec{System: sys.Name(), Workload: w, Options: o})
	if err != nil {
		return nil, err
	}
	if p, ok := sys.(interface{ serverExe() string }); ok {
		// A peer library serves from a binary of its own.
		exe = p.serverExe()
	}
	cmd := exec.CommandContext(ctx, exe, serverCommand, string(spec))
	cmd.Stderr = stderr
	stdin, lines, err := startLines(cmd, 0)
	if err != nil {
		return nil, err
	}
	waited := false
	defer func() {
		if !waited {
			cmd.Process.Kill()
			for range lines {
			}
			cmd.Wait()
		}
	}()
	next := func(prefix string) (string, error) {
		select {
		case l, ok := <-lines:
			if !ok {
				return "", fmt.Errorf("server exited before %q", prefix)
			}
			if rest, found := strings.CutPrefix(l, prefix+" "); found {
				return rest, nil
			}
			return "", fmt.Errorf("server said %q, want %q", l, prefix)
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}

	addr, err := next("ready")
	if err != nil {
		return nil, err
	}
	cpu0 := processCPU()
	cm, err := sys.Client(ctx, w, o, addr)
	cpu1 := processCPU()
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	stdin.Close()
	res, err := next("result")
	if err != nil {
		return nil, err
	}
	var sm Metrics
	if err := json.Unmarshal([]byte(res), &sm); err != nil {
		return nil, err
	}
	for range lines {
	}
	waited = true
	if err := cmd.Wait(); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}

	m := Metrics{}
	for k, v := range sm {
		m[k] = v
	}
	for k, v := range cm {
		m[k] = v
	}
	if cpu0 >= 0 && cpu1 >= 0 {
		// A client in a process of its own (a peer library's) reports
		// its CPU time; this process's is added.
		m[ClientCPU] = cm[ClientCPU] + float64(cpu1-cpu0)/float64(time.Millisecond)
	}
	if ps := cmd.ProcessState; ps != nil {
		m[ServerCPU] = float64(ps.UserTime()+ps.SystemTime()) / float64(time.Millisecond)
	}
	derive(w, m)
	return m, nil
}

// derive adds the metrics computed from others.
func derive(w Workload, m Metrics) {
	if w.Name == "W5" {
		deriveIdle(m)
		return
	}
	if !isRate(w) {
		return
	}
	if m[ReceiveSeconds] > 0 {
		m[Rate] = m[Received] / m[ReceiveSeconds]
	}
	if m[SendSeconds] > 0 {
		m[SendRate] = m[Sent] / m[SendSeconds]
	}
	if m[Sent] > 0 {
		m[Loss] = 100 * (m[Sent] - m[Received]) / m[Sent]
	}
}

// isRate reports whether w is W4 or its 1 KiB variant W4K, which measures
// the datagram rate of raw UDP for 1 KiB datagrams: the baseline of W3,
// whose messages are sent one per datagram.
func isRate(w Workload) bool { return w.Name == "W4" || w.Name == "W4K" }

// result is one row of the table: every run of one system on one workload.
type result struct {
	system string
	w      Workload
	runs   []Metrics
}

// spread is the median, minimum and maximum of one metric over the runs.
type spread struct{ med, lo, hi float64 }

func (r *result) spread(name string) (spread, bool) {
	var v []float64
	for _, m := range r.runs {
		if x, ok := m[name]; ok {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return spread{}, false
	}
	slices.Sort(v)
	return spread{median(v), v[0], v[len(v)-1]}, true
}

// median is the median of v, sorted and not empty.
func median(v []float64) float64 {
	if len(v)%2 == 0 {
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return v[len(v)/2]
}

// config is what the command was asked to do.
type config struct {
	runs      int
	workloads []Workload
	systems   []System
	opts      Options
	timeout   time.Duration // per run
	exe       string        // binary that plays the server
	progress  io.Writer
}

// system returns the selected system of that name (a peer system carries
// its built binary).
func (cfg *config) system(name string) System {
	for _, s := range cfg.systems {
		if s.Name() == name {
			return s
		}
	}
	return findSystem(name)
}

// benchmark runs every supported pair of system and workload cfg.runs
// times, interleaving the runs so that a slow spell of the machine spreads
// over all rows.
func benchmark(ctx context.Context, cfg config) ([]*result, error) {
	var results []*result
	for _, s := range cfg.systems {
		for _, w := range cfg.workloads {
			if s.Supports(w) {
				results = append(results, &result{system: s.Name(), w: w})
			}
		}
	}
	if len(results) == 0 {
		return nil, errors.New("no selected system supports a selected workload")
	}
	for run := 1; run <= cfg.runs; run++ {
		for _, r := range results {
			sys := cfg.system(r.system)
			limit := cfg.timeout
			if r.w.Name == "W5" {
				// A server answers a bounded number of its clients' MTU
				// estimations at once (N53), about 70 a second here:
				// 10,000 take minutes whatever -timeout says.
				limit = max(limit, time.Duration(r.w.Messages)*50*time.Millisecond+time.Minute)
			}
			rctx, cancel := context.WithTimeout(ctx, limit)
			m, err := measure(rctx, cfg.exe, sys, r.w, cfg.opts, cfg.progress)
			cancel()
			if err != nil {
				return nil, fmt.Errorf("run %d of %s %s: %w", run, r.system, r.w.Name, err)
			}
			r.runs = append(r.runs, m)
			fmt.Fprintf(cfg.progress, "run %d/%d %-16s %s %s\n", run, cfg.runs, r.system, r.w.Name, brief(r.w, m))
		}
	}
	return results, nil
}

// brief is the one-line progress report of a run.
func brief(w Workload, m Metrics) string {
	switch w.Name {
	case "W1":
		return fmt.Sprintf("p50 %.1f µs, p99 %.1f µs", m[P50], m[P99])
	case "W4", "W4K":
		return fmt.Sprintf("%s received/s, loss %.1f %%, sent %s/s", si(m[Rate]), m[Loss], si(m[SendRate]))
	case "W5":
		return fmt.Sprintf("%.0f connected in %.1f s (%.0f retries), estimation done at %.1f s (one: %.1f s at most), "+
			"MTU estimation %.0f kB up / %.0f kB down a connection (at most %.0f / %.0f), payload MTU %.0f / %.0f; "+
			"idle server %.2f %% of a core (user %.2f, system %.2f; client %.1f %%), %.1f datagrams a connection a second, "+
			"%.0f wake-ups/s; %.1f kB RSS, %.1f kB heap a connection",
			m[Conns], m[ConnectSeconds], m[DialRetries], m[EstimateSeconds], m[EstimateConnMax],
			m[MTUUp], m[MTUDown], m[MTUUpMax], m[MTUDownMax], m[ClientMTU], m[ServerMTU],
			m[IdleCPU], m[IdleUser], m[IdleSystem], m[IdleClientCPU], m[IdleDatagrams],
			m[IdleWakeups], m[RSSPerConn], m[HeapPerConn])
	}
	return fmt.Sprintf("%s msg/s", si(m[Rate]))
}

// printTable writes the results as one Markdown table.
func printTable(out io.Writer, results []*result, runs int) {
	fmt.Fprintf(out, "| system | workload | median [min-max] of %d runs | CPU ms client / server | vs baseline | vs best peer |\n", runs)
	fmt.Fprintln(out, "| --- | --- | --- | --- | --- | --- |")
	for _, r := range results {
		fmt.Fprintf(out, "| %s | %s %s | %s | %s | %s | %s |\n", r.system, r.w.Name, r.w.Title, cell(r), cpuCell(r), ratioCell(r, results), bestPeerCell(r, results))
	}
}

// bimodal is how far apart the slowest and fastest W1 runs of the latency
// baseline must be for printNotes to say the comparison is unsteady.
const bimodal = 1.5

// printNotes writes what a reader of the table needs to weigh it: when raw
// UDP's W1 p50 spread widely over the runs (on two processors the kernel
// keeps client and server on one of them in some runs and not in others),
// the W1 ratios depend on which kind of run the median fell on, and
// pinning every process to one processor measures the work of a round
// trip instead. It writes nothing when there is nothing to say.
func printNotes(out io.Writer, results []*result, pinned bool) {
	if pinned {
		return
	}
	for _, r := range results {
		if r.system != latencyBaseline || r.w.Name != "W1" {
			continue
		}
		if s, ok := r.spread(P50); ok && s.lo > 0 && s.hi/s.lo >= bimodal {
			fmt.Fprintf(out, "\nNote: %s's W1 p50 ranged %.0f-%.0f µs over the runs: the kernel placed client and server differently from run to run, and the W1 ratios follow the runs the medians fell on. `--pin 0` runs every process on one CPU, where W1 holds still and measures the work of a round trip.\n", r.system, s.lo, s.hi)
		}
	}
}

// The baselines the ratios compare with, measured in the same run: echo
// latency against plain UDP calls, and against the floors of four
// datagrams per round trip (raw-udp-acked with plain batched calls,
// udpio-acked through the project's socket layer with offload); every rate
// against raw-udp-batch64's received rate (the machine's datagram rate with
// batched calls) and udpio-batch64's (the socket layer's, with
// segmentation offload where the kernel has it), for datagrams of 64 bytes
// (W4) or, for W3, of 1 KiB (W4K).
const (
	latencyBaseline = "raw-udp-plain"
	rateBaseline    = "raw-udp-batch64"
	layerBaseline   = "udpio-batch64"
)

// The TCP driver is compared with raw TCP too, on the same workload.
const (
	tcpSystem   = "fastnet-tcp"
	tcpBaseline = "raw-tcp"
)

// latencyBaselines are the systems W1 is compared with.
var latencyBaselines = []string{latencyBaseline, "raw-udp-acked", "udpio-acked"}

// ratioCell compares r's median with its baselines'. It is "-" when no
// baseline was run.
func ratioCell(r *result, results []*result) string {
	find := func(system, workload string) *result {
		for _, b := range results {
			if b.system == system && b.w.Name == workload {
				return b
			}
		}
		return nil
	}
	ratio := func(b *result, metric, baseMetric string) (float64, bool) {
		if b == nil {
			return 0, false
		}
		x, ok1 := r.spread(metric)
		y, ok2 := b.spread(baseMetric)
		if !ok1 || !ok2 || y.med == 0 {
			return 0, false
		}
		return x.med / y.med, true
	}
	if r.w.Name == "W1" {
		var parts []string
		bases := latencyBaselines
		if r.system == tcpSystem {
			bases = append(slices.Clone(bases), tcpBaseline)
		}
		for _, base := range bases {
			if base == r.system {
				continue
			}
			p50, ok1 := ratio(find(base, "W1"), P50, P50)
			p99, ok2 := ratio(find(base, "W1"), P99, P99)
			if ok1 && ok2 {
				parts = append(parts, fmt.Sprintf("p50 %.2fx, p99 %.2fx %s", p50, p99, base))
			}
		}
		if len(parts) == 0 {
			return "-"
		}
		return strings.Join(parts, "; ")
	}
	workload := "W4"
	if r.w.Name == "W3" || r.w.Name == "W4K" {
		// One 1 KiB message per datagram: the rate for datagrams of
		// that size is the fair baseline.
		workload = "W4K"
	}
	var parts []string
	for _, base := range []string{rateBaseline, layerBaseline} {
		if x, ok := ratio(find(base, workload), Rate, Rate); ok {
			parts = append(parts, fmt.Sprintf("%.2fx %s %s", x, base, workload))
		}
	}
	if r.system == tcpSystem {
		if x, ok := ratio(find(tcpBaseline, r.w.Name), Rate, Rate); ok {
			parts = append(parts, fmt.Sprintf("%.2fx %s %s", x, tcpBaseline, r.w.Name))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

// rateSpread is the spread of Rate, for a result that may be nil.
func (r *result) rateSpread() (spread, bool) {
	if r == nil {
		return spread{}, false
	}
	return r.spread(Rate)
}

func cell(r *result) string {
	f := func(metric string, format func(float64) string) string {
		s, ok := r.spread(metric)
		if !ok {
			return "?"
		}
		return fmt.Sprintf("%s [%s-%s]", format(s.med), format(s.lo), format(s.hi))
	}
	us := func(x float64) string { return fmt.Sprintf("%.0f", x) }
	pct := func(x float64) string { return fmt.Sprintf("%.1f", x) }
	switch r.w.Name {
	case "W1":
		return "p50 " + f(P50, us) + ", p99 " + f(P99, us) + " µs" + extras(r)
	case "W3":
		mbs := func(x float64) string { return fmt.Sprintf("%.0f", x*float64(r.w.Size)/1e6) }
		return f(Rate, si) + " msg/s, " + f(Rate, mbs) + " MB/s" + extras(r)
	case "W4", "W4K":
		return f(Rate, si) + " received/s, loss " + f(Loss, pct) + " %, sent " + f(SendRate, si) + "/s" + extras(r)
	case "W5":
		s1 := func(x float64) string { return fmt.Sprintf("%.1f", x) }
		s2 := func(x float64) string { return fmt.Sprintf("%.2f", x) }
		kb := func(x float64) string { return fmt.Sprintf("%.0f", x) }
		return fmt.Sprintf("%d connected in ", r.w.Messages) + f(ConnectSeconds, s1) + " s; MTU estimation done at " + f(EstimateSeconds, s1) +
			" s, " + f(MTUUp, kb) + " kB up, " + f(MTUDown, kb) + " kB down a connection; idle server " + f(IdleCPU, s2) +
			" % of a core, " + f(RSSPerConn, s1) + " kB RSS a connection"
	}
	return f(Rate, si) + " msg/s" + extras(r)
}

// extras shows what only some systems report: the payload MTU and the
// packets resent.
func extras(r *result) string {
	var s string
	if m, ok := r.spread(MTU); ok {
		s += fmt.Sprintf("; MTU %.0f", m.med)
	}
	if m, ok := r.spread(Resent); ok {
		s += fmt.Sprintf(", %.0f resent", m.med)
	}
	return s
}

func cpuCell(r *result) string {
	c, okc := r.spread(ClientCPU)
	s, oks := r.spread(ServerCPU)
	if !okc || !oks {
		return "-"
	}
	return fmt.Sprintf("%.0f / %.0f", c.med, s.med)
}

// si formats a rate with a k or M suffix.
func si(x float64) string {
	switch {
	case math.Abs(x) >= 1e6:
		return fmt.Sprintf("%.2fM", x/1e6)
	case math.Abs(x) >= 1e3:
		return fmt.Sprintf("%.0fk", x/1e3)
	}
	return fmt.Sprintf("%.0f", x)
}

// startLines starts cmd with a pipe to its standard input and returns it,
// with a channel of its standard output's lines (of at most maxLine bytes,
// 0 for bufio's default), closed when the output ends.
func startLines(cmd *exec.Cmd, maxLine int) (io.WriteCloser, <-chan string, error) {
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		if maxLine > 0 {
			sc.Buffer(make([]byte, 1<<16), maxLine)
		}
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return stdin, lines, nil
}
