package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// peerSystem is a peer library measured through a binary of its own: the
// module bench/peers/DIR (its own go.mod, so that neither this module nor
// the engine's requires the library) builds a command that speaks the
// child protocol for both roles (bench/peers/peerkit). buildPeers builds
// it before the runs; the server role is that binary started with
// serverCommand, and the client role the same binary started with
// clientCommand, whose CPU time is the client's.
type peerSystem struct {
	name      string
	dir       string   // under bench/peers
	workloads []string // the workloads the library runs
	bin       string   // the built binary; empty before buildPeers
}

// clientCommand is the hidden first argument that makes a peer binary
// play the client; the second is a childSpec in JSON, the third the
// server's address.
const clientCommand = "__fastnet_bench_client"

// peerSystems are the peer libraries, in table order.
func peerSystems() []System {
	return []System{
		&peerSystem{name: "enet", dir: "enet", workloads: []string{"W1", "W2", "W3", "W4"}},
		&peerSystem{name: "quic-go", dir: "quic", workloads: []string{"W1", "W2", "W3", "W4"}},
		&peerSystem{name: "kcp-go", dir: "kcp", workloads: []string{"W1", "W2", "W3"}},
	}
}

// peerNames are the systems the last column compares with: the peer
// libraries and the raw TCP baseline.
var peerNames = []string{"enet", "quic-go", "kcp-go", "raw-tcp"}

func (s *peerSystem) Name() string { return s.name }

func (s *peerSystem) Supports(w Workload) bool { return slices.Contains(s.workloads, w.Name) }

// serverExe is the binary the harness starts as the server.
func (s *peerSystem) serverExe() string { return s.bin }

func (s *peerSystem) Server(ctx context.Context, w Workload, o Options, ready func(string)) (Metrics, error) {
	return nil, fmt.Errorf("%s serves from its own binary (bench/peers/%s)", s.name, s.dir)
}

// Client runs the peer binary as the client and returns its metrics with
// its CPU time.
func (s *peerSystem) Client(ctx context.Context, w Workload, o Options, addr string) (Metrics, error) {
	if s.bin == "" {
		return nil, fmt.Errorf("%s is not built", s.name)
	}
	spec, err := json.Marshal(childSpec{System: s.name, Workload: w, Options: o})
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, s.bin, clientCommand, string(spec), addr)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	var m Metrics
	res, ok := strings.CutPrefix(strings.TrimSpace(stdout.String()), "result ")
	if !ok {
		return nil, fmt.Errorf("the client said %q, want a result", stdout.String())
	}
	if err := json.Unmarshal([]byte(res), &m); err != nil {
		return nil, fmt.Errorf("the client's result: %w", err)
	}
	if ps := cmd.ProcessState; ps != nil {
		m[ClientCPU] = float64(ps.UserTime()+ps.SystemTime()) / float64(time.Millisecond)
	}
	return m, nil
}

// findPeersDir returns the directory that holds the peer modules: dir if
// given, else peers in the working directory or bench/peers in it or one
// of its parents (the bench command runs from bench/ or the repository).
func findPeersDir(dir string) (string, error) {
	if dir != "" {
		return dir, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	if isPeersDir(filepath.Join(wd, "peers")) {
		return filepath.Join(wd, "peers"), nil
	}
	for d := wd; ; d = filepath.Dir(d) {
		if p := filepath.Join(d, "bench", "peers"); isPeersDir(p) {
			return p, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no bench/peers above %s (-peers gives it)", wd)
		}
	}
}

func isPeersDir(p string) bool {
	_, err := os.Stat(filepath.Join(p, "peerkit", "go.mod"))
	return err == nil
}

// buildPeers builds the binary of every peer system among cfg.systems into
// tmp, with the go command, and drops from cfg.systems, with a line on
// out, each one whose build failed (a library missing: ENet needs
// libenet-dev). Progress goes to progress.
func buildPeers(ctx context.Context, cfg *config, peersDir, tmp string, out, progress io.Writer) {
	kept := cfg.systems[:0]
	for _, s := range cfg.systems {
		p, ok := s.(*peerSystem)
		if !ok {
			kept = append(kept, s)
			continue
		}
		if err := p.build(ctx, peersDir, tmp, progress); err != nil {
			fmt.Fprintf(out, "Skipped %s: %v\n", p.name, err)
			continue
		}
		kept = append(kept, s)
	}
	cfg.systems = kept
}

func (s *peerSystem) build(ctx context.Context, peersDir, tmp string, progress io.Writer) error {
	dir := filepath.Join(peersDir, s.dir)
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return fmt.Errorf("no module in %s", dir)
	}
	bin := filepath.Join(tmp, s.dir)
	fmt.Fprintf(progress, "building %s (%s)\n", s.name, dir)
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	cmd.Dir = dir
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building %s failed (%v): %s", dir, err, firstLines(log.String(), 3))
	}
	s.bin = bin
	return nil
}

// firstLines is the first n lines of s, on one line.
func firstLines(s string, n int) string {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() && len(lines) < n {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, " / ")
}

// bestPeerCell compares r's median with the best peer's on the same
// workload: the lowest W1 p50 (p50 and p99 both compared with that
// system's), the highest rate otherwise. It is "-" when no peer ran r's
// workload.
func bestPeerCell(r *result, results []*result) string {
	var best *result
	var bestV float64
	metric := Rate
	if r.w.Name == "W1" {
		metric = P50
	}
	for _, b := range results {
		if b.w.Name != r.w.Name || !slices.Contains(peerNames, b.system) {
			continue
		}
		s, ok := b.spread(metric)
		if !ok || s.med <= 0 {
			continue
		}
		if best == nil || (metric == P50 && s.med < bestV) || (metric == Rate && s.med > bestV) {
			best, bestV = b, s.med
		}
	}
	if best == nil {
		return "-"
	}
	x, ok := r.spread(metric)
	if !ok {
		return "-"
	}
	if metric == Rate {
		return fmt.Sprintf("%sx %s", times(x.med/bestV), best.system)
	}
	p99, ok1 := r.spread(P99)
	b99, ok2 := best.spread(P99)
	if !ok1 || !ok2 || b99.med <= 0 {
		return fmt.Sprintf("p50 %sx %s", times(x.med/bestV), best.system)
	}
	return fmt.Sprintf("p50 %sx, p99 %sx %s", times(x.med/bestV), times(p99.med/b99.med), best.system)
}

// pairedMin is the fewest runs printPaired compares run by run.
const pairedMin = 5

// printPaired writes, for each of the project's systems run at least
// pairedMin times, how it compared run by run with each peer library that
// ran its workload as often (and fastnet-tcp with raw TCP, its baseline):
// every run of every system is made in turn, so that run i of two
// systems was measured close together, while the machine's speed drifts
// over a sitting by more than the medians of some workloads differ. The
// median of the per-run ratios, their quartiles and in how many runs the
// system was ahead say what the medians of the table, taken over
// different moments, cannot. It writes nothing with fewer runs.
func printPaired(out io.Writer, results []*result) {
	var lines []string
	for _, r := range results {
		if !strings.HasPrefix(r.system, "fastnet-") || len(r.runs) < pairedMin {
			continue
		}
		metric, what := Rate, "rate"
		if r.w.Name == "W1" {
			metric, what = P50, "p50"
		}
		for _, p := range results {
			if p.w.Name != r.w.Name || len(p.runs) != len(r.runs) || !slices.Contains(peerNames, p.system) ||
				p.system == tcpBaseline && r.system != tcpSystem {
				continue
			}
			var ratios []float64
			ahead := 0
			for i := range r.runs {
				x, y := r.runs[i][metric], p.runs[i][metric]
				if x <= 0 || y <= 0 {
					continue
				}
				q := x / y
				ratios = append(ratios, q)
				if metric == Rate && q > 1 || metric == P50 && q < 1 {
					ahead++
				}
			}
			if len(ratios) < pairedMin {
				continue
			}
			slices.Sort(ratios)
			n := len(ratios)
			lines = append(lines, fmt.Sprintf("- %s %s against %s, %s run by run: median ratio %sx (quartiles %s-%s), ahead in %d of %d runs.",
				r.system, r.w.Name, p.system, what, times(median(ratios)), times(ratios[n/4]), times(ratios[(3*n)/4]), ahead, n))
		}
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintf(out, "\nRun by run (each run of every system made in turn):\n\n%s\n", strings.Join(lines, "\n"))
}

// times formats a ratio with two decimals, or three significant digits
// below 0.1, so that a small one does not read 0.00.
func times(x float64) string {
	if x < 0.1 {
		return fmt.Sprintf("%.3g", x)
	}
	return fmt.Sprintf("%.2f", x)
}
