package mtu

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"
	"time"
)

// TestConvergence runs whole estimations over the simulated network: on
// paths whose largest datagram is 576, 1280, 1500 and 9000 bytes, with 0, 5
// and 20 % loss on each link and a 50 ms RTT, the estimate ends within 1 %
// of the largest payload that fits (path-2, D12) and is never above it.
// On the 1500-byte path without loss, full-size packets come within 5 s.
func TestConvergence(t *testing.T) {
	seeds := uint64(4)
	if testing.Short() {
		seeds = 1
	}
	for _, path := range []int{576, 1280, 1500, 9000} {
		for _, loss := range []float64{0, 0.05, 0.20} {
			t.Run(fmt.Sprintf("path %d loss %.0f%%", path, loss*100), func(t *testing.T) {
				for seed := range seeds {
					s := newSim(t, seed, Config{MaxPayload: 65505}, path, loss, 50*time.Millisecond)
					s.target = within1(s.fits())
					took := s.estimate(time.Minute)
					m := s.est.MTU()
					if m < s.target || m > s.fits() {
						t.Errorf("seed %d: MTU %d, want in [%d, %d]; rounds %v", seed, m, s.target, s.fits(), s.rounds)
					}
					if s.maxAbove != 0 {
						t.Errorf("seed %d: MTU reached %d, above the largest payload that fits, %d", seed, s.maxAbove, s.fits())
					}
					if path == 1500 && loss == 0 && s.fullAt.Sub(s.begin) > 5*time.Second {
						t.Errorf("seed %d: full size after %v, want within 5 s", seed, s.fullAt.Sub(s.begin))
					}
					t.Logf("seed %d: MTU %d after %v, full size after %v, %d rounds", seed, m, took, s.fullAt.Sub(s.begin), len(s.rounds))
				}
			})
		}
	}
}

// TestConvergenceReordering checks that replies delayed past the next
// round's reset ack (jitter up to twice the base RTT on each link) never
// lift the estimate above the path.
func TestConvergenceReordering(t *testing.T) {
	for seed := range uint64(4) {
		s := newSim(t, seed, Config{MaxPayload: 65505}, 1500, 0.05, 50*time.Millisecond)
		s.fwd.jitter, s.back.jitter = 100*time.Millisecond, 100*time.Millisecond
		s.rtt = 150 * time.Millisecond // the mean RTT, as a smoothed RTT would say
		s.target = within1(s.fits())
		s.estimate(time.Minute)
		if m := s.est.MTU(); m < s.target || m > s.fits() || s.maxAbove != 0 {
			t.Errorf("seed %d: MTU %d (highest above the path %d), want in [%d, %d]", seed, m, s.maxAbove, s.target, s.fits())
		}
	}
}

// TestPathChanges checks that a path that shrinks mid-connection, and then
// grows, is followed after the next period.
func TestPathChanges(t *testing.T) {
	const period = 10 * time.Minute
	s := newSim(t, 7, Config{MaxPayload: 65505, Period: period}, 1500, 0.05, 50*time.Millisecond)
	s.estimate(time.Minute)
	for _, path := range []int{1280, 576, 9000, 1500} {
		s.fwd.path, s.back.path = path, path
		before := s.est.MTU()
		// Until the next estimation, the MTU stays.
		s.run(period-time.Second, func() bool { return false })
		if m := s.est.MTU(); m != before {
			t.Fatalf("path %d: MTU moved from %d to %d before the period ended", path, before, m)
		}
		s.maxAbove = 0
		took := s.rerun(period + time.Minute)
		m := s.est.MTU()
		if m < within1(s.fits()) || m > s.fits() {
			t.Fatalf("path %d: MTU %d after the re-estimation, want within 1 %% of %d", path, m, s.fits())
		}
		t.Logf("path %d: MTU %d, %v after the path changed", path, m, took+period-time.Second)
	}
}

// TestSilentPeer checks D19's "a peer that never answers the reset leaves
// the MTU where it is", without a busy loop: the estimator wakes up once per
// reset, then sleeps until its next try (N44).
func TestSilentPeer(t *testing.T) {
	const period = time.Minute
	tests := []struct {
		name string
		set  func(s *sim)
	}{
		{"nothing comes back", func(s *sim) { s.back.loss = 1 }},
		{"nothing gets there", func(s *sim) { s.fwd.loss = 1 }},
		{"only resets are answered", func(s *sim) { s.fwd.path = 3 }}, // 1-byte resets fit, probes do not
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSim(t, 1, Config{MaxPayload: 65505, Period: period}, 1500, 0, 50*time.Millisecond)
			tt.set(s)
			s.start()
			s.run(3*period+30*time.Second, func() bool { return false })
			st := s.est.Stats()
			if m := s.est.MTU(); m != DefaultInitial {
				t.Fatalf("MTU %d, want %d", m, DefaultInitial)
			}
			// Estimations that measure nothing are tried again after
			// about 1 s, 2 s, 4 s, then every 8 s or so, each wait spread
			// by half of itself (N44): no more than one each 4 s.
			if limit := uint64((3*period + 30*time.Second) / (retryMax / 2)); st.Estimations < 4 || st.Estimations > limit+4 {
				t.Fatalf("%d estimations in 3 periods and a half, want 4 to %d: %+v", st.Estimations, limit+4, st)
			}
			// Per estimation: 10 resets and a give-up, or a reset, 100
			// probes and the final wait.
			perEstimation := DefaultResetTries + 1
			if st.ProbesSent > 0 {
				perEstimation = ProbesPerRound + 1 + 2
			}
			if s.wakeups > int(st.Estimations)*perEstimation {
				t.Fatalf("%d wakeups for %d estimations, want at most %d: deadlines must stay sparse", s.wakeups, st.Estimations, int(st.Estimations)*perEstimation)
			}
			if d := s.est.NextDeadline(); d.Sub(s.now) > 3*retryMax/2 {
				t.Fatalf("next deadline in %v, want a retry within %v", d.Sub(s.now), 3*retryMax/2)
			}
		})
	}
}

// hostile is a responder that answers with extra replies of its own.
type hostile struct {
	honest  *Responder // nil: answers nothing honestly
	onReset [][]byte   // replies added to each reset
	onProbe [][]byte   // replies added to each probe
	ackAll  bool       // acks every reset
	queue   [][]byte
}

func (h *hostile) HandlePayload(p []byte) {
	if h.honest != nil {
		h.honest.HandlePayload(p)
		for {
			b, ok := h.honest.AppendReply(nil)
			if !ok {
				break
			}
			h.queue = append(h.queue, b)
		}
	}
	if isReset(p) {
		if h.ackAll {
			h.queue = append(h.queue, ack)
		}
		h.queue = append(h.queue, h.onReset...)
		return
	}
	h.queue = append(h.queue, h.onProbe...)
}

func (h *hostile) AppendReply(b []byte) ([]byte, bool) {
	if len(h.queue) == 0 {
		return b, false
	}
	b = append(b, h.queue[0]...)
	h.queue = h.queue[1:]
	return b, true
}

// TestHostileResponder checks that a responder answering counts it never
// earned cannot lift the estimate: counts above the probes sent are
// ignored, and sizes whose probes do not get through still fail.
func TestHostileResponder(t *testing.T) {
	huge := [][]byte{count(math.MaxUint32), count(1 << 31), count(101), count(1000)}
	var burst [][]byte
	for i := range uint32(100) {
		burst = append(burst, count(i+1))
	}
	tests := []struct {
		name    string
		h       *hostile
		wantMTU func(s *sim) bool // nil: within 1 % of the path and never above it
		wantBad bool
	}{
		{"huge counts only", &hostile{ackAll: true, onProbe: huge},
			func(s *sim) bool { return s.est.MTU() == DefaultInitial }, true},
		{"honest and huge", &hostile{honest: NewResponder(), onProbe: huge}, nil, true},
		{"honest and 100 for every probe", &hostile{honest: NewResponder(), onProbe: [][]byte{count(100)}}, nil, true},
		{"every count at once after each reset", &hostile{ackAll: true, onReset: burst},
			// It needs no probe to lie, so it gets a count of 1
			// through each round (one probe has been sent when the
			// burst follows the ack) and 99 refused. No rule of the
			// protocol can tell a well-timed lie from an answer; a
			// liar only misleads the estimate of the path towards
			// itself. What must hold: MaxPayload bounds the estimate,
			// and the estimation ends.
			func(s *sim) bool { return s.est.MTU() <= s.est.cfg.MaxPayload }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSim(t, 1, Config{MaxPayload: 65505}, 1500, 0, 50*time.Millisecond)
			s.resp = tt.h
			s.estimate(time.Minute)
			st := s.est.Stats()
			if tt.wantMTU != nil {
				if !tt.wantMTU(s) {
					t.Fatalf("MTU %d; rounds %v", s.est.MTU(), s.rounds)
				}
			} else if m := s.est.MTU(); m < within1(s.fits()) || m > s.fits() || s.maxAbove != 0 {
				t.Fatalf("MTU %d (highest above the path %d), want within 1 %% of %d; rounds %v", m, s.maxAbove, s.fits(), s.rounds)
			}
			if tt.wantBad && st.BadCounts == 0 {
				t.Fatalf("no count was refused: %+v", st)
			}
			if st.Rounds > 60 {
				t.Fatalf("%d rounds", st.Rounds)
			}
			t.Logf("MTU %d after %d rounds, %d counts refused", s.est.MTU(), st.Rounds, st.BadCounts)
		})
	}
}

// TestGarbageReplies feeds the estimator random payloads of every short
// length besides the honest replies: the estimate is unaffected.
func TestGarbageReplies(t *testing.T) {
	s := newSim(t, 3, Config{MaxPayload: 65505}, 1280, 0, 50*time.Millisecond)
	g := &hostile{honest: NewResponder()}
	s.resp = g
	for n := range 9 {
		b := make([]byte, n)
		binary.LittleEndian.PutUint64(append(b, make([]byte, 8)...), s.rng.Uint64())
		if n == 1 {
			b[0] = 7
		}
		g.onProbe = append(g.onProbe, b)
	}
	s.estimate(time.Minute)
	if m := s.est.MTU(); m < within1(s.fits()) || m > s.fits() {
		t.Fatalf("MTU %d, want within 1 %% of %d", m, s.fits())
	}
}
