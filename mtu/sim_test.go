package mtu

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
)

// This file is a tiny simulated network for the estimator tests: one
// Estimator on one side, a responder on the other, two one-way links with
// a path MTU, loss, delay, jitter and an optional bottleneck, all in
// virtual time and driven by a seeded source.
//
// A link's path is the largest datagram it carries. A datagram is the
// 2-byte channel id plus the payload (D12), so the largest payload that
// fits is path-2, and a payload of n bytes is dropped when n+2 > path.

// link is one direction of the simulated path.
type link struct {
	path   int           // largest datagram carried; larger ones are dropped
	loss   float64       // probability that a datagram is lost
	delay  time.Duration // one-way delay
	jitter time.Duration // extra delay, uniform in [0, jitter): reorders
	// Datagrams longer than stepAbove are lost with probability
	// loss+stepLoss: a path that gets worse above some size.
	stepAbove int
	stepLoss  float64
	rate      int           // bottleneck bytes per second, 0 = unlimited
	buffer    time.Duration // bottleneck queue, as time to drain at rate
	busy      clock.Time    // when the bottleneck has sent what it holds
}

// arrival returns when a datagram of n bytes sent at now arrives, or false
// if it is lost.
func (l *link) arrival(now clock.Time, n int, rng *rand.Rand) (clock.Time, bool) {
	if l.path > 0 && n > l.path {
		return 0, false
	}
	loss := l.loss
	if l.stepAbove > 0 && n > l.stepAbove {
		loss += l.stepLoss
	}
	if loss > 0 && rng.Float64() < loss {
		return 0, false
	}
	at := now
	if l.rate > 0 {
		start := max(now, l.busy)
		if start.Sub(now) > l.buffer {
			return 0, false // drop-tail
		}
		l.busy = start.Add(time.Duration(int64(n) * int64(time.Second) / int64(l.rate)))
		at = l.busy
	}
	at = at.Add(l.delay)
	if l.jitter > 0 {
		at = at.Add(time.Duration(rng.Int64N(int64(l.jitter))))
	}
	return at, true
}

// responder is what answers the estimator: the real Responder or a hostile
// one.
type responder interface {
	HandlePayload(payload []byte)
	AppendReply(b []byte) ([]byte, bool)
}

// packet is a datagram in flight.
type packet struct {
	at     clock.Time
	seq    int  // tie-break: equal arrival times keep send order
	toResp bool // estimator to responder; else responder to estimator
	data   []byte
}

type flight []packet

func (f flight) Len() int { return len(f) }
func (f flight) Less(i, j int) bool {
	if f[i].at != f[j].at {
		return f[i].at < f[j].at
	}
	return f[i].seq < f[j].seq
}
func (f flight) Swap(i, j int) { f[i], f[j] = f[j], f[i] }
func (f *flight) Push(x any)   { *f = append(*f, x.(packet)) }
func (f *flight) Pop() (x any) { n := len(*f) - 1; x = (*f)[n]; *f = (*f)[:n]; return x }
func (f flight) earliest() clock.Time {
	if len(f) == 0 {
		return 0
	}
	return f[0].at
}

// sim wires an Estimator to a responder through two links.
type sim struct {
	t         testing.TB
	now       clock.Time
	rng       *rand.Rand
	est       *Estimator
	resp      responder
	fwd, back link
	rtt       time.Duration // what the estimator is told
	inflight  flight
	seq       int
	steps     int   // times the loop moved the clock
	wakeups   int   // times it moved the clock for the estimator's deadline
	maxAbove  int   // the largest MTU seen above the forward path's limit, 0 if none
	probes    []int // the probes each round of rounds sent
	fullAt    clock.Time
	begin     clock.Time // when the last estimation was started by start
	target    int        // fullAt is the first instant MTU >= target
	rounds    []string   // "size:count+" or "size:count-" for each evaluated round
	minMTU    int        // the smallest MTU seen since start (or since a test set it)
	buf       []byte
}

// newSim returns a simulation of a symmetric path of largest datagram path,
// with the given loss on each link and round-trip time rtt.
func newSim(t testing.TB, seed uint64, cfg Config, path int, loss float64, rtt time.Duration) *sim {
	rng := rand.New(rand.NewPCG(seed, 0x73696d))
	if cfg.Rand == nil {
		cfg.Rand = rand.New(rand.NewPCG(seed, 0x70726f6265))
	}
	if cfg.FirstRoundProbes == 0 {
		cfg.FirstRoundProbes = ProbesPerRound // D19's round, unless a test asks for more
	}
	s := &sim{
		t:    t,
		now:  clock.Epoch,
		rng:  rng,
		est:  NewEstimator(cfg),
		resp: NewResponder(),
		fwd:  link{path: path, loss: loss, delay: rtt / 2},
		back: link{path: path, loss: loss, delay: rtt / 2},
		rtt:  rtt,
	}
	return s
}

// fits returns the largest payload the forward path carries.
func (s *sim) fits() int { return s.fwd.path - 2 }

// send puts a payload on a link.
func (s *sim) send(l *link, toResp bool, p []byte) {
	at, ok := l.arrival(s.now, len(p)+2, s.rng)
	if !ok {
		return
	}
	s.seq++
	heap.Push(&s.inflight, packet{at: at, seq: s.seq, toResp: toResp, data: append([]byte(nil), p...)})
}

// flush sends everything the estimator and the responder have due.
func (s *sim) flush() {
	for {
		var ok bool
		s.buf, ok = s.est.AppendPayload(s.buf[:0], s.now, s.rtt)
		if !ok {
			break
		}
		s.send(&s.fwd, true, s.buf)
	}
	for {
		var ok bool
		s.buf, ok = s.resp.AppendReply(s.buf[:0])
		if !ok {
			break
		}
		s.send(&s.back, false, s.buf)
	}
}

// check records the invariants after each step.
func (s *sim) check() {
	s.t.Helper()
	m := s.est.MTU()
	if m < s.est.cfg.Initial || m > s.est.cfg.MaxPayload {
		s.t.Fatalf("at %v: MTU %d outside [Initial %d, MaxPayload %d]", s.now, m, s.est.cfg.Initial, s.est.cfg.MaxPayload)
	}
	if m > s.fits() && m > s.maxAbove {
		s.maxAbove = m
	}
	if s.fullAt == 0 && s.target > 0 && m >= s.target {
		s.fullAt = s.now
	}
	if m < s.minMTU {
		s.minMTU = m
	}
	if st := s.est.Stats(); int(st.Rounds) > len(s.rounds) {
		if int(st.Rounds) > len(s.rounds)+1 {
			s.t.Fatalf("at %v: two rounds ended in one step; the trace would miss one", s.now)
		}
		sign := "-"
		if st.LastPass {
			sign = "+"
		}
		s.rounds = append(s.rounds, fmt.Sprintf("%d:%d%s", st.LastSize, st.LastCount, sign))
		s.probes = append(s.probes, st.LastProbes)
	}
	if d := s.est.NextDeadline(); d != 0 && d <= s.now {
		s.t.Fatalf("at %v: deadline %v is not in the future after the estimator was drained (busy loop)", s.now, d)
	}
}

// step moves the clock to the next event at or before limit and handles it;
// it returns false if nothing happens before limit.
func (s *sim) step(limit clock.Time) bool {
	s.t.Helper()
	next := clock.Earliest(s.est.NextDeadline(), s.inflight.earliest())
	if next == 0 || next > limit {
		s.now = max(s.now, limit)
		return false
	}
	if next == s.est.NextDeadline() {
		s.wakeups++
	}
	s.now = max(s.now, next)
	s.steps++
	for len(s.inflight) > 0 && s.inflight[0].at <= s.now {
		p := heap.Pop(&s.inflight).(packet)
		if p.toResp {
			s.resp.HandlePayload(p.data)
		} else {
			s.est.HandlePayload(s.now, p.data)
		}
		s.flush()
	}
	s.est.HandleTimeout(s.now)
	s.flush()
	s.check()
	return true
}

// run runs until d has passed or done returns true.
func (s *sim) run(d time.Duration, done func() bool) {
	s.t.Helper()
	limit := s.now.Add(d)
	for !done() && s.step(limit) {
	}
}

// start starts the estimator now and flushes its first reset.
func (s *sim) start() {
	s.begin = s.now
	s.minMTU = s.est.MTU()
	s.est.Start(s.now)
	s.flush()
}

// estimate starts an estimation and runs it to its end (at most limit).
// It returns the time it took.
func (s *sim) estimate(limit time.Duration) time.Duration {
	s.t.Helper()
	begin := s.now
	n := s.est.Stats().Estimations
	s.start()
	s.run(limit, func() bool { return s.est.Stats().Estimations > n })
	if s.est.Stats().Estimations == n {
		s.t.Fatalf("estimation not finished after %v", limit)
	}
	return s.now.Sub(begin)
}

// rerun lets the estimator start its next estimation on its own, after
// Period, and runs it to its end. It returns the time that took.
func (s *sim) rerun(limit time.Duration) time.Duration {
	s.t.Helper()
	begin := s.now
	n := s.est.Stats().Estimations
	s.run(limit, func() bool { return s.est.Stats().Estimations > n })
	if s.est.Stats().Estimations == n {
		s.t.Fatalf("re-estimation not finished after %v", limit)
	}
	return s.now.Sub(begin)
}
