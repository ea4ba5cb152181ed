package udpio

import (
	"errors"
	"net"
	"syscall"
)

// batchSupported says whether the platform has recvmmsg and sendmmsg.
const batchSupported = true

// unsupported reports whether err says the kernel lacks the batched calls,
// in which case the Conn falls back to one call per datagram.
func unsupported(err error) bool {
	return errors.Is(err, syscall.ENOSYS) || errors.Is(err, syscall.EOPNOTSUPP)
}

// bufferSize returns the socket's receive (read) or send buffer size as the
// kernel reports it, or 0 if it cannot be read.
func bufferSize(uc *net.UDPConn, read bool) int {
	opt := syscall.SO_SNDBUF
	if read {
		opt = syscall.SO_RCVBUF
	}
	return getsockopt(uc, opt)
}

// forceBuffer sets the buffer past net.core.rmem_max or wmem_max, which
// only a process with CAP_NET_ADMIN may do; failure is ignored.
func forceBuffer(uc *net.UDPConn, size int, read bool) {
	opt := syscall.SO_SNDBUFFORCE
	if read {
		opt = syscall.SO_RCVBUFFORCE
	}
	rc, err := uc.SyscallConn()
	if err != nil {
		return
	}
	rc.Control(func(fd uintptr) {
		syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, opt, size)
	})
}

func getsockopt(uc *net.UDPConn, opt int) int {
	rc, err := uc.SyscallConn()
	if err != nil {
		return 0
	}
	v := 0
	rc.Control(func(fd uintptr) {
		if n, err := syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, opt); err == nil {
			v = n
		}
	})
	return v
}
