//go:build amd64

package multimd5

import "golang.org/x/sys/cpu"

//go:generate go run gen.go

// lanes is the number of messages this processor hashes side by side: 16
// with AVX-512 or AVX2, 1 (crypto/md5) without either.
var lanes = func() int {
	if cpu.X86.HasAVX512F || cpu.X86.HasAVX2 {
		return Lanes
	}
	return 1
}()

// zmm says the 16 lanes run on block16 (AVX-512), not block16y (AVX2).
var zmm = cpu.X86.HasAVX512F

// block8 hashes one block in each of lanes 0-7, lane l's 64 bytes at
// blocks[l], as block16y does the 16, in about 0.8x its time: the
// kernel of a group of 8 messages or fewer. It needs AVX2.
//
//go:noescape
func block8(state *[4][Lanes]uint32, blocks *[Lanes]*byte, data *[16][Lanes]uint32)

// block16y hashes one block in each of the 16 lanes, lane l's 64 bytes at
// blocks[l]; state[w][l] is word w of lane l's state. It transposes the
// blocks into data (data[w][l] is word w of lane l's block), which it
// only writes and reads. It needs AVX2.
//
//go:noescape
func block16y(state *[4][Lanes]uint32, blocks *[Lanes]*byte, data *[16][Lanes]uint32)

// block16 is block16y with AVX-512 (F), which holds the blocks in its
// registers and needs no data.
//
//go:noescape
func block16(state *[4][Lanes]uint32, blocks *[Lanes]*byte)
