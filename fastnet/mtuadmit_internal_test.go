package fastnet

import (
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
)

// N53: with every place among the answered estimations taken, a peer's
// reset takes the place held longest once it has been held responderHold,
// and no other: the places given later keep theirs until they have been
// held as long. A place that changes hands leaves its peer out of the
// answered estimations, so its next reset asks again.
func TestAdmitResponderHandsOverOldestPlace(t *testing.T) {
	e := &Endpoint{}
	e.cfg.MTU.MaxConcurrent = 4 // two places
	reset, probe := []byte{0}, []byte{7, 7, 7}
	a, b, c := &conn{state: 1}, &conn{state: 1}, &conn{state: 1}
	t0 := clock.Epoch.Add(time.Second)
	at := func(d time.Duration) clock.Time { return t0.Add(d) }
	// a and b stay busy: a probe every 100 ms keeps each place from
	// going idle (responderIdle).
	busy := func(from, to time.Duration, cs ...*conn) {
		for d := from; d < to; d += 100 * time.Millisecond {
			for _, x := range cs {
				e.admitResponder(at(d), x, probe)
			}
		}
	}
	if !e.admitResponder(at(0), a, reset) {
		t.Fatal("a refused with both places free")
	}
	busy(0, 5*time.Second, a)
	if !e.admitResponder(at(5*time.Second), b, reset) {
		t.Fatal("b refused with one place free")
	}
	busy(5*time.Second, 10*time.Second, a, b)
	if e.admitResponder(at(10*time.Second-time.Millisecond), c, reset) {
		t.Fatal("c admitted before any place was held responderHold")
	}
	if !e.admitResponder(at(10*time.Second), c, reset) {
		t.Fatal("c refused once a's place was held responderHold")
	}
	if a.respActive || !b.respActive || !c.respActive {
		t.Fatalf("after c took a place: active a %v, b %v, c %v; want a's place to have gone", a.respActive, b.respActive, c.respActive)
	}
	if len(e.responders) != 2 {
		t.Fatalf("%d places held, want 2", len(e.responders))
	}
	busy(10*time.Second, 15*time.Second, b, c)
	if e.admitResponder(at(15*time.Second-time.Millisecond), a, reset) {
		t.Fatal("a took a place back before b's was held responderHold")
	}
	if !e.admitResponder(at(15*time.Second), a, reset) {
		t.Fatal("a refused once b's place was held responderHold")
	}
	if !a.respActive || b.respActive || !c.respActive {
		t.Fatalf("after a took b's place: active a %v, b %v, c %v", a.respActive, b.respActive, c.respActive)
	}
}
