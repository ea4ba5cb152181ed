// Command bench runs the workloads of docs/workloads.md (W1 echo latency, W2
// and W3 reliable throughput, W4 unreliable rate, W5 many idle
// connections) against several systems
// over 127.0.0.1, each run with the server in a separate process, and
// prints one Markdown table of medians with min-max and CPU time.
//
// It lives in a module of its own so that the engine's module needs none of
// its dependencies. From the repository root:
//
//	cd bench && go run . [flags]
//
// Flags:
//
//	-runs N          runs of each workload on each system (default 3)
//	-workloads LIST  comma-separated, from W1,W2,W3,W4,W4K,W5 (default all)
//	-systems LIST    comma-separated system names (default all; -list shows them)
//	-quick           reduced counts, for a smoke run of a few seconds
//	-sockbuf BYTES   socket buffer size for the raw UDP systems (default: OS default)
//	-min-resend-rtt D  floor of the fastnet systems' resend RTT (default: the engine's)
//	-no-offload      turn UDP segmentation offload (GSO, GRO) off in
//	                 udpio-batch64 and fastnet-udp
//	-listen-any      bind fastnet-udp's servers to 0.0.0.0, as servers
//	                 usually are (each datagram's local address read and
//	                 set, N149), its clients still dialing 127.0.0.1
//	-pin LIST        run the client and every server on these CPUs only
//	                 (Linux; "0", "0,1", "0-3"): with one CPU, W1 measures
//	                 the work of a round trip without the cost of waking
//	                 another processor, which on virtual machines decides
//	                 the latency run by run
//	-timeout D       limit on each run (default 2m; W5 gets at least 50 ms a
//	                 connection and a minute)
//	-cpuprofile FILE write a CPU profile of the clients (this process) to
//	                 FILE, and of each server to FILE-SYSTEM-WORKLOAD.server
//	                 (W5: of the measured window only)
//	-stream-messages N  W2's and W3's messages (default 200000 and 100000):
//	                 a longer stream measures the steady state, past a
//	                 fresh process's first 100 ms (ENet's client queues a
//	                 whole stream: W3 at 2,000,000 runs it out of memory)
//	-w5-conns N      W5's connections (default 10000, 500 with -quick)
//	-w5-window D     how long W5 measures the idle server (default 15s,
//	                 3s with -quick)
//	-w5-dials N      W5's handshakes under way at once (default 256)
//	-peers DIR       the peer modules (default: bench/peers, found from the
//	                 working directory)
//
// W6, the bottleneck workload, is not in the default list: -workloads W6
// runs it (alone, or after the others), with its own flags (see w6.go and
// docs/congestion.md):
//
//	-w6-links LIST   bottlenecks RATE/RTT/QUEUE (default
//	                 20mbit/40ms/100kB,5mbit/40ms/12.5kB)
//	-w6-paths LIST   tun (namespaces and TUN devices, any IP traffic;
//	                 Linux, root) and relay (package impair's UDP relay)
//	-w6-systems LIST fastnet, fastnet-unreliable, tcp-cubic, tcp-bbr (default
//	                 tcp-cubic,fastnet); fastnet-unreliable sends its messages
//	                 unreliably, as fast as the sender lets them go
//	-w6-flows LIST   numbers of flows (default 1,4)
//	-w6-duration D   how long the flows send (default 20s; 3s with -quick)
//	-w6-late D       when the last of several flows starts (default 5s)
//	-w6-drain D      how long a flow waits for its last messages (default 10s)
//	-w6-size BYTES   message size (default 1024)
//
// Flags may also be written with two dashes (--quick). A system is a value
// implementing [System]: its server role runs in a child process (the same
// binary started with a hidden first argument), its client role in this
// process. A workload a system does not support is left out of the table.
//
// The systems are the baselines, raw-udp-plain (one system call per
// datagram), raw-udp-batch64 (x/net ipv4 WriteBatch and ReadBatch, 64
// datagrams per call), raw-udp-acked (W1 with an ack datagram after each
// message, the floor of Fastnet 1.0's four datagrams per round trip),
// udpio-batch64 (batches through the project's socket layer,
// internal/udpio, with segmentation offload where the kernel has it) and
// udpio-acked (raw-udp-acked through that layer), and the engine itself:
// fastnet-udp (W1-W5, through udpdriver) and fastnet-tcp (W1-W3, through
// tcpdriver), and raw-tcp, the TCP driver's baseline (W1-W3: 4-byte length
// and message over one net.TCPConn, written through a buffer flushed after
// each W1 message and at the end of W2 and W3). W5's clients are the engine's endpoints, each with a socket of
// its own, in this process (see swarm); it is reported in a section of its
// own below the table. The last column of the table compares each median with
// baselines of the same run: W1 latency with raw-udp-plain's and the two
// acked floors, every rate with raw-udp-batch64's and udpio-batch64's
// received rate for datagrams of the same size (W4, or W4K for W3), and
// fastnet-tcp's with raw-tcp's on the same workload.
//
// The peer libraries, measured by the same harness on the same workloads:
// enet (ENet 1.3 through cgo, W1-W4), quic-go (W1-W3 on one bidirectional
// stream, W4 as QUIC datagrams) and kcp-go (fast mode, W1-W3). Each lives
// in a Go module of its own under bench/peers (kcp, quic, enet), so that
// neither this module nor the engine's requires them; bench/peers/peerkit,
// a module of the standard library only, holds what they share: the child
// protocol for both roles and the workloads written once over a message
// connection. Before the runs the command builds each selected peer's
// binary with the go command into a temporary directory (the Go build
// cache keeps it quick after the first time); a peer whose build fails
// (ENet needs libenet-dev and a C compiler) is left out with a line above
// the table saying why. A peer's server is its binary started with the
// hidden server argument, as this binary is for the other systems, and
// its client the same binary started with a hidden client argument, whose
// CPU time the table shows as the client's. The last column, vs best peer,
// compares each median with the best of the peers and raw-tcp on the same
// workload: the lowest W1 p50 (p50 and p99 against that system's), the
// highest rate otherwise.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"time"
)

func main() {
	if len(os.Args) == 3 && os.Args[1] == w6Command {
		if err := runW6Child(os.Args[2], os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "bench W6:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) == 3 && os.Args[1] == serverCommand {
		if err := serveChild(os.Args[2], os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "bench server:", err)
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run is the command: it parses args, runs the benchmark, prints the table
// to stdout and progress to stderr, and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	runs := fs.Int("runs", 3, "runs of each workload on each system")
	wl := fs.String("workloads", "W1,W2,W3,W4,W4K,W5", "comma-separated workloads (W4K: raw UDP with 1 KiB datagrams, W3's baseline)")
	sl := fs.String("systems", "", "comma-separated systems (default all)")
	quick := fs.Bool("quick", false, "reduced counts for a smoke run")
	sockbuf := fs.Int("sockbuf", 0, "socket buffer size in bytes (0: OS default)")
	minResend := fs.Duration("min-resend-rtt", 0, "floor of the resend RTT of the fastnet systems (0: the engine's default)")
	timeout := fs.Duration("timeout", 2*time.Minute, "limit on each run")
	list := fs.Bool("list", false, "list the systems and exit")
	noOffload := fs.Bool("no-offload", false, "turn UDP segmentation offload (GSO, GRO) off in udpio-batch64 and fastnet-udp")
	listenAny := fs.Bool("listen-any", false, "bind fastnet-udp's servers to 0.0.0.0 (clients dial 127.0.0.1)")
	payloadMTU := fs.Int("payload-mtu", 0, "fastnet-udp's payload MTU, with MTU estimation off (0: estimated; 1200 is an Internet path's)")
	cpuprofile := fs.String("cpuprofile", "", "write CPU profiles of clients and servers to this file (and FILE-SYSTEM-WORKLOAD.server)")
	pin := fs.String("pin", "", "run the client and every server on these CPUs only (Linux; e.g. 0, 0,1 or 0-3)")
	w5Conns := fs.Int("w5-conns", 0, "W5's connections (0: 10000, 500 with -quick)")
	w5Window := fs.Duration("w5-window", 0, "how long W5 measures the idle server (0: 15s, 3s with -quick)")
	w5Dials := fs.Int("w5-dials", 0, "W5's handshakes under way at once (0: 256)")
	streamMessages := fs.Int("stream-messages", 0, "W2's and W3's messages (0: 200000 and 100000)")
	peersDir := fs.String("peers", "", "directory of the peer modules (default: bench/peers, found from the working directory)")
	w6Links := fs.String("w6-links", w6DefaultLinks, "W6's bottlenecks, comma-separated RATE/RTT/QUEUE")
	w6Paths := fs.String("w6-paths", w6DefaultPaths, "W6's bottlenecks are built as: tun (IP packets, any protocol; Linux, root), relay (package impair's UDP relay)")
	w6Systems := fs.String("w6-systems", w6DefaultSystems, "W6's systems: fastnet, fastnet-unreliable (unreliable messages), tcp-cubic, tcp-bbr")
	w6Flows := fs.String("w6-flows", w6DefaultFlows, "W6's numbers of flows, comma-separated")
	w6Duration := fs.Duration("w6-duration", 20*time.Second, "how long W6's flows send")
	w6Late := fs.Duration("w6-late", 5*time.Second, "when W6's last flow starts, with several")
	w6Drain := fs.Duration("w6-drain", 10*time.Second, "how long a W6 flow waits for its last messages to arrive")
	w6Size := fs.Int("w6-size", 1024, "W6's message size in bytes")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var w6 *w6Config
	if rest, ok := cutW6(*wl); ok {
		c, err := parseW6(*runs, *w6Links, *w6Paths, *w6Systems, *w6Flows, *w6Duration, *w6Late, *w6Drain, *w6Size, *quick)
		if err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return 2
		}
		w6, *wl = &c, rest
	}
	if *pin != "" {
		cpus, err := parseCPUList(*pin)
		if err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return 2
		}
		if pinned() == "" {
			err = restartPinned(cpus, *pin) // returns only on failure
		} else {
			err = checkPinned(cpus)
		}
		if err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return 1
		}
	}
	if *list {
		for _, s := range systems() {
			fmt.Fprintln(stdout, s.Name())
		}
		return 0
	}
	if w6 != nil {
		exe, err := os.Executable()
		if err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return 1
		}
		w6.exe, w6.progress = exe, stderr
		if *wl == "" {
			if err := runW6(ctx, *w6, stdout); err != nil {
				fmt.Fprintln(stderr, "bench:", err)
				return 1
			}
			return 0
		}
		defer func() {
			if err := runW6(ctx, *w6, stdout); err != nil {
				fmt.Fprintln(stderr, "bench:", err)
			}
		}()
	}
	cfg, err := parseConfig(*runs, *wl, *sl, *quick)
	if err == nil {
		err = cfg.setW5(*w5Conns, *w5Window, *w5Dials)
	}
	if err == nil {
		err = cfg.setStream(*streamMessages)
	}
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 2
	}
	cfg.opts = Options{SocketBuffer: *sockbuf, CPUProfile: *cpuprofile, MinResendRTT: *minResend, NoOffload: *noOffload, ListenAny: *listenAny, PayloadMTU: *payloadMTU, Progress: stderr}
	if *cpuprofile != "" {
		stop, err := startCPUProfile(*cpuprofile)
		if err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return 1
		}
		defer stop()
	}
	cfg.timeout = *timeout
	cfg.progress = stderr
	if cfg.exe, err = os.Executable(); err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	var skipped bytes.Buffer
	if needsPeers(cfg.systems) {
		dir, err := findPeersDir(*peersDir)
		if err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return 1
		}
		tmp, err := os.MkdirTemp("", "fastnet-bench-peers-")
		if err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return 1
		}
		defer os.RemoveAll(tmp)
		buildPeers(ctx, &cfg, dir, tmp, io.MultiWriter(&skipped, stderr), stderr)
	}
	results, err := benchmark(ctx, cfg)
	if skipped.Len() > 0 {
		fmt.Fprintf(stdout, "%s\n", skipped.Bytes())
	}
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	if *pin != "" {
		fmt.Fprintf(stdout, "Client and servers ran on CPU %s only (-pin).\n\n", *pin)
	}
	printTable(stdout, results, cfg.runs)
	printNotes(stdout, results, *pin != "")
	printPaired(stdout, results)
	printIdle(stdout, results)
	return 0
}

// cutW6 removes W6 from a list of workloads, and reports whether it was
// there.
func cutW6(list string) (string, bool) {
	var rest []string
	found := false
	for _, name := range strings.Split(list, ",") {
		if strings.EqualFold(strings.TrimSpace(name), "W6") {
			found = true
			continue
		}
		rest = append(rest, name)
	}
	return strings.Join(rest, ","), found
}

// parseConfig checks the selection flags.
func parseConfig(runs int, workloadList, systemList string, quick bool) (config, error) {
	cfg := config{runs: runs}
	if runs < 1 {
		return cfg, fmt.Errorf("-runs %d: need at least 1", runs)
	}
	all := workloads(quick)
	for _, name := range strings.Split(workloadList, ",") {
		name = strings.ToUpper(strings.TrimSpace(name))
		found := false
		for _, w := range all {
			if w.Name == name {
				cfg.workloads = append(cfg.workloads, w)
				found = true
			}
		}
		if !found {
			return cfg, fmt.Errorf("unknown workload %q (want W1, W2, W3, W4, W4K, W5 or W6)", name)
		}
	}
	if systemList == "" {
		cfg.systems = systems()
		return cfg, nil
	}
	for _, name := range strings.Split(systemList, ",") {
		s := findSystem(strings.TrimSpace(name))
		if s == nil {
			return cfg, fmt.Errorf("unknown system %q (see -list)", name)
		}
		cfg.systems = append(cfg.systems, s)
	}
	return cfg, nil
}

// setW5 applies W5's flags; zero leaves a setting as it is.
func (cfg *config) setW5(conns int, window time.Duration, dials int) error {
	if conns < 0 || window < 0 || dials < 0 {
		return fmt.Errorf("-w5-conns %d, -w5-window %v, -w5-dials %d: negative", conns, window, dials)
	}
	for i := range cfg.workloads {
		w := &cfg.workloads[i]
		if w.Name != "W5" {
			continue
		}
		if conns > 0 {
			w.Messages = conns
		}
		if window > 0 {
			w.Window = window
		}
		if dials > 0 {
			w.Dials = dials
		}
	}
	return nil
}

// setStream applies -stream-messages: W2's and W3's count of messages, 0
// leaving them as they are. A stream ten times as long measures the steady
// state, past what a fresh process pays in its first 100 ms (a heap that
// grows, a window that opens; docs/performance.md).
func (cfg *config) setStream(n int) error {
	if n < 0 {
		return fmt.Errorf("-stream-messages %d: negative", n)
	}
	for i := range cfg.workloads {
		if w := &cfg.workloads[i]; n > 0 && (w.Name == "W2" || w.Name == "W3") {
			w.Messages = n
		}
	}
	return nil
}

// needsPeers reports whether a peer library is among systems.
func needsPeers(systems []System) bool {
	for _, s := range systems {
		if _, ok := s.(*peerSystem); ok {
			return true
		}
	}
	return false
}

// startCPUProfile starts writing a CPU profile to file; the function it
// returns stops it.
func startCPUProfile(file string) (stop func(), err error) {
	f, err := os.Create(file)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
