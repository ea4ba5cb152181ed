package mtu

import (
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
)

// Quiet is true exactly when nothing the estimator does at that instant
// changes it or sends anything (N119): HandleTimeout, AppendPayload and
// Changed then leave its deadline, statistics and estimate as they were,
// and AppendPayload appends nothing. Played over lossy paths through two
// estimations each, with Changed read after every step as a connection
// reads it; Quiet must hold between the estimations, and not while one
// runs or once the next is due.
func TestEstimatorQuiet(t *testing.T) {
	for seed := uint64(1); seed <= 12; seed++ {
		s := newSim(t, seed, Config{MaxPayload: 65505, Period: time.Minute}, 1500, 0.1, 20*time.Millisecond)
		if !checkQuiet(t, seed, s.est, s.now) {
			t.Fatalf("seed %d: not quiet before the first Start, which only the endpoint makes", seed)
		}
		s.start()
		limit := s.now.Add(3 * time.Minute)
		var quiet, busy int
		for {
			// Before the estimate is read, and after.
			checkQuiet(t, seed, s.est, s.now)
			s.est.Changed()
			// The instant itself, and instants on the way to the
			// next event, where the estimator is asked nothing.
			next := clock.Earliest(s.est.NextDeadline(), s.inflight.earliest())
			for _, at := range []clock.Time{s.now, s.now.Add(time.Millisecond), next - 1, next} {
				if at < s.now || at == 0 {
					continue
				}
				if checkQuiet(t, seed, s.est, at) {
					quiet++
				} else {
					busy++
				}
			}
			if !s.step(limit) {
				break
			}
		}
		if s.est.Stats().Estimations < 2 {
			t.Fatalf("seed %d: %d estimations in 3 minutes, want 2 or more", seed, s.est.Stats().Estimations)
		}
		if quiet == 0 || busy == 0 {
			t.Fatalf("seed %d: quiet at %d instants, busy at %d: both must occur", seed, quiet, busy)
		}
	}
}

// checkQuiet asks e whether it is quiet at now and, if it is, makes sure
// that it is: a copy of e (its generator of probe bytes shared) is driven
// at now and must end as it began. It returns what Quiet said.
func checkQuiet(t *testing.T, seed uint64, e *Estimator, now clock.Time) bool {
	t.Helper()
	if !e.Quiet(now) {
		// Not quiet only for a reason the estimator's users can see:
		// an estimation under way, the next one due, or an estimate
		// Changed has not returned yet.
		c := *e
		if _, changed := c.Changed(); !e.Stats().Searching && !e.Due(now) && !changed {
			t.Fatalf("seed %d at %v: not quiet, yet not searching, not due and nothing to report", seed, now)
		}
		return false
	}
	if e.Stats().Searching || e.Due(now) {
		t.Fatalf("seed %d at %v: quiet while searching (%v) or due (%v)", seed, now, e.Stats().Searching, e.Due(now))
	}
	c := *e
	deadline, stats, mtu := c.NextDeadline(), c.Stats(), c.MTU()
	c.HandleTimeout(now)
	if b, ok := c.AppendPayload(nil, now, 20*time.Millisecond); ok || len(b) > 0 {
		t.Fatalf("seed %d at %v: quiet, yet AppendPayload gave %x", seed, now, b)
	}
	if m, changed := c.Changed(); changed || m != mtu {
		t.Fatalf("seed %d at %v: quiet, yet Changed gave %d, %v", seed, now, m, changed)
	}
	if c.NextDeadline() != deadline || c.Stats() != stats || c.MTU() != mtu || !c.Quiet(now) {
		t.Fatalf("seed %d at %v: quiet, yet driving it changed it: deadline %v to %v, stats %+v to %+v", seed, now, deadline, c.NextDeadline(), stats, c.Stats())
	}
	return true
}
