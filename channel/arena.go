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
// With Reuse set, the Arena also takes its blocks back: Lend names the
// Block a buffer was carved from, and once every buffer carved from a
// block has been given back with Release, the block is carved again. The
// buffers are then lent, not given: whoever holds one must stop using it
// before the Arena next carves, and the caller of Release decides when
// that is (N103).
type Arena struct {
	block []byte // the block carved, when Reuse is not set
	cur   *Block // the block carved, when it is
	free  []*Block
	// Reuse makes the Arena take back the blocks whose buffers were all
	// released. Set it before the first copy.
	Reuse bool
}

// A Block is one of the blocks an Arena with Reuse set carves buffers out
// of. Its fields are the Arena's own.
type Block struct {
	buf  []byte
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
// current block: the caller's in either case. An Arena with Reuse set
// lends its buffers instead (Lend).
func (a *Arena) Copy(p []byte) []byte {
	n := len(p)
	if a == nil || n == 0 || n > ArenaMax || a.Reuse {
		return append(make([]byte, 0, n), p...)
	}
	if cap(a.block)-len(a.block) < n {
		a.block = make([]byte, 0, ArenaBlock)
	}
	i := len(a.block)
	a.block = append(a.block, p...)
	return a.block[i : i+n : i+n]
}

// Lend returns a copy of p and, if the Arena reuses its blocks and
// carved the copy out of one, that block, for Release; otherwise the
// block is nil and the copy is the caller's, as from Copy.
func (a *Arena) Lend(p []byte) ([]byte, *Block) {
	if a == nil || !a.Reuse || len(p) == 0 || len(p) > ArenaMax {
		return a.Copy(p), nil
	}
	b := a.cur
	if b == nil || cap(b.buf)-len(b.buf) < len(p) {
		b = a.next()
	}
	i, n := len(b.buf), len(p)
	b.buf = append(b.buf, p...)
	b.live++
	return b.buf[i : i+n : i+n], b
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
		b.buf, b.live, b.done = b.buf[:0], 0, false
	} else {
		b = &Block{buf: make([]byte, 0, ArenaBlock)}
	}
	a.cur = b
	return b
}

// Release gives back one buffer carved out of b, a block Lend returned. Once all of b's buffers are back and b is no longer carved,
// the Arena may carve b again at its next copy: no buffer of b may be
// used after that.
func (a *Arena) Release(b *Block) {
	b.live--
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
