// Package fifo holds the first-in first-out queue the project's state
// machines and drivers keep their pending items in: a slice that reuses
// its space, so that a queue that stays bounded stops allocating, and that
// reclaims what was taken before it grows, so that a queue its reader
// never quite empties stays as large as what it holds.
package fifo

// Queue is a first-in first-out queue. The zero value is empty and ready
// to use.
type Queue[T any] struct {
	buf  []T
	head int
}

// Len returns the number of queued values.
func (q *Queue[T]) Len() int { return len(q.buf) - q.head }

// Cap returns the number of values the queue's array holds.
func (q *Queue[T]) Cap() int { return cap(q.buf) }

// At returns the i-th queued value, 0 being the front.
func (q *Queue[T]) At(i int) *T { return &q.buf[q.head+i] }

// Push appends v at the back. Before the array would grow, the places
// already taken are reclaimed once they are half of it; when it must grow,
// it doubles, so that the arrays a queue grows through add up to about its
// final size (append grows a large slice by a quarter: five times as much).
func (q *Queue[T]) Push(v T) {
	if len(q.buf) == cap(q.buf) {
		q.grow()
	}
	q.buf = append(q.buf, v)
}

// grow makes room in a full array for one more value. It is rare, and
// kept out of line so that Push stays small enough to inline.
//
//go:noinline
func (q *Queue[T]) grow() {
	if q.head > 0 && q.head >= len(q.buf)/2 {
		n := copy(q.buf, q.buf[q.head:])
		clear(q.buf[n:])
		q.buf = q.buf[:n]
		q.head = 0
		return
	}
	buf := make([]T, len(q.buf), max(2*len(q.buf), 4))
	copy(buf, q.buf)
	q.buf = buf
}

// Skip is Pop without clearing the front value's place: for a T without
// references, or a value that stays alive elsewhere, or may stay alive
// until the place is written again or the queue Reset. Clearing costs
// stores (13 instructions a reliable message, for the sender's two
// queues of entries), and a write barrier while the garbage collector
// marks if T holds a reference.
func (q *Queue[T]) Skip() {
	q.head++
	if q.head == len(q.buf) {
		q.buf = q.buf[:0]
		q.head = 0
	}
}

// Pop removes the front value; the queue must not be empty.
func (q *Queue[T]) Pop() {
	var zero T
	q.buf[q.head] = zero
	q.head++
	if q.head == len(q.buf) {
		q.buf = q.buf[:0]
		q.head = 0
	}
}

// Take removes and returns the front value, or reports false when the
// queue is empty.
func (q *Queue[T]) Take() (T, bool) {
	if q.head == len(q.buf) {
		var zero T
		return zero, false
	}
	v := q.buf[q.head]
	q.Pop()
	return v, true
}

// Filter keeps the values for which keep returns true, in order.
func (q *Queue[T]) Filter(keep func(*T) bool) {
	n := 0
	for i := q.head; i < len(q.buf); i++ {
		if keep(&q.buf[i]) {
			q.buf[n] = q.buf[i]
			n++
		}
	}
	clear(q.buf[n:])
	q.buf = q.buf[:n]
	q.head = 0
}

// Reset empties the queue, releasing its array if it holds more than keep
// values.
func (q *Queue[T]) Reset(keep int) {
	if cap(q.buf) > keep {
		q.buf = nil
	} else {
		clear(q.buf[:cap(q.buf)]) // the places Skip left too
		q.buf = q.buf[:0]
	}
	q.head = 0
}
