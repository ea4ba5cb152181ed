package urp

import "testing"

// A queue that is never quite drained keeps a place per item it holds,
// not per item pushed.
func TestFifoCompacts(t *testing.T) {
	var q fifo[int]
	q.push(0)
	for i := range 100000 {
		q.push(i + 1)
		if v, ok := q.pop(); !ok || v != i {
			t.Fatalf("pop %d: %d, %v", i, v, ok)
		}
	}
	if got := cap(q.items); got > 16 {
		t.Errorf("the queue grew to %d places, holding %d", got, len(q.items)-q.head)
	}
}
