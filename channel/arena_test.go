package channel

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"unsafe"
)

// Buffers from an Arena hold their copies, have no room past their
// length (an append reallocates rather than write over a neighbour), and
// share blocks only while small.
func TestArena(t *testing.T) {
	var a Arena
	var got [][]byte
	for i := range 300 {
		p := bytes.Repeat([]byte{byte(i)}, 1+i%(ArenaMax+20))
		b := a.Copy(p)
		if !bytes.Equal(b, p) || cap(b) != len(b) {
			t.Fatalf("copy %d: %d bytes, cap %d, equal %v", i, len(b), cap(b), bytes.Equal(b, p))
		}
		got = append(got, b)
	}
	for i, b := range got {
		_ = append(b, 0xff) // must not reach the next buffer
		if want := bytes.Repeat([]byte{byte(i)}, 1+i%(ArenaMax+20)); !bytes.Equal(b, want) {
			t.Fatalf("buffer %d changed", i)
		}
	}
	for i := 1; i < len(got); i++ {
		if &got[i-1][len(got[i-1])-1] == &got[i][0] {
			t.Fatal("buffers overlap")
		}
	}
	var nilArena *Arena
	if b := nilArena.Copy([]byte("x")); string(b) != "x" {
		t.Errorf("nil Arena: %q", b)
	}
	if b := nilArena.Lend([]byte("x")); string(b) != "x" || nilArena.Owner(b) != nil {
		t.Errorf("nil Arena lends %q", b)
	}
	if b := a.Copy(nil); b == nil || len(b) != 0 {
		t.Errorf("empty copy: %v", b)
	}
	n := testing.AllocsPerRun(100, func() {
		for range ArenaBlock / 64 {
			a.Copy(make([]byte, 64)[:64])
		}
	})
	if n > 2 {
		t.Errorf("%v allocations for a block's worth of 64-byte copies", n)
	}
}

// Alloc carves the buffers Copy would copy into: given the same lengths,
// an Arena that copies and one that allocates and copies make buffers of
// the same lengths and capacities at the same places in blocks of the
// same sizes, with the same new blocks; large ones and empty ones, and a
// nil Arena's, are of their own.
func TestArenaAlloc(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	var a, b Arena
	for i := range 2000 {
		p := arenaMsg(r, i)
		n := len(p)
		ca := a.Copy(p)
		cb := b.Alloc(n)
		copy(cb, p)
		if !bytes.Equal(ca, cb) || len(cb) != n || cap(cb) != n || cb == nil {
			t.Fatalf("%d: Alloc(%d): %d bytes, cap %d, nil %v; Copy: %d, cap %d", i, n, len(cb), cap(cb), cb == nil, len(ca), cap(ca))
		}
		if len(a.block) != len(b.block) || cap(a.block) != cap(b.block) {
			t.Fatalf("%d: blocks of %d/%d bytes after Copy, %d/%d after Alloc", i, len(a.block), cap(a.block), len(b.block), cap(b.block))
		}
		if n > 0 {
			in := n <= len(b.block) && &cb[0] == &b.block[len(b.block)-n]
			if carved := n <= ArenaMax; in != carved {
				t.Fatalf("%d: a buffer of %d bytes carved out of the block: %v", i, n, in)
			}
		}
	}
	var nilArena *Arena
	if c := nilArena.Alloc(5); len(c) != 5 || cap(c) != 5 {
		t.Errorf("nil Arena: %d bytes, cap %d", len(c), cap(c))
	}
}

// arenaMsg is the i-th message of the tests that compare an Arena's ways
// of carving: random bytes, empty every 50th, up to 40 bytes past the
// largest the Arena carves.
func arenaMsg(r *rand.Rand, i int) []byte {
	n := r.IntN(ArenaMax + 40)
	if i%50 == 0 {
		n = 0
	}
	p := make([]byte, n)
	for j := range p {
		p[j] = byte(r.Uint32())
	}
	return p
}

// carveSizes are the lengths of TestArenaCarve's messages at its first
// steps, before the random ones: an empty one before any block, lengths
// around ArenaMax, 64-byte ones and one that fills the block exactly,
// one of ArenaMax into a new block, then 250-byte ones until less room
// is left than the next, of ArenaMax, needs.
var carveSizes = func() []int {
	s := []int{0, ArenaMax, ArenaMax + 1, ArenaMax - 1, 1}
	used := ArenaMax + ArenaMax - 1 + 1
	for used+64 < ArenaBlock {
		s = append(s, 64)
		used += 64
	}
	s = append(s, ArenaBlock-used, ArenaMax, 0) // the fill, the next block
	for used = ArenaMax; used+250 <= ArenaBlock; used += 250 {
		s = append(s, 250)
	}
	return append(s, ArenaMax, ArenaBlock-used) // past the room, then its size
}()

// Carve carves as Lend does: an Arena with Reuse set that carves and
// one that lends, given back the same buffers in the same order, make
// buffers of the same lengths at the same places in their blocks, owned
// or lent alike, and Carve returns the block Owner finds for Lend's
// buffer; an Arena without Reuse carves buffers of their own (N103).
func TestArenaCarve(t *testing.T) {
	for _, reuse := range []bool{true, false} {
		r := rand.New(rand.NewPCG(23, 24))
		a, b := Arena{Reuse: reuse}, Arena{Reuse: reuse}
		blocks := map[*Block]*Block{} // b's block for each of a's
		type out struct{ ab, bb *Block }
		var lent []out
		for i := range 5000 {
			p := arenaMsg(r, i)
			if i < len(carveSizes) {
				p = p[:0]
				for range carveSizes[i] {
					p = append(p, byte(r.Uint32()))
				}
			}
			n := len(p)
			la := a.Lend(p)
			ab := a.Owner(la)
			off := ArenaBlock - cap(la) // as Owner finds it
			la = la[:n:n]
			bb, lb := b.Carve(n)
			copy(lb, p)
			if !bytes.Equal(la, lb) || len(lb) != n || cap(lb) != n || lb == nil {
				t.Fatalf("reuse %v, %d: Carve(%d): %d bytes, cap %d, nil %v", reuse, i, n, len(lb), cap(lb), lb == nil)
			}
			if (ab == nil) != (bb == nil) {
				t.Fatalf("reuse %v, %d: Carve(%d) lent %v, Lend %v", reuse, i, n, bb != nil, ab != nil)
			}
			if bb == nil {
				if reuse && n > 0 && n <= ArenaMax {
					t.Fatalf("%d: a buffer of %d bytes not lent", i, n)
				}
				continue
			}
			if m, ok := blocks[ab]; !ok {
				blocks[ab] = bb
			} else if m != bb {
				t.Fatalf("%d: Carve's block is not the one it carved before where Lend's is", i)
			}
			if &lb[0] != &bb.mem[off] {
				t.Fatalf("%d: Carve's buffer is not in its block where Lend's is", i)
			}
			if ab.used != bb.used || ab.live != bb.live || ab.done != bb.done {
				t.Fatalf("%d: block used %d, live %d, done %v after Carve; %d, %d, %v after Lend", i, bb.used, bb.live, bb.done, ab.used, ab.live, ab.done)
			}
			lent = append(lent, out{ab, bb})
			// Give back the oldest buffers now and then, as an
			// endpoint does when its events are polled.
			if k := r.IntN(8); k == 0 {
				m := r.IntN(len(lent) + 1)
				for _, o := range lent[:m] {
					a.Release(o.ab, 1)
					b.Release(o.bb, 1)
				}
				lent = lent[m:]
			}
			if len(a.free) != len(b.free) {
				t.Fatalf("%d: %d free blocks after Carve, %d after Lend", i, len(b.free), len(a.free))
			}
		}
		if reuse && (b.nrec < 100 || len(blocks) >= b.nrec) {
			t.Fatalf("%d blocks carved, %d of them new: too few to cover carving a block again", b.nrec, len(blocks))
		}
	}
}

// An Arena with Reuse set lends buffers out of blocks that Owner finds,
// and carves a block again only once every buffer
// carved out of it is released and it is no longer the current block;
// until then its buffers keep their copies (N103).
func TestArenaReuse(t *testing.T) {
	a := Arena{Reuse: true}
	const size = 64
	perBlock := ArenaBlock / size
	type lent struct {
		b   []byte
		blk *Block
		v   byte
	}
	var out []lent
	carve := func(v byte) {
		b := a.Lend(bytes.Repeat([]byte{v}, size))
		blk := a.Owner(b)
		if blk == nil || len(b) != size {
			t.Fatalf("copy %d: block %v, %d bytes", v, blk, len(b))
		}
		out = append(out, lent{b[:size:size], blk, v})
	}
	check := func(when string) {
		t.Helper()
		for i, l := range out {
			if !bytes.Equal(l.b, bytes.Repeat([]byte{l.v}, size)) {
				t.Fatalf("%s: buffer %d (value %d) overwritten", when, i, l.v)
			}
		}
	}
	// Two blocks' worth, all kept: the second block is new memory.
	for i := range 2 * perBlock {
		carve(byte(i))
	}
	first, second := out[0].blk, out[perBlock].blk
	if first == second {
		t.Fatal("a full block was carved again with its buffers out")
	}
	// Release all of the first block but one: it must not be carved again.
	for _, l := range out[:perBlock-1] {
		a.Release(l.blk, 1)
	}
	out = out[perBlock-1:]
	for i := range perBlock {
		carve(byte(100 + i))
	}
	check("one buffer of a block still out")
	if blk := out[len(out)-1].blk; blk == first {
		t.Fatal("carved a block with a buffer still out")
	}
	// Its last buffer back, the first block is the next one carved.
	a.Release(out[0].blk, 1)
	out = out[1:]
	for i := range perBlock {
		carve(byte(200 + i))
	}
	check("after reuse")
	if blk := out[len(out)-1].blk; blk != first {
		t.Fatal("the released block was not carved again")
	}
	// The current block, all released, is not carved again while current.
	cur := out[len(out)-1].blk
	for _, l := range out {
		if l.blk == cur {
			a.Release(l.blk, 1)
		}
	}
	if len(a.free) != 0 {
		t.Fatalf("%d free blocks; the current block must not be one", len(a.free))
	}
	// A block retired with one buffer still out is not carved again.
	out = out[:0]
	for i := range perBlock {
		carve(byte(i))
	}
	held := out[len(out)-1]
	for _, l := range out {
		if l.blk == held.blk && &l.b[0] != &held.b[0] {
			a.Release(l.blk, 1)
		}
	}
	out = []lent{held}
	for i := range 3 * perBlock {
		carve(byte(50 + i))
	}
	check("a retired block with a buffer out")
	// Steady state: releasing each block's buffers before it fills
	// allocates nothing.
	out = out[:0]
	n := testing.AllocsPerRun(100, func() {
		for range perBlock {
			a.Release(a.Owner(a.Lend(make([]byte, size)[:size])), 1)
		}
	})
	if n != 0 {
		t.Errorf("%v allocations a block's worth of lent copies", n)
	}
	// Large and empty copies are the caller's, with no block; so is a
	// buffer from Copy, or one of another arena.
	if b := a.Lend(make([]byte, ArenaMax+1)); a.Owner(b) != nil || cap(b) != len(b) {
		t.Error("a large copy came with a block")
	}
	if b := a.Lend(nil); a.Owner(b) != nil || b == nil {
		t.Errorf("empty copy: %v", b)
	}
	var other Arena
	for _, b := range [][]byte{a.Copy(make([]byte, size)), other.Copy(make([]byte, size)), make([]byte, size, ArenaBlock)} {
		if a.Owner(b) != nil {
			t.Error("a buffer not lent has an owner")
		}
	}
}

// An Arena with Reuse set keeps at most ArenaKeep free blocks.
func TestArenaKeep(t *testing.T) {
	a := Arena{Reuse: true}
	var blks []*Block
	for range (ArenaKeep + 10) * (ArenaBlock / ArenaMax) {
		blks = append(blks, a.Owner(a.Lend(make([]byte, ArenaMax))))
	}
	for _, blk := range blks {
		a.Release(blk, 1)
	}
	if len(a.free) != ArenaKeep {
		t.Errorf("%d free blocks kept, want %d", len(a.free), ArenaKeep)
	}
}

// Owner finds the block of a lent buffer among the last arenaRecent
// blocks carved, in any order, and no block for one carved before them.
func TestArenaOwner(t *testing.T) {
	a := Arena{Reuse: true}
	const size = 100
	var bufs [][]byte
	var blks []*Block
	for range 10 * ArenaBlock / size {
		b := a.Lend(make([]byte, size))
		bufs, blks = append(bufs, b), append(blks, a.cur)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, i := range rng.Perm(len(bufs)) {
		if got := a.Owner(bufs[i]); got != blks[i] {
			t.Fatalf("buffer %d: owner %p, want %p", i, got, blks[i])
		}
	}
	old := bufs[0]
	for range (arenaRecent + 1) * ArenaBlock / size {
		a.Lend(make([]byte, size))
	}
	if a.Owner(old) != nil {
		t.Error("found the owner of a buffer older than the blocks looked in")
	}
}

// Span carves n bytes for k buffers (N127): out of the current block
// while it has Room, else out of the next, the span's capacity its
// length, following the span before in the same block; with Reuse, the
// block counts k buffers more, so that it is carved again only once k
// are released and it is retired; without, spans are the caller's and a
// span past Room starts a block of its own.
func TestArenaSpan(t *testing.T) {
	for _, reuse := range []bool{true, false} {
		a := Arena{Reuse: reuse}
		if r := a.Room(); r != 0 {
			t.Fatalf("reuse %v: Room %d before any carving, want 0", reuse, r)
		}
		steps := []struct {
			n, k    int
			sameBlk bool // out of the block of the step before
		}{
			{100, 3, false}, {ArenaBlock - 300, 5, true}, {200, 1, true},
			{1, 1, false}, // 0 bytes of room left: a block of its own
			{ArenaBlock - 1, 2, true},
			{ArenaBlock, 4, false},
		}
		var prev []byte
		var prevBlk *Block
		type held struct {
			b *Block
			k int
		}
		var lent []held
		for i, s := range steps {
			room := a.Room()
			b, span := a.Span(s.n, s.k)
			if len(span) != s.n || cap(span) != s.n {
				t.Fatalf("reuse %v, step %d: Span(%d) %d bytes, capacity %d", reuse, i, s.n, len(span), cap(span))
			}
			if (b != nil) != reuse {
				t.Fatalf("reuse %v, step %d: block %p", reuse, i, b)
			}
			// Compared as addresses: a pointer just past a span that
			// ends its block points past its allocation, which the
			// race detector's pointer checks reject.
			follows := prev != nil && uintptr(unsafe.Pointer(unsafe.SliceData(span))) == uintptr(unsafe.Pointer(unsafe.SliceData(prev)))+uintptr(len(prev))
			// A new block may lie just after the one before: only a
			// span of the same block must follow the span before.
			if s.sameBlk && !follows || s.sameBlk != (s.n <= room) {
				t.Fatalf("reuse %v, step %d: Span(%d) with room %d follows the span before: %v, want %v", reuse, i, s.n, room, follows, s.sameBlk)
			}
			if want := room - s.n; s.sameBlk && a.Room() != want || !s.sameBlk && a.Room() != ArenaBlock-s.n {
				t.Fatalf("reuse %v, step %d: Room %d after Span(%d) from %d", reuse, i, a.Room(), s.n, room)
			}
			if reuse {
				if s.sameBlk != (b == prevBlk) {
					t.Fatalf("step %d: block %p after %p", i, b, prevBlk)
				}
				if s.sameBlk {
					lent[len(lent)-1].k += s.k
				} else {
					lent = append(lent, held{b, s.k})
				}
				if got := lent[len(lent)-1].k; b.live != got {
					t.Fatalf("step %d: block counts %d buffers, want %d", i, b.live, got)
				}
			}
			prev, prevBlk = span, b
		}
		if !reuse {
			continue
		}
		// Every block but the current one retired: released all but
		// one buffer, none is carved again; released whole, each is.
		for _, h := range lent[:len(lent)-1] {
			if !h.b.done {
				t.Fatalf("a block carved before the current one is not retired")
			}
			a.Release(h.b, h.k-1)
		}
		if len(a.free) != 0 {
			t.Fatalf("%d blocks free with a buffer of each still lent", len(a.free))
		}
		for _, h := range lent[:len(lent)-1] {
			a.Release(h.b, 1)
		}
		if len(a.free) != len(lent)-1 {
			t.Fatalf("%d blocks free, want %d", len(a.free), len(lent)-1)
		}
		if b, _ := a.Span(ArenaBlock, 1); b != lent[len(lent)-2].b {
			t.Fatalf("a full span carved out of a new block, not the last freed")
		}
	}
}
