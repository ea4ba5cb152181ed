package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBestPeerCell checks the last column: each median against the best
// peer's on the same workload, lowest latency or highest rate.
func TestBestPeerCell(t *testing.T) {
	w := map[string]Workload{}
	for _, x := range workloads(false) {
		w[x.Name] = x
	}
	enetW1 := &result{system: "enet", w: w["W1"], runs: []Metrics{{P50: 40, P99: 100}}}
	tcpW1 := &result{system: "raw-tcp", w: w["W1"], runs: []Metrics{{P50: 20, P99: 200}}}
	fnW1 := &result{system: "fastnet-udp", w: w["W1"], runs: []Metrics{{P50: 30, P99: 100}}}
	quicW2 := &result{system: "quic-go", w: w["W2"], runs: []Metrics{{Rate: 100e3}}}
	kcpW2 := &result{system: "kcp-go", w: w["W2"], runs: []Metrics{{Rate: 400e3}}}
	fnW2 := &result{system: "fastnet-udp", w: w["W2"], runs: []Metrics{{Rate: 200e3}}}
	fnW3 := &result{system: "fastnet-udp", w: w["W3"], runs: []Metrics{{Rate: 1e3}}}
	tcpW3 := &result{system: "raw-tcp", w: w["W3"], runs: []Metrics{{Rate: 1e6}}}
	all := []*result{enetW1, tcpW1, fnW1, quicW2, kcpW2, fnW2, fnW3, tcpW3}
	tests := []struct {
		r    *result
		want string
	}{
		{fnW1, "p50 1.50x, p99 0.50x raw-tcp"},
		{enetW1, "p50 2.00x, p99 0.50x raw-tcp"},
		{fnW2, "0.50x kcp-go"},
		{kcpW2, "1.00x kcp-go"},
		{fnW3, "0.001x raw-tcp"},
	}
	for _, tt := range tests {
		if got := bestPeerCell(tt.r, all); got != tt.want {
			t.Errorf("%s %s: %q, want %q", tt.r.system, tt.r.w.Name, got, tt.want)
		}
	}
	if got := bestPeerCell(fnW2, []*result{fnW1, fnW2}); got != "-" {
		t.Errorf("without peers: %q, want -", got)
	}
}

// TestPeerBuildFails: a peer module that does not build is left out with
// a line that says why, and the other systems run.
func TestPeerBuildFails(t *testing.T) {
	dir := t.TempDir()
	broken := filepath.Join(dir, "kcp")
	if err := os.MkdirAll(broken, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(broken, "go.mod"), []byte("module broken\n\ngo 1.21\n"), 0o644)
	os.WriteFile(filepath.Join(broken, "main.go"), []byte("package main\n\nfunc main() { undefined() }\n"), 0o644)
	cfg := config{systems: []System{rawTCP{}, findSystem("kcp-go")}}
	var out, progress bytes.Buffer
	buildPeers(context.Background(), &cfg, dir, t.TempDir(), &out, &progress)
	if len(cfg.systems) != 1 || cfg.systems[0].Name() != "raw-tcp" {
		t.Errorf("systems after the build: %v, want raw-tcp only", cfg.systems)
	}
	if !strings.Contains(out.String(), "Skipped kcp-go: building") || !strings.Contains(out.String(), "undefined") {
		t.Errorf("output %q does not say the build failed and why", out.String())
	}
}

// TestPrintPaired checks the run-by-run comparison: each of the project's
// systems against the best peer of its workload, from five runs on, with
// the ratios of runs made in turn.
func TestPrintPaired(t *testing.T) {
	w := map[string]Workload{}
	for _, x := range workloads(false) {
		w[x.Name] = x
	}
	rates := func(system, workload string, v ...float64) *result {
		r := &result{system: system, w: w[workload]}
		for _, x := range v {
			r.runs = append(r.runs, Metrics{Rate: x})
		}
		return r
	}
	// Medians equal (3 and 3), but the project's system is ahead in
	// four runs of five.
	fn := rates("fastnet-udp", "W2", 2, 3, 4, 5, 1)
	enet := rates("enet", "W2", 1, 2, 3, 4, 5)
	lat := &result{system: "fastnet-udp", w: w["W1"]}
	peer := &result{system: "enet", w: w["W1"]}
	for _, p50 := range []float64{10, 20, 30, 40, 50} {
		lat.runs = append(lat.runs, Metrics{P50: p50 / 2})
		peer.runs = append(peer.runs, Metrics{P50: p50})
	}
	// raw TCP is fastnet-tcp's baseline, not fastnet-udp's.
	tcp := rates("raw-tcp", "W2", 10, 10, 10, 10, 10)
	fnTCP := rates("fastnet-tcp", "W2", 5, 5, 5, 5, 5)
	var b bytes.Buffer
	printPaired(&b, []*result{fn, enet, lat, peer, tcp, fnTCP})
	got := b.String()
	for _, want := range []string{
		"- fastnet-udp W2 against enet, rate run by run: median ratio 1.33x (quartiles 1.25-1.50), ahead in 4 of 5 runs.",
		"- fastnet-udp W1 against enet, p50 run by run: median ratio 0.50x (quartiles 0.50-0.50), ahead in 5 of 5 runs.",
		"- fastnet-tcp W2 against raw-tcp, rate run by run: median ratio 0.50x (quartiles 0.50-0.50), ahead in 0 of 5 runs.",
		"- fastnet-tcp W2 against enet, rate run by run: median ratio 1.67x (quartiles 1.25-2.50), ahead in 4 of 5 runs.",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	if strings.Contains(got, "fastnet-udp W2 against raw-tcp") {
		t.Errorf("fastnet-udp compared with raw TCP:\n%s", got)
	}
	b.Reset()
	printPaired(&b, []*result{rates("fastnet-udp", "W2", 1, 2, 3, 4), rates("enet", "W2", 1, 2, 3, 4)})
	if b.Len() != 0 {
		t.Errorf("four runs: %q, want nothing", b.String())
	}
}
