//go:build unix

package tcpdriver

import (
	"syscall"
)

// inlineWrites says whether a Send may write to the socket itself
// (tryWrite): where the socket's descriptor can be written without
// blocking.
const inlineWrites = true

// tryWrite writes as much of b as the socket takes now, without waiting,
// and returns how much that was. An error (the socket full, or broken)
// ends it early: the writer goroutine writes the rest and meets the error
// itself.
func tryWrite(rc syscall.RawConn, b []byte) int {
	n := 0
	rc.Write(func(fd uintptr) bool {
		for n < len(b) {
			m, err := syscall.Write(int(fd), b[n:])
			if m > 0 {
				n += m
			}
			if err == syscall.EINTR {
				continue
			}
			if err != nil || m <= 0 {
				break
			}
		}
		return true // never wait for the socket to be writable
	})
	return n
}
