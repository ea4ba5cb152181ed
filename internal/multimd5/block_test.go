package multimd5

import (
	"crypto/md5"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"golang.org/x/sys/cpu"
)

// A kernel is a way Sums can run: crypto/md5 alone (lanes 1), the AVX2
// kernels (block8 for 8 messages or fewer, block16y for more) or block16
// (AVX-512, zmm).
type kernel struct {
	name  string
	lanes int
	zmm   bool
}

// kernels returns the ways Sums can run on this processor.
func kernels() []kernel {
	k := []kernel{{"md5", 1, false}}
	if cpu.X86.HasAVX2 {
		k = append(k, kernel{"avx2", Lanes, false})
	}
	if cpu.X86.HasAVX512F {
		k = append(k, kernel{"avx512", Lanes, true})
	}
	return k
}

// withKernel runs f with Sums running k.
func withKernel(k kernel, f func()) {
	savedLanes, savedZmm := lanes, zmm
	lanes, zmm = k.lanes, k.zmm
	defer func() { lanes, zmm = savedLanes, savedZmm }()
	f()
}

func BenchmarkBlock(b *testing.B) {
	var h hasher
	var blocks [Lanes]*byte
	for l := range blocks {
		blocks[l] = &idleBlock[0]
	}
	if cpu.X86.HasAVX2 {
		b.Run("8", func(b *testing.B) {
			for b.Loop() {
				block8(&h.state, &blocks, &h.data)
			}
		})
		b.Run("16y", func(b *testing.B) {
			for b.Loop() {
				block16y(&h.state, &blocks, &h.data)
			}
		})
	}
	if cpu.X86.HasAVX512F {
		b.Run("16", func(b *testing.B) {
			for b.Loop() {
				block16(&h.state, &blocks)
			}
		})
	}
}

// TestBlock16y runs block16y alone on 16 messages of two blocks (112 to
// 119 bytes: a block of the message, then its tail with the padding, in
// two calls, so that the state the second call starts from is each
// lane's own) and checks each lane's digest against crypto/md5's: both
// groups of 8 lanes, whose steps interleave.
func TestBlock16y(t *testing.T) {
	if !cpu.X86.HasAVX2 {
		t.Skip("no AVX2")
	}
	r := rand.New(rand.NewPCG(7, 8))
	for round := range 20 {
		var (
			state  = initState
			blocks [Lanes]*byte
			data   [16][Lanes]uint32
			tails  [Lanes][2 * 64]byte
			msgs   [Lanes][]byte
		)
		for l := range msgs {
			msgs[l] = make([]byte, 119-(l%8)*(round%2))
			for i := range msgs[l] {
				msgs[l][i] = byte(r.Uint32())
			}
			if padTail(&tails[l], msgs[l]) != 1 {
				t.Fatal("not one whole block")
			}
			blocks[l] = &msgs[l][0]
		}
		block16y(&state, &blocks, &data)
		for l := range blocks {
			blocks[l] = &tails[l][0]
		}
		block16y(&state, &blocks, &data)
		for l, m := range msgs {
			if d, want := laneDigest(&state, l), md5.Sum(m); d != want {
				t.Fatalf("round %d, lane %d: %x, want %x", round, l, d, want)
			}
		}
	}
}

// TestDefaultKernel checks the kernel Sums runs on this processor when
// no test chose one: every other test chooses.
func TestDefaultKernel(t *testing.T) {
	wantLanes := 1
	if cpu.X86.HasAVX2 || cpu.X86.HasAVX512F {
		wantLanes = Lanes
	}
	if lanes != wantLanes || zmm != cpu.X86.HasAVX512F {
		t.Errorf("lanes %d, zmm %v; want %d, %v", lanes, zmm, wantLanes, cpu.X86.HasAVX512F)
	}
}

// TestBlock8 runs block8 alone on 8 one-block messages (55 bytes, padded
// into their one block) and checks each lane's digest against
// crypto/md5's, and that lanes 8-15 of the state, which it does not
// hash, are left as they were.
func TestBlock8(t *testing.T) {
	if !cpu.X86.HasAVX2 {
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
			if d, want := laneDigest(&state, l), md5.Sum(m); d != want {
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

// laneDigest returns the digest lane l's state holds once its message's
// last block is hashed.
func laneDigest(state *[4][Lanes]uint32, l int) (d [Size]byte) {
	for w := range 4 {
		binary.LittleEndian.PutUint32(d[4*w:], state[w][l])
	}
	return d
}
