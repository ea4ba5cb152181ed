package tcpdriver

import (
	"context"
	"io"
	"net"
	"testing"
	"time"
)

// socketPair returns the two ends of a TCP connection over loopback.
func socketPair(t *testing.T) (*net.TCPConn, *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a.(*net.TCPConn), b.(*net.TCPConn)
}

// TestReplyWrittenInline: a packet that follows the previous one within
// writeBurst is part of a burst, which the writer goroutine writes, unless
// a packet was read from the stream in between: then it may be that
// packet's reply, and the goroutine sending it writes it (N104). Before,
// a round trip shorter than writeBurst sent every reply through the
// writer goroutine, and the round trip could not get much shorter.
func TestReplyWrittenInline(t *testing.T) {
	if !inlineWrites {
		t.Skip("no inline writes on this system")
	}
	a, b := socketPair(t)
	rc, err := a.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	c := &tcpConn{nc: a, iw: newInlineWriter(rc)}
	// recent sets the time of the last write: within writeBurst (true),
	// long before (false), or as the last step left it (nil).
	yes, no := true, false
	steps := []struct {
		name   string
		read   bool // a packet was read before this one is sent
		recent *bool
		inline bool
	}{
		{"first packet", false, &no, true},
		{"packet right after another", false, &yes, false},
		{"reply right after another", true, &yes, true},
		{"the packet after the reply", false, nil, true},
		{"the next within writeBurst", false, nil, false},
		{"a packet long after the last", false, &no, true},
		{"reply long after the last", true, &no, true},
		{"after a read, sending again at once", false, &yes, false},
	}
	packet := []byte("a packet of the test")
	written := 0
	for _, s := range steps {
		c.mu.Lock()
		if s.read {
			c.answer.Store(true)
		}
		switch {
		case s.recent != nil && *s.recent:
			c.lastWrite = time.Now().Add(time.Hour) // never writeBurst ago
		case s.recent != nil:
			c.lastWrite = time.Now().Add(-time.Hour)
		case !s.inline && !c.lastWrite.IsZero():
			// As the last step left it, as if no time had passed
			// since (a slow machine takes more than writeBurst
			// between two steps). A time the last step wrongly left
			// zero stays zero, and the step fails.
			c.lastWrite = c.lastWrite.Add(time.Hour)
		}
		got := c.writeNowLocked(packet)
		c.mu.Unlock()
		if got != s.inline {
			t.Errorf("%s: written inline %v, want %v", s.name, got, s.inline)
		}
		if got {
			written++
		}
	}
	// What was written inline arrived, each packet behind its length.
	frameLen := 4 + len(packet)
	buf := make([]byte, written*frameLen)
	b.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(b, buf); err != nil {
		t.Fatalf("reading the %d packets written inline: %v", written, err)
	}
	for i := range written {
		if got := string(buf[i*frameLen+4 : (i+1)*frameLen]); got != string(packet) {
			t.Fatalf("packet %d reads %q", i, got)
		}
	}
}

// TestConnLookup: the transport finds a connection by its peer's address
// through the one it found last, which must never outlive its place in
// the connections: a connection that replaces another to the same
// address is found at once, and one forgotten is no longer found.
func TestConnLookup(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, c, tr := listenDial(t, ctx, Config{})
	addr := c.RemoteAddr()
	first := tr.conn(addr)
	if first == nil || tr.conn(addr) != first {
		t.Fatalf("the dialed connection is not found: %v", first)
	}
	// A second TCP connection to the same address replaces the first
	// in the transport's connections.
	nc, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	tr.add(nc, false)
	second := tr.conn(addr)
	if second == nil || second == first {
		t.Fatal("found the replaced connection")
	}
	// Both end (the first's end ends the Fastnet connection to addr,
	// and with it the second): nothing is found any more.
	first.nc.Close()
	second.nc.Close()
	waitFor(t, func() bool {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		return len(tr.conns) == 0
	})
	if got := tr.conn(addr); got != nil {
		t.Fatalf("a forgotten connection is still found: %p", got)
	}
}

// waitFor waits up to 10 seconds for cond.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestReadMarksReply: both ways a stream is read, by a Receive holding
// its role and by the reader goroutine, mark that a packet was read, so
// that the next packet sent may be written inline as its reply (N104).
func TestReadMarksReply(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, c, tr := listenDial(t, ctx, Config{})
	sc, err := l.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tc := tr.conn(c.RemoteAddr())
	send := func() {
		tc.answer.Store(false)
		if err := sc.Send(ctx, 1, []byte("ping"), true); err != nil {
			t.Fatal(err)
		}
	}
	// A Receive that finds the role free reads the stream itself.
	leaveRoleFree(t, ctx, c, sc, tc)
	send()
	if _, err := c.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	if !tc.answer.Load() {
		t.Error("a packet read by a Receive left no mark")
	}
	// Nobody receives: the reader goroutine takes the role back and
	// reads.
	waitFor(t, func() bool { return roleOf(tc) == roleReader })
	send()
	waitFor(t, func() bool { return c.Queued() > 0 })
	if !tc.answer.Load() {
		t.Error("a packet read by the reader goroutine left no mark")
	}
}
