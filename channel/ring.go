package channel

import (
	"math/bits"

	"github.com/fastnet-engine/fastnet/clock"
)

// slot is one place of the receive queue: a queued packet, or nothing.
type slot struct {
	data    []byte // the chunk, in a buffer from the pool; nil if empty
	arrived clock.Time
	rel     Seq
	flags   uint8 // FlagReliable | FlagStart
}

func (s *slot) reliable() bool { return s.flags&FlagReliable != 0 }
func (s *slot) start() bool    { return s.flags&FlagStart != 0 }

// seqRing is the receive queue: a sequence buffer indexed by the distance of
// a packet's sequence number from the ignore number, so inserting, finding
// and consuming packets costs no search and no shifting. Logical index i
// holds sequence number G+1+i. Its capacity is a power of two, at least
// baseRing, and grows on demand up to the receive window. Two bitmaps, one
// of occupied slots and one of occupied unreliable slots, find the queue
// head and the newest unreliable packet without visiting empty slots one
// by one.
type seqRing struct {
	slots   []slot
	present []uint64 // bit per slot: occupied
	unrel   []uint64 // bit per slot: occupied by an unreliable packet
	head    int      // physical index of logical 0
	span    int      // logical slots at and beyond span are empty

	base        []slot // the baseRing-sized arrays, kept for reuse
	basePresent []uint64
	baseUnrel   []uint64
}

// baseRing is the capacity a ring starts with and returns to when it
// empties; beyond it, the ring's slots are charged against the receive
// memory limits.
const baseRing = 64

func (r *seqRing) cap() int { return len(r.slots) }

func (r *seqRing) phys(i int) int { return (r.head + i) & (len(r.slots) - 1) }

// at returns the slot at logical index i, which must be below cap.
func (r *seqRing) at(i int) *slot { return &r.slots[r.phys(i)] }

// has reports whether logical index i is occupied.
func (r *seqRing) has(i int) bool {
	if i >= r.span {
		return false
	}
	p := r.phys(i)
	return r.present[p>>6]&(1<<(p&63)) != 0
}

// ensure makes room for logical index i, growing the ring to a power of two
// above i.
func (r *seqRing) ensure(i int) {
	if r.slots == nil {
		r.base = make([]slot, baseRing)
		r.basePresent = make([]uint64, baseRing/64)
		r.baseUnrel = make([]uint64, baseRing/64)
		r.slots, r.present, r.unrel = r.base, r.basePresent, r.baseUnrel
	}
	if i < len(r.slots) {
		return
	}
	n := ringCapFor(i)
	slots := make([]slot, n)
	present := make([]uint64, n/64)
	unrel := make([]uint64, n/64)
	for j := range r.span {
		p := r.phys(j)
		slots[j] = r.slots[p]
		if r.present[p>>6]&(1<<(p&63)) != 0 {
			present[j>>6] |= 1 << (j & 63)
		}
		if r.unrel[p>>6]&(1<<(p&63)) != 0 {
			unrel[j>>6] |= 1 << (j & 63)
		}
	}
	if len(r.slots) == baseRing {
		clear(r.base)
		clear(r.basePresent)
		clear(r.baseUnrel)
	}
	r.slots, r.present, r.unrel, r.head = slots, present, unrel, 0
}

// ringCapFor returns the ring capacity that holds logical index i.
func ringCapFor(i int) int {
	if i < baseRing {
		return baseRing
	}
	return 1 << bits.Len(uint(i))
}

// set fills logical index i, which ensure has made room for.
func (r *seqRing) set(i int, s slot) {
	p := r.phys(i)
	r.slots[p] = s
	r.present[p>>6] |= 1 << (p & 63)
	if !s.reliable() {
		r.unrel[p>>6] |= 1 << (p & 63)
	}
	r.span = max(r.span, i+1)
}

// take empties logical index i and returns what it held.
func (r *seqRing) take(i int) slot {
	p := r.phys(i)
	s := r.slots[p]
	r.slots[p] = slot{}
	r.present[p>>6] &^= 1 << (p & 63)
	r.unrel[p>>6] &^= 1 << (p & 63)
	return s
}

// advance moves logical 0 forward by k places (the ignore number moved by
// k); the slots passed must be empty.
func (r *seqRing) advance(k int) {
	if r.slots == nil {
		return
	}
	r.head = r.phys(k)
	r.span = max(r.span-k, 0)
}

// shrink returns an empty ring to its base arrays.
func (r *seqRing) shrink() {
	r.span = 0
	r.head = 0
	if len(r.slots) > baseRing {
		r.slots, r.present, r.unrel = r.base, r.basePresent, r.baseUnrel
	}
}

// first returns the lowest occupied logical index at or after from, or -1.
func (r *seqRing) first(from int) int {
	if from >= r.span {
		return -1
	}
	a := r.phys(from)
	n := r.span - from
	end := min(a+n, len(r.slots))
	if p := firstSet(r.present, a, end); p >= 0 {
		return from + p - a
	}
	if a+n > len(r.slots) {
		if p := firstSet(r.present, 0, a+n-len(r.slots)); p >= 0 {
			return from + len(r.slots) - a + p
		}
	}
	return -1
}

// lastUnreliable returns the highest logical index holding an unreliable
// packet, or -1.
func (r *seqRing) lastUnreliable() int {
	if r.span == 0 {
		return -1
	}
	a := r.head
	n := r.span
	if a+n > len(r.slots) {
		if p := lastSet(r.unrel, 0, a+n-len(r.slots)); p >= 0 {
			return len(r.slots) - a + p
		}
	}
	if p := lastSet(r.unrel, a, min(a+n, len(r.slots))); p >= 0 {
		return p - a
	}
	return -1
}

// firstSet returns the lowest set bit of bm in [a, b), or -1.
func firstSet(bm []uint64, a, b int) int {
	for w := a >> 6; w<<6 < b; w++ {
		x := bm[w]
		if w == a>>6 {
			x &= ^uint64(0) << (a & 63)
		}
		if x != 0 {
			p := w<<6 + bits.TrailingZeros64(x)
			if p < b {
				return p
			}
			return -1
		}
	}
	return -1
}

// lastSet returns the highest set bit of bm in [a, b), or -1.
func lastSet(bm []uint64, a, b int) int {
	if a >= b {
		return -1
	}
	for w := (b - 1) >> 6; w >= a>>6; w-- {
		x := bm[w]
		if w == (b-1)>>6 && (b&63) != 0 {
			x &= 1<<(b&63) - 1
		}
		if x != 0 {
			p := w<<6 + 63 - bits.LeadingZeros64(x)
			if p >= a {
				return p
			}
			return -1
		}
	}
	return -1
}
