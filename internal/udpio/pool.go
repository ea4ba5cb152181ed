package udpio

import "sync"

// BufferSize is the size of the receive buffers the package hands out. It
// holds the largest UDP payload over IPv4 (65507 bytes, which D21 requires
// receivers to accept) and over IPv6 (65527 bytes), so that no datagram read
// into such a buffer is ever truncated.
const BufferSize = 65536

// MaxDatagram is the largest datagram a Fastnet receiver accepts (D21).
const MaxDatagram = 65507

var buffers = sync.Pool{New: func() any { return new([BufferSize]byte) }}

// GetBuffer returns a buffer of length and capacity BufferSize from a pool
// shared by the process. Its contents are arbitrary. Give it back with
// [PutBuffer] once nothing refers to it any more.
func GetBuffer() []byte {
	return buffers.Get().(*[BufferSize]byte)[:]
}

// PutBuffer returns to the pool a buffer obtained from [GetBuffer] (or any
// slice whose capacity is exactly BufferSize; it may have been resliced).
// Other slices are ignored, so that a stray small buffer never enters the
// pool. The caller must not use b afterwards.
func PutBuffer(b []byte) {
	if cap(b) != BufferSize {
		return
	}
	buffers.Put((*[BufferSize]byte)(b[:BufferSize]))
}
