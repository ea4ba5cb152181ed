package udpio

import (
	"encoding/binary"
	"net"
	"os"
	"syscall"
	"testing"
)

// TestUnsupported checks which errors make a Conn give up batched calls:
// only those saying the kernel lacks them, however they are wrapped.
func TestUnsupported(t *testing.T) {
	wrap := func(op string, errno syscall.Errno) error {
		return &net.OpError{Op: "read", Net: "udp", Err: os.NewSyscallError(op, errno)}
	}
	tests := []struct {
		err  error
		want bool
	}{
		{wrap("recvmmsg", syscall.ENOSYS), true},
		{wrap("sendmmsg", syscall.ENOSYS), true},
		{wrap("sendmmsg", syscall.EOPNOTSUPP), true},
		{wrap("sendmmsg", syscall.ECONNREFUSED), false},
		{wrap("sendmmsg", syscall.EAFNOSUPPORT), false},
		{net.ErrClosed, false},
		{os.ErrDeadlineExceeded, false},
	}
	for _, tt := range tests {
		if got := unsupported(tt.err); got != tt.want {
			t.Errorf("unsupported(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

// segmentOf reads back the segment size putSegmentCmsg wrote.
func segmentOf(oob []byte) int {
	n, level, typ := cmsghdr(oob)
	if n != syscall.CmsgLen(2) || level != solUDP || typ != udpSegment {
		return -1
	}
	return int(binary.NativeEndian.Uint16(oob[syscall.CmsgLen(0):]))
}
