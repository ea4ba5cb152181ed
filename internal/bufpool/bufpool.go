// Package bufpool recycles byte buffers in power-of-two size classes,
// within a bound on the bytes it keeps: the message buffers of the
// channel package's senders and receivers, and of a Stream connection's
// queue (N107).
package bufpool

import "math/bits"

// Pool recycles byte buffers in power-of-two size classes, so that
// steady-state sending and receiving allocate nothing. The bytes it keeps
// are bounded by Limit: a burst that needed many buffers does not pin them
// forever. Each class is also a size class of Go's allocator, so a buffer
// costs the heap exactly its capacity (ClassCap). The zero Pool keeps
// nothing.
type Pool struct {
	free     [numClasses][][]byte
	Retained int // sum of the capacities of the free buffers
	Limit    int // bound on Retained
}

const (
	minClassShift = 5  // the smallest class holds 32 bytes: a chunk of the smallest message MTU, 25 bytes (D12)
	numClasses    = 26 // 32 B .. 1 GiB
)

// ClassOf returns the smallest class whose buffers hold n bytes.
func ClassOf(n int) int {
	if n <= 1<<minClassShift {
		return 0
	}
	return bits.Len(uint(n-1)) - minClassShift
}

// ClassCap returns the capacity of the buffer Get(n) returns: what holding
// n bytes in a pooled buffer costs.
func ClassCap(n int) int {
	if c := ClassOf(n); c < numClasses {
		return 1 << (minClassShift + c)
	}
	return n
}

// Get returns a buffer of length n.
func (p *Pool) Get(n int) []byte {
	c := ClassOf(n)
	if c >= numClasses {
		return make([]byte, n)
	}
	if f := p.free[c]; len(f) > 0 {
		b := f[len(f)-1]
		f[len(f)-1] = nil
		p.free[c] = f[:len(f)-1]
		p.Retained -= cap(b)
		return b[:n]
	}
	return make([]byte, n, 1<<(minClassShift+c))
}

// Put returns b, which came from Get, to the pool. Buffers beyond the
// limit, or of a capacity no class has, are left to the garbage collector.
func (p *Pool) Put(b []byte) {
	n := cap(b)
	c := ClassOf(n)
	if c >= numClasses || n != 1<<(minClassShift+c) || p.Retained+n > p.Limit {
		return
	}
	p.free[c] = append(p.free[c], b[:0])
	p.Retained += n
}

// Trim forgets free buffers, the largest first, until at most keep bytes
// are retained.
func (p *Pool) Trim(keep int) {
	for c := numClasses - 1; c >= 0 && p.Retained > keep; c-- {
		f := p.free[c]
		for len(f) > 0 && p.Retained > keep {
			p.Retained -= cap(f[len(f)-1])
			f[len(f)-1] = nil
			f = f[:len(f)-1]
		}
		p.free[c] = f
	}
}

// Drain forgets every free buffer.
func (p *Pool) Drain() {
	for c := range p.free {
		clear(p.free[c])
		p.free[c] = p.free[c][:0]
	}
	p.Retained = 0
}
