package mtu

import (
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
)

// N157: TestCutShortEstimationTriedAgain's peer, busy from the fourth
// round's reset, 2.7 s in, but until 30 s rather than 5 s: a server with
// more estimations waiting than it answers (N53) is busy for as long as
// its queue lasts. A fixed number of quick tries ended by about 20 s, and
// the estimator kept 128 bytes for the next Period; tried every 8 s or
// so, it finds the path within 2 minutes.
func TestCutShortPeerBusyLonger(t *testing.T) {
	s := newSim(t, 1, Config{MaxPayload: 65505}, 1500, 0, 50*time.Millisecond)
	s.resp = busyFromFourth(s, s.now.Add(30*time.Second))
	s.estimate(time.Minute)
	s.run(2*time.Minute, func() bool { return s.est.MTU() >= 1480 && !s.est.Stats().Searching })
	if m := s.est.MTU(); m < 1480 {
		st := s.est.Stats()
		t.Errorf("2 min on: MTU %d after %d estimations (%d given up), next in %v; want the path's 1,496, as an estimator that measured nothing has by then",
			m, st.Estimations, st.GaveUp, s.est.NextDeadline().Sub(s.now))
	}
}

// N157: the same with an MTU assumed from the system's path MTU (Assume,
// as fastnet does on every connection with a hint, N84) and every reset
// refused for the first 30 s: above Initial, the first estimation refused
// at its first reset waited Period.
func TestAssumedMTUPeerBusy(t *testing.T) {
	s := newSim(t, 1, Config{MaxPayload: 65505}, 1500, 0, 50*time.Millisecond)
	until := s.now.Add(30 * time.Second)
	s.resp = &busy{NewResponder(), s, func(now clock.Time) bool { return now < until }}
	s.est.Assume(546)
	s.start()
	s.run(2*time.Minute, func() bool { return s.est.MTU() >= 1480 && !s.est.Stats().Searching })
	if m := s.est.MTU(); m < 1480 {
		st := s.est.Stats()
		t.Errorf("2 min on: MTU %d after %d estimations (%d given up), next in %v; want the path's 1,496", m, st.Estimations, st.GaveUp, s.est.NextDeadline().Sub(s.now))
	}
}

// scripted answers the estimator by how many estimations it has finished:
// the first gets its first three resets answered, then none (cut short
// at 128); the second its resets answered and its probes dropped (a first
// round with no count: not cut, MTU kept, next at Period); from the third
// on no reset is answered.
type scripted struct {
	*Responder
	s      *sim
	resets int
}

func (r *scripted) HandlePayload(p []byte) {
	reset := len(p) == 1 && p[0] == 0
	switch n := r.s.est.Stats().Estimations; {
	case n == 0:
		if reset {
			if r.resets++; r.resets > 3 {
				return
			}
		}
	case n == 1:
		if !reset {
			return
		}
	default:
		if reset {
			return
		}
	}
	r.Responder.HandlePayload(p)
}

// N157: the waits after estimations cut short start again from about a
// second once an estimation ends otherwise (here a first round with no
// count, which keeps the MTU and waits Period).
func TestCutBackoffStartsAfresh(t *testing.T) {
	s := newSim(t, 1, Config{MaxPayload: 65505}, 1500, 0, 50*time.Millisecond)
	s.resp = &scripted{Responder: NewResponder(), s: s}
	s.estimate(time.Minute) // cut at 128
	if d := s.est.NextDeadline().Sub(s.now); d >= 3*time.Second/2 {
		t.Fatalf("after the first cut, next in %v, want about 1 s", d)
	}
	s.rerun(time.Minute) // its first round gets no count: Period
	if d := s.est.NextDeadline().Sub(s.now); d < DefaultPeriod/2 {
		t.Fatalf("after a first round with no count, next in %v, want Period", d)
	}
	s.rerun(DefaultPeriod + time.Minute) // cut at its first reset
	if d := s.est.NextDeadline().Sub(s.now); d < time.Second/2 || d >= 3*time.Second/2 {
		t.Fatalf("after a cut that follows an estimation not cut, next in %v, want about 1 s", d)
	}
}
