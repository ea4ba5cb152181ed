package fifo

import (
	"slices"
	"testing"
)

// Values come out in the order they went in, through Take, Pop, At and
// Filter, and Reset empties the queue.
func TestOrder(t *testing.T) {
	var q Queue[int]
	for i := range 10 {
		q.Push(i)
	}
	if v, ok := q.Take(); !ok || v != 0 {
		t.Fatalf("Take: %d, %v", v, ok)
	}
	q.Pop()
	if q.Len() != 8 || *q.At(0) != 2 || *q.At(7) != 9 {
		t.Fatalf("Len %d, front %d, back %d", q.Len(), *q.At(0), *q.At(q.Len() - 1))
	}
	q.Filter(func(v *int) bool { return *v%2 == 0 })
	var got []int
	for v, ok := q.Take(); ok; v, ok = q.Take() {
		got = append(got, v)
	}
	if want := []int{2, 4, 6, 8}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	q.Push(1)
	q.Reset(0)
	if q.Len() != 0 || q.Cap() != 0 {
		t.Errorf("after Reset: Len %d, Cap %d", q.Len(), q.Cap())
	}
}

// A queue that is never quite drained keeps a place per item it holds,
// not per item pushed.
func TestCompacts(t *testing.T) {
	var q Queue[int]
	q.Push(0)
	for i := range 100000 {
		q.Push(i + 1)
		if v, ok := q.Take(); !ok || v != i {
			t.Fatalf("Take %d: %d, %v", i, v, ok)
		}
	}
	if got := q.Cap(); got > 16 {
		t.Errorf("the queue grew to %d places, holding %d", got, q.Len())
	}
}

// TestGrowthDoubles: a queue that grows to n values allocates arrays that
// add up to about 2n places, not the 5n of append's growth by a quarter,
// and none larger than twice what it holds.
func TestGrowthDoubles(t *testing.T) {
	var q Queue[int64]
	total, last := 0, 0
	const n = 100000
	for i := range n {
		q.Push(int64(i))
		if c := q.Cap(); c != last {
			total += c
			last = c
		}
	}
	if total > 2*last+64 || last > 2*n {
		t.Errorf("growing to %d values: arrays of %d places in all, the last %d; want at most twice the last, and it at most %d", n, total, last, 2*n)
	}
}

// Skip removes the front value as Pop does, leaving its place as it was
// (N117), and Pop clears the place, so that the queue does not keep what
// it refers to alive.
func TestSkipLeavesPlace(t *testing.T) {
	for _, tc := range []struct {
		name      string
		remove    func(*Queue[*int])
		wantStale bool
	}{
		{"Pop", (*Queue[*int]).Pop, false},
		{"Skip", (*Queue[*int]).Skip, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var q Queue[*int]
			a, b := new(int), new(int)
			q.Push(a)
			q.Push(b)
			tc.remove(&q)
			if q.Len() != 1 || *q.At(0) != b {
				t.Fatalf("Len %d, front %p, want 1, %p", q.Len(), *q.At(0), b)
			}
			if stale := q.buf[0] == a; stale != tc.wantStale {
				t.Errorf("place of the removed value still refers to it: %v, want %v", stale, tc.wantStale)
			}
			tc.remove(&q)
			if q.Len() != 0 || len(q.buf) != 0 || q.head != 0 {
				t.Errorf("emptied: Len %d, len(buf) %d, head %d", q.Len(), len(q.buf), q.head)
			}
			// Reset, keeping the array, clears what Skip left.
			q.Reset(64)
			for i, v := range q.buf[:cap(q.buf)] {
				if v != nil {
					t.Errorf("after Reset, place %d still refers to a value", i)
				}
			}
		})
	}
}
