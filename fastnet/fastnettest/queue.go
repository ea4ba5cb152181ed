package fastnettest

import (
	"math/bits"

	"github.com/fastnet-engine/fastnet/clock"
)

// A packet is one datagram in flight on a link, or a bottleneck's event.
type packet struct {
	l     *link
	epoch uint32 // l.epoch when sent; a packet of an older epoch was cut off
	b     []byte // from the pool
	kind  packetKind
	bn    *Bottleneck // kindEnter, kindDepart
	gen   uint32      // kindDepart: the bottleneck's gen when scheduled
	hop   *natHop     // set if the datagram crosses a NAT (nat.go)
}

// packetKind says what happens when a packet comes out of the flight queue.
type packetKind uint8

const (
	kindArrive packetKind = iota // the datagram arrives at l.dst
	kindEnter                    // the datagram reaches bn's queue
	kindDepart                   // bn's datagram being sent has gone (no datagram)
)

// flightQueue holds the packets in flight, by arrival time and then by
// insertion order, so that ties are deterministic.
//
// The packets stay in slots; the heap orders small pointer-free entries that
// name them, which keeps sifting cheap. The heap is written out rather than
// built on container/heap so that a push does not box its entry in an
// interface (an allocation per packet).
type flightQueue struct {
	heap  []entry
	slots []packet
	free  []int32 // unused slots
}

type entry struct {
	at   clock.Time // arrival
	seq  uint64     // insertion order
	slot int32
}

// before reports whether e comes out of the queue before o.
func (e *entry) before(o *entry) bool {
	return e.at < o.at || e.at == o.at && e.seq < o.seq
}

func (q *flightQueue) len() int { return len(q.heap) }

// peek returns the first packet, which stays in the queue; the queue must
// not be empty.
func (q *flightQueue) peek() *packet { return &q.slots[q.heap[0].slot] }

// next returns the arrival time of the first packet; the queue must not be
// empty.
func (q *flightQueue) next() clock.Time { return q.heap[0].at }

// push adds p, arriving at at; seq must be above that of every packet pushed
// before.
func (q *flightQueue) push(at clock.Time, seq uint64, p packet) {
	var slot int32
	if n := len(q.free); n > 0 {
		slot = q.free[n-1]
		q.free = q.free[:n-1]
		q.slots[slot] = p
	} else {
		slot = int32(len(q.slots))
		q.slots = append(q.slots, p)
	}
	e := entry{at: at, seq: seq, slot: slot}
	q.heap = append(q.heap, e)
	h := q.heap
	i := len(h) - 1
	for i > 0 {
		parent := (i - 1) / 2
		if !e.before(&h[parent]) {
			break
		}
		h[i] = h[parent]
		i = parent
	}
	h[i] = e
}

// pop removes the first packet and returns it with its arrival time; the
// queue must not be empty.
func (q *flightQueue) pop() (clock.Time, packet) {
	h := q.heap
	top := h[0]
	last := len(h) - 1
	x := h[last]
	h = h[:last]
	q.heap = h
	if last > 0 {
		// Move the hole at the root down to where x belongs.
		i := 0
		for {
			c := 2*i + 1
			if c >= last {
				break
			}
			if r := c + 1; r < last && h[r].before(&h[c]) {
				c = r
			}
			if !h[c].before(&x) {
				break
			}
			h[i] = h[c]
			i = c
		}
		h[i] = x
	}
	p := q.slots[top.slot]
	q.slots[top.slot] = packet{} // drop the references
	q.free = append(q.free, top.slot)
	return top.at, p
}

// minClass is the size class of the smallest pooled buffer, 64 bytes.
const minClass = 6

// bufPool recycles the byte slices of packets in flight, in power-of-two
// size classes, so that a long run does not churn the garbage collector.
type bufPool struct {
	free [bits.UintSize][][]byte
}

func sizeClass(n int) int {
	if n <= 1<<minClass {
		return minClass
	}
	return bits.Len(uint(n - 1))
}

// get returns a slice of length n.
func (p *bufPool) get(n int) []byte {
	c := sizeClass(n)
	if f := p.free[c]; len(f) > 0 {
		b := f[len(f)-1]
		f[len(f)-1] = nil
		p.free[c] = f[:len(f)-1]
		return b[:n]
	}
	return make([]byte, n, 1<<c)
}

// put returns a slice obtained from get.
func (p *bufPool) put(b []byte) {
	c := sizeClass(cap(b))
	p.free[c] = append(p.free[c], b[:0])
}
