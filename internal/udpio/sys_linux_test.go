package udpio

import (
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
