package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fastnet-engine/fastnet/impair"
)

// W6, the bottleneck workload (docs/workloads.md, docs/congestion.md):
// bulk reliable flows through one bottleneck link of a given rate, round
// trip and tail-drop queue, built two ways:
//
//   - relay: the UDP relay of package impair with Rate and Queue, between
//     the flows' clients and their server on 127.0.0.1; fastnet only, since
//     a UDP relay cannot carry TCP;
//   - tun: two network namespaces joined by two TUN devices, whose IP
//     packets this process moves from one to the other through an
//     impair.Queue and a delay line, the same model as the relay's; kernel
//     TCP and fastnet both go through it (Linux, as root; skipped
//     elsewhere, with the reason).
//
// The kernel here has no netem, so a tc bottleneck could not add the
// delay; the TUN path carries any IP traffic through the relay's own
// queue model instead.

// w6PathMTU is the path MTU of both of W6's paths: the TUN devices' own
// (Linux's default for them), and the relay's datagram limit.
const w6PathMTU = 1500

// w6Link is one bottleneck: rate in bytes a second, round trip, queue in
// bytes.
type w6Link struct {
	Name  string
	Rate  int64
	RTT   time.Duration
	Queue int
}

// parseW6Links reads "20mbit/40ms/100kB,5mbit/40ms/12.5kB".
func parseW6Links(s string) ([]w6Link, error) {
	var links []w6Link
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		f := strings.Split(part, "/")
		if len(f) != 3 {
			return nil, fmt.Errorf("-w6-links %q: want RATE/RTT/QUEUE, as 20mbit/40ms/100kB", part)
		}
		rate, err := impair.ParseRate(f[0])
		if err != nil {
			return nil, fmt.Errorf("-w6-links %q: %v", part, err)
		}
		rtt, err := time.ParseDuration(f[1])
		if err != nil || rtt < 0 || rtt > impair.MaxDelay {
			return nil, fmt.Errorf("-w6-links %q: bad round trip %q", part, f[1])
		}
		q, err := impair.ParseSize(f[2])
		if err != nil || q < 1 || q > impair.MaxQueue {
			return nil, fmt.Errorf("-w6-links %q: bad queue %q: want 1 byte to %d", part, f[2], impair.MaxQueue)
		}
		links = append(links, w6Link{Name: part, Rate: rate, RTT: rtt, Queue: int(q)})
	}
	return links, nil
}

// w6Config is what W6 was asked to do.
type w6Config struct {
	runs      int
	links     []w6Link
	paths     []string // "relay", "tun"
	systems   []string
	flows     []int
	size      int
	duration  time.Duration
	lateStart time.Duration
	drain     time.Duration
	exe       string
	progress  io.Writer
}

// The defaults of W6's flags.
const (
	w6DefaultLinks   = "20mbit/40ms/100kB,5mbit/40ms/12.5kB"
	w6DefaultPaths   = "tun,relay"
	w6DefaultSystems = "tcp-cubic,fastnet"
	w6DefaultFlows   = "1,4"
)

// parseW6 checks W6's flags; quick shortens the runs for a smoke run.
func parseW6(runs int, links, paths, systems, flows string, duration, late, drain time.Duration, size int, quick bool) (w6Config, error) {
	cfg := w6Config{runs: runs, size: size, duration: duration, lateStart: late, drain: drain}
	var err error
	if cfg.links, err = parseW6Links(links); err != nil {
		return cfg, err
	}
	for _, p := range strings.Split(paths, ",") {
		p = strings.TrimSpace(p)
		if p != "relay" && p != "tun" {
			return cfg, fmt.Errorf("-w6-paths: unknown path %q (want relay, tun)", p)
		}
		cfg.paths = append(cfg.paths, p)
	}
	for _, s := range strings.Split(systems, ",") {
		s = strings.TrimSpace(s)
		if s != w6Fastnet && s != w6FastnetUnreliable && s != w6TCPCubic && s != w6TCPBBR {
			return cfg, fmt.Errorf("-w6-systems: unknown system %q (want fastnet, fastnet-unreliable, tcp-cubic, tcp-bbr)", s)
		}
		cfg.systems = append(cfg.systems, s)
	}
	for _, f := range strings.Split(flows, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 64 {
			return cfg, fmt.Errorf("-w6-flows: %q: want 1 to 64 flows", f)
		}
		cfg.flows = append(cfg.flows, n)
	}
	if quick {
		cfg.duration, cfg.lateStart, cfg.drain = 3*time.Second, time.Second, 3*time.Second
	}
	switch {
	case runs < 1:
		return cfg, fmt.Errorf("-runs %d: need at least 1", runs)
	case cfg.size < w6Header+8 || cfg.size > 60000:
		return cfg, fmt.Errorf("-w6-size %d: want %d to 60000 bytes", cfg.size, w6Header+8)
	case cfg.duration < time.Second:
		return cfg, fmt.Errorf("-w6-duration %v: want at least 1s", cfg.duration)
	case cfg.lateStart < 0 || cfg.lateStart >= cfg.duration/2:
		return cfg, fmt.Errorf("-w6-late %v: want 0 to less than half of -w6-duration (%v), before the window of fairness", cfg.lateStart, cfg.duration)
	case cfg.drain <= 0:
		return cfg, fmt.Errorf("-w6-drain %v: must be positive", cfg.drain)
	}
	return cfg, nil
}

// w6Row is every run of one path, system and number of flows on one link.
type w6Row struct {
	link   w6Link
	path   string
	system string
	flows  int
	runs   []w6Run
	skip   string // why the row was not run
}

// w6Run is the outcome of one run.
type w6Run struct {
	Goodput   float64 // payload delivered in order over the sending time, share of the link's rate
	Drops     float64 // share of the data direction's packets dropped at the queue
	WirePer   float64 // bytes offered to the data direction's queue per byte delivered
	Delivered uint64  // messages delivered in order
	Sent      uint64
	Disorder  uint64        // messages out of order
	Confirmed int           // flows whose receiver confirmed every message
	Jain      float64       // over the flows, second half of the run; 0 with one flow
	LateShare time.Duration // the last flow's time to its share; -1: never
	RTT50     time.Duration
	RTT99     time.Duration
	QDelay50  time.Duration // queueing delay at the bottleneck, data direction
	QDelay99  time.Duration
	Before    uint64 // packets lost before the bottleneck (socket or device queues)
	Errors    []string
}

// runW6 runs W6 and prints its tables.
func runW6(ctx context.Context, cfg w6Config, stdout io.Writer) error {
	var rows []*w6Row
	for _, l := range cfg.links {
		for _, p := range cfg.paths {
			for _, s := range cfg.systems {
				for _, n := range cfg.flows {
					r := &w6Row{link: l, path: p, system: s, flows: n}
					if p == "relay" && !w6IsFastnet(s) {
						continue // a UDP relay cannot carry TCP
					}
					rows = append(rows, r)
				}
			}
		}
	}
	if len(rows) == 0 {
		return errors.New("W6: no path carries a selected system (the relay carries fastnet only)")
	}
	tunSkip := ""
	for run := 1; run <= cfg.runs; run++ {
		for _, r := range rows {
			if r.skip != "" {
				continue
			}
			if r.path == "tun" && tunSkip != "" {
				r.skip = tunSkip
				continue
			}
			limit := cfg.duration + cfg.drain + 30*time.Second
			rctx, cancel := context.WithTimeout(ctx, limit)
			res, err := runW6Once(rctx, cfg, r)
			cancel()
			var skip *skipError
			if errors.As(err, &skip) {
				tunSkip = skip.Error()
				r.skip = tunSkip
				fmt.Fprintf(cfg.progress, "W6 %s path skipped: %s\n", r.path, tunSkip)
				continue
			}
			if err != nil {
				return fmt.Errorf("W6 run %d of %s %s %d flows on %s: %w", run, r.path, r.system, r.flows, r.link.Name, err)
			}
			r.runs = append(r.runs, res)
			late := "never"
			switch {
			case r.flows == 1:
				late = "-"
			case res.LateShare >= 0:
				late = res.LateShare.String()
			}
			fmt.Fprintf(cfg.progress, "W6 run %d/%d %s %-5s %-9s %d flows: goodput %.1f %%, drops %.1f %%, %d of %d in order, Jain %.3f, late flow at its share after %s, errors %q\n",
				run, cfg.runs, r.link.Name, r.path, r.system, r.flows, 100*res.Goodput, 100*res.Drops, res.Delivered, res.Sent, res.Jain, late, res.Errors)
		}
	}
	printW6(stdout, cfg, rows)
	return nil
}

// skipError is a path that cannot be built on this machine.
type skipError struct{ reason string }

func (e *skipError) Error() string { return e.reason }

// runW6Once runs r once.
func runW6Once(ctx context.Context, cfg w6Config, r *w6Row) (w6Run, error) {
	spec := w6Spec{System: r.system, Flows: r.flows, Size: cfg.size, Duration: cfg.duration, LateStart: cfg.lateStart, Drain: cfg.drain}
	var (
		serverNS, clientNS []string // command prefixes
		before             func() uint64
		queue              func() impair.QueueStats
		closePath          func()
	)
	switch r.path {
	case "relay":
		spec.Addr = "127.0.0.1:0"
		errs0 := udpReceiveErrors()
		before = func() uint64 { return udpReceiveErrors() - errs0 }
	case "tun":
		tp, err := newTunPath(ctx, r.link)
		if err != nil {
			return w6Run{}, err
		}
		closePath = tp.close
		defer tp.close()
		serverNS, clientNS = tp.exec("b"), tp.exec("a")
		spec.Addr = tp.serverIP + ":0"
		queue = tp.up.Stats
		before = tp.dropsBefore
	}
	_ = closePath
	spec.Role = "server"
	srv, err := startW6Child(ctx, cfg.exe, serverNS, spec)
	if err != nil {
		return w6Run{}, fmt.Errorf("server: %w", err)
	}
	defer srv.kill()
	addr, err := srv.next(ctx, "ready")
	if err != nil {
		return w6Run{}, fmt.Errorf("server: %w", err)
	}
	spec.Addr = addr
	if r.path == "relay" {
		// A 1500-byte path, as the TUN path's devices have: loopback's
		// own would let MTU estimation probe 9 kB datagrams through a
		// link of a few kilobytes of queue.
		relay, err := impair.Listen(ctx, "127.0.0.1:0", addr, impair.Config{Rate: r.link.Rate, Queue: r.link.Queue, Delay: r.link.RTT / 2, MTU: w6PathMTU - 28})
		if err != nil {
			return w6Run{}, err
		}
		defer relay.Close()
		spec.Addr = relay.Addr().String()
		queue = func() impair.QueueStats { return relay.Stats().Up }
	}
	spec.Role = "client"
	cli, err := startW6Child(ctx, cfg.exe, clientNS, spec)
	if err != nil {
		return w6Run{}, fmt.Errorf("client: %w", err)
	}
	defer cli.kill()
	cres, err := cli.next(ctx, "result")
	if err != nil {
		return w6Run{}, fmt.Errorf("client: %w", err)
	}
	qs := queue()
	lostBefore := before()
	srv.stdin.Close()
	sres, err := srv.next(ctx, "result")
	if err != nil {
		return w6Run{}, fmt.Errorf("server: %w", err)
	}
	var cr w6ClientResult
	var sr w6ServerResult
	if err := json.Unmarshal([]byte(cres), &cr); err != nil {
		return w6Run{}, err
	}
	if err := json.Unmarshal([]byte(sres), &sr); err != nil {
		return w6Run{}, err
	}
	srv.wait()
	cli.wait()
	return w6Measure(cfg, r.link, cr, sr, qs, lostBefore), nil
}

// w6Measure computes a run's figures.
func w6Measure(cfg w6Config, link w6Link, cr w6ClientResult, sr w6ServerResult, qs impair.QueueStats, before uint64) w6Run {
	var res w6Run
	window := int(cfg.duration / w6Bucket)
	var inWindow, total float64
	n := len(sr.Flows)
	perFlow := make([]float64, n) // second half of the window
	for i, f := range sr.Flows {
		for b, x := range f.Buckets {
			total += float64(x)
			if b < window {
				inWindow += float64(x)
			}
			if b >= window/2 && b < window {
				perFlow[i] += float64(x)
			}
		}
		res.Delivered += f.Delivered
		res.Disorder += f.OutOfOrder
		if f.Err != "" {
			res.Errors = appendOnce(res.Errors, "receiver: "+plainError(f.Err))
		}
	}
	var rtts []time.Duration
	for _, f := range cr.Flows {
		res.Sent += f.Sent
		if f.Confirmed {
			res.Confirmed++
		}
		if f.Err != "" {
			res.Errors = appendOnce(res.Errors, "sender: "+plainError(f.Err))
		}
		rtts = append(rtts, f.RTT...)
	}
	res.Goodput = inWindow / (float64(link.Rate) * cfg.duration.Seconds())
	if offered := qs.Queued + qs.Dropped; offered > 0 {
		res.Drops = float64(qs.Dropped) / float64(offered)
	}
	if total > 0 {
		res.WirePer = float64(qs.QueuedBytes+qs.DroppedBytes) / total
	}
	res.QDelay50, res.QDelay99 = qs.DelayP50, qs.DelayP99
	slices.Sort(rtts)
	res.RTT50, res.RTT99 = percentile(rtts, 50), percentile(rtts, 99)
	res.Before = before
	if n > 1 {
		res.Jain = jain(perFlow)
		res.LateShare = lateShare(sr.Flows, float64(link.Rate))
	}
	return res
}

// addrInError matches the addresses and ports in an error, which differ
// from run to run.
var addrInError = regexp.MustCompile(`(udp|tcp) [0-9a-f.:\[\]]+: `)

// plainError is an error without its addresses, so that the same error of
// several flows or runs is reported once.
func plainError(s string) string { return addrInError.ReplaceAllString(s, "") }

func appendOnce(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// jain is Jain's fairness index of x: 1 when all are equal, 1/n when one
// has everything; 0 when all are zero.
func jain(x []float64) float64 {
	var sum, sq float64
	for _, v := range x {
		sum += v
		sq += v * v
	}
	if sq == 0 {
		return 0
	}
	return sum * sum / (float64(len(x)) * sq)
}

// lateShare returns how long after its first message the last flow first
// had, over one second, at least 80 % of an equal share of what every flow
// delivered in that second, in a second when the flows together delivered
// at least half of the link's rate (bytes a second); -1 if it never did.
func lateShare(flows []w6FlowIn, rate float64) time.Duration {
	late := flows[len(flows)-1]
	if late.First < 0 {
		return -1
	}
	const win = int(time.Second / w6Bucket)
	at := func(f w6FlowIn, b int) float64 {
		if b < len(f.Buckets) {
			return float64(f.Buckets[b])
		}
		return 0
	}
	end := 0
	for _, f := range flows {
		end = max(end, len(f.Buckets))
	}
	for t := late.First; t+win <= end; t++ {
		var mine, all float64
		for b := t; b < t+win; b++ {
			mine += at(late, b)
			for _, f := range flows {
				all += at(f, b)
			}
		}
		if all >= rate/2 && mine >= 0.8*all/float64(len(flows)) {
			return time.Duration(t-late.First) * w6Bucket
		}
	}
	return -1
}

// udpReceiveErrors returns the system's count of UDP datagrams dropped
// for want of room in a receive buffer (Linux, /proc/net/snmp), or 0.
func udpReceiveErrors() uint64 {
	b, err := os.ReadFile("/proc/net/snmp")
	if err != nil {
		return 0
	}
	var names []string
	for _, line := range strings.Split(string(b), "\n") {
		rest, ok := strings.CutPrefix(line, "Udp: ")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if names == nil {
			names = f
			continue
		}
		for i, n := range names {
			if n == "RcvbufErrors" && i < len(f) {
				v, _ := strconv.ParseUint(f[i], 10, 64)
				return v
			}
		}
	}
	return 0
}

// w6Child is a W6 child process.
type w6Child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines <-chan string
	done  bool
}

// startW6Child starts the binary exe in the W6 role of spec, behind the
// command prefix (ip netns exec NS), if any.
func startW6Child(ctx context.Context, exe string, prefix []string, spec w6Spec) (*w6Child, error) {
	b, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	argv := append(slices.Clone(prefix), exe, w6Command, string(b))
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stderr = os.Stderr
	stdin, lines, err := startLines(cmd, 64<<20)
	if err != nil {
		return nil, err
	}
	return &w6Child{cmd: cmd, stdin: stdin, lines: lines}, nil
}

// next waits for the child's line that starts with prefix and returns the
// rest of it.
func (c *w6Child) next(ctx context.Context, prefix string) (string, error) {
	select {
	case l, ok := <-c.lines:
		if !ok {
			return "", fmt.Errorf("exited before %q", prefix)
		}
		if rest, found := strings.CutPrefix(l, prefix+" "); found {
			return rest, nil
		}
		return "", fmt.Errorf("said %q, want %q", l, prefix)
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

func (c *w6Child) wait() {
	for range c.lines {
	}
	c.cmd.Wait()
	c.done = true
}

func (c *w6Child) kill() {
	if c.done {
		return
	}
	c.stdin.Close()
	c.cmd.Process.Kill()
	c.wait()
}

// printW6 prints a table for each link.
func printW6(out io.Writer, cfg w6Config, rows []*w6Row) {
	fmt.Fprintf(out, "## W6 bottleneck\n\nEach flow sends %d-byte reliable ordered messages for %v (with several flows, the last starts %v after the others); median of %d runs, with min-max.\n",
		cfg.size, cfg.duration, cfg.lateStart, cfg.runs)
	for _, l := range cfg.links {
		fmt.Fprintf(out, "\n### %s (%s a second, %v round trip, queue %d bytes)\n\n", l.Name, rateText(l.Rate), l.RTT, l.Queue)
		fmt.Fprintln(out, "| path | system | flows | goodput, share of link | dropped at the queue | bytes offered per byte delivered | delivered in order / sent | fairness (Jain) | late flow at its share | RTT p50 / p99 | queueing p50 / p99 | lost before the queue | errors |")
		fmt.Fprintln(out, "|---|---|---|---|---|---|---|---|---|---|---|---|---|")
		for _, r := range rows {
			if r.link != l {
				continue
			}
			if len(r.runs) == 0 {
				fmt.Fprintf(out, "| %s | %s | %d | skipped: %s |||||||||\n", r.path, r.system, r.flows, r.skip)
				continue
			}
			get := func(f func(w6Run) float64) spread {
				v := make([]float64, len(r.runs))
				for i, x := range r.runs {
					v[i] = f(x)
				}
				slices.Sort(v)
				med := v[len(v)/2]
				if len(v)%2 == 0 {
					med = (v[len(v)/2-1] + v[len(v)/2]) / 2
				}
				return spread{med, v[0], v[len(v)-1]}
			}
			pct := func(f func(w6Run) float64) string {
				s := get(f)
				if len(r.runs) == 1 {
					return fmt.Sprintf("%.1f %%", 100*s.med)
				}
				return fmt.Sprintf("%.1f %% (%.1f-%.1f)", 100*s.med, 100*s.lo, 100*s.hi)
			}
			num := func(f func(w6Run) float64, prec int) string {
				s := get(f)
				if len(r.runs) == 1 {
					return strconv.FormatFloat(s.med, 'f', prec, 64)
				}
				return fmt.Sprintf("%s (%s-%s)", strconv.FormatFloat(s.med, 'f', prec, 64), strconv.FormatFloat(s.lo, 'f', prec, 64), strconv.FormatFloat(s.hi, 'f', prec, 64))
			}
			ms := func(f func(w6Run) time.Duration) string {
				return num(func(x w6Run) float64 { return float64(f(x)) / 1e6 }, 0)
			}
			// The run of median goodput stands for the counts.
			mid := slices.Clone(r.runs)
			slices.SortFunc(mid, func(a, b w6Run) int { return cmp.Compare(a.Goodput, b.Goodput) })
			m := mid[len(mid)/2]
			order := fmt.Sprintf("%d / %d", m.Delivered, m.Sent)
			if m.Disorder > 0 {
				order += fmt.Sprintf(", %d out of order", m.Disorder)
			}
			if m.Confirmed < r.flows {
				order += fmt.Sprintf(", %d of %d flows unconfirmed", r.flows-m.Confirmed, r.flows)
			}
			fair, late := "", ""
			if r.flows > 1 {
				fair = num(func(x w6Run) float64 { return x.Jain }, 3)
				var lates []string
				for _, x := range r.runs {
					if x.LateShare < 0 {
						lates = append(lates, "never")
					} else {
						lates = append(lates, strconv.FormatFloat(x.LateShare.Seconds(), 'f', 1, 64)+" s")
					}
				}
				late = strings.Join(lates, ", ")
			}
			var errs []string
			for _, x := range r.runs {
				for _, e := range x.Errors {
					errs = appendOnce(errs, e)
				}
			}
			fmt.Fprintf(out, "| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s / %s ms | %s / %s ms | %s | %s |\n",
				r.path, r.system, r.flows,
				pct(func(x w6Run) float64 { return x.Goodput }),
				pct(func(x w6Run) float64 { return x.Drops }),
				num(func(x w6Run) float64 { return x.WirePer }, 2),
				order, fair, late,
				ms(func(x w6Run) time.Duration { return x.RTT50 }), ms(func(x w6Run) time.Duration { return x.RTT99 }),
				ms(func(x w6Run) time.Duration { return x.QDelay50 }), ms(func(x w6Run) time.Duration { return x.QDelay99 }),
				num(func(x w6Run) float64 { return float64(x.Before) }, 0),
				strings.Join(errs, "; "))
		}
	}
}

// rateText writes a rate in bytes a second as bits a second.
func rateText(r int64) string {
	bits := float64(r) * 8
	switch {
	case bits >= 1e9:
		return strconv.FormatFloat(bits/1e9, 'g', 4, 64) + " Gbit"
	case bits >= 1e6:
		return strconv.FormatFloat(bits/1e6, 'g', 4, 64) + " Mbit"
	case bits >= 1e3:
		return strconv.FormatFloat(bits/1e3, 'g', 4, 64) + " kbit"
	}
	return strconv.FormatFloat(bits, 'g', 4, 64) + " bit"
}
