// Package rawcall decides when a system call that cannot block (a read or
// write on a non-blocking socket or timerfd) may skip the Go scheduler's
// bookkeeping and be made with syscall.RawSyscall.
//
// A call made with syscall.Syscall enters the scheduler's system-call
// state, and entering it wakes the runtime's monitor thread (sysmon) if
// that thread sleeps, which it does whenever every P was idle. A process
// that waits for each datagram, as one side of a request-and-reply
// exchange does, goes idle between any two of them, so each of its socket
// calls woke the monitor: a futex wake in the caller's path, and a thread
// that then runs and sleeps again, on the caller's own processor when the
// process has one. Raw calls are therefore made only with GOMAXPROCS 1
// (see Permit for why not with more); measurements are in the project's
// protocol notes (docs/protocol.md, N32).
//
// The monitor is what preempts a goroutine that runs too long, so it must
// not sleep through one for long. Its sleep ends at the runtime's next
// timer; a goroutine made runnable without a system call (by the network
// poller) and running on after raw calls would otherwise go unpreempted
// until then, up to a minute. So Permit keeps a timer pending at
// most Period ahead while it permits raw calls: the first call after a
// Period without any is made the standard way (it wakes the monitor) and
// starts that timer again, and the timer stops once a Period passes
// without calls. Such a goroutine is preempted at most Period after the
// runtime's own limit (10 ms), and an idle process has no timer running.
package rawcall

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Period bounds how long the runtime's monitor may sleep while raw calls
// are being made (see the package documentation).
const Period = 10 * time.Millisecond

// recheckPeriod is how often, at most, a process with more than one P
// reads GOMAXPROCS again, to notice it becoming 1.
const recheckPeriod = time.Second

// A gate is the state behind Permit.
type gate struct {
	used atomic.Bool // a call asked since the last tick
	raw  atomic.Bool // the ticker is pending and GOMAXPROCS was 1
	// recheck is when a process with more than one P reads GOMAXPROCS
	// again (now's scale); 0 in other states.
	recheck atomic.Int64
	period  time.Duration

	mu      sync.Mutex
	ticking bool        // the ticker is pending
	t       *time.Timer // the ticker, created by the first start
	// procs returns GOMAXPROCS, now a monotonic time above 0; fire, if
	// set, replaces t (tests).
	procs func() int
	now   func() int64
	fire  func()
}

var base = time.Now()

var std = gate{
	period: Period,
	procs:  func() int { return runtime.GOMAXPROCS(0) },
	now:    func() int64 { return int64(time.Since(base)) + 1 },
}

// Permit reports whether the caller may make its next system call, one
// that cannot block, with syscall.RawSyscall. When it reports false the
// caller makes it with syscall.Syscall, which wakes the runtime's monitor
// if it sleeps. It is safe for concurrent use; while calls are frequent it
// costs two atomic loads with GOMAXPROCS 1, and a clock reading more with
// more.
//
// Only a process with one P (GOMAXPROCS 1) makes raw calls, and one with
// more keeps no timer for them. With more than one P the monitor wakes on
// another processor, and on the project's machines its activity there
// shortened the wake-ups of a request-and-reply exchange across
// processors instead of delaying it (N32).
//
// The caller converts its pointers to uintptr in the call expression of
// syscall.RawSyscall or syscall.Syscall itself, as package unsafe asks, so
// this package offers no wrapper of its own around them.
func Permit() bool { return std.permit() }

func (g *gate) permit() bool {
	// used is set before raw is read: a tick that clears raw after this
	// read then finds used set and re-arms (tick).
	if !g.used.Load() {
		g.used.Store(true)
	}
	if g.raw.Load() {
		return true
	}
	if r := g.recheck.Load(); r != 0 && g.now() < r {
		return false
	}
	g.start()
	return false
}

// start reads GOMAXPROCS: with 1 it arms the ticker and permits raw calls
// from now on; with more it sets the time to read it again.
func (g *gate) start() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.raw.Load() {
		return
	}
	if g.procs() != 1 {
		g.recheck.Store(g.now() + int64(recheckPeriod))
		return
	}
	g.recheck.Store(0)
	if !g.ticking {
		g.ticking = true
		g.arm()
	}
	g.raw.Store(true) // after the timer is armed
}

// arm makes the ticker fire in one period; g.mu is held.
func (g *gate) arm() {
	switch {
	case g.fire != nil:
		g.fire()
	case g.t == nil:
		g.t = time.AfterFunc(g.period, g.tick)
	default:
		g.t.Reset(g.period)
	}
}

// tick runs a period after the ticker was armed: it keeps the ticker going
// if a call came meanwhile and GOMAXPROCS is still 1, and otherwise stops
// permitting raw calls.
func (g *gate) tick() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.raw.Store(false)
	if g.used.Swap(false) && g.procs() == 1 {
		g.raw.Store(true)
		g.arm()
		return
	}
	g.ticking = false
}

// Await asks Permit every 2 ms until it permits a raw call or timeout
// has passed, and reports whether it did: after GOMAXPROCS becomes 1, the
// gate notices within recheckPeriod. Tests that run with one P use it to
// make sure their calls are raw.
func Await(timeout time.Duration) bool {
	for deadline := time.Now().Add(timeout); !Permit(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}
