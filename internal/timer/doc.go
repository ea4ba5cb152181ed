// Package timer holds the drivers' timers: an Alarm, one deadline that a
// kernel timer (Linux timerfd) fires where the system has one, and
// IdleTimers, a set of short idle delays that one Alarm serves. The
// driver's engine fires the endpoint's deadlines with an Alarm (N30), and
// hands a read role left free to a background reader with an IdleTimer.
package timer
