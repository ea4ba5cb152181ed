//go:build !amd64

package multimd5

var lanes = 1

var zmm = false

func block8(state *[4][Lanes]uint32, blocks *[Lanes]*byte, data *[16][Lanes]uint32) {
	panic("multimd5: no vector unit")
}
func block16y(state *[4][Lanes]uint32, blocks *[Lanes]*byte, data *[16][Lanes]uint32) {
	panic("multimd5: no vector unit")
}
func block16(state *[4][Lanes]uint32, blocks *[Lanes]*byte) { panic("multimd5: no vector unit") }
