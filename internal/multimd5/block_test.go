package multimd5

import (
	"crypto/md5"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"golang.org/x/sys/cpu"
)

// widths returns the kernel widths this processor runs, 1 being
// crypto/md5 alone.
func widths() []int {
	w := []int{1}
	if hasAVX2() {
		w = append(w, 8)
	}
	if hasAVX512() {
		w = append(w, 16)
	}
	return w
}

func hasAVX2() bool   { return lanes >= 8 || cpu.X86.HasAVX2 }
func hasAVX512() bool { return lanes >= 16 || cpu.X86.HasAVX512F }

// withWidth runs f with Sums limited to width lanes.
func withWidth(width int, f func()) {
	saved := lanes
	lanes = width
	defer func() { lanes = saved }()
	f()
}

func BenchmarkBlock(b *testing.B) {
	var h hasher
	var blocks [Lanes]*byte
	for l := range blocks {
		blocks[l] = &idleBlock[0]
	}
	if hasAVX2() {
		b.Run("8", func(b *testing.B) {
			for b.Loop() {
				block8(&h.state, &blocks, &h.data)
			}
		})
	}
	if hasAVX512() {
		b.Run("16", func(b *testing.B) {
			for b.Loop() {
				block16(&h.state, &blocks)
			}
		})
	}
}

// TestBlock8 runs block8 alone on 8 one-block messages (55 bytes, padded
// into their one block) and checks each lane's digest against
// crypto/md5's, and that lanes 8-15 of the state, which it does not
// hash, are left as they were.
func TestBlock8(t *testing.T) {
	if !hasAVX2() {
		t.Skip("no AVX2")
	}
	r := rand.New(rand.NewPCG(7, 8))
	for round := range 20 {
		var (
			state  = initState
			blocks [Lanes]*byte
			data   [16][Lanes]uint32
			tails  [8][2 * 64]byte
			msgs   [8][]byte
		)
		for l := Lanes / 2; l < Lanes; l++ {
			for w := range state {
				state[w][l] = uint32(l*4 + w)
			}
		}
		for l := range msgs {
			msgs[l] = make([]byte, 55-l*(round%2)) // one block with its padding
			for i := range msgs[l] {
				msgs[l][i] = byte(r.Uint32())
			}
			if padTail(&tails[l], msgs[l]) != 0 {
				t.Fatal("a whole block")
			}
			blocks[l] = &tails[l][0]
		}
		block8(&state, &blocks, &data)
		for l, m := range msgs {
			var d [Size]byte
			for w := range 4 {
				binary.LittleEndian.PutUint32(d[4*w:], state[w][l])
			}
			if want := md5.Sum(m); d != want {
				t.Fatalf("round %d, lane %d: %x, want %x", round, l, d, want)
			}
		}
		for l := Lanes / 2; l < Lanes; l++ {
			for w := range state {
				if state[w][l] != uint32(l*4+w) {
					t.Fatalf("round %d: lane %d's state word %d changed", round, l, w)
				}
			}
		}
	}
}
