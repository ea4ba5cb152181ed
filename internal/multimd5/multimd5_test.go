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
	for _, k := range kernels() {
		t.Run(k.name, func(t *testing.T) { withKernel(k, func() { testSums(t) }) })
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
	for _, batch := range []int{2, 8, 9, 15, 16, 17, 33} {
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
	for _, k := range kernels() {
		t.Run(k.name, func(t *testing.T) { withKernel(k, func() { testSumsProperty(t) }) })
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

// TestSumsAllocs checks that Sums allocates nothing, with every kernel,
// in lockstep (lengths of one block count) and not (lengths that are
// not).
func TestSumsAllocs(t *testing.T) {
	for _, k := range kernels() {
		for _, spread := range []int{1, 40} {
			msgs := make([][]byte, 20)
			for i := range msgs {
				msgs[i] = make([]byte, 64+i*spread)
			}
			dst := make([][Size]byte, len(msgs))
			withKernel(k, func() {
				if n := testing.AllocsPerRun(100, func() { Sums(dst, msgs) }); n != 0 {
					t.Errorf("%s, lengths 64 + %d i: %v allocations per call", k.name, spread, n)
				}
			})
		}
	}
}

// TestKernelRuns checks that each kernel runs where it is chosen: with
// AVX-512 block16 alone; with AVX2 block8 for a group of 8 messages or
// fewer and block16y for more. On a processor with AVX-512, block16
// would give the same digests where an AVX2 kernel should run, and fail
// only on one without it.
func TestKernelRuns(t *testing.T) {
	for _, k := range kernels()[1:] {
		for _, tt := range []struct {
			batch, spread int
			want          [3]bool // kernel8, kernel16y, kernel16 run
		}{
			{5, 0, [3]bool{true, false, false}},
			{5, 1, [3]bool{true, false, false}},
			{8, 0, [3]bool{true, false, false}}, // narrow
			{8, 1, [3]bool{true, false, false}},
			{9, 0, [3]bool{false, true, false}},
			{9, 1, [3]bool{false, true, false}},
			{2*Lanes + 3, 0, [3]bool{true, true, false}}, // the last group, of 3, on block8
			{2*Lanes + 12, 0, [3]bool{false, true, false}},
			{2*Lanes + 3, 1, [3]bool{false, true, false}},
		} {
			var ran [3]bool
			onHash = func(kernel int) { ran[kernel] = true }
			msgs := make([][]byte, tt.batch)
			for i := range msgs {
				msgs[i] = make([]byte, 100+i*tt.spread*64)
			}
			dst := make([][Size]byte, len(msgs))
			withKernel(k, func() { Sums(dst, msgs) })
			onHash = nil
			checkSums(t, dst, msgs, k.name)
			want := tt.want
			if k.zmm {
				want = [3]bool{false, false, true}
			}
			if ran != want {
				t.Errorf("%s, batch %d, spread %d: kernels 8, 16y, 16 ran %v, want %v", k.name, tt.batch, tt.spread, ran, want)
			}
		}
	}
}

func FuzzSums(f *testing.F) {
	f.Add([]byte("abc"), uint8(3))
	f.Add(make([]byte, 1000), uint8(9))
	// Seeds whose cuts pick each kernel (cuts % len(kernels())), so that
	// go test alone runs each on these inputs.
	f.Add(make([]byte, 700), uint8(1))
	f.Add(make([]byte, 1500), uint8(2))
	ks := kernels()
	f.Fuzz(func(t *testing.T, data []byte, cuts uint8) {
		// The kernel comes from the input too, so that every kernel
		// sees every input shape.
		kern := ks[int(cuts)%len(ks)]
		savedLanes, savedZmm := lanes, zmm
		lanes, zmm = kern.lanes, kern.zmm
		defer func() { lanes, zmm = savedLanes, savedZmm }()
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
