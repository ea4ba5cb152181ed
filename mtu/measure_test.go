package mtu

import (
	"flag"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

var measure = flag.Bool("mtu.measure", false, "print the measurements behind the defaults (see doc.go)")

// trial is the outcome of one first estimation in the simulator.
type trial struct {
	full  time.Duration // time until MTU was within 1 % of the largest payload that fits; -1 if never
	done  time.Duration // time until the estimation ended
	final int           // MTU at the end
	ok    bool          // final within 1 % of the largest payload that fits and never above it
	bytes uint64        // probe bytes sent
}

// scenario is a path for a trial: symmetric loss and delay, and on the
// forward link an optional bottleneck and an optional loss step.
type scenario struct {
	path      int
	loss      float64
	rtt       time.Duration
	jitter    time.Duration
	rate      int           // bytes/s; 0 = none
	buffer    time.Duration // the bottleneck's queue
	stepAbove int           // payloads above this lose stepLoss more
	stepLoss  float64
}

// setup applies sc to s.
func (sc scenario) setup(s *sim) {
	s.fwd.rate, s.fwd.buffer = sc.rate, sc.buffer
	s.fwd.jitter, s.back.jitter = sc.jitter, sc.jitter
	// Jitter on each link adds its mean, jitter/2, to the path's RTT; the
	// estimator is told the mean, as a smoothed RTT would tell it.
	s.rtt = sc.rtt + sc.jitter
	// The link counts the channel id; stepAbove counts payload bytes.
	if sc.stepAbove > 0 {
		s.fwd.stepAbove, s.fwd.stepLoss = sc.stepAbove+2, sc.stepLoss
	}
}

// runTrial runs one first estimation of cfg over sc, with the given number
// of confirmations of a marginal failure.
func runTrial(t testing.TB, seed uint64, cfg Config, retry int, sc scenario) trial {
	t.Helper()
	s := newSim(t, seed, cfg, sc.path, sc.loss, sc.rtt)
	s.est.retry = retry
	sc.setup(s)
	s.target = within1(s.fits())
	done := s.estimate(time.Hour)
	tr := trial{full: -1, done: done, final: s.est.MTU(), bytes: s.est.Stats().ProbeBytes}
	if s.fullAt != 0 {
		tr.full = s.fullAt.Sub(s.begin)
	}
	tr.ok = s.maxAbove == 0 && tr.final >= s.target && tr.final <= s.fits()
	return tr
}

// within1 returns the smallest MTU within 1 % of fits.
func within1(fits int) int { return (fits*99 + 99) / 100 }

// trials runs n seeds of a trial.
func trials(t testing.TB, n int, cfg Config, retry int, sc scenario) []trial {
	var out []trial
	for seed := range uint64(n) {
		out = append(out, runTrial(t, seed, cfg, retry, sc))
	}
	return out
}

// summarize returns the median time to full size (within 1 %) and how many
// trials ended within 1 % and never above.
func summarize(ts []trial) string {
	var full []time.Duration
	okN := 0
	for _, tr := range ts {
		if tr.ok {
			okN++
		}
		if tr.full >= 0 {
			full = append(full, tr.full)
		}
	}
	slices.Sort(full)
	med := "never"
	if len(full) > len(ts)/2 {
		med = full[len(full)/2].Round(10 * time.Millisecond).String()
	}
	return fmt.Sprintf("%6s %3d%%", med, okN*100/len(ts))
}

// TestMeasureDefaults prints the measurements recorded in doc.go:
//
//	go test ./mtu -run TestMeasureDefaults -mtu.measure -v
func TestMeasureDefaults(t *testing.T) {
	if !*measure {
		t.Skip("run with -mtu.measure to print the measurements")
	}
	const seeds = 200
	rtt := 50 * time.Millisecond
	var b strings.Builder

	// Table 1: probe interval and final timeout.
	cols := []struct {
		name string
		sc   scenario
	}{
		{"loss 0%", scenario{path: 1500, rtt: rtt}},
		{"loss 5%", scenario{path: 1500, rtt: rtt, loss: 0.05}},
		{"loss 20%", scenario{path: 1500, rtt: rtt, loss: 0.20}},
		{"5%, jitter 100ms", scenario{path: 1500, rtt: rtt, loss: 0.05, jitter: 100 * time.Millisecond}},
		{"5 Mbit/s", scenario{path: 1500, rtt: rtt, rate: 625000, buffer: 50 * time.Millisecond}},
		{"2 Mbit/s", scenario{path: 1500, rtt: rtt, rate: 250000, buffer: 50 * time.Millisecond}},
	}
	fmt.Fprintf(&b, "\nTable 1. 1500-byte path (largest payload 1498), RTT 50 ms, %d seeds.\n", seeds)
	b.WriteString("Each cell: median time from Start until MTU >= 1483 (1 %), and % of estimations ending in [1483, 1498].\n")
	fmt.Fprintf(&b, "%-9s %-6s", "interval", "final")
	for _, c := range cols {
		fmt.Fprintf(&b, " | %-15s", c.name)
	}
	b.WriteString("\n")
	for _, iv := range []time.Duration{time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond} {
		for _, ft := range []time.Duration{100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond, time.Second} {
			fmt.Fprintf(&b, "%-9v %-6v", iv, ft)
			for _, c := range cols {
				cfg := Config{MaxPayload: 65505, ProbeInterval: iv, FinalTimeout: ft}
				fmt.Fprintf(&b, " | %-15s", summarize(trials(t, seeds, cfg, confirmations, c.sc)))
			}
			b.WriteString("\n")
		}
	}

	// Table 2: confirmations of a marginal failure.
	cols = []struct {
		name string
		sc   scenario
	}{
		{"loss 5%", scenario{path: 1500, rtt: rtt, loss: 0.05}},
		{"loss 20%", scenario{path: 1500, rtt: rtt, loss: 0.20}},
		{"loss 30%", scenario{path: 1500, rtt: rtt, loss: 0.30}},
	}
	fmt.Fprintf(&b, "\nTable 2. Default interval and final timeout, 1500-byte path, RTT 50 ms, %d seeds: confirmations of a failure with some count.\n", seeds)
	b.WriteString("Cells as in table 1. Last columns: 5 % loss, and 12 or 25 points more above 1000 bytes: % of estimations ending at or below 1000.\n")
	fmt.Fprintf(&b, "%-13s", "confirmations")
	for _, c := range cols {
		fmt.Fprintf(&b, " | %-15s", c.name)
	}
	b.WriteString(" | step 12 | step 25\n")
	for _, r := range []int{0, 1, 2, 3, 4, 5, 6} {
		fmt.Fprintf(&b, "%-13d", r)
		for _, c := range cols {
			fmt.Fprintf(&b, " | %-15s", summarize(trials(t, seeds, Config{MaxPayload: 65505}, r, c.sc)))
		}
		for _, step := range []float64{0.12, 0.25} {
			below := 0
			ts := trials(t, seeds, Config{MaxPayload: 65505}, r, scenario{path: 1500, rtt: rtt, loss: 0.05, stepAbove: 1000, stepLoss: step})
			for _, tr := range ts {
				if tr.final <= 1000 {
					below++
				}
			}
			fmt.Fprintf(&b, " | %6d%%", below*100/len(ts))
		}
		b.WriteString("\n")
	}

	// Table 3: the cost of an estimation, for the period.
	fmt.Fprintf(&b, "\nTable 3. Default config, RTT 50 ms, 0 %% loss: cost of the first estimation and of a re-estimation of an unchanged path,\n")
	b.WriteString("and the re-estimations' average probe rate for three periods.\n")
	fmt.Fprintf(&b, "%-6s | %-17s | %-17s | %-9s %-9s %-9s\n", "path", "first: time bytes", "again: time bytes", "1 min", "5 min", "10 min")
	for _, path := range []int{576, 1280, 1500, 9000} {
		s := newSim(t, 1, Config{MaxPayload: 65505}, path, 0, rtt)
		d1 := s.estimate(time.Hour)
		b1 := s.est.Stats().ProbeBytes
		d2 := s.rerun(time.Hour) - DefaultPeriod
		b2 := s.est.Stats().ProbeBytes - b1
		fmt.Fprintf(&b, "%-6d | %6v %9d | %6v %9d |", path, d1.Round(10*time.Millisecond), b1, d2.Round(10*time.Millisecond), b2)
		for _, p := range []time.Duration{time.Minute, 5 * time.Minute, 10 * time.Minute} {
			fmt.Fprintf(&b, " %5.0f B/s", float64(b2)/(p+d2).Seconds())
		}
		b.WriteString("\n")
	}
	t.Log(b.String())
}
