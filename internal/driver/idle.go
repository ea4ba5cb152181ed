package driver

import "time"

// An IdleTimer hands a read role left free back to a background reader
// (Reader, StreamReader). Arm restarts its delay but moves the timer only
// when it would fire in under half of it: a Go timer moved to become the
// next one due wakes the runtime's network poller or another thread, and
// a role left free at every round trip would pay that each time (N26).
// The owner, when C fires, calls Fired, checks how long the role has
// really been free, and arms it again with ArmIn for what is left. Its
// owner's lock guards it.
type IdleTimer struct {
	C     <-chan time.Time
	a     *Alarm
	delay time.Duration
	at    time.Time // when it fires; zero: not armed
}

// NewIdleTimer returns a stopped idle timer of the given delay, a Go
// timer.
func NewIdleTimer(delay time.Duration) *IdleTimer {
	return newIdleTimer(delay, NewAlarm(false))
}

// newIdleTimer returns a stopped idle timer of the given delay that uses
// a. A value may come on C after Stop or a move (see Alarm).
func newIdleTimer(delay time.Duration, a *Alarm) *IdleTimer {
	return &IdleTimer{C: a.C, a: a, delay: delay}
}

// Delay returns the timer's delay.
func (t *IdleTimer) Delay() time.Duration { return t.delay }

// Arm makes the timer fire at most the delay from now, and at least half
// of it.
func (t *IdleTimer) Arm() {
	now := time.Now()
	if !t.at.IsZero() && t.at.Sub(now) >= t.delay/2 {
		return
	}
	t.ArmIn(t.delay)
}

// ArmIn makes the timer fire d from now.
func (t *IdleTimer) ArmIn(d time.Duration) {
	t.at = time.Now().Add(d)
	t.a.Reset(d)
}

// Fired records that a value was received from C.
func (t *IdleTimer) Fired() { t.at = time.Time{} }

// Armed reports whether the timer is due to fire.
func (t *IdleTimer) Armed() bool { return !t.at.IsZero() }

// Stop stops the timer.
func (t *IdleTimer) Stop() {
	t.a.Stop()
	t.at = time.Time{}
}

// Close stops the timer for good, releasing its alarm.
func (t *IdleTimer) Close() {
	t.a.Close()
	t.at = time.Time{}
}
