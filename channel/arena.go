package channel

// Arena hands out the buffers of delivered messages, carving small ones
// out of shared blocks: receiving many small messages then costs one
// allocation per block rather than one per message. Each buffer is the
// application's once delivered, with its capacity equal to its length, so
// that appending to it never touches its neighbours. A buffer the
// application keeps keeps its whole block alive, as a small object keeps
// its span in Go's own allocator; a block is no larger than such a span.
// The zero value is ready to use; a nil *Arena allocates every buffer
// alone. An Arena is not safe for concurrent use.
//
// With Reuse set, the Arena also takes its blocks back: Lend carves a
// buffer, Owner finds the Block it was carved out of, and once every
// buffer carved out of a block has been given back with Release, the
// block is carved again. The buffers are then lent, not given: whoever
// holds one must stop using it before the Arena next carves, and the
// caller of Release decides when that is (N103).
type Arena struct {
	block []byte // the block carved, when Reuse is not set
	cur   *Block // the block carved, when it is
	free  []*Block
	// recent holds the blocks carved last, cur among them, for Owner:
	// block number k (counting from 0) at recent[k%arenaRecent], nrec
	// blocks so far, the last Owner found number hint, which is found.
	recent     [arenaRecent]*Block
	nrec, hint int
	found      *Block
	// Reuse makes the Arena take back the blocks whose buffers were all
	// released. Set it before the first copy.
	Reuse bool
}

// arenaRecent is how many of the blocks carved last Owner looks in: more
// than the 64 KiB of small messages one datagram can carry.
const arenaRecent = 32

// A Block is one of the blocks an Arena with Reuse set carves buffers out
// of. Its fields are the Arena's own.
type Block struct {
	mem  *[ArenaBlock]byte
	used int  // bytes carved out of mem
	live int  // buffers carved out of it and not yet released
	done bool // no more buffers will be carved out of it
}

const (
	// ArenaBlock is the size of an Arena's blocks.
	ArenaBlock = 4096
	// ArenaMax is the largest buffer carved out of a block; larger ones
	// are allocated alone.
	ArenaMax = 256
	// ArenaKeep is how many free blocks an Arena with Reuse set keeps for
	// reuse (256 KiB); more are left to the garbage collector.
	ArenaKeep = 64
)

// Copy returns a copy of p, in a buffer of its own or carved out of the
// current block: the caller's in either case, Reuse or not (Lend lends).
func (a *Arena) Copy(p []byte) []byte {
	c := a.Alloc(len(p))
	copy(c, p)
	return c
}

// Alloc returns the buffer of n bytes that Copy would copy n bytes into,
// for the caller to fill: of its own or carved out of the current block,
// the caller's either way, Reuse or not. It is Copy without the copy, for
// a caller that copies small messages one after the other in a loop
// without calling memmove for each: the call costs more than the copy,
// and everything the loop holds in registers is stored and loaded again
// around it.
func (a *Arena) Alloc(n int) []byte {
	if a == nil || n == 0 || n > ArenaMax {
		return make([]byte, n)
	}
	return a.slice(n)
}

// slice carves n bytes, at most ArenaBlock, out of the current block of
// an Arena without Reuse, or out of a new one if it has not the room.
func (a *Arena) slice(n int) []byte {
	if cap(a.block)-len(a.block) < n {
		a.block = make([]byte, 0, ArenaBlock)
	}
	// Re-sliced, not appended to: an append writes the block's reference
	// back, which costs a write barrier while the garbage collector marks
	// (N117).
	i := len(a.block)
	a.block = a.block[:i+n]
	return a.block[i : i+n : i+n]
}

// Take returns p's copy as a delivered message carries it: lent if the
// Arena reuses its blocks (Lend), else the caller's (Copy). A nil Arena
// copies p into a buffer of its own.
func (a *Arena) Take(p []byte) []byte {
	if a != nil && a.Reuse {
		return a.Lend(p)
	}
	return a.Copy(p)
}

// Lend returns a copy of p. If the Arena reuses its blocks and p is
// small, the copy is carved out of the current block and lent: its
// capacity runs on to the end of the block, so that Owner can find the
// block, and whoever hands it on trims it to its length first.
// Otherwise the copy is the caller's, as from Copy.
func (a *Arena) Lend(p []byte) []byte {
	if a == nil {
		return append(make([]byte, 0, len(p)), p...)
	}
	b, c := a.Carve(len(p))
	if b != nil {
		// Carved last, so ending where b's carving now ends, and
		// taken up to the end of the block.
		c = b.mem[b.used-len(p):]
	}
	copy(c, p)
	return c[:len(p)]
}

// Carve carves a buffer of n bytes for the caller to fill, trimmed to its
// length as whoever hands on a lent buffer trims it, and returns it with
// the Block it was carved out of, the one Owner would find: Lend without
// the copy and without Owner's search, for a caller that lends the
// buffers of many small messages in a loop. The Block is nil, and the
// buffer the caller's, if the Arena does not reuse its blocks or n is 0
// or above ArenaMax.
func (a *Arena) Carve(n int) (*Block, []byte) {
	// One comparison for 0 < n <= ArenaMax and one for the room left.
	if b := a.cur; b != nil && uint(n-1) < ArenaMax && n <= ArenaBlock-b.used {
		i := b.used
		b.used = i + n
		b.live++
		return b, b.mem[i:b.used:b.used]
	}
	return a.carve(n)
}

// Room returns how many bytes Span can carve out of the current block:
// a span longer than that starts a block of its own.
func (a *Arena) Room() int {
	if a.Reuse {
		if b := a.cur; b != nil {
			return ArenaBlock - b.used
		}
		return 0
	}
	return cap(a.block) - len(a.block)
}

// Span carves n bytes, 0 < n <= ArenaBlock, for the caller to cut k
// buffers out of: a run of small messages that lay one after the other
// in a datagram, copied at once with what lies between them and each
// then sliced out with its capacity equal to its length (N127). It
// returns the bytes and, if the Arena reuses its blocks, the Block they
// were carved out of, whose count of buffers not yet released goes up by
// k: the caller releases k buffers in all (Release), as after k calls of
// Carve. Without Reuse the buffers are the caller's, as from Alloc. The
// span is carved out of the current block if it has Room, else out of
// the next.
func (a *Arena) Span(n, k int) (*Block, []byte) {
	if !a.Reuse {
		return nil, a.slice(n)
	}
	b := a.cur
	if b == nil || n > ArenaBlock-b.used {
		b = a.next()
	}
	i := b.used
	b.used, b.live = i+n, b.live+k
	return b, b.mem[i : i+n : i+n]
}

// carve is Carve past the current block.
func (a *Arena) carve(n int) (*Block, []byte) {
	if !a.Reuse || n == 0 || n > ArenaMax {
		return nil, make([]byte, n)
	}
	b := a.next()
	b.used, b.live = n, b.live+1
	return b, b.mem[:n:n]
}

// Owner returns the block out of which Lend carved data, untrimmed, if it
// is one of the blocks carved last; otherwise nil: data is not lent, or
// its block is older, and then never carved again (the garbage collector
// takes it once its buffers are dropped).
func (a *Arena) Owner(data []byte) *Block {
	if a == nil {
		return nil
	}
	if b, off := a.found, uint(ArenaBlock-cap(data)); b != nil && off < ArenaBlock && len(data) > 0 && &b.mem[off] == &data[0] {
		return b // most often, the block of the buffer before
	}
	return a.owner(data)
}

// owner is Owner past its first guess.
func (a *Arena) owner(data []byte) *Block {
	off := ArenaBlock - cap(data)
	if len(data) == 0 || off < 0 {
		return nil
	}
	p := &data[0]
	// Data is given back in about the order it was carved: the blocks
	// after the one found last, then those before.
	lo := max(a.nrec-arenaRecent, 0)
	for k := max(a.hint, lo); k < a.nrec; k++ {
		if b := a.recent[k%arenaRecent]; &b.mem[off] == p {
			a.hint, a.found = k, b
			return b
		}
	}
	for k := min(a.hint, a.nrec) - 1; k >= lo; k-- {
		if b := a.recent[k%arenaRecent]; &b.mem[off] == p {
			a.hint, a.found = k, b
			return b
		}
	}
	return nil
}

// next retires the current block and makes a free one, or a new one, the
// current block.
func (a *Arena) next() *Block {
	if b := a.cur; b != nil {
		b.done = true
		if b.live == 0 {
			a.keep(b)
		}
	}
	var b *Block
	if k := len(a.free); k > 0 {
		b = a.free[k-1]
		a.free[k-1] = nil
		a.free = a.free[:k-1]
		b.used, b.live, b.done = 0, 0, false
	} else {
		b = &Block{mem: new([ArenaBlock]byte)}
	}
	a.cur = b
	a.recent[a.nrec%arenaRecent] = b
	a.nrec++
	return b
}

// Release gives back n buffers carved out of b, a block Owner returned.
// Once all of b's buffers are back and b is no longer carved, the Arena
// may carve b again at its next copy: no buffer of b may be used after
// that.
func (a *Arena) Release(b *Block, n int) {
	b.live -= n
	if b.live == 0 && b.done {
		a.keep(b)
	}
}

// keep adds b, free, to the blocks to carve again, if there is room.
func (a *Arena) keep(b *Block) {
	if len(a.free) < ArenaKeep {
		a.free = append(a.free, b)
	}
}
