package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"
)

func TestParseW6(t *testing.T) {
	cfg, err := parseW6(3, w6DefaultLinks, w6DefaultPaths, w6DefaultSystems, w6DefaultFlows, 20*time.Second, 5*time.Second, 10*time.Second, 1024, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.links) != 2 || cfg.links[0].Rate != 2_500_000 || cfg.links[0].RTT != 40*time.Millisecond || cfg.links[0].Queue != 100_000 ||
		cfg.links[1].Rate != 625_000 || cfg.links[1].Queue != 12_500 {
		t.Errorf("links %+v", cfg.links)
	}
	if len(cfg.paths) != 2 || len(cfg.systems) != 2 || len(cfg.flows) != 2 {
		t.Errorf("paths %v, systems %v, flows %v", cfg.paths, cfg.systems, cfg.flows)
	}
	for _, tt := range []struct {
		links, paths, systems, flows string
		dur, late                    time.Duration
		size                         int
		want                         string
	}{
		{"20mbit/40ms", "tun", "fastnet", "1", 20 * time.Second, 5 * time.Second, 1024, "want RATE/RTT/QUEUE"},
		{"20/40ms/100kB", "tun", "fastnet", "1", 20 * time.Second, 5 * time.Second, 1024, "no unit"},
		{"20mbit/x/100kB", "tun", "fastnet", "1", 20 * time.Second, 5 * time.Second, 1024, "bad round trip"},
		{"20mbit/40ms/0", "tun", "fastnet", "1", 20 * time.Second, 5 * time.Second, 1024, "bad queue"},
		{"20mbit/40ms/100kB", "wire", "fastnet", "1", 20 * time.Second, 5 * time.Second, 1024, "unknown path"},
		{"20mbit/40ms/100kB", "tun", "quic", "1", 20 * time.Second, 5 * time.Second, 1024, "unknown system"},
		{"20mbit/40ms/100kB", "tun", "fastnet", "0", 20 * time.Second, 5 * time.Second, 1024, "want 1 to 64 flows"},
		{"20mbit/40ms/100kB", "tun", "fastnet", "1", 20 * time.Second, 10 * time.Second, 1024, "-w6-late"},
		{"20mbit/40ms/100kB", "tun", "fastnet", "1", 500 * time.Millisecond, 0, 1024, "-w6-duration"},
		{"20mbit/40ms/100kB", "tun", "fastnet", "1", 20 * time.Second, 5 * time.Second, 8, "-w6-size"},
	} {
		_, err := parseW6(1, tt.links, tt.paths, tt.systems, tt.flows, tt.dur, tt.late, time.Second, tt.size, false)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: %v, want %q", tt, err, tt.want)
		}
	}
	if rest, ok := cutW6("W1,w6,W3"); !ok || rest != "W1,W3" {
		t.Errorf("cutW6: %q %v", rest, ok)
	}
}

func TestJain(t *testing.T) {
	for _, tt := range []struct {
		x    []float64
		want float64
	}{
		{[]float64{1, 1, 1, 1}, 1},
		{[]float64{1, 0, 0, 0}, 0.25},
		{[]float64{0, 0}, 0},
		{[]float64{3, 1}, 0.8},
	} {
		if got := jain(tt.x); math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("jain(%v) = %v, want %v", tt.x, got, tt.want)
		}
	}
}

func TestLateShare(t *testing.T) {
	const rate = 1000 // bytes a second: 100 a bucket
	steady := func(n int, per uint64) []uint64 {
		b := make([]uint64, n)
		for i := range b {
			b[i] = per
		}
		return b
	}
	late := w6FlowIn{First: 20, Buckets: append(make([]uint64, 20), steady(40, 10)...)}
	// The late flow takes 10 a bucket at first, then from bucket 40 its
	// equal share.
	for i := 40; i < 60; i++ {
		late.Buckets[i] = 25
	}
	flows := []w6FlowIn{{First: 0, Buckets: steady(60, 25)}, {First: 0, Buckets: steady(60, 25)}, {First: 0, Buckets: steady(60, 25)}, late}
	// From bucket 36 on, a second's window has 4*10 + 6*25 = 190 of an
	// equal share of 237.5 (80 %: 190).
	if got := lateShare(flows, rate); got != 16*w6Bucket {
		t.Errorf("lateShare = %v, want 1.6s", got)
	}
	// A link that carries less than half its rate: never.
	if got := lateShare(flows, 1e6); got != -1 {
		t.Errorf("lateShare on a nearly idle link = %v, want -1", got)
	}
	if got := lateShare([]w6FlowIn{{First: 0, Buckets: steady(20, 100)}, {First: -1}}, rate); got != -1 {
		t.Errorf("lateShare of a flow that never sent = %v, want -1", got)
	}
}

// TestSmokeW6 runs W6 for a second on one flow: fastnet through the UDP
// relay (with -short too: two seconds or so), and, without -short, kernel
// TCP through the TUN path where this machine can build it. It checks the
// table, and that TCP delivered every message in order and used most of
// the link.
func TestSmokeW6(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	run := func(paths, systems string) string {
		t.Helper()
		cfg, err := parseW6(1, "20mbit/20ms/50kB", paths, systems, "1", time.Second, 0, time.Second, 1024, false)
		if err != nil {
			t.Fatal(err)
		}
		var progress, out bytes.Buffer
		cfg.progress, cfg.exe = &progress, exe
		err = runW6(context.Background(), cfg, &out)
		t.Logf("progress:\n%s\n%s", progress.String(), out.String())
		if err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	if out := run("relay", "fastnet"); !strings.Contains(out, "| relay | fastnet | 1 | ") {
		t.Errorf("no relay row in the table")
	}
	if testing.Short() {
		return
	}
	out := run("tun", "tcp-cubic")
	if strings.Contains(out, "| tun | tcp-cubic | 1 | skipped") {
		t.Skip("the TUN path cannot be built here")
	}
	line := ""
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "| tun | tcp-cubic | 1 | ") {
			line = l
		}
	}
	f := strings.Split(line, " | ")
	if len(f) < 7 {
		t.Fatalf("tun tcp-cubic row %q", line)
	}
	var goodput float64
	if _, err := fmt.Sscan(f[3], &goodput); err != nil || goodput < 50 {
		t.Errorf("kernel TCP's goodput %q, want at least 50 %%", f[3])
	}
	if strings.Contains(f[6], "unconfirmed") || strings.Contains(f[6], "out of order") {
		t.Errorf("kernel TCP: %q", f[6])
	}
}
