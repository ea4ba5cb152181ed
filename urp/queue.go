package urp

// fifo is the queue of events a state machine holds until they are
// polled. Its array is reused once it is drained.
type fifo[T any] struct {
	items []T
	head  int
}

// push appends v. Before the array would grow, the part already popped is
// reclaimed once it is half of it, so that a queue never quite drained
// stays as large as what it holds.
func (q *fifo[T]) push(v T) {
	if len(q.items) == cap(q.items) && q.head > 0 && q.head >= cap(q.items)/2 {
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
	q.items = append(q.items, v)
}

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
