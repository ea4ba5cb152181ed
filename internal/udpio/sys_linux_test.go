package udpio

import (
	"encoding/binary"
	"errors"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
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

// TestInputWaiting checks that InputWaiting sees a datagram waiting in
// the socket without taking it, and that it leaves a pending socket
// error (an ICMP port unreachable) for the read that reports it.
func TestInputWaiting(t *testing.T) {
	// Without receive offload, each datagram is one read message.
	rx := listen(t, "udp4", "127.0.0.1:0", Options{NoOffload: true})
	tx := listen(t, "udp4", "127.0.0.1:0", Options{})
	check := func(want bool) {
		t.Helper()
		if waiting, known := rx.InputWaiting(); waiting != want || !known {
			t.Fatalf("InputWaiting() = %v, %v; want %v, true", waiting, known, want)
		}
	}
	check(false)
	// Asked at each flush while a deadline is put off (N130): nothing
	// allocated once the first call made what it keeps.
	if a := testing.AllocsPerRun(100, func() { rx.InputWaiting() }); a != 0 {
		t.Errorf("InputWaiting allocates %v times a call, want 0", a)
	}
	to := rx.LocalAddr()
	if n, err := tx.WriteBatch([]Message{{Buf: []byte("one"), Addr: to}, {Buf: []byte("two"), Addr: to}}); n != 2 || err != nil {
		t.Fatalf("WriteBatch = %d, %v", n, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if waiting, _ := rx.InputWaiting(); waiting || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	check(true)
	check(true) // asking takes nothing
	msgs := make([]Message, 4)
	for i := range msgs {
		msgs[i].Buf = make([]byte, 64)
	}
	rx.SetReadDeadline(time.Now().Add(5 * time.Second))
	got := 0
	for got < 2 {
		n, err := rx.ReadBatch(msgs)
		if err != nil {
			t.Fatal(err)
		}
		got += n
	}
	check(false)

	// A write to a port nobody listens on leaves an error on the socket
	// (Linux reports ICMP errors on unconnected UDP sockets only when
	// connected, so tx is connected first).
	gone := listen(t, "udp4", "127.0.0.1:0", Options{})
	dead := gone.LocalAddr()
	gone.Close()
	if err := tx.Connect(dead); err != nil {
		t.Skipf("Connect: %v", err)
	}
	tx.WriteBatch([]Message{{Buf: []byte("x"), Addr: dead}})
	time.Sleep(50 * time.Millisecond)
	if waiting, known := tx.InputWaiting(); waiting || !known {
		t.Errorf("InputWaiting() with an error pending = %v, %v; want false, true", waiting, known)
	}
	tx.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := tx.ReadBatch(msgs); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("read after InputWaiting: %v, want the pending ECONNREFUSED", err)
	}
}
