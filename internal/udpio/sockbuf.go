package udpio

import (
	"math"
	"net"
)

// sizeBuffer asks for a receive (read) or send buffer of want bytes, trying
// halves of it down to minSocketBuffer where the platform refuses, and
// returns the size the kernel then reports (0 if it does not say). On Linux,
// where the request is silently capped, it also tries the privileged
// override when the cap leaves the buffer below want.
func sizeBuffer(uc *net.UDPConn, want int, read bool) int {
	set := uc.SetWriteBuffer
	if read {
		set = uc.SetReadBuffer
	}
	// The system takes an int32: a larger request would be truncated,
	// to as little as nothing (N109).
	want = min(want, math.MaxInt32)
	for size := want; size >= minSocketBuffer; size /= 2 {
		if set(size) == nil {
			break
		}
	}
	got := bufferSize(uc, read)
	if got > 0 && got < want {
		forceBuffer(uc, want, read)
		got = bufferSize(uc, read)
	}
	return got
}
