package timer

import (
	"runtime"
	"testing"
	"time"
)

// alarmKinds runs f on a kernel alarm (where the system has one) and on a
// Go timer.
func alarmKinds(t *testing.T, f func(t *testing.T, a *Alarm)) {
	for _, kernel := range []bool{true, false} {
		name := "go"
		if kernel {
			name = "kernel"
		}
		t.Run(name, func(t *testing.T) {
			a := NewAlarm(kernel)
			defer a.Close()
			if kernel && runtime.GOOS == "linux" && !a.Kernel() {
				t.Fatal("no kernel timer on Linux")
			}
			if !kernel && a.Kernel() {
				t.Fatal("a Go timer asked for, a kernel timer made")
			}
			f(t, a)
		})
	}
}

// fired waits up to within for a value on a.C.
func fired(a *Alarm, within time.Duration) bool {
	select {
	case <-a.C:
		return true
	case <-time.After(within):
		return false
	}
}

func TestAlarmFires(t *testing.T) {
	alarmKinds(t, func(t *testing.T, a *Alarm) {
		start := time.Now()
		a.Reset(20 * time.Millisecond)
		if !fired(a, 5*time.Second) {
			t.Fatal("armed for 20ms, did not fire in 5s")
		}
		if d := time.Since(start); d < 20*time.Millisecond {
			t.Fatalf("armed for 20ms, fired after %v", d)
		}
		// Reset with a duration of 0 or less fires at once.
		a.Reset(0)
		if !fired(a, 5*time.Second) {
			t.Fatal("Reset(0) did not fire")
		}
		a.Reset(-time.Second)
		if !fired(a, 5*time.Second) {
			t.Fatal("Reset(-1s) did not fire")
		}
	})
}

func TestAlarmMoves(t *testing.T) {
	alarmKinds(t, func(t *testing.T, a *Alarm) {
		// Moved later: it does not fire at the first time.
		a.Reset(10 * time.Millisecond)
		a.Reset(time.Hour)
		if fired(a, 100*time.Millisecond) {
			t.Fatal("moved from 10ms to an hour, fired within 100ms")
		}
		// Moved earlier: it fires at the new time.
		a.Reset(time.Millisecond)
		if !fired(a, 5*time.Second) {
			t.Fatal("moved from an hour to 1ms, did not fire in 5s")
		}
	})
}

func TestAlarmStop(t *testing.T) {
	alarmKinds(t, func(t *testing.T, a *Alarm) {
		a.Reset(10 * time.Millisecond)
		a.Stop()
		if fired(a, 100*time.Millisecond) {
			t.Fatal("stopped, fired")
		}
		// A value waiting on C when Stop comes is dropped.
		a.Reset(0)
		time.Sleep(50 * time.Millisecond)
		a.Stop()
		if fired(a, 50*time.Millisecond) {
			t.Fatal("a value that came before Stop was still on C")
		}
		// Armed again after Stop, it fires.
		a.Reset(time.Millisecond)
		if !fired(a, 5*time.Second) {
			t.Fatal("armed after Stop, did not fire")
		}
	})
}

// TestAlarmClose checks that Close ends the kernel timer's goroutine, may
// be called twice, and that the alarm does nothing afterwards.
func TestAlarmClose(t *testing.T) {
	before := runtime.NumGoroutine()
	var as []*Alarm
	for range 20 {
		a := NewAlarm(true)
		a.Reset(time.Hour)
		as = append(as, a)
	}
	for _, a := range as {
		a.Close()
		a.Close()
		a.Reset(time.Millisecond) // after Close: nothing, no panic
		a.Stop()
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines before, %d after closing 20 alarms", before, runtime.NumGoroutine())
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, a := range as {
		if fired(a, 20*time.Millisecond) {
			t.Fatal("a closed alarm fired")
		}
	}
}

// TestIdleTimers checks that timers of one set fire at their own times,
// that Stop and a move later hold one back, and that a set's Close stops
// them all.
func TestIdleTimers(t *testing.T) {
	for _, kernel := range []bool{true, false} {
		s := NewIdleTimers(kernel)
		const n = 50
		ts := make([]*IdleTimer, n)
		start := time.Now()
		for i := range ts {
			ts[i] = s.NewTimer(time.Hour)
			ts[i].ArmIn(time.Duration(n-i) * time.Millisecond) // the last first
		}
		ts[7].Stop()
		ts[8].ArmIn(time.Hour)
		if !ts[8].Armed() || ts[7].Armed() {
			t.Fatalf("kernel %v: Armed: moved %v, stopped %v", kernel, ts[8].Armed(), ts[7].Armed())
		}
		for i, it := range ts {
			select {
			case at := <-it.C:
				it.Fired()
				if i == 7 || i == 8 {
					t.Fatalf("kernel %v: timer %d fired", kernel, i)
				}
				if want := start.Add(time.Duration(n-i) * time.Millisecond); at.Before(want) {
					t.Fatalf("kernel %v: timer %d fired at %v, %v early", kernel, i, at.Sub(start), want.Sub(at))
				}
				if it.Armed() {
					t.Fatalf("kernel %v: timer %d still armed after Fired", kernel, i)
				}
			case <-time.After(200 * time.Millisecond):
				if i != 7 && i != 8 {
					t.Fatalf("kernel %v: timer %d did not fire", kernel, i)
				}
			}
		}
		// A timer armed again before its value was taken stays armed.
		ts[0].ArmIn(0)
		<-ts[0].C
		ts[0].ArmIn(time.Hour)
		ts[0].Fired()
		if !ts[0].Armed() {
			t.Fatalf("kernel %v: armed for an hour, Fired for an earlier value: not armed", kernel)
		}
		// Arm leaves an armed timer as it is, and arms a stopped one
		// for its delay.
		a := s.NewTimer(40 * time.Millisecond)
		a.ArmIn(10 * time.Millisecond)
		a.Arm()
		if d := time.Until(a.at); d > 10*time.Millisecond {
			t.Fatalf("kernel %v: due in 10ms of 40, Arm moved it to %v", kernel, d)
		}
		a.Stop()
		a.Arm()
		if d := time.Until(a.at); d < 30*time.Millisecond {
			t.Fatalf("kernel %v: stopped, Arm armed it for %v, not 40ms", kernel, d)
		}
		a.ArmIn(30 * time.Millisecond)
		s.Close()
		select {
		case <-a.C:
			t.Fatalf("kernel %v: a timer fired after its set's Close", kernel)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
