//go:build amd64

package multimd5

import "golang.org/x/sys/cpu"

//go:generate go run gen.go

// lanes is the width of the widest kernel this processor runs.
var lanes = func() int {
	switch {
	case cpu.X86.HasAVX512F:
		return 16
	case cpu.X86.HasAVX2:
		return 8
	}
	return 1
}()

// block8 hashes one block in each of lanes 0-7, lane l's 64 bytes at
// blocks[l]; state[w][l] is word w of lane l's state. It transposes the
// blocks into data (data[w][l] is word w of lane l's block), which it
// only writes and reads. It needs AVX2.
//
//go:noescape
func block8(state *[4][Lanes]uint32, blocks *[Lanes]*byte, data *[16][Lanes]uint32)

// block16 hashes one block in each of the 16 lanes, lane l's 64 bytes at
// blocks[l]; state is as for block8. It needs AVX-512 (F).
//
//go:noescape
func block16(state *[4][Lanes]uint32, blocks *[Lanes]*byte)
