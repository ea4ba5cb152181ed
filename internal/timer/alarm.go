package timer

import (
	"sync"
	"sync/atomic"
	"time"
)

// An Alarm is a one-shot timer that sends on C when it fires, for the
// engine's deadlines and its idle timer. Where the system has a timer the
// runtime's network poller can wait on (Linux's timerfd), an Alarm is that
// kernel timer, read by a goroutine of its own, instead of a Go timer.
//
// The reason is what a pending Go timer costs a process that blocks
// between datagrams: whenever one is due, the runtime's poller waits in
// epoll_pwait with a timeout, and the kernel programs and cancels a
// hardware timer around every such wait. A round trip of W1 blocks once on
// each side, and an engine always has a timer due within a few
// milliseconds (the idle timer's 5 ms, the first resend's 20 ms). On
// virtual machines, where programming the timer traps to the hypervisor,
// that was a quarter of W1's round trip (N30). A kernel timer is
// programmed when it is armed, not at each wait, and the poller then waits
// with no timeout, as it does for a bare socket.
//
// Unlike a time.Timer, a value may still come on C after Reset or Stop:
// the owner checks, when one comes, whether anything is due. C holds one
// value at most. Close releases the kernel timer and ends its goroutine;
// after it, the alarm does nothing.
type Alarm struct {
	C <-chan time.Time
	c chan time.Time
	f func()       // what firing does
	k *kernelTimer // nil: t
	t *time.Timer

	closed atomic.Bool
	done   chan struct{} // closed when k's goroutine ends
	once   sync.Once
}

// NewAlarm returns a stopped alarm; kernel asks for a kernel timer where
// the system has one (it costs a file descriptor and a goroutine).
func NewAlarm(kernel bool) *Alarm {
	a := &Alarm{c: make(chan time.Time, 1)}
	a.C = a.c
	a.f = a.send
	a.start(kernel)
	return a
}

// newAlarmFunc returns a stopped alarm that calls f, on a goroutine of
// its own, each time it fires, instead of sending on C.
func newAlarmFunc(kernel bool, f func()) *Alarm {
	a := &Alarm{f: f}
	a.start(kernel)
	return a
}

// start makes the timer, a kernel one if asked for and available.
func (a *Alarm) start(kernel bool) {
	if kernel {
		if k, err := newKernelTimer(); err == nil {
			a.k = k
			a.done = make(chan struct{})
			go a.run()
			return
		}
	}
	a.t = time.AfterFunc(time.Hour, a.fire)
	a.t.Stop()
}

// Kernel reports whether the alarm is a kernel timer.
func (a *Alarm) Kernel() bool { return a.k != nil }

// run waits for the kernel timer until Close.
func (a *Alarm) run() {
	defer close(a.done)
	for a.k.wait() {
		a.fire()
	}
}

func (a *Alarm) fire() {
	if !a.closed.Load() {
		a.f()
	}
}

func (a *Alarm) send() {
	select {
	case a.c <- time.Now():
	default:
	}
}

// drain removes a value waiting on C.
func (a *Alarm) drain() {
	select {
	case <-a.c:
	default:
	}
}

// Reset makes the alarm fire d from now, at once if d <= 0.
func (a *Alarm) Reset(d time.Duration) {
	if a.closed.Load() {
		return
	}
	a.drain()
	if a.k == nil {
		a.t.Reset(d)
		return
	}
	// A zero time stops a timerfd; the earliest it can fire is 1 ns.
	a.k.set(max(d, 1))
}

// Stop stops the alarm.
func (a *Alarm) Stop() {
	if a.k == nil {
		a.t.Stop()
	} else {
		a.k.set(0)
	}
	a.drain()
}

// Close stops the alarm for good and waits for its goroutine to end.
func (a *Alarm) Close() {
	a.once.Do(func() {
		a.closed.Store(true)
		a.drain()
		if a.k == nil {
			a.t.Stop()
			return
		}
		a.k.close()
		<-a.done
	})
}
