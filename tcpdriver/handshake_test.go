package tcpdriver_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/tcpdriver"
)

// listenTCP starts a server on loopback, closed when the test ends.
func listenTCP(t *testing.T, ctx context.Context, cfg tcpdriver.Config) *tcpdriver.Listener {
	t.Helper()
	l, err := tcpdriver.Listen(ctx, "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// silent opens n TCP connections to addr that never send a byte, closed
// when the test ends.
func silent(t *testing.T, addr string, n int) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, 0, n)
	t.Cleanup(func() {
		for _, nc := range conns {
			nc.Close()
		}
	})
	for range n {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, nc)
	}
	return conns
}

// waitUntil waits up to 20 s until cond holds, and fails the test if it
// never does.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 20 s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// closedByServer reports whether the server has closed nc: a read ends
// with something other than its deadline.
func closedByServer(nc net.Conn, within time.Duration) bool {
	nc.SetReadDeadline(time.Now().Add(within))
	var b [64]byte
	for {
		_, err := nc.Read(b[:])
		if err != nil {
			return !errors.Is(err, os.ErrDeadlineExceeded)
		}
	}
}

// settledGoroutines returns the number of goroutines once it has stopped
// falling for a moment.
func settledGoroutines() int {
	n := runtime.NumGoroutine()
	for range 20 {
		time.Sleep(10 * time.Millisecond)
		m := runtime.NumGoroutine()
		if m >= n {
			return m
		}
		n = m
	}
	return n
}

// echoOnce dials l, has the server echo one message, and closes both ends.
func echoOnce(t *testing.T, ctx context.Context, l *tcpdriver.Listener) {
	t.Helper()
	c, err := tcpdriver.Dial(ctx, l.Addr().String(), tcpdriver.Config{})
	if err != nil {
		t.Fatalf("a real client's Dial: %v", err)
	}
	defer c.Abort("")
	sc, err := l.Accept(ctx)
	if err != nil {
		t.Fatalf("Accept: %v", err)
	}
	defer sc.Abort("")
	msg := []byte("hello")
	if err := c.Send(ctx, 1, msg, true); err != nil {
		t.Fatal(err)
	}
	m, err := sc.Receive(ctx)
	if err != nil || !bytes.Equal(m.Data, msg) {
		t.Fatalf("server received %q, %v", m.Data, err)
	}
}

// TestHandshakeBound opens many TCP connections that never speak: the
// server keeps at most MaxHandshakes of them, closing the oldest to make
// room for each new one, so their goroutines stay bounded, and a real
// client still gets in (N46).
func TestHandshakeBound(t *testing.T) {
	const bound, n = 8, 200
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l := listenTCP(t, ctx, tcpdriver.Config{MaxHandshakes: bound, HandshakeTimeout: time.Hour})
	base := settledGoroutines()

	conns := silent(t, l.Addr().String(), n)
	waitUntil(t, "the server to accept every connection", func() bool {
		s := l.DriverStats()
		return s.HandshakesDropped == n-bound
	})
	if s := l.DriverStats(); s.Handshakes != bound {
		t.Errorf("%d connections in their handshake, want the bound, %d", s.Handshakes, bound)
	}
	// Each has a reader and a writer goroutine; those of the closed
	// ones return.
	waitUntil(t, "the goroutines of the dropped connections to return", func() bool {
		return runtime.NumGoroutine() <= base+2*bound
	})
	if !closedByServer(conns[0], 10*time.Second) {
		t.Error("the oldest silent connection is still open")
	}
	if closedByServer(conns[n-1], 50*time.Millisecond) {
		t.Error("the newest silent connection was closed")
	}

	echoOnce(t, ctx, l)
	s := l.DriverStats()
	if s.Handshakes > bound || s.HandshakesDropped != n-bound+1 {
		t.Errorf("after a real client: %d in their handshake (bound %d), %d dropped (want %d)",
			s.Handshakes, bound, s.HandshakesDropped, n-bound+1)
	}
	if s.HandshakeTimeouts != 0 {
		t.Errorf("%d handshake timeouts, want none", s.HandshakeTimeouts)
	}
}

// TestHandshakeTimeout checks that a server's TCP connection that does
// not complete its handshake within HandshakeTimeout is closed, whether it
// says nothing or starts a frame and stops (N46).
func TestHandshakeTimeout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l := listenTCP(t, ctx, tcpdriver.Config{HandshakeTimeout: 200 * time.Millisecond})
	conns := silent(t, l.Addr().String(), 4)
	// Half a frame's length, then nothing.
	if _, err := conns[3].Write([]byte{0, 0}); err != nil {
		t.Fatal(err)
	}
	for i, nc := range conns {
		if !closedByServer(nc, 10*time.Second) {
			t.Errorf("connection %d still open 10 s after it was accepted", i)
		}
	}
	waitUntil(t, "the timeouts to be counted", func() bool {
		s := l.DriverStats()
		return s.HandshakeTimeouts == 4 && s.Handshakes == 0
	})
	echoOnce(t, ctx, l)
}

// TestHandshakeMemory checks that a server's TCP connection holds small
// buffers until its handshake completes (N46): two of the 64 KiB a
// connection reads and writes through would be 128 KiB each.
func TestHandshakeMemory(t *testing.T) {
	const n = 100
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l := listenTCP(t, ctx, tcpdriver.Config{HandshakeTimeout: time.Hour})
	echoOnce(t, ctx, l) // what the first connection allocates once
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	silent(t, l.Addr().String(), n)
	waitUntil(t, "the server to accept every connection", func() bool { return l.DriverStats().Handshakes == n })
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / n
	t.Logf("%d bytes of heap per connection in its handshake", per)
	if per > 16<<10 {
		t.Errorf("%d bytes of heap per connection in its handshake, want at most 16 KiB", per)
	}
}
