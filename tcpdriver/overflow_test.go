package tcpdriver

import (
	"bytes"
	"math"
	"net"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/datagram"
	"github.com/fastnet-engine/fastnet/driver"
	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/internal/frame"
)

// A peer that floods "query:fastnet", which the endpoint answers anyone,
// always (D15), and never reads its socket, makes the server queue an
// answer for each: WriteQueue holds back only the application's Send.
// Its connection's write queue stops at twice WriteQueue plus the
// endpoint's SendQueueSize, and the connection is closed and counted
// (Stats.WriteOverflows, N107). Before, the queue grew with every query:
// 4.5 MB for 200,000 queries with WriteQueue at 64 KiB.
func TestWriteQueueOverflow(t *testing.T) {
	// Small bounds, so that a few thousand queries pass them even under
	// the race detector.
	cfg := Config{WriteQueue: 4 << 10}
	cfg.Engine.Role = fastnet.Server
	cfg.Engine.MaxMessageSize = 4 << 10
	cfg.Engine.SendQueueSize = 8 << 10
	tr, c, peer := overflowPair(t, cfg)
	if want := 2 * (4<<10 + 8<<10); tr.maxQueue != want {
		t.Fatalf("maxQueue %d, want %d", tr.maxQueue, want)
	}
	packet := func(payload string) []byte {
		return frame.Append(nil, append([]byte{0xff, 0xff}, payload...))
	}
	// The handshake, then a flood of queries; the peer never reads.
	if _, err := peer.Write(packet("connect?")); err != nil {
		t.Fatal(err)
	}
	const n = 200000 // 3.8 MB
	flood := bytes.Repeat(packet("query:fastnet"), n)
	go func() {
		peer.SetWriteDeadline(time.Now().Add(20 * time.Second))
		peer.Write(flood) // fails once the server closes the connection
	}()
	most, s := watchOverflow(tr, c)
	if s.WriteOverflows != 1 {
		t.Fatalf("WriteOverflows %d after %d queries from a peer that reads nothing (queue at most %d bytes seen), want 1", s.WriteOverflows, n, most)
	}
	if most > tr.maxQueue {
		t.Errorf("the write queue reached %d bytes, past its bound %d", most, tr.maxQueue)
	}
	// The connection ends: the transport forgets it once its reader
	// has returned.
	for deadline := time.Now().Add(5 * time.Second); tr.conn(c.remote) != nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the overflowed connection was not forgotten")
		}
	}
}

// A connection whose write queue overflows while its reading is paused
// (the application behind in Receive, N13) ends all the same: the paused
// reader goroutine is woken to read the closed socket, and fails (N107).
func TestWriteQueueOverflowWhilePaused(t *testing.T) {
	cfg := Config{WriteQueue: 64 << 10, HandshakeTimeout: time.Minute}
	cfg.Engine.Role = fastnet.Server
	cfg.Engine.MaxMessageSize = 16 << 10
	cfg.Engine.SendQueueSize = 32 << 10
	tr, c, peer := overflowPair(t, cfg)

	// The intake pauses (as deliverLocked does when ReceiveQueue fills),
	// and the reader goroutine, after one more packet, waits paused.
	tr.PauseRead(c.remote, true)
	if _, err := peer.Write(frame.Append(nil, append([]byte{0xff, 0xff}, "query:fastnet"...))); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)

	// The endpoint's own packets (here written directly) pass the bound.
	big := make([]byte, 12<<10)
	for i := 0; i < 1000; i++ {
		tr.WriteBatch([]datagram.Message{{Buf: big, N: len(big), Addr: c.remote}})
		c.mu.Lock()
		over := c.overflowed
		c.mu.Unlock()
		if over {
			break
		}
		time.Sleep(time.Millisecond)
	}
	c.mu.Lock()
	over := c.overflowed
	c.mu.Unlock()
	if !over {
		t.Fatal("no overflow")
	}
	// The engine hears of it at once, paused or not: the reader is woken
	// to read the closed socket, and fails.
	for deadline := time.Now().Add(5 * time.Second); tr.conn(c.remote) != nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("an overflowed connection whose reading was paused was not ended")
		}
	}
}

// The hard bound saturates: a WriteQueue or SendQueueSize given as "no
// limit" stays one (N109).
func TestHardQueue(t *testing.T) {
	tests := []struct{ w, s, want int }{
		{4 << 20, 1 << 20, 10 << 20},
		{0, 0, 0},
		{math.MaxInt/2 - 10, 10, math.MaxInt - 1},
		{math.MaxInt/2 - 10, 11, math.MaxInt},
		{1 << 62, 1 << 20, math.MaxInt},
		{1 << 20, 1 << 62, math.MaxInt},
		{math.MaxInt, math.MaxInt, math.MaxInt},
	}
	for _, tc := range tests {
		if got := hardQueue(tc.w, tc.s); got != tc.want {
			t.Errorf("hardQueue(%d, %d) = %d, want %d", tc.w, tc.s, got, tc.want)
		}
	}
}

// watchOverflow watches c's write queue for 20 s at most, until it
// overflows, and returns the most it held and the transport's counters.
func watchOverflow(tr *transport, c *tcpConn) (most int, s driver.Stats) {
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		c.mu.Lock()
		most = max(most, len(c.pending))
		over := c.overflowed
		c.mu.Unlock()
		if over {
			break
		}
	}
	tr.AddStats(&s)
	return most, s
}

// overflowPair starts a server transport with cfg and connects a peer to
// it, with small socket buffers, so that little of what the server
// writes is absorbed by the kernel: it returns the transport, the
// server's connection and the peer's socket.
func overflowPair(t *testing.T, cfg Config) (*transport, *tcpConn, net.Conn) {
	t.Helper()
	e, err := newEngine(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tr := newTransport(e, cfg)
	tr.ln = ln
	l := e.NewListener(ln.Addr())
	e.Start(tr)
	t.Cleanup(func() { l.Close(); ln.Close() })
	accepted := make(chan *tcpConn, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		nc.(*net.TCPConn).SetWriteBuffer(4096)
		accepted <- tr.conn(tr.add(nc, true))
	}()
	peer, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { peer.Close() })
	peer.(*net.TCPConn).SetReadBuffer(4096)
	return tr, <-accepted, peer
}

// A peer in its handshake, never past "connect?", is sent only the
// answers to its queries: one that floods queries and reads nothing is
// closed once its write queue passes handshakeQueue, not twice WriteQueue
// plus SendQueueSize (N136). Before, such a connection held 5.8 MB
// queued within 4 s.
func TestHandshakeWriteQueueOverflow(t *testing.T) {
	cfg := Config{HandshakeTimeout: time.Minute}
	cfg.Engine.Role = fastnet.Server
	tr, c, peer := overflowPair(t, cfg)
	flood := bytes.Repeat(frame.Append(nil, []byte("\xff\xffquery:fastnet")), 10000)
	go func() {
		peer.SetWriteDeadline(time.Now().Add(20 * time.Second))
		for {
			if _, err := peer.Write(flood); err != nil {
				return // the server closed the connection
			}
		}
	}()
	most, s := watchOverflow(tr, c)
	if s.WriteOverflows != 1 || most > handshakeQueue {
		t.Errorf("WriteOverflows %d, the queue at most %d bytes; want 1, at most %d", s.WriteOverflows, most, handshakeQueue)
	}
}

// A connection that ends while its writer is blocked on a peer that
// reads nothing is closed within closeWait all the same, and forgotten
// (N136). Before, its socket, goroutines and queue stayed until the
// endpoint closed, and it no longer counted against MaxConnections.
func TestEndedWhileWriterBlocked(t *testing.T) {
	cfg := Config{}
	cfg.Engine.Role = fastnet.Server
	cfg.Engine.Linger = 200 * time.Millisecond
	tr, c, peer := overflowPair(t, cfg)
	packet := func(payload string) []byte { return frame.Append(nil, append([]byte{0xff, 0xff}, payload...)) }
	if _, err := peer.Write(packet("connect?")); err != nil {
		t.Fatal(err)
	}
	// Queries, read by the server and answered into a socket the peer
	// does not read, until the writer is blocked with more queued.
	// 20,000 queries at most, so that the server, slow under the race
	// detector and a loaded machine, reads them all in good time: their
	// answers are well past what the sockets' buffers hold.
	chunk := bytes.Repeat(packet("query:fastnet"), 500)
	stop, flooded := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(flooded)
		peer.SetWriteDeadline(time.Now().Add(time.Minute))
		for range 40 {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := peer.Write(chunk); err != nil {
				return
			}
		}
	}()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		c.mu.Lock()
		blocked := c.writing && len(c.pending) > 64<<10
		c.mu.Unlock()
		if blocked {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the writer never blocked")
		}
	}
	close(stop)
	<-flooded
	if _, err := peer.Write(packet("disconnect bye")); err != nil {
		t.Fatal(err)
	}
	// The queries before it are read and answered first: slowly under
	// the race detector.
	ending := func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.ending
	}
	for deadline := time.Now().Add(30 * time.Second); !ending(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the connection did not end")
		}
	}
	for deadline := time.Now().Add(tr.closeWait + 3*time.Second); tr.conn(c.remote) != nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the ended connection still held 3 s past its closeWait of %v", tr.closeWait)
		}
	}
}
