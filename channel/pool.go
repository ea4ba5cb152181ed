package channel

import "math/bits"

// bufPool recycles byte buffers in power-of-two size classes, so that
// steady-state sending and receiving allocate nothing. The bytes it keeps
// are bounded by limit: a burst that needed many buffers does not pin them
// forever. Each class is also a size class of Go's allocator, so a buffer
// costs the heap exactly its capacity (classCap).
type bufPool struct {
	free     [numClasses][][]byte
	retained int // sum of the capacities in free
	limit    int // bound on retained
}

const (
	minClassShift = 5  // the smallest class holds 32 bytes: a chunk of the smallest message MTU, 25 bytes (D12)
	numClasses    = 26 // 32 B .. 1 GiB
)

// classOf returns the smallest class whose buffers hold n bytes.
func classOf(n int) int {
	if n <= 1<<minClassShift {
		return 0
	}
	return bits.Len(uint(n-1)) - minClassShift
}

// classCap returns the capacity of the buffer get(n) returns: what holding
// n bytes in a pooled buffer costs.
func classCap(n int) int {
	if c := classOf(n); c < numClasses {
		return 1 << (minClassShift + c)
	}
	return n
}

// get returns a buffer of length n.
func (p *bufPool) get(n int) []byte {
	c := classOf(n)
	if c >= numClasses {
		return make([]byte, n)
	}
	if f := p.free[c]; len(f) > 0 {
		b := f[len(f)-1]
		f[len(f)-1] = nil
		p.free[c] = f[:len(f)-1]
		p.retained -= cap(b)
		return b[:n]
	}
	return make([]byte, n, 1<<(minClassShift+c))
}

// put returns b, which came from get, to the pool. Buffers beyond the limit
// are left to the garbage collector.
func (p *bufPool) put(b []byte) {
	n := cap(b)
	c := classOf(n)
	if c >= numClasses || n != 1<<(minClassShift+c) || p.retained+n > p.limit {
		return
	}
	p.free[c] = append(p.free[c], b[:0])
	p.retained += n
}

// trim forgets free buffers, the largest first, until at most keep bytes
// are retained.
func (p *bufPool) trim(keep int) {
	for c := numClasses - 1; c >= 0 && p.retained > keep; c-- {
		f := p.free[c]
		for len(f) > 0 && p.retained > keep {
			p.retained -= cap(f[len(f)-1])
			f[len(f)-1] = nil
			f = f[:len(f)-1]
		}
		p.free[c] = f
	}
}

// drain forgets every free buffer.
func (p *bufPool) drain() {
	for c := range p.free {
		clear(p.free[c])
		p.free[c] = p.free[c][:0]
	}
	p.retained = 0
}
