package mtu

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
)

// probeBudget is the most probe payload one estimation may send on a path
// the system's hint describes: the target of D29 (300 KB per direction).
const probeBudget = 300_000

// sizes returns the sizes of the rounds a sim has evaluated.
func sizes(rounds []string) []int {
	var out []int
	for _, r := range rounds {
		var size int
		fmt.Sscanf(r, "%d:", &size)
		out = append(out, size)
	}
	return out
}

// TestPathHint checks the hint of D29 (N43): the estimation probes it
// right after its first round and then a size just beyond 1 % above it, so
// that on a path the hint describes the MTU is at full size after two
// rounds and the estimation ends after three; D19's rounds remain the
// check, so a hint above the path is searched below and one below the
// path is searched above. Every case ends within 1 % of the largest
// payload that fits and never above it.
func TestPathHint(t *testing.T) {
	tests := []struct {
		name  string
		path  int
		hint  int
		max   int   // MaxPayload, 65505 if 0
		want  []int // the sizes probed, nil: not checked
		loss  float64
		bytes int // the most probe bytes, probeBudget if 0
	}{
		{"1500 path, exact hint", 1500, 1498, 0, []int{32, 1498, 1513}, 0, 0},
		{"1280 path, exact hint", 1280, 1278, 0, []int{32, 1278, 1291}, 0, 0},
		{"IPv6 1280 path, exact hint", 1270, 1268, 0, []int{32, 1268, 1281}, 0, 0},
		{"hint above the path", 1280, 1498, 0, []int{32, 1498, 765, 1131, 1314, 1222, 1268, 1291, 1279}, 0, 0},
		{"hint below the path", 1500, 1278, 0, nil, 0, 2 * probeBudget},
		{"hint above MaxPayload", 65535, 9000, 1400, []int{32, 1400}, 0, 0},
		{"1500 path, exact hint, 5 % loss", 1500, 1498, 0, nil, 0.05, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for seed := range uint64(4) {
				cfg := Config{MaxPayload: 65505}
				if tt.max != 0 {
					cfg.MaxPayload = tt.max
				}
				s := newSim(t, seed, cfg, tt.path, tt.loss, 50*time.Millisecond)
				s.est.SetPathHint(tt.hint)
				fits := min(s.fits(), cfg.MaxPayload)
				s.target = within1(fits)
				s.estimate(time.Minute)
				if tt.want != nil && !slices.Equal(sizes(s.rounds), tt.want) {
					t.Fatalf("seed %d: sizes %v\nwant     %v", seed, sizes(s.rounds), tt.want)
				}
				if m := s.est.MTU(); m < s.target || m > fits || s.maxAbove != 0 {
					t.Fatalf("seed %d: MTU %d (highest above the path %d), want in [%d, %d]; rounds %v", seed, m, s.maxAbove, s.target, fits, s.rounds)
				}
				budget := tt.bytes
				if budget == 0 {
					budget = probeBudget
				}
				if b := s.est.Stats().ProbeBytes; b > uint64(budget) {
					t.Errorf("seed %d: %d probe bytes, want at most %d; rounds %v", seed, b, budget, s.rounds)
				}
				t.Logf("seed %d: MTU %d, full size after %v, %d probe bytes, rounds %v", seed, s.est.MTU(), s.fullAt.Sub(s.begin), s.est.Stats().ProbeBytes, s.rounds)
			}
		})
	}
}

// TestPathHintFast checks the targets of D29 on a path like loopback (RTT
// 0.1 ms) with the default settings: with an exact hint, the MTU reaches
// the largest payload that fits within 1 s, the estimation ends within 1 s,
// and it sends at most 300 KB of probes on 1500- and 1280-byte paths. A
// jumbo path costs its two rounds of MinProbesPerRound probes (N44).
func TestPathHintFast(t *testing.T) {
	for _, path := range []int{1500, 1280, 9000} {
		s := newSim(t, 1, Config{MaxPayload: 65505}, path, 0, 100*time.Microsecond)
		s.est.SetPathHint(s.fits())
		s.target = s.fits()
		took := s.estimate(time.Minute)
		if s.fullAt == 0 || s.fullAt.Sub(s.begin) > time.Second || took > time.Second {
			t.Errorf("path %d: full size after %v, estimation %v; want both within 1 s", path, s.fullAt.Sub(s.begin), took)
		}
		budget := probeBudget
		if path > 1500 {
			budget = ProbesPerRound*DefaultInitial + 2*MinProbesPerRound*(s.fits()+s.fits()/100+1)
		}
		if b := s.est.Stats().ProbeBytes; b > uint64(budget) {
			t.Errorf("path %d: %d probe bytes, want at most %d", path, b, budget)
		}
		t.Logf("path %d: full size after %v, done after %v, %d probe bytes, rounds %v", path, s.fullAt.Sub(s.begin), took, s.est.Stats().ProbeBytes, s.rounds)
	}
}

// TestPathHintReestimation checks that the estimations after the first,
// with the hint still set, cost the same three rounds on an unchanged path,
// and that clearing the hint with 0 or a size at Initial removes it.
func TestPathHintReestimation(t *testing.T) {
	s := newSim(t, 1, Config{MaxPayload: 65505, Period: time.Minute}, 1500, 0, 50*time.Millisecond)
	s.est.SetPathHint(1498)
	s.estimate(time.Minute)
	first := len(s.rounds)
	s.rerun(time.Hour)
	if got, want := sizes(s.rounds[first:]), []int{32, 1498, 1513}; !slices.Equal(got, want) {
		t.Fatalf("re-estimation sizes %v, want %v", got, want)
	}
	if s.est.Stats().PathHint != 1498 {
		t.Fatalf("Stats.PathHint %d, want 1498", s.est.Stats().PathHint)
	}
	for _, h := range []int{0, DefaultInitial} {
		s.est.SetPathHint(1200)
		s.est.SetPathHint(h)
		if st := s.est.Stats(); st.PathHint != 0 || s.est.pathTry != 0 {
			t.Fatalf("SetPathHint(%d): hint %d, want none", h, st.PathHint)
		}
	}
}

// TestRoundSize checks the round size of N44: 100 probes for small sizes
// as in D19, RoundBytes/size for larger ones, never fewer than 20; the
// round ends early when all of its probes are counted.
func TestRoundSize(t *testing.T) {
	e := NewEstimator(Config{MaxPayload: 65505})
	for _, tt := range []struct{ size, want int }{
		{32, 100}, {327, 100}, {328, 99}, {1024, 32}, {1250, 26}, {1470, 22}, {1498, 21}, {1638, 20}, {9000, 20}, {65505, 20},
	} {
		if got := e.probesFor(tt.size); got != tt.want {
			t.Errorf("probesFor(%d) = %d, want %d", tt.size, got, tt.want)
		}
	}
	e = NewEstimator(Config{MaxPayload: 65505, RoundBytes: 1 << 20})
	if got := e.probesFor(1470); got != ProbesPerRound {
		t.Errorf("RoundBytes 1 MiB: probesFor(1470) = %d, want %d", got, ProbesPerRound)
	}
	// A lossless round of 1470 bytes: 22 probes, and the count of 22 ends
	// it at once.
	s := newSim(t, 1, Config{MaxPayload: 1470, Initial: 1470}, 1500, 0, 50*time.Millisecond)
	s.estimate(time.Minute)
	st := s.est.Stats()
	if st.LastProbes != 22 || st.LastCount != 22 || !st.LastPass || st.ProbesSent != 22 || st.ProbeBytes != 22*1470 {
		t.Fatalf("stats %+v; want one round of 22 probes of 1470 bytes, all counted", st)
	}
	if took := s.now.Sub(s.begin); took > 200*time.Millisecond {
		t.Fatalf("the round took %v: it should end when the count reached 22", took)
	}
}

// TestLossWithin checks D19's point rules between rounds of different
// probe counts (N44): points are percentages of each round's probes.
func TestLossWithin(t *testing.T) {
	for _, tt := range []struct {
		ref, refN, cnt, n, points int
		want                      bool
	}{
		{100, 100, 19, 20, 5, true},  // one probe of 20 lost: 5 points
		{100, 100, 18, 20, 5, false}, // two: 10 points
		{100, 100, 18, 20, 10, true},
		{100, 100, 17, 20, 10, false},
		{90, 100, 85, 100, 5, true},
		{90, 100, 84, 100, 5, false},
		{20, 22, 19, 22, 5, true}, // 90.9 % to 86.4 %: 4.5 points
		{20, 22, 18, 22, 5, false},
		{95, 100, 22, 22, 5, true}, // gains always pass
	} {
		if got := lossWithin(tt.ref, tt.refN, tt.cnt, tt.n, tt.points); got != tt.want {
			t.Errorf("lossWithin(%d/%d, %d/%d, %d) = %v, want %v", tt.ref, tt.refN, tt.cnt, tt.n, tt.points, got, tt.want)
		}
	}
}

// countingSource counts the values drawn from it.
type countingSource struct {
	rand.Source
	n int
}

func (c *countingSource) Uint64() uint64 { c.n++; return c.Source.Uint64() }

// TestProbeFill checks that probes are filled by the estimator's own
// generator (N44): the configured source is drawn from twice, when the
// estimator is made, however many probes it sends; and the probes still
// differ from one another.
func TestProbeFill(t *testing.T) {
	src := &countingSource{Source: rand.NewPCG(1, 2)}
	s := newSim(t, 1, Config{MaxPayload: 65505, Rand: rand.New(src)}, 1500, 0, 50*time.Millisecond)
	drawn := src.n
	var seen [][]byte
	s.est.Start(s.now)
	for len(seen) < 50 {
		b, ok := s.est.AppendPayload(nil, s.now, s.rtt)
		if !ok {
			s.now = s.est.NextDeadline()
			if len(seen) == 0 {
				s.est.HandlePayload(s.now, ackPayload)
			}
			continue
		}
		if len(b) > 1 {
			seen = append(seen, b)
		}
	}
	if drawn != 2 || src.n != drawn {
		t.Fatalf("drew %d values when made and %d while sending 50 probes; want 2 and 0", drawn, src.n-drawn)
	}
	for i := 1; i < len(seen); i++ {
		if string(seen[i]) == string(seen[i-1]) {
			t.Fatalf("probes %d and %d are the same", i-1, i)
		}
	}
}

// BenchmarkProbeFill measures filling a 1470-byte probe.
func BenchmarkProbeFill(b *testing.B) {
	e := NewEstimator(Config{MaxPayload: 65505})
	e.size = 1470
	buf := make([]byte, 0, 1470)
	b.SetBytes(1470)
	for b.Loop() {
		buf = e.appendProbe(buf[:0])
	}
}

// TestPilots checks N91: a round of a size more than pilotAbove times the
// last that passed sends pilotProbes probes first and, when none of them
// is counted within a final wait, a second set; when none of those is
// either, it fails having sent only these. A jumbo hint on a 1500-byte
// path, an interface's MTU the path does not carry with no ICMP to say so,
// then costs a few probes for each of the sizes far above the path, not
// rounds of 20 of them; the search ends where it did without pilots.
func TestPilots(t *testing.T) {
	for seed := range uint64(4) {
		s := newSim(t, seed, Config{MaxPayload: 65505}, 1500, 0, 50*time.Millisecond)
		s.est.SetPathHint(8972)
		s.target = within1(s.fits())
		s.estimate(time.Minute)
		if m := s.est.MTU(); m < s.target || m > s.fits() {
			t.Fatalf("seed %d: MTU %d, want in [%d, %d]; rounds %v", seed, m, s.target, s.fits(), s.rounds)
		}
		if !slices.Equal(sizes(s.rounds), []int{32, 8972, 4502, 2267, 1149, 1708, 1428, 1568, 1498, 1533, 1515, 1506}) {
			t.Fatalf("seed %d: sizes %v, want the search of TestPathHint's hint above the path", seed, sizes(s.rounds))
		}
		st := s.est.Stats()
		piloted := 0
		for i, r := range s.rounds {
			var size int
			fmt.Sscanf(r, "%d:", &size)
			if s.probes[i] <= pilotSets*pilotProbes {
				piloted++
				if size <= s.fits() {
					t.Errorf("seed %d: round %s, which the path carries, ended after %d probes", seed, r, s.probes[i])
				}
			}
		}
		// 8972, 4502 and 2267, above four times the 32 of the first round.
		if piloted != 3 || st.PilotsLost != uint64(piloted) {
			t.Errorf("seed %d: %d rounds ended after their pilots, %d counted; want 3; rounds %v", seed, piloted, st.PilotsLost, s.rounds)
		}
		t.Logf("seed %d: MTU %d, %d probe bytes, %d pilot rounds lost, rounds %v", seed, s.est.MTU(), st.ProbeBytes, st.PilotsLost, s.rounds)
	}
}

// TestPilotsSecondSet drives a round by hand: its first pilots are all
// lost, as in a burst of loss at a full queue; the second set gets
// through, and the round goes on to its end. Its count decides, as D19
// says: three of 22 lost is more than 10 points, a failure with a count,
// which is measured again rather than taken as the path's limit (N91).
func TestPilotsSecondSet(t *testing.T) {
	const rtt = 50 * time.Millisecond
	e := NewEstimator(Config{MaxPayload: 65505})
	e.SetPathHint(1470)
	buf := make([]byte, 0, 65536)
	now := clock.Epoch
	e.Start(now)
	now = round(t, e, now, buf, count(ProbesPerRound)) // the reference round, at 32 bytes
	var ok bool
	if buf, ok = e.AppendPayload(buf[:0], now, rtt); !ok || len(buf) != 1 {
		t.Fatalf("no reset of the hint's round")
	}
	e.HandlePayload(now, ackPayload)
	send := func(n int) {
		t.Helper()
		for range n {
			now = max(now, e.NextDeadline())
			if buf, ok = e.AppendPayload(buf[:0], now, rtt); !ok || len(buf) != 1470 {
				t.Fatalf("at %v: no probe of 1470 bytes due (phase %d)", now, e.phase)
			}
		}
	}
	send(pilotProbes) // lost
	if e.phase != phasePilot {
		t.Fatalf("phase %d after the pilots, want phasePilot", e.phase)
	}
	now = e.NextDeadline()
	e.HandleTimeout(now)
	send(pilotProbes) // the second set: one gets through at once
	e.HandlePayload(now, count(1))
	if d := e.NextDeadline(); d < now.Add(e.cfg.ProbeInterval) {
		t.Fatalf("the next probe due %v after the last pilot, want a ProbeInterval (%v) at least", d.Sub(now), e.cfg.ProbeInterval)
	}
	n := e.probesFor(1470)
	send(n - 2*pilotProbes)
	e.HandlePayload(now, count(uint32(n-pilotProbes)))
	e.HandleTimeout(e.NextDeadline())
	st := e.Stats()
	if st.LastSize != 1470 || st.LastCount != n-pilotProbes || st.LastProbes != n || st.PilotsLost != 0 || st.Retries != 1 {
		t.Fatalf("round %d: %d of %d, %d pilot rounds lost, %d retries; want 1470's whole round, %d of %d, measured again", st.LastSize, st.LastCount, st.LastProbes, st.PilotsLost, st.Retries, n-pilotProbes, n)
	}
}
