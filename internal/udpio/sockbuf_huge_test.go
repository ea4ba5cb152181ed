//go:build linux

package udpio

import (
	"context"
	"testing"
)

// A SocketBuffer too large for the system's int32 asks for the largest
// it can take, not a truncated one (N109): before, 1<<32 reached the
// kernel as 0, and the socket got its minimum buffer, below the default.
func TestSocketBufferHuge(t *testing.T) {
	open := func(size int) (int, int) {
		c, err := Listen(context.Background(), "udp4", "127.0.0.1:0", Options{SocketBuffer: size})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.BufferSizes()
	}
	sysR, sysW := open(-1) // the system's defaults
	for _, size := range []int{1 << 32, 1 << 40, 1 << 62} {
		r, w := open(size)
		if r < sysR || w < sysW {
			t.Errorf("SocketBuffer %d: buffers read %d, write %d bytes: below the system's defaults (%d, %d) kept by SocketBuffer -1", size, r, w, sysR, sysW)
		}
	}
}
