package timer

import (
	"errors"
	"os"
	"syscall"
	"time"
	"unsafe"
)

// A kernelTimer is a timerfd on CLOCK_MONOTONIC, non-blocking, so that a
// read waits in the runtime's network poller.
type kernelTimer struct {
	f  *os.File
	rc syscall.RawConn // holds the descriptor open while it is set
}

const (
	clockMonotonic = 1
	tfdNonblock    = syscall.O_NONBLOCK
	tfdCloexec     = syscall.O_CLOEXEC
)

func newKernelTimer() (*kernelTimer, error) {
	fd, _, errno := syscall.Syscall(syscall.SYS_TIMERFD_CREATE, clockMonotonic, tfdNonblock|tfdCloexec, 0)
	if errno != 0 {
		return nil, errno
	}
	f := os.NewFile(fd, "timerfd")
	if f == nil {
		syscall.Close(int(fd))
		return nil, errors.New("timerfd: bad descriptor")
	}
	// os.NewFile falls back to a file the poller does not wait on when it
	// cannot register the descriptor (the epoll watch limit): its reads
	// would fail at once, spinning the alarm's goroutine. Such a file
	// has no deadlines; the caller then uses a Go timer.
	if err := f.SetReadDeadline(time.Time{}); err != nil {
		f.Close()
		return nil, err
	}
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &kernelTimer{f: f, rc: rc}, nil
}

// itimerspec is struct itimerspec.
type itimerspec struct {
	interval syscall.Timespec
	value    syscall.Timespec
}

// set arms the timer to fire d from now, or disarms it if d is 0. After
// close it does nothing.
func (k *kernelTimer) set(d time.Duration) {
	spec := itimerspec{value: syscall.NsecToTimespec(int64(d))}
	k.rc.Control(func(fd uintptr) {
		// It fails only for a bad descriptor or value, neither of
		// which Control and NsecToTimespec let through.
		syscall.Syscall6(syscall.SYS_TIMERFD_SETTIME, fd, 0, uintptr(unsafe.Pointer(&spec)), 0, 0, 0)
	})
}

// wait blocks until the timer fires and reports true, or false once the
// timer is closed.
func (k *kernelTimer) wait() bool {
	var b [8]byte // the count of expirations
	err := k.rc.Read(func(fd uintptr) bool {
		for {
			// A read of a non-blocking timerfd cannot block.
			var e syscall.Errno
			_, _, e = syscall.Syscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
			if e == syscall.EINTR {
				continue
			}
			// On a timerfd of CLOCK_MONOTONIC that the poller waits
			// on (newKernelTimer checks), no error other than EAGAIN
			// (not fired yet) is known; should one come, a value on C
			// is harmless where a silent alarm would stall the engine.
			return e != syscall.EAGAIN
		}
	})
	// The poller's only error here is the close: no deadline is set.
	return err == nil
}

func (k *kernelTimer) close() { k.f.Close() }
