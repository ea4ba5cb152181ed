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
	t     *time.Timer
	delay time.Duration
	at    time.Time // when it fires; zero: not armed
}

// NewIdleTimer returns a stopped idle timer of the given delay.
func NewIdleTimer(delay time.Duration) *IdleTimer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &IdleTimer{C: t.C, t: t, delay: delay}
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
	t.t.Reset(d)
}

// Fired records that a value was received from C.
func (t *IdleTimer) Fired() { t.at = time.Time{} }

// Armed reports whether the timer is due to fire.
func (t *IdleTimer) Armed() bool { return !t.at.IsZero() }

// Stop stops the timer.
func (t *IdleTimer) Stop() {
	t.t.Stop()
	t.at = time.Time{}
}
