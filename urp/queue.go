package urp

// fifo is the queue of events a state machine holds until they are
// polled. Its array is reused once it is drained.
type fifo[T any] struct {
	items []T
	head  int
}

func (q *fifo[T]) push(v T) { q.items = append(q.items, v) }

// pop returns the oldest item, or false when there is none.
func (q *fifo[T]) pop() (T, bool) {
	var zero T
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
		return zero, false
	}
	v := q.items[q.head]
	q.items[q.head] = zero
	q.head++
	return v, true
}
