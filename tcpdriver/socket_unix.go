//go:build unix

package tcpdriver

import (
	"syscall"
)

// inlineWrites says whether a Send may write to the socket itself
// (inlineWriter): where the socket's descriptor can be written without
// blocking.
const inlineWrites = true

// inlineWriter writes to a socket without waiting, from the goroutine
// that sends. Its function is made once, so that a write allocates
// nothing; one goroutine uses it at a time (tcpConn.mu).
type inlineWriter struct {
	rc syscall.RawConn
	fn func(fd uintptr) bool
	b  []byte // what to write
	n  int    // how much of it was written
}

func newInlineWriter(rc syscall.RawConn) *inlineWriter {
	w := &inlineWriter{rc: rc}
	w.fn = w.write
	return w
}

// write writes as much of w.b as the socket takes now, counting it in
// w.n. An error (the socket full, or broken) ends it early: the writer
// goroutine writes the rest and meets the error itself.
func (w *inlineWriter) write(fd uintptr) bool {
	for w.n < len(w.b) {
		m, err := syscall.Write(int(fd), w.b[w.n:])
		if m > 0 {
			w.n += m
		}
		if err == syscall.EINTR {
			continue
		}
		if err != nil || m <= 0 {
			break
		}
	}
	return true // never wait for the socket to be writable
}

// tryWrite writes as much of b as the socket takes now, without waiting,
// and returns how much that was.
func (w *inlineWriter) tryWrite(b []byte) int {
	w.b, w.n = b, 0
	w.rc.Write(w.fn)
	w.b = nil
	return w.n
}
