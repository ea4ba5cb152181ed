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

// seqRing is the receive queue: a sequence buffer indexed by the distance
// of a packet's sequence number from the ignore number, so inserting,
// finding and consuming packets costs no search and no shifting. Logical
// index i holds sequence number G+1+i. The ring covers exactly the logical
// range from its first occupied place to its last, so places outside it
// (packets lost before the queue head, or evicted at either end) cost
// nothing. Its capacity is a power of two, at least minRing; it grows on
// demand (up to the receive window), keeps the largest arrays of up to
// baseRing places it grew for, and past those shrinks when the range it
// needs, from logical index 0 (where new packets arrive) to its last
// packet, falls to an eighth of it, or returns to those arrays when it
// empties, but only once the packets set and taken since it grew have
// paid for the growth (debt, N39): a single packet can make the range
// jump to the window's width, and without the hysteresis a peer parking
// one packet near the window's far edge and completing messages at its
// near edge made the ring grow and shrink at every message. Bitmaps of occupied places, of places holding
// reliable or unreliable packets and of places holding starts of messages
// find the queue head, the next message, the newest unreliable packet and
// counts without visiting places one by one.
type seqRing struct {
	slots []slot
	bm    [numBitmaps][]uint64
	head  int // physical index of ring position 0
	off   int // logical index of ring position 0, the first occupied place
	span  int // ring positions [0, span) cover every occupied place; the last is occupied

	base   []slot // the arrays of up to baseRing places, kept for reuse
	baseBM [numBitmaps][]uint64

	// debt is the places allocated beyond baseRing by growing (the
	// increase) and by shrinking to arrays larger than baseRing, less one
	// for each packet set or taken since; the ring shrinks only at zero.
	// So the places allocated are at most twice the packets set and
	// taken plus the window (N39).
	debt int
}

// The bitmaps of a seqRing.
const (
	bmPresent = iota // occupied
	bmRel            // occupied by a reliable packet
	bmUnrel          // occupied by an unreliable packet
	bmStart          // occupied by a start of message
	numBitmaps
)

// baseRing is the largest capacity a ring keeps when it empties; every
// place is charged against the receive memory limits (bytesWith).
// minRing is the capacity a ring starts with: a channel holding one packet
// of a message begun needs a few places, not baseRing (N25).
const (
	baseRing = 64
	minRing  = 4
)

// arraysFor returns empty arrays for a ring of capacity n.
func arraysFor(n int) ([]slot, [numBitmaps][]uint64) {
	var bm [numBitmaps][]uint64
	w := max(n/64, 1)
	words := make([]uint64, numBitmaps*w) // one allocation for all of them
	for k := range bm {
		bm[k] = words[k*w : (k+1)*w : (k+1)*w]
	}
	return make([]slot, n), bm
}

// bytes returns what the arrays the ring holds cost (N49).
func (r *seqRing) bytes() int {
	if r.slots == nil {
		return 0
	}
	return r.bytesWith(len(r.slots))
}

// bytesWith returns what the ring's arrays cost once its capacity is n
// places: n places, and its base arrays beside them if n is past baseRing
// (relayout keeps them for when it shrinks).
func (r *seqRing) bytesWith(n int) int {
	b := ringBytes(n)
	if n > baseRing {
		b += ringBytes(max(len(r.base), minRing))
	}
	return b
}

// capWith returns the capacity the ring has after ensure(i).
func (r *seqRing) capWith(i int) int {
	if r.slots == nil {
		return minRing
	}
	if r.span == 0 {
		return len(r.slots)
	}
	lo, hi := min(r.off, i), max(r.off+r.span, i+1)
	if hi-lo <= len(r.slots) {
		return len(r.slots)
	}
	return capFor(hi - lo)
}

// capFor returns the capacity of a ring covering n places.
func capFor(n int) int {
	if n <= minRing {
		return minRing
	}
	return 1 << bits.Len(uint(n-1))
}

// ringCapFor returns the capacity of a ring covering n places.
func ringCapFor(n int) int {
	if n <= baseRing {
		return baseRing
	}
	return 1 << bits.Len(uint(n-1))
}

// extent returns the number of places a ring covering [lo, hi] and the
// occupied places needs; lo > hi adds nothing.
func (r *seqRing) extent(lo, hi int) int {
	if r.span > 0 {
		if lo > hi {
			lo, hi = r.off, r.off+r.span-1
		} else {
			lo, hi = min(lo, r.off), max(hi, r.off+r.span-1)
		}
	}
	return max(hi-lo+1, 0)
}

// phys returns the physical index of logical index i, which must lie
// within the ring's capacity.
func (r *seqRing) phys(i int) int { return (r.head + i - r.off) & (len(r.slots) - 1) }

// at returns the slot at logical index i, which must be occupied.
func (r *seqRing) at(i int) *slot { return &r.slots[r.phys(i)] }

// has reports whether logical index i is occupied.
func (r *seqRing) has(i int) bool {
	if p := i - r.off; p < 0 || p >= r.span {
		return false
	}
	p := r.phys(i)
	return r.bm[bmPresent][p>>6]&(1<<(p&63)) != 0
}

// ensure makes room for logical index i.
func (r *seqRing) ensure(i int) {
	if r.slots == nil {
		r.base, r.baseBM = arraysFor(minRing)
		r.slots, r.bm = r.base, r.baseBM
	}
	if r.span == 0 {
		r.off = i
		return
	}
	lo, hi := min(r.off, i), max(r.off+r.span, i+1)
	if hi-lo <= len(r.slots) {
		if i < r.off {
			// Extend backwards: ring position 0 moves to i.
			r.head = (r.head - (r.off - i)) & (len(r.slots) - 1)
			r.span += r.off - i
			r.off = i
		}
		return
	}
	r.relayout(lo, capFor(hi-lo))
}

// relayout moves the ring into new arrays of capacity n whose position 0
// is logical index lo, at or before the first occupied place.
func (r *seqRing) relayout(lo, n int) {
	var slots []slot
	var bm [numBitmaps][]uint64
	fromBase := len(r.slots) <= baseRing // arrays of up to baseRing places are the base
	switch {
	case n <= len(r.base) && !fromBase:
		slots, bm = r.base, r.baseBM
	case n <= baseRing:
		// The base grows, and keeps its new size.
		slots, bm = arraysFor(n)
	default:
		slots, bm = arraysFor(n)
		if n > len(r.slots) {
			r.debt += n - len(r.slots)
		} else {
			r.debt += n
		}
	}
	shift := r.off - lo
	for j := range r.span {
		p := (r.head + j) & (len(r.slots) - 1)
		q := j + shift
		slots[q] = r.slots[p]
		for k := range bm {
			if r.bm[k][p>>6]&(1<<(p&63)) != 0 {
				bm[k][q>>6] |= 1 << (q & 63)
			}
		}
	}
	switch {
	case n <= baseRing && len(slots) != len(r.base):
		r.base, r.baseBM = slots, bm
	case fromBase:
		// Grown past the base: clean it for when the ring shrinks.
		clear(r.base)
		for k := range r.baseBM {
			clear(r.baseBM[k])
		}
	}
	r.slots, r.bm = slots, bm
	r.head, r.off, r.span = 0, lo, r.span+shift
}

// set fills logical index i, which ensure has made room for.
func (r *seqRing) set(i int, s slot) {
	p := r.phys(i)
	r.slots[p] = s
	w, b := p>>6, uint64(1)<<(p&63)
	r.bm[bmPresent][w] |= b
	if s.reliable() {
		r.bm[bmRel][w] |= b
	} else {
		r.bm[bmUnrel][w] |= b
	}
	if s.start() {
		r.bm[bmStart][w] |= b
	}
	r.span = max(r.span, i-r.off+1)
	r.pay()
}

// pay counts a packet set or taken against the debt.
func (r *seqRing) pay() {
	if r.debt > 0 {
		r.debt--
	}
}

// take empties logical index i and returns what it held. The ring then
// covers only the occupied places left, and shrinks if it covers a quarter
// of its capacity or less.
func (r *seqRing) take(i int) slot {
	p := r.phys(i)
	s := r.slots[p]
	r.slots[p] = slot{}
	for k := range r.bm {
		r.bm[k][p>>6] &^= 1 << (p & 63)
	}
	switch i - r.off {
	case 0:
		r.advance(0)
	case r.span - 1:
		if l := r.last(bmPresent); l >= 0 {
			r.span = l - r.off + 1
		} else {
			r.span = 0
		}
	}
	r.pay()
	// New packets arrive from logical index 0 on, so the ring must cover
	// [0, off+span) before long: measured from 0, not from off, a ring
	// whose only packet lies far ahead does not shrink to regrow at the
	// next packet near the window's start.
	if len(r.slots) > baseRing && r.span > 0 && r.debt == 0 && ringCapFor(r.off+r.span) <= len(r.slots)/8 {
		r.relayout(r.off, max(ringCapFor(r.off+r.span), len(r.base)))
	}
	return s
}

// advance renumbers the logical indices after the ignore number moved k
// places forward; the places it passed must be empty. The ring then starts
// at its first occupied place.
func (r *seqRing) advance(k int) {
	r.off -= k
	if r.span == 0 {
		return
	}
	f := r.first(max(r.off, 0))
	if f < 0 {
		r.span = 0
		return
	}
	d := f - r.off
	r.head = (r.head + d) & (len(r.slots) - 1)
	r.span -= d
	r.off = f
}

// shrink returns an empty ring to its base arrays once its debt is paid;
// until then it keeps its arrays.
func (r *seqRing) shrink() {
	r.span, r.head, r.off = 0, 0, 0
	if len(r.slots) > baseRing && r.debt == 0 {
		r.slots, r.bm = r.base, r.baseBM
	}
}

// reset empties the ring and releases every array and the debt.
func (r *seqRing) reset() { *r = seqRing{} }

// first returns the lowest occupied logical index at or after from, or -1.
func (r *seqRing) first(from int) int { return r.next(bmPresent, from, true) }

// next returns the lowest logical index at or after from whose bit in
// bitmap k is set (or clear, if set is false), or -1.
func (r *seqRing) next(k, from int, set bool) int {
	from = max(from, r.off)
	if from >= r.off+r.span {
		return -1
	}
	a := r.phys(from)
	n := r.off + r.span - from
	end := min(a+n, len(r.slots))
	if p := firstBit(r.bm[k], a, end, set); p >= 0 {
		return from + p - a
	}
	if a+n > len(r.slots) {
		if p := firstBit(r.bm[k], 0, a+n-len(r.slots), set); p >= 0 {
			return from + len(r.slots) - a + p
		}
	}
	return -1
}

// last returns the highest logical index whose bit in bitmap k is set, or
// -1.
func (r *seqRing) last(k int) int { return r.prev(k, r.off+r.span) }

// prev returns the highest logical index less than i whose bit in bitmap
// k is set, or -1.
func (r *seqRing) prev(k, i int) int {
	n := min(i, r.off+r.span) - r.off
	if n <= 0 {
		return -1
	}
	a := r.head
	if a+n > len(r.slots) {
		if p := lastSet(r.bm[k], 0, a+n-len(r.slots)); p >= 0 {
			return r.off + len(r.slots) - a + p
		}
	}
	if p := lastSet(r.bm[k], a, min(a+n, len(r.slots))); p >= 0 {
		return r.off + p - a
	}
	return -1
}

// count returns the number of logical indices in [from, to) whose bit in
// bitmap k is set.
func (r *seqRing) count(k, from, to int) int {
	from, to = max(from, r.off), min(to, r.off+r.span)
	if from >= to {
		return 0
	}
	a := r.phys(from)
	n := to - from
	c := countBits(r.bm[k], a, min(a+n, len(r.slots)))
	if a+n > len(r.slots) {
		c += countBits(r.bm[k], 0, a+n-len(r.slots))
	}
	return c
}

// firstBit returns the lowest bit of bm in [a, b) that is set (or clear,
// if set is false), or -1.
func firstBit(bm []uint64, a, b int, set bool) int {
	for w := a >> 6; w<<6 < b; w++ {
		x := bm[w]
		if !set {
			x = ^x
		}
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

// countBits returns the number of set bits of bm in [a, b).
func countBits(bm []uint64, a, b int) int {
	c := 0
	for w := a >> 6; w<<6 < b; w++ {
		x := bm[w]
		if w == a>>6 {
			x &= ^uint64(0) << (a & 63)
		}
		if w == (b-1)>>6 && b&63 != 0 {
			x &= 1<<(b&63) - 1
		}
		c += bits.OnesCount64(x)
	}
	return c
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
