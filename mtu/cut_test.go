package mtu

import (
	"math"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
)

// busy is a responder that drops the resets that come while refuse says
// so, as a server answering as many estimations as it may does (N53), and
// answers everything else as the real one.
type busy struct {
	*Responder
	s      *sim
	refuse func(now clock.Time) bool
}

// busyFromFourth returns a busy responder for s that answers the first
// three resets (the rounds at 32, 64 and 128 bytes), then refuses those
// that come before until.
func busyFromFourth(s *sim, until clock.Time) *busy {
	answered := 0
	return &busy{NewResponder(), s, func(now clock.Time) bool {
		if answered < 3 {
			answered++
			return false
		}
		return now < until
	}}
}

func (b *busy) HandlePayload(p []byte) {
	if len(p) == 1 && p[0] == 0 && b.refuse(b.s.now) {
		return
	}
	b.Responder.HandlePayload(p)
}

// N157: an estimation whose later round's reset is never answered (its
// peer busy with other estimations, N53) used to end with the size
// measured so far, and the next began only a Period (10 min by default)
// later. It is now tried again about a second later, as one that measured
// nothing is (N44), then every 8 s or so: each try costs the peer its 10
// one-byte resets, and the MTU in use stays.
func TestCutShortEstimationTriedAgain(t *testing.T) {
	t.Run("busy for a while", func(t *testing.T) {
		s := newSim(t, 1, Config{MaxPayload: 65505}, 1500, 0, 50*time.Millisecond)
		s.resp = busyFromFourth(s, s.now.Add(5*time.Second))
		s.estimate(time.Minute)
		cutAt := s.now
		st := s.est.Stats()
		if st.GaveUp != 1 || s.est.MTU() != 128 {
			t.Fatalf("first estimation: gave up %d times, MTU %d; want cut short at 128", st.GaveUp, s.est.MTU())
		}
		// The next comes about a second later, past the busy time after
		// a try or two, and finds the path.
		s.run(time.Minute, func() bool { return s.est.MTU() >= 1480 && !s.est.Stats().Searching })
		if m := s.est.MTU(); m < 1480 || m > s.fits() {
			t.Fatalf("a minute on: MTU %d (%d estimations, %d given up), want within 1 %% of %d",
				m, s.est.Stats().Estimations, s.est.Stats().GaveUp, s.fits())
		}
		t.Logf("cut short at %v, at %d bytes %v later", cutAt.Sub(clock.Epoch), s.est.MTU(), s.now.Sub(cutAt))
		if d := s.est.NextDeadline().Sub(s.now); d != DefaultPeriod || s.est.Stats().Retrying {
			t.Fatalf("after the complete estimation the next is %v on (retrying %v), want Period %v", d, s.est.Stats().Retrying, DefaultPeriod)
		}
	})
	t.Run("busy for good", func(t *testing.T) {
		s := newSim(t, 1, Config{MaxPayload: 65505}, 1500, 0, 50*time.Millisecond)
		s.resp = busyFromFourth(s, clock.Time(math.MaxInt64))
		s.estimate(time.Minute)
		begin := s.now
		var starts []time.Duration
		for s.now.Sub(begin) < 30*time.Minute {
			n := s.est.Stats().Estimations
			s.run(30*time.Minute-s.now.Sub(begin), func() bool { return s.est.Stats().Estimations > n })
			starts = append(starts, s.now.Sub(begin))
		}
		st := s.est.Stats()
		if s.est.MTU() != 128 || !st.Retrying || st.ResetsSent != uint64(st.Estimations)*DefaultResetTries+3 {
			t.Fatalf("MTU %d, retrying %v, %d resets in %d estimations; want 128, true, %d resets a try",
				s.est.MTU(), st.Retrying, st.ResetsSent, st.Estimations, DefaultResetTries)
		}
		// The tries end about 8 s apart (the wait, spread by half of
		// itself, and the resets' 1.5 s), never a Period.
		for i := 4; i < len(starts)-1; i++ {
			if d := starts[i] - starts[i-1]; d < 5*time.Second || d > 14*time.Second {
				t.Fatalf("tries ended at %v: %v between two", starts, d)
			}
		}
	})
}
