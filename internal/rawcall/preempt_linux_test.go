package rawcall

import (
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// TestPreemptsAfterRawWake is the reason for the ticker: with one P, a
// goroutine that a raw read woke and that then runs without yielding must
// still be preempted, so that another runnable goroutine gets the CPU.
// The read wakes it from an idle process, when the runtime's monitor is
// likely asleep until the next timer; no timer but the gate's is pending.
// Without the gate's ticker the other goroutine would wait for the whole
// spin.
func TestPreemptsAfterRawWake(t *testing.T) {
	if testing.Short() {
		t.Skip("spins a CPU for up to a few seconds when it fails")
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))

	fd, _, errno := syscall.Syscall(syscall.SYS_TIMERFD_CREATE, 1 /* CLOCK_MONOTONIC */, syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if errno != 0 {
		t.Skipf("timerfd_create: %v", errno)
	}
	f := os.NewFile(fd, "timerfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}

	const spin = 3 * time.Second
	var start time.Time
	ranAfter := make(chan time.Duration, 1)
	wake := make(chan struct{})
	go func() {
		<-wake
		ranAfter <- time.Since(start)
	}()
	spun := make(chan time.Duration, 1)
	go func() {
		var b [8]byte
		var raw bool
		rc.Read(func(fd uintptr) bool {
			raw = Permit()
			var e syscall.Errno
			if raw {
				_, _, e = syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&b[0])), 8)
			} else {
				_, _, e = syscall.Syscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&b[0])), 8)
			}
			return e != syscall.EAGAIN
		})
		if !raw {
			spun <- -1
			return
		}
		start = time.Now()
		close(wake) // runnable, but this goroutine keeps the P
		var other atomic.Bool
		for time.Since(start) < spin && !other.Load() {
			select {
			case d := <-ranAfter:
				// Only reachable once preempted and rescheduled.
				ranAfter <- d
				other.Store(true)
			default:
			}
		}
		spun <- time.Since(start)
	}()

	// Let the reader park, with raw calls permitted, then fire the timerfd
	// 3 ms later: within the gate's period, so the read is raw.
	time.Sleep(20 * time.Millisecond)
	if !Await(5 * time.Second) {
		t.Fatal("raw calls not permitted with GOMAXPROCS 1")
	}
	spec := struct{ interval, value syscall.Timespec }{value: syscall.NsecToTimespec(int64(3 * time.Millisecond))}
	if _, _, e := syscall.Syscall6(syscall.SYS_TIMERFD_SETTIME, fd, 0, uintptr(unsafe.Pointer(&spec)), 0, 0, 0); e != 0 {
		t.Fatalf("timerfd_settime: %v", e)
	}
	d := <-spun
	if d < 0 {
		t.Skip("the read was not raw (the gate's period passed first)")
	}
	select {
	case ran := <-ranAfter:
		t.Logf("the other goroutine ran %v after the spin began", ran)
		if ran > spin/2 {
			t.Errorf("the other goroutine waited %v for a spinning goroutine woken by a raw read", ran)
		}
	default:
		t.Errorf("the other goroutine did not run during a %v spin", d)
	}
}
