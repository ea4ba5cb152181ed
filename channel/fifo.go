package channel

// fifo is a first-in first-out queue on a slice that reuses its space, so a
// queue that stays bounded stops allocating.
type fifo[T any] struct {
	buf  []T
	head int
}

// len returns the number of queued values.
func (q *fifo[T]) len() int { return len(q.buf) - q.head }

// at returns the i-th queued value, 0 being the front.
func (q *fifo[T]) at(i int) *T { return &q.buf[q.head+i] }

// push appends v at the back.
func (q *fifo[T]) push(v T) {
	if len(q.buf) == cap(q.buf) && q.head > 0 && q.head >= len(q.buf)/2 {
		n := copy(q.buf, q.buf[q.head:])
		clear(q.buf[n:])
		q.buf = q.buf[:n]
		q.head = 0
	}
	q.buf = append(q.buf, v)
}

// pop removes the front value.
func (q *fifo[T]) pop() {
	var zero T
	q.buf[q.head] = zero
	q.head++
	if q.head == len(q.buf) {
		q.buf = q.buf[:0]
		q.head = 0
	}
}

// filter keeps the values for which keep returns true, in order.
func (q *fifo[T]) filter(keep func(*T) bool) {
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

// reset empties the queue, releasing its array if it is larger than keep.
func (q *fifo[T]) reset(keep int) {
	if cap(q.buf) > keep {
		q.buf = nil
	} else {
		clear(q.buf)
		q.buf = q.buf[:0]
	}
	q.head = 0
}
