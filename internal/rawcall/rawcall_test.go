package rawcall

import (
	"testing"
	"time"
)

// TestGate walks the gate through its states with a clock and a ticker
// the test moves and fires itself.
func TestGate(t *testing.T) {
	armed := 0
	procs := 1
	var now int64 = 1
	g := &gate{
		period: Period,
		procs:  func() int { return procs },
		now:    func() int64 { return now },
		fire:   func() { armed++ },
	}
	steps := []struct {
		name      string
		procs     int
		advance   time.Duration // move the clock first
		tick      bool          // fire the ticker instead of asking
		want      bool          // what Permit reports (asking)
		wantArmed int
	}{
		{"first call is made the standard way and starts the ticker", 1, 0, false, false, 1},
		{"then calls are raw", 1, 0, false, true, 1},
		{"and stay raw", 1, 0, false, true, 1},
		{"a tick after calls keeps the ticker going", 1, 0, true, false, 2},
		{"calls after it are raw", 1, 0, false, true, 2},
		{"a tick after a call re-arms", 1, 0, true, false, 3},
		{"a tick after none stops", 1, 0, true, false, 3},
		{"the next call is made the standard way and restarts", 1, 0, false, false, 4},
		{"then raw again", 1, 0, false, true, 4},
		{"GOMAXPROCS raised: calls stay raw until the tick", 2, 0, false, true, 4},
		{"the tick notices it and stops", 2, 0, true, false, 4},
		{"with more than one P no call is raw", 2, 0, false, false, 4},
		{"nor later", 2, recheckPeriod / 2, false, false, 4},
		{"GOMAXPROCS back to 1: not raw before the recheck", 1, 0, false, false, 4},
		{"raw from the recheck on, with the ticker going", 1, recheckPeriod, false, false, 5},
		{"and after it", 1, 0, false, true, 5},
	}
	for _, s := range steps {
		procs = s.procs
		now += int64(s.advance)
		if s.tick {
			g.tick()
		} else if got := g.permit(); got != s.want {
			t.Fatalf("%s: permit = %v, want %v", s.name, got, s.want)
		}
		if armed != s.wantArmed {
			t.Fatalf("%s: ticker armed %d times, want %d", s.name, armed, s.wantArmed)
		}
		if g.raw.Load() && !g.ticking {
			t.Fatalf("%s: raw calls permitted with no ticker pending", s.name)
		}
	}
}

// TestTickerStops checks the real ticker: it runs while calls come and
// stops a period or two after the last one.
func TestTickerStops(t *testing.T) {
	g := &gate{period: time.Millisecond, procs: func() int { return 1 }, now: std.now}
	g.permit()
	raw := 0
	for range 20 {
		if g.permit() {
			raw++
		}
		time.Sleep(200 * time.Microsecond)
	}
	if raw == 0 {
		t.Error("no call was permitted raw while calls came every 200 µs")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		g.mu.Lock()
		ticking := g.ticking
		g.mu.Unlock()
		if !ticking {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the ticker still runs 10 s after the last call")
		}
		time.Sleep(time.Millisecond)
	}
	if g.permit() {
		t.Error("the first call after the ticker stopped was permitted raw")
	}
}
