package tcpdriver

import (
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/internal/rawcall"
)

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(t *testing.T) (a, b *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		done <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s := <-done
	if s == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return c.(*net.TCPConn), s.(*net.TCPConn)
}

// TestRawStream checks the TCP reads made with the driver's own calls
// (rawStream) against what the standard library's give: data in order,
// a deadline that ends a waiting read and loses nothing, io.EOF at the
// peer's close, the reset as a syscall error, and net.ErrClosed after
// Close; with GOMAXPROCS 1 too, where the calls are raw (rawcall).
func TestRawStream(t *testing.T) {
	for _, procs := range []int{0, 1} {
		t.Run(map[int]string{0: "default", 1: "onep"}[procs], func(t *testing.T) {
			if procs > 0 {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				if !rawcall.Await(5 * time.Second) {
					t.Fatal("raw calls not permitted with GOMAXPROCS 1")
				}
			}
			a, b := tcpPair(t)
			r, ok := streamReader(b).(*rawStream)
			if !ok {
				t.Fatalf("streamReader gave %T, want *rawStream", streamReader(b))
			}
			buf := make([]byte, 64)

			// A read waits for the data, then takes what is there.
			go func() {
				time.Sleep(10 * time.Millisecond)
				a.Write([]byte("hello"))
			}()
			n, err := r.Read(buf)
			if err != nil || string(buf[:n]) != "hello" {
				t.Fatalf("Read = %q, %v; want hello", buf[:n], err)
			}
			if n, err := r.Read(nil); n != 0 || err != nil {
				t.Fatalf("Read(nil) = %d, %v", n, err)
			}

			// A deadline ends a waiting read; what comes later is read.
			b.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
			if _, err := r.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("Read past the deadline: %v, want os.ErrDeadlineExceeded", err)
			}
			b.SetReadDeadline(time.Time{})
			a.Write([]byte("again"))
			if n, err := r.Read(buf); err != nil || string(buf[:n]) != "again" {
				t.Fatalf("Read after the deadline = %q, %v; want again", buf[:n], err)
			}

			// The peer's close is io.EOF.
			a.Close()
			if _, err := r.Read(buf); err != io.EOF {
				t.Fatalf("Read after the peer closed: %v, want io.EOF", err)
			}

			// Close of this side: net.ErrClosed.
			b.Close()
			if _, err := r.Read(buf); !errors.Is(err, net.ErrClosed) {
				t.Fatalf("Read after Close: %v, want net.ErrClosed", err)
			}

			// A reset is the syscall's error, as the standard library
			// reports it.
			c, d := tcpPair(t)
			rd := streamReader(d).(*rawStream)
			c.SetLinger(0)
			c.Close()
			_, err = rd.Read(buf)
			var oe *net.OpError
			if !errors.Is(err, syscall.ECONNRESET) || !errors.As(err, &oe) || oe.Op != "read" {
				t.Fatalf("Read after a reset: %v, want a read *net.OpError around ECONNRESET", err)
			}
		})
	}
}

// TestRawStreamAllocs: a read allocates nothing, as net.TCPConn's does.
func TestRawStreamAllocs(t *testing.T) {
	a, b := tcpPair(t)
	r := streamReader(b)
	msg := []byte("ping")
	buf := make([]byte, 64)
	allocs := testing.AllocsPerRun(100, func() {
		a.Write(msg)
		if n, err := io.ReadFull(r, buf[:len(msg)]); n != len(msg) || err != nil {
			t.Fatalf("read: %d, %v", n, err)
		}
	})
	if allocs > 0 {
		t.Errorf("%.1f allocations per write and read, want 0", allocs)
	}
}
