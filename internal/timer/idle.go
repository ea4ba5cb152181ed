package timer

import (
	"container/heap"
	"sync"
	"time"
)

// An IdleTimer hands a read role left free back to a background reader
// (Reader, StreamReader). Arm starts its delay unless it is armed already,
// so that a role left free at every round trip does not move a timer at
// every round trip (N26). The owner, when C fires, calls Fired, checks how
// long the role has really been free, and arms it again with ArmIn for
// what is left; a value may come on C after Stop or a move, which that
// check makes harmless. Its owner's lock guards it.
//
// The idle timers of one engine share one Alarm (IdleTimers): a kernel
// timer on Linux (N30), one for all the streams of a TCP server.
type IdleTimer struct {
	C     <-chan time.Time
	c     chan time.Time
	set   *IdleTimers
	delay time.Duration
	at    time.Time // when it fires; zero: not armed
	index int       // in set.heap; -1: not there
}

// IdleTimers fires many idle timers from one Alarm.
type IdleTimers struct {
	mu    sync.Mutex
	a     *Alarm
	heap  idleHeap
	armed time.Time // when a fires; zero: not armed
}

// NewIdleTimers returns an empty set of idle timers; kernel asks for a
// kernel timer where the system has one (see Alarm). Close releases it.
func NewIdleTimers(kernel bool) *IdleTimers {
	s := &IdleTimers{}
	s.a = newAlarmFunc(kernel, s.fire)
	return s
}

// NewTimer returns a stopped idle timer of the given delay.
func (s *IdleTimers) NewTimer(delay time.Duration) *IdleTimer {
	t := &IdleTimer{c: make(chan time.Time, 1), set: s, delay: delay, index: -1}
	t.C = t.c
	return t
}

// Close stops every timer of the set for good.
func (s *IdleTimers) Close() { s.a.Close() }

// fire sends on the channel of every timer due, and arms the alarm for
// the next one.
func (s *IdleTimers) fire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	s.armed = time.Time{}
	for len(s.heap) > 0 && !s.heap[0].at.After(now) {
		t := heap.Pop(&s.heap).(*IdleTimer)
		select {
		case t.c <- now:
		default:
		}
	}
	s.armLocked(now)
}

// armLocked makes the alarm fire by the earliest timer's time. An alarm
// due earlier is left as it is: it fires, finds nothing due, and is armed
// for what is.
func (s *IdleTimers) armLocked(now time.Time) {
	if len(s.heap) == 0 {
		return
	}
	at := s.heap[0].at
	if !s.armed.IsZero() && !s.armed.After(at) {
		return
	}
	s.armed = at
	s.a.Reset(at.Sub(now))
}

// set makes t fire at at, or stops it if at is zero.
func (s *IdleTimers) set(t *IdleTimer, at, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t.at = at
	switch {
	case at.IsZero():
		if t.index >= 0 {
			heap.Remove(&s.heap, t.index)
		}
	case t.index >= 0:
		heap.Fix(&s.heap, t.index)
	default:
		heap.Push(&s.heap, t)
	}
	s.armLocked(now)
}

// Delay returns the timer's delay.
func (t *IdleTimer) Delay() time.Duration { return t.delay }

// Arm makes the timer fire the delay from now unless it is armed: a role
// left free again and again (at every round trip of an echo) then moves
// no timer at all. The owner, when it fires, arms it for the rest of the
// delay counted from when the role was last left free, if the role is
// still free.
func (t *IdleTimer) Arm() {
	if t.Armed() {
		return
	}
	t.ArmIn(t.delay)
}

// ArmIn makes the timer fire d from now.
func (t *IdleTimer) ArmIn(d time.Duration) {
	now := time.Now()
	t.set.set(t, now.Add(d), now)
}

// Fired records that a value was received from C. A value that came
// before the timer was armed again leaves it armed.
func (t *IdleTimer) Fired() {
	t.set.mu.Lock()
	if t.index < 0 {
		t.at = time.Time{}
	}
	t.set.mu.Unlock()
}

// Armed reports whether the timer is due to fire.
func (t *IdleTimer) Armed() bool { return !t.at.IsZero() }

// Stop stops the timer.
func (t *IdleTimer) Stop() {
	t.set.set(t, time.Time{}, time.Now())
	select {
	case <-t.c:
	default:
	}
}

// idleHeap orders idle timers by when they fire.
type idleHeap []*IdleTimer

func (h idleHeap) Len() int           { return len(h) }
func (h idleHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h idleHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *idleHeap) Push(x any) {
	t := x.(*IdleTimer)
	t.index = len(*h)
	*h = append(*h, t)
}
func (h *idleHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	t.index = -1
	*h = old[:len(old)-1]
	return t
}
