package multimd5

import (
	"crypto/md5"
	"fmt"
	"math/rand/v2"
	"testing"

	"pgregory.net/rapid"
)

// TestSums compares every digest with crypto/md5's, for every length
// around the block and padding boundaries and batches of every size up to
// past two rounds of lanes.
func TestSums(t *testing.T) {
	for _, w := range widths() {
		t.Run(fmt.Sprint(w), func(t *testing.T) { withWidth(w, func() { testSums(t) }) })
	}
}

func testSums(t *testing.T) {
	testSumsMixed(t)
	testSumsEqual(t)
	testSumsEqualBlocks(t)
}

// testSumsEqualBlocks hashes batches whose messages hash the same number
// of blocks with different numbers of whole blocks taken as they are: a
// message ending 56-63 bytes into a block pads into two blocks of its own,
// one of 64 more bytes ending earlier into one (56 and 100 bytes both hash
// two blocks). The lockstep path (sumsEqual) runs them together.
func testSumsEqualBlocks(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for nb := 1; nb <= 4; nb++ {
		var sizes []int // every length that hashes nb blocks
		for n := 0; n <= 64*nb; n++ {
			if blocksOf(n) == nb {
				sizes = append(sizes, n)
			}
		}
		for _, batch := range []int{2, 16, 17, 40} {
			for round := range 8 {
				msgs := make([][]byte, batch)
				for i := range msgs {
					msgs[i] = make([]byte, sizes[(i*7+round*13)%len(sizes)])
					for j := range msgs[i] {
						msgs[i][j] = byte(r.Uint32())
					}
				}
				if _, ok := equalBlocks(msgs); !ok {
					t.Fatalf("%d blocks: a batch of unequal block counts", nb)
				}
				dst := make([][Size]byte, batch)
				Sums(dst, msgs)
				checkSums(t, dst, msgs, fmt.Sprintf("batch %d of %d blocks (round %d)", batch, nb, round))
			}
		}
	}
}

// testSumsEqual hashes batches of messages of one length, which every
// vector width runs in lockstep (sumsEqual), and batches where one
// message has another length, which it does not.
func testSumsEqual(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, batch := range []int{2, 15, 16, 17, 33} {
		for n := 0; n <= 200; n++ {
			for odd := range 2 {
				msgs := make([][]byte, batch)
				for i := range msgs {
					size := n
					if odd == 1 && i == batch/2 {
						size = n + 64
					}
					msgs[i] = make([]byte, size)
					for j := range msgs[i] {
						msgs[i][j] = byte(r.Uint32())
					}
				}
				dst := make([][Size]byte, batch)
				Sums(dst, msgs)
				checkSums(t, dst, msgs, fmt.Sprintf("batch %d of %d bytes (odd %d)", batch, n, odd))
			}
		}
	}
}

func testSumsMixed(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for batch := 1; batch <= 2*Lanes+3; batch++ {
		for base := 0; base <= 200; base++ {
			msgs := make([][]byte, batch)
			for i := range msgs {
				// Lengths differ within a batch, so that lanes finish
				// at different blocks.
				n := (base + i*37) % 300
				msgs[i] = make([]byte, n)
				for j := range msgs[i] {
					msgs[i][j] = byte(r.Uint32())
				}
			}
			dst := make([][Size]byte, batch)
			Sums(dst, msgs)
			checkSums(t, dst, msgs, fmt.Sprintf("mixed batch %d", batch))
		}
	}
}

func TestSumsProperty(t *testing.T) {
	for _, w := range widths() {
		t.Run(fmt.Sprint(w), func(t *testing.T) { withWidth(w, func() { testSumsProperty(t) }) })
	}
}

func testSumsProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		msgs := rapid.SliceOfN(rapid.SliceOfN(rapid.Byte(), 0, 1100), 0, 40).Draw(t, "msgs")
		dst := make([][Size]byte, len(msgs)+1)
		sentinel := [Size]byte{1, 2, 3}
		dst[len(msgs)] = sentinel
		Sums(dst, msgs)
		checkSums(t, dst, msgs, "dst longer than msgs")
		if dst[len(msgs)] != sentinel {
			t.Fatal("wrote past len(msgs)")
		}
	})
}

// TestSumsAllocs checks that Sums allocates nothing, at every width, in
// lockstep (lengths of one block count) and not (lengths that are not).
func TestSumsAllocs(t *testing.T) {
	for _, w := range widths() {
		for _, spread := range []int{1, 40} {
			msgs := make([][]byte, 20)
			for i := range msgs {
				msgs[i] = make([]byte, 64+i*spread)
			}
			dst := make([][Size]byte, len(msgs))
			withWidth(w, func() {
				if n := testing.AllocsPerRun(100, func() { Sums(dst, msgs) }); n != 0 {
					t.Errorf("width %d, lengths 64 + %d i: %v allocations per call", w, spread, n)
				}
			})
		}
	}
}

// TestKernelOfWidth checks that each width runs its own kernel: on a
// processor with AVX-512, block16 would give the same digests where
// block8 should run, and fail only on one without it.
func TestKernelOfWidth(t *testing.T) {
	for _, w := range widths()[1:] {
		for _, spread := range []int{0, 1} { // in lockstep, then not
			var got []int
			onHash = func(width int) { got = append(got, width) }
			msgs := make([][]byte, 2*w+3)
			for i := range msgs {
				msgs[i] = make([]byte, 100+i*spread*64)
			}
			dst := make([][Size]byte, len(msgs))
			withWidth(w, func() { Sums(dst, msgs) })
			onHash = nil
			checkSums(t, dst, msgs, fmt.Sprintf("width %d", w))
			if len(got) == 0 {
				t.Fatalf("width %d, spread %d: no kernel ran", w, spread)
			}
			for _, k := range got {
				if k != w {
					t.Fatalf("width %d, spread %d: a kernel of width %d ran", w, spread, k)
				}
			}
		}
	}
}

func FuzzSums(f *testing.F) {
	f.Add([]byte("abc"), uint8(3))
	f.Add(make([]byte, 1000), uint8(9))
	ws := widths()
	f.Fuzz(func(t *testing.T, data []byte, cuts uint8) {
		// The width comes from the input too, so that every kernel
		// sees every input shape.
		saved := lanes
		lanes = ws[int(cuts)%len(ws)]
		defer func() { lanes = saved }()
		// Cut data into up to 20 messages at points the fuzzer chooses.
		var msgs [][]byte
		k := int(cuts)%20 + 1
		for i := 0; i < k; i++ {
			lo, hi := len(data)*i/k, len(data)*(i+1)/k
			msgs = append(msgs, data[lo:hi+min(i, len(data)-hi)])
		}
		dst := make([][Size]byte, len(msgs))
		Sums(dst, msgs)
		checkSums(t, dst, msgs, "fuzz")
	})
}

func BenchmarkSums(b *testing.B) {
	for _, size := range []int{64, 200, 1024} {
		for _, batch := range []int{1, 8, 12, 16, 32} {
			msgs := make([][]byte, batch)
			for i := range msgs {
				msgs[i] = make([]byte, size)
			}
			dst := make([][Size]byte, batch)
			b.Run(fmt.Sprintf("%dB/%d", size, batch), func(b *testing.B) {
				b.SetBytes(int64(size * batch))
				for b.Loop() {
					Sums(dst, msgs)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/msg")
			})
			b.Run(fmt.Sprintf("%dB/%d/md5", size, batch), func(b *testing.B) {
				b.SetBytes(int64(size * batch))
				for b.Loop() {
					for i, m := range msgs {
						dst[i] = md5.Sum(m)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/msg")
			})
		}
	}
}

// checkSums fails the test unless dst holds crypto/md5's digest of each
// of msgs; what says which batch it was.
func checkSums(t interface {
	Helper()
	Fatalf(string, ...any)
}, dst [][Size]byte, msgs [][]byte, what string) {
	t.Helper()
	for i, m := range msgs {
		if want := md5.Sum(m); dst[i] != want {
			t.Fatalf("%s, message %d of %d bytes: %x, want %x", what, i, len(m), dst[i], want)
		}
	}
}
