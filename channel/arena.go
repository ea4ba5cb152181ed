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
type Arena struct {
	block []byte
}

const (
	// ArenaBlock is the size of an Arena's blocks.
	ArenaBlock = 4096
	// ArenaMax is the largest buffer carved out of a block; larger ones
	// are allocated alone.
	ArenaMax = 256
)

// Copy returns a copy of p, in a buffer of its own or carved out of the
// current block.
func (a *Arena) Copy(p []byte) []byte {
	n := len(p)
	if a == nil || n == 0 || n > ArenaMax {
		return append(make([]byte, 0, n), p...)
	}
	if cap(a.block)-len(a.block) < n {
		a.block = make([]byte, 0, ArenaBlock)
	}
	i := len(a.block)
	a.block = append(a.block, p...)
	return a.block[i : i+n : i+n]
}
