package fastnet

import (
	"math/rand/v2"
	"testing"

	"github.com/fastnet-engine/fastnet/clock"
)

// The endpoint's timer heap under random pushes, deadline changes and
// removals: every connection knows its index, and the earliest deadline
// is always at the top.
func TestTimerHeap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var h timerHeap
	var out []*conn
	for step := range 20000 {
		switch op := rng.IntN(3); {
		case op == 0 || len(h) == 0:
			c := &conn{heapIdx: -1, deadline: clock.Time(rng.IntN(1000) + 1)}
			if len(out) > 0 && rng.IntN(2) == 0 {
				c, out = out[len(out)-1], out[:len(out)-1]
				c.deadline = clock.Time(rng.IntN(1000) + 1)
			}
			h.push(c)
		case op == 1:
			i := rng.IntN(len(h))
			h[i].deadline = clock.Time(rng.IntN(1000) + 1)
			h.fix(i)
		default:
			i := rng.IntN(len(h))
			c := h[i]
			h.remove(i)
			if c.heapIdx != -1 {
				t.Fatalf("step %d: removed connection keeps index %d", step, c.heapIdx)
			}
			out = append(out, c)
		}
		for i, c := range h {
			if c.heapIdx != i {
				t.Fatalf("step %d: index %d holds a connection that says %d", step, i, c.heapIdx)
			}
			if i > 0 && h[(i-1)/2].deadline > c.deadline {
				t.Fatalf("step %d: heap order broken at %d", step, i)
			}
		}
	}
}
