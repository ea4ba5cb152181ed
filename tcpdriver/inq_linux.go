package tcpdriver

import (
	"sync"
	"syscall"
	"unsafe"
)

// inputQuery asks the kernel how many bytes wait unread in a socket's
// receive queue (SIOCINQ). Its function is made once, so that a query
// allocates nothing.
type inputQuery struct {
	mu    sync.Mutex
	rc    syscall.RawConn
	fn    func(fd uintptr)
	n     int32 // the kernel writes an int
	errno syscall.Errno
}

func newInputQuery(rc syscall.RawConn) *inputQuery {
	q := &inputQuery{rc: rc}
	q.fn = func(fd uintptr) {
		_, _, q.errno = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&q.n)))
	}
	return q
}

// waiting reports whether bytes wait in the socket, and whether it could
// tell (not on a nil query, nor on a closed socket).
func (q *inputQuery) waiting() (waiting, known bool) {
	if q == nil {
		return false, false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.n, q.errno = 0, 0
	if err := q.rc.Control(q.fn); err != nil || q.errno != 0 {
		return false, false
	}
	return q.n > 0, true
}
