package mtu

import (
	"testing"
	"time"
)

// Hold keeps an estimator between estimations from starting the next one
// when it is due, through HandleTimeout or AppendPayload, until Start;
// Due says when the next one would start (N108).
func TestHold(t *testing.T) {
	tc := newEstTest(t, Config{}, 10*time.Millisecond)
	if tc.e.Due(tc.now) {
		t.Fatal("due before the first Start")
	}
	tc.e.Hold() // before the first Start: nothing to hold
	tc.e.Start(tc.now)
	tc.e.Hold() // during an estimation: does nothing
	// No answer: the resets run out and the estimation gives up.
	for i := 0; tc.e.Stats().Searching; i++ {
		if i == 1000 {
			t.Fatal("still searching")
		}
		tc.poll()
		if d := tc.e.NextDeadline(); d > tc.now {
			tc.now = d
		}
	}
	next := tc.e.NextDeadline()
	if next == 0 {
		t.Fatal("no next estimation scheduled")
	}
	if tc.e.Due(next.Add(-1)) {
		t.Fatal("due before its time")
	}
	tc.now = next
	if !tc.e.Due(tc.now) {
		t.Fatal("not due at its time")
	}
	tc.e.Hold()
	if tc.e.Due(tc.now) || tc.e.NextDeadline() != 0 {
		t.Fatalf("held: due %v, deadline %v", tc.e.Due(tc.now), tc.e.NextDeadline())
	}
	tc.now = tc.now.Add(time.Hour)
	tc.wantIdle("held an hour")
	if tc.e.Stats().Searching {
		t.Fatal("a held estimator started by itself")
	}
	tc.e.Start(tc.now)
	if !tc.e.Stats().Searching {
		t.Fatal("Start did not start a held estimator")
	}
	if p := tc.poll(); !isReset(p) {
		t.Fatalf("after Start: payload %x, want a reset", p)
	}
}
