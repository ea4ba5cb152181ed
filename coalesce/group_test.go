package coalesce

import (
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
)

func TestDecide(t *testing.T) {
	const mci = 25 * time.Millisecond
	t0 := clock.Epoch
	tests := []struct {
		name string
		g    Group
		now  clock.Time
		want Action
	}{
		// Rule 1 (D7, D11): a blocked head waits, whatever else is true.
		{"D11.1 blocked reliable waits", Group{Blocked: true, Reliable: true, Start: true, Complete: true}, t0, Wait},
		{"D11.1 blocked unreliable never expires", Group{Blocked: true, Start: true, Newest: t0}, t0.Add(time.Hour), Wait},
		{"D11.1 blocked malformed waits", Group{Blocked: true, Start: true, Malformed: true}, t0, Wait},
		{"D11.1 blocked non-start waits", Group{Blocked: true, Reliable: true}, t0, Wait},
		// Rule 2.
		{"D11.2 complete reliable delivers", Group{Reliable: true, Start: true, Complete: true, Newest: t0}, t0, Deliver},
		{"D11.2 complete unreliable delivers", Group{Start: true, Complete: true, Newest: t0}, t0, Deliver},
		{"D11.2 complete unreliable delivers even when old", Group{Start: true, Complete: true, Newest: t0}, t0.Add(time.Hour), Deliver},
		{"D11.2 incomplete reliable waits forever", Group{Reliable: true, Start: true, Newest: t0}, t0.Add(time.Hour), Wait},
		// Rule 3.
		{"D11.3 incomplete unreliable waits within the MCI", Group{Start: true, Newest: t0}, t0.Add(mci - 1), Wait},
		{"D11.3 incomplete unreliable expires at the MCI", Group{Start: true, Newest: t0}, t0.Add(mci), Expire},
		{"D11.3 incomplete unreliable expires after the MCI", Group{Start: true, Newest: t0}, t0.Add(time.Second), Expire},
		// Malformed groups (D11, last paragraph).
		{"malformed unreliable is discarded", Group{Start: true, Complete: true, Malformed: true, Newest: t0}, t0, Discard},
		{"malformed reliable fails", Group{Reliable: true, Start: true, Complete: true, Malformed: true}, t0, Fail},
		{"malformed incomplete reliable fails", Group{Reliable: true, Start: true, Malformed: true}, t0, Fail},
		{"unblocked reliable head without start fails", Group{Reliable: true, Complete: true}, t0, Fail},
		{"unblocked unreliable head without start is discarded at once", Group{Newest: t0}, t0, Discard},
		{"unreliable head without start after a gap waits for its start", Group{Gap: true, Newest: t0}, t0.Add(mci - 1), Wait},
		{"unreliable head without start after a gap waits, even if complete", Group{Gap: true, Complete: true, Newest: t0}, t0, Wait},
		{"unreliable head without start after a gap expires", Group{Gap: true, Newest: t0}, t0.Add(mci), Expire},
		{"reliable head without start fails even after a gap", Group{Gap: true, Reliable: true}, t0, Fail},
		{"unreliable head without start after a gap: Malformed means nothing", Group{Gap: true, Malformed: true, Newest: t0}, t0, Wait},
		{"D11.2 complete after a gap delivers", Group{Gap: true, Start: true, Complete: true}, t0, Deliver},
		// D23: nothing stalls forever.
		{"unblockable unreliable head is discarded", Group{Blocked: true, Unblockable: true, Start: true}, t0, Discard},
		{"unblockable reliable head fails", Group{Blocked: true, Unblockable: true, Reliable: true, Start: true}, t0, Fail},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Decide(tc.g, tc.now, mci); got != tc.want {
				t.Errorf("Decide(%+v) = %v, want %v", tc.g, got, tc.want)
			}
		})
	}
}

func TestActionString(t *testing.T) {
	for a, want := range map[Action]string{Wait: "Wait", Deliver: "Deliver", Expire: "Expire", Discard: "Discard", Fail: "Fail", 99: "Action(?)"} {
		if got := a.String(); got != want {
			t.Errorf("Action(%d).String() = %q, want %q", a, got, want)
		}
	}
}
