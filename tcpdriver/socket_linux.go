//go:build linux

package tcpdriver

import (
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"

	"github.com/fastnet-engine/fastnet/internal/rawcall"
)

// inlineWrites says whether a Send may write to the socket itself
// (tryWrite): where the socket's descriptor can be written without
// blocking.
const inlineWrites = true

// tryWrite writes as much of b as the socket takes now, without waiting,
// and returns how much that was. An error (the socket full, or broken)
// ends it early: the writer goroutine writes the rest and meets the error
// itself. The socket is non-blocking, so with GOMAXPROCS 1 the writes skip
// the scheduler's system-call state (internal/rawcall, N32).
func tryWrite(rc syscall.RawConn, b []byte) int {
	n := 0
	rc.Write(func(fd uintptr) bool {
		for n < len(b) {
			// The pointer is converted in the call expression itself,
			// which keeps its object alive and in place during the call.
			var m uintptr
			var e syscall.Errno
			if rawcall.Permit() {
				m, _, e = syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&b[n])), uintptr(len(b)-n))
			} else {
				m, _, e = syscall.Syscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&b[n])), uintptr(len(b)-n))
			}
			if e == syscall.EINTR {
				continue
			}
			if e != 0 || m == 0 {
				break
			}
			n += int(m)
		}
		return true // never wait for the socket to be writable
	})
	return n
}

// A rawStream reads a TCP socket with its own read(2) calls through the
// runtime's poller, so that with GOMAXPROCS 1 they skip the scheduler's
// system-call state (internal/rawcall, N32). Deadlines and Close work as
// on the net.Conn, through the poller: the errors wrap
// os.ErrDeadlineExceeded and net.ErrClosed as the net.Conn's do (with
// the operation named "raw-read"). One goroutine reads at a time (the
// frame reader's).
type rawStream struct {
	rc    syscall.RawConn
	laddr net.Addr // for errors, as the standard library reports them
	raddr net.Addr
	// The read in progress, for try, a method value made once so that
	// a read allocates nothing.
	buf []byte
	n   int
	err syscall.Errno
	try func(fd uintptr) bool
}

// streamReader returns what the frame reader reads nc through: a
// rawStream for a TCP connection, nc itself otherwise.
func streamReader(nc net.Conn) io.Reader {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return nc
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nc
	}
	s := &rawStream{rc: rc, laddr: nc.LocalAddr(), raddr: nc.RemoteAddr()}
	s.try = s.attempt
	return s
}

// Read reads what the socket holds into b, waiting for something if it
// holds nothing; at the end of the stream it returns io.EOF.
func (s *rawStream) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	s.buf, s.n, s.err = b, 0, 0
	perr := s.rc.Read(s.try)
	s.buf = nil
	switch {
	case perr != nil:
		return 0, perr
	case s.err != 0:
		return 0, &net.OpError{Op: "read", Net: "tcp", Source: s.laddr, Addr: s.raddr, Err: os.NewSyscallError("read", s.err)}
	case s.n == 0:
		return 0, io.EOF
	}
	return s.n, nil
}

// attempt is one try of a read, called by the poller until it returns
// true: at once, and again each time the socket becomes readable.
func (s *rawStream) attempt(fd uintptr) bool {
	for {
		// The pointer is converted in the call expression itself,
		// which keeps its object alive and in place during the call.
		var m uintptr
		var e syscall.Errno
		if rawcall.Permit() {
			m, _, e = syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&s.buf[0])), uintptr(len(s.buf)))
		} else {
			m, _, e = syscall.Syscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&s.buf[0])), uintptr(len(s.buf)))
		}
		switch e {
		case 0:
			s.n = int(m)
			return true
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false // wait until readable
		}
		s.err = e
		return true
	}
}
