package multimd5

import (
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
