package channel

// Seq is a packet or reliable sequence number (D5, D7). Valid values are
// MinSeq..MaxSeq; after MaxSeq comes MinSeq. Sequence numbers are compared
// only with [Seq.Before] and [Distance] (serial number arithmetic, D6),
// never with <.
type Seq int32

// The range of sequence numbers (D5).
const (
	// MinSeq is the lowest valid sequence number, the one after MaxSeq.
	MinSeq Seq = -10000
	// MaxSeq is the highest valid sequence number, the largest 24-bit
	// two's complement integer.
	MaxSeq Seq = 8388607
	// SeqSpace is M, the number of valid sequence numbers.
	SeqSpace = int(MaxSeq) - int(MinSeq) + 1
)

// index maps s onto 0..SeqSpace-1: i(s) = s + 10000 (D6).
func (s Seq) index() int { return int(s) - int(MinSeq) }

// fromIndex is the inverse of index for i in 0..SeqSpace-1.
func fromIndex(i int) Seq { return Seq(i + int(MinSeq)) }

// Valid reports whether s is a valid sequence number, MinSeq..MaxSeq (D5).
func (s Seq) Valid() bool { return s >= MinSeq && s <= MaxSeq }

// Next returns the sequence number after s: s+1, or MinSeq after MaxSeq.
func (s Seq) Next() Seq {
	if s >= MaxSeq {
		return MinSeq
	}
	return s + 1
}

// Prev returns the sequence number before s: s-1, or MaxSeq before MinSeq.
func (s Seq) Prev() Seq {
	if s <= MinSeq {
		return MaxSeq
	}
	return s - 1
}

// Add returns the sequence number n places after s, wrapping as Next does.
// A negative n counts backwards.
func (s Seq) Add(n int) Seq {
	if uint(n) >= uint(SeqSpace) || !s.Valid() {
		return s.addSlow(n)
	}
	// Forward from a valid number by less than the space, as almost
	// always: one wrap at most, without the divisions.
	if i := int(s) + n; i <= int(MaxSeq) {
		return Seq(i)
	}
	return Seq(int(s) + n - SeqSpace)
}

// addSlow is Add for a negative n, one of the space or more, or an
// invalid s: kept apart so that Add, on its common path, is inlined.
func (s Seq) addSlow(n int) Seq {
	i := (s.index() + n%SeqSpace) % SeqSpace
	if i < 0 {
		i += SeqSpace
	}
	return fromIndex(i)
}

// Before reports whether s comes before t (D6): with i(s) = s + 10000,
// 0 < (i(t) - i(s)) mod M < M/2. Exactly one of s.Before(t), t.Before(s) and
// s == t holds, except for the pairs exactly M/2 apart, where neither comes
// before the other.
func (s Seq) Before(t Seq) bool {
	d := Distance(s, t)
	return d > 0 && d < SeqSpace/2
}

// Distance returns how many places to lies after from: (i(to) - i(from)) mod
// M, in [0, M).
func Distance(from, to Seq) int {
	d := to.index() - from.index()
	if uint(d+SeqSpace-1) > uint(2*SeqSpace-2) {
		// Not within (-M, M), which two valid numbers always are:
		// the remainder, which Distance takes on every packet and
		// every ack, costs a multiplication and its fix-ups.
		d %= SeqSpace
	}
	if d < 0 {
		d += SeqSpace
	}
	return d
}
