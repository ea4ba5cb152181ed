package channel

import (
	"bytes"
	"testing"
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

// An Arena with Reuse set carves a block again only once every buffer
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
		b, blk := a.Lend(bytes.Repeat([]byte{v}, size))
		if blk == nil || len(b) != size || cap(b) != size {
			t.Fatalf("copy %d: block %v, %d bytes, cap %d", v, blk, len(b), cap(b))
		}
		out = append(out, lent{b, blk, v})
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
		a.Release(l.blk)
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
	a.Release(out[0].blk)
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
			a.Release(l.blk)
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
			a.Release(l.blk)
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
			b, blk := a.Lend(make([]byte, size)[:size])
			_ = b
			a.Release(blk)
		}
	})
	if n != 0 {
		t.Errorf("%v allocations a block's worth of lent copies", n)
	}
	// Large and empty copies are the caller's, with no block.
	if _, blk := a.Lend(make([]byte, ArenaMax+1)); blk != nil {
		t.Error("a large copy came with a block")
	}
	if b, blk := a.Lend(nil); blk != nil || b == nil {
		t.Errorf("empty copy: %v, block %v", b, blk)
	}
}

// An Arena with Reuse set keeps at most ArenaKeep free blocks.
func TestArenaKeep(t *testing.T) {
	a := Arena{Reuse: true}
	var blks []*Block
	for range (ArenaKeep + 10) * (ArenaBlock / ArenaMax) {
		_, blk := a.Lend(make([]byte, ArenaMax))
		blks = append(blks, blk)
	}
	for _, blk := range blks {
		a.Release(blk)
	}
	if len(a.free) != ArenaKeep {
		t.Errorf("%d free blocks kept, want %d", len(a.free), ArenaKeep)
	}
}
