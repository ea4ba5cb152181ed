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
