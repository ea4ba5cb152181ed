// Package clock is the time source of the Fastnet engine.
//
// The engine's core never reads the time itself: every input carries a
// [Time] read by its driver (or by a simulator) from a [Clock]. [Real] reads
// the operating system's monotonic clock; [Manual] moves only when told,
// which makes tests deterministic and lets simulated networks run hours of
// protocol time in milliseconds.
package clock

import (
	"math"
	"sync"
	"time"
)

// Time is an instant on a monotonic clock, in nanoseconds since an arbitrary
// epoch. The zero Time means "unset" (no deadline), so clocks never return 0.
// Instants compare with < and >; durations between them are time.Duration.
type Time int64

// Add returns t+d. It saturates instead of overflowing: an instant past the
// clock's range reads as the largest (or smallest) Time, so a duration of
// math.MaxInt64 added to any instant means "never" rather than a deadline
// in the past.
func (t Time) Add(d time.Duration) Time {
	s := t + Time(d)
	switch {
	case d > 0 && s < t:
		return Never
	case d < 0 && s > t:
		return minTime
	}
	return s
}

// Never is the latest instant: a deadline that is never reached. Adding a
// duration too large for the clock's range to any Time gives Never.
const Never Time = 1<<63 - 1

// minTime is the earliest instant, where subtractions saturate.
const minTime Time = -1 << 63

// Scale returns d times n, n not negative, saturating as Add does: a
// product past the range reads as math.MaxInt64 (or math.MinInt64 for a
// negative d), so that a configured duration of "never" stays "never"
// however many times it is counted (N36).
func Scale(d time.Duration, n int64) time.Duration {
	switch {
	case n == 0 || d == 0:
		return 0
	case d > 0 && d > math.MaxInt64/time.Duration(n):
		return math.MaxInt64
	case d < 0 && d < math.MinInt64/time.Duration(n):
		return math.MinInt64
	}
	return d * time.Duration(n)
}

// Sub returns the duration t-u.
func (t Time) Sub(u Time) time.Duration { return time.Duration(t - u) }

// IsZero reports whether t is the zero (unset) Time.
func (t Time) IsZero() bool { return t == 0 }

// Before reports whether t is before u.
func (t Time) Before(u Time) bool { return t < u }

// After reports whether t is after u.
func (t Time) After(u Time) bool { return t > u }

// String formats t as seconds since the clock's epoch, for traces.
func (t Time) String() string { return time.Duration(t).String() }

// Earliest returns the earlier of a and b, treating the zero Time as "no
// deadline": Earliest(0, b) == b.
func Earliest(a, b Time) Time {
	switch {
	case a == 0:
		return b
	case b == 0:
		return a
	case b < a:
		return b
	}
	return a
}

// Epoch is the first instant a [Manual] clock reads when created with
// [NewManual](0). It is non-zero so that no reading is ever the unset Time.
const Epoch Time = Time(time.Hour)

// A Clock tells the time. Implementations are safe for concurrent use.
type Clock interface {
	Now() Time
}

// Real is the operating system's monotonic clock.
type Real struct {
	start time.Time
}

// NewReal returns a clock that reads the monotonic wall clock, starting at
// [Epoch].
func NewReal() *Real { return &Real{start: time.Now()} }

// Now returns the current instant.
func (r *Real) Now() Time { return Epoch + Time(time.Since(r.start)) }

// Deadline converts an instant of r to a time.Time, for timers and socket
// deadlines.
func (r *Real) Deadline(t Time) time.Time { return r.start.Add(time.Duration(t - Epoch)) }

// Manual is a clock that moves only when told. Its zero value is not usable;
// create one with [NewManual].
type Manual struct {
	mu sync.Mutex
	t  Time
}

// NewManual returns a manual clock reading start, or [Epoch] if start is 0.
func NewManual(start Time) *Manual {
	if start == 0 {
		start = Epoch
	}
	return &Manual{t: start}
}

// Now returns the clock's current reading.
func (m *Manual) Now() Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.t
}

// Advance moves the clock forward by d and returns the new reading. A
// negative d is ignored: a monotonic clock never goes back.
func (m *Manual) Advance(d time.Duration) Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	if d > 0 {
		m.t += Time(d)
	}
	return m.t
}

// Set moves the clock forward to t. Setting an earlier instant does nothing.
func (m *Manual) Set(t Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t > m.t {
		m.t = t
	}
}
