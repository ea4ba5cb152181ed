package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary play the server process, as the command
// does: the harness starts os.Executable, which here is the test binary.
func TestMain(m *testing.M) {
	if len(os.Args) == 3 && os.Args[1] == w6Command {
		if err := runW6Child(os.Args[2], os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "bench W6:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if len(os.Args) == 3 && os.Args[1] == serverCommand {
		if err := serveChild(os.Args[2], os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "bench server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestSmoke runs every system on every workload it supports once, with the
// reduced counts of -quick, and checks that the figures are plausible and
// that the table shows them.
func TestSmoke(t *testing.T) {
	cfg, err := parseConfig(1, "W1,W2,W3,W4", "", true)
	if err != nil {
		t.Fatal(err)
	}
	// The peer libraries build and test in their own modules
	// (bench/peers); this test keeps to the systems of this module.
	cfg.systems = slices.DeleteFunc(cfg.systems, func(s System) bool { _, ok := s.(*peerSystem); return ok })
	cfg.timeout = time.Minute
	var progress bytes.Buffer
	cfg.progress = &progress
	if cfg.exe, err = os.Executable(); err != nil {
		t.Fatal(err)
	}
	results, err := benchmark(context.Background(), cfg)
	t.Logf("progress:\n%s", progress.String())
	if err != nil {
		t.Fatal(err)
	}
	rows := 0
	for _, r := range results {
		m := r.runs[0]
		rows++
		if len(r.runs) != 1 {
			t.Errorf("%s %s: %d runs, want 1", r.system, r.w.Name, len(r.runs))
		}
		if m[ServerCPU] <= 0 {
			t.Errorf("%s %s: server CPU %v ms", r.system, r.w.Name, m[ServerCPU])
		}
		switch r.w.Name {
		case "W1":
			if m[P50] <= 0 || m[P99] < m[P50] || m[P99] > 1e6 {
				t.Errorf("%s W1: p50 %v µs, p99 %v µs", r.system, m[P50], m[P99])
			}
		case "W2", "W3":
			if m[Rate] <= 0 {
				t.Errorf("%s %s: %v msg/s", r.system, r.w.Name, m[Rate])
			}
		case "W4":
			if m[Sent] != float64(r.w.Messages) {
				t.Errorf("%s W4: sent %v, want %d", r.system, m[Sent], r.w.Messages)
			}
			if m[Received] <= 0 || m[Received] > m[Sent] {
				t.Errorf("%s W4: received %v of %v", r.system, m[Received], m[Sent])
			}
			if m[Loss] < 0 || m[Loss] >= 100 {
				t.Errorf("%s W4: loss %v %%", r.system, m[Loss])
			}
		}
	}
	want := 0
	for _, s := range cfg.systems {
		for _, w := range cfg.workloads {
			if s.Supports(w) {
				want++
			}
		}
	}
	if rows != want || rows < 4 {
		t.Errorf("%d rows, want %d (and at least the 4 of the UDP baselines)", rows, want)
	}

	var table bytes.Buffer
	printTable(&table, results, 1)
	t.Logf("table:\n%s", table.String())
	lines := strings.Split(strings.TrimSpace(table.String()), "\n")
	if len(lines) != 2+rows {
		t.Errorf("table of %d lines, want %d", len(lines), 2+rows)
	}
	for _, r := range results {
		prefix := fmt.Sprintf("| %s | %s ", r.system, r.w.Name)
		found := false
		for _, l := range lines {
			if strings.HasPrefix(l, prefix) && !strings.Contains(l, "?") {
				found = true
			}
		}
		if !found {
			t.Errorf("no complete row %q in the table", prefix)
		}
	}
}

// TestSmokeW5 runs W5 once with the counts of -quick and checks that
// every figure of its report is there and plausible.
func TestSmokeW5(t *testing.T) {
	cfg, err := parseConfig(1, "W5", "fastnet-udp", true)
	if err != nil {
		t.Fatal(err)
	}
	cfg.timeout = time.Minute
	var progress bytes.Buffer
	cfg.progress = &progress
	if cfg.exe, err = os.Executable(); err != nil {
		t.Fatal(err)
	}
	results, err := benchmark(context.Background(), cfg)
	t.Logf("progress:\n%s", progress.String())
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 1 || len(results[0].runs) != 1 {
		t.Fatalf("%d results, want one run of one", len(results))
	}
	r := results[0]
	m := r.runs[0]
	n := float64(r.w.Messages)
	for _, c := range []struct {
		metric   string
		min, max float64
	}{
		{Conns, n, n},
		{ConnectSeconds, 1e-6, 60},
		{EstimateSeconds, 1e-6, 60},
		{MTUUp, 0.001, 1e6},
		{MTUDown, 0.001, 1e6},
		{ClientMTU, 32, 65507},
		{ServerMTU, 32, 65507},
		{IdleCPU, 1e-6, 200},
		{IdleDatagrams, 1, 100}, // heartbeats and echoes, both ways
		{HeapPerConn, 0.01, 1e4},
		{ServerLive, n, n},
		{ClientLive, n, n},
	} {
		if v, ok := m[c.metric]; !ok || v < c.min || v > c.max {
			t.Errorf("%s = %v (reported %v), want %v to %v", c.metric, v, ok, c.min, c.max)
		}
	}
	var out bytes.Buffer
	printTable(&out, results, 1)
	printIdle(&out, results)
	t.Logf("report:\n%s", out.String())
	if strings.Contains(out.String(), "?") {
		t.Error("the report lacks a figure")
	}
}

func TestFlags(t *testing.T) {
	tests := []struct {
		args []string
		code int
		out  string // in stdout
		err  string // in stderr
	}{
		{[]string{"-list"}, 0, "raw-udp-batch64", ""},
		{[]string{"--runs", "0"}, 2, "", "at least 1"},
		{[]string{"--workloads", "W7"}, 2, "", `unknown workload "W7"`},
		{[]string{"--workloads", "W6", "--w6-flows", "0"}, 2, "", "want 1 to 64 flows"},
		{[]string{"--workloads", "W6", "--w6-links", "20mbit"}, 2, "", "want RATE/RTT/QUEUE"},
		{[]string{"--w5-conns", "-1"}, 2, "", "negative"},
		{[]string{"--systems", "bogus"}, 2, "", `unknown system "bogus"`},
		{[]string{"--systems", "kcp-go", "--peers", "/nonexistent"}, 1, "Skipped kcp-go: no module in /nonexistent/kcp", "no selected system supports"},
		{[]string{"--bogus"}, 2, "", "flag provided but not defined"},
		{[]string{"--systems", "raw-udp-batch64", "--workloads", "W2"}, 1, "", "no selected system supports"},
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), tt.args, &stdout, &stderr)
		if code != tt.code || !strings.Contains(stdout.String(), tt.out) || !strings.Contains(stderr.String(), tt.err) {
			t.Errorf("run %q = %d, stdout %q, stderr %q; want %d, %q, %q", tt.args, code, stdout.String(), stderr.String(), tt.code, tt.out, tt.err)
		}
	}
}

func TestPercentile(t *testing.T) {
	d := make([]time.Duration, 100)
	for i := range d {
		d[i] = time.Duration(i + 1)
	}
	tests := []struct {
		d    []time.Duration
		p    float64
		want time.Duration
	}{
		{d, 50, 50},
		{d, 99, 99},
		{d, 100, 100},
		{d[:1], 99, 1},
		{d[:3], 50, 2},
		{nil, 50, 0},
	}
	for _, tt := range tests {
		if got := percentile(tt.d, tt.p); got != tt.want {
			t.Errorf("percentile(%d values, %v) = %v, want %v", len(tt.d), tt.p, got, tt.want)
		}
	}
}

func TestSpread(t *testing.T) {
	r := result{runs: []Metrics{{Rate: 3}, {Rate: 1}, {Rate: 10}, {P50: 7}}}
	if s, ok := r.spread(Rate); !ok || s != (spread{3, 1, 10}) {
		t.Errorf("odd count: %+v, %v", s, ok)
	}
	r.runs = append(r.runs, Metrics{Rate: 4})
	if s, _ := r.spread(Rate); s != (spread{3.5, 1, 10}) {
		t.Errorf("even count: %+v", s)
	}
	if _, ok := r.spread(Loss); ok {
		t.Error("spread of a metric no run has")
	}
}

// TestNotes: the note on an unsteady W1 baseline appears only when raw
// UDP's W1 p50 spread by at least bimodal over the runs, and not when the
// processes were pinned.
func TestNotes(t *testing.T) {
	w1 := Workload{Name: "W1"}
	mk := func(system string, p50s ...float64) *result {
		r := &result{system: system, w: w1}
		for _, x := range p50s {
			r.runs = append(r.runs, Metrics{P50: x})
		}
		return r
	}
	tests := []struct {
		name    string
		results []*result
		pinned  bool
		want    bool
	}{
		{"steady", []*result{mk(latencyBaseline, 19, 20, 21)}, false, false},
		{"bimodal", []*result{mk(latencyBaseline, 17, 40, 65)}, false, true},
		{"bimodal but pinned", []*result{mk(latencyBaseline, 17, 40, 65)}, true, false},
		{"another system spreads", []*result{mk(latencyBaseline, 19, 20), mk("fastnet-udp", 24, 40)}, false, false},
		{"no baseline", []*result{mk("fastnet-udp", 17, 65)}, false, false},
	}
	for _, tt := range tests {
		var b strings.Builder
		printNotes(&b, tt.results, tt.pinned)
		if got := strings.Contains(b.String(), "Note:"); got != tt.want {
			t.Errorf("%s: note printed %v, want %v (%q)", tt.name, got, tt.want, b.String())
		}
	}
	var b strings.Builder
	printNotes(&b, []*result{mk(latencyBaseline, 17, 40, 65)}, false)
	if !strings.Contains(b.String(), "ranged 17-65 µs") || !strings.Contains(b.String(), "--pin 0") {
		t.Errorf("note %q does not give the range and the remedy", b.String())
	}
}

// TestStreamMessages: -stream-messages sets W2's and W3's counts and
// nothing else's, and refuses a negative count.
func TestStreamMessages(t *testing.T) {
	cfg, err := parseConfig(1, "W1,W2,W3,W4", "fastnet-udp", false)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.setStream(2000000); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"W1": 20000, "W2": 2000000, "W3": 2000000, "W4": 1000000}
	for _, w := range cfg.workloads {
		if w.Messages != want[w.Name] {
			t.Errorf("%s: %d messages, want %d", w.Name, w.Messages, want[w.Name])
		}
	}
	if err := cfg.setStream(-1); err == nil {
		t.Error("-stream-messages -1 accepted")
	}
}
