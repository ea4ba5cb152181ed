package tcpdriver

import (
	"context"
	"net"
	"testing"
	"time"
	"unsafe"

	"github.com/fastnet-engine/fastnet/driver"
	"github.com/fastnet-engine/fastnet/fastnet"
)

// dialTransport is Dial that also returns the client's transport, for
// tests that drive the read role as Conn.Receive does.
func dialTransport(t testing.TB, ctx context.Context, addr string, cfg Config) (*driver.Conn, *transport) {
	t.Helper()
	cfg.Engine.Role = fastnet.Client
	e, err := newEngine(cfg)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	tr := newTransport(e, cfg)
	e.Start(tr)
	c, err := e.Dial(ctx, tr.add(nc, false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Abort("test over") })
	return c, tr
}

// listenDial starts a server with cfg on loopback and dials it as
// dialTransport does; the server ends with t.
func listenDial(t testing.TB, ctx context.Context, cfg Config) (*Listener, *driver.Conn, *transport) {
	t.Helper()
	l, err := Listen(ctx, "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	c, tr := dialTransport(t, ctx, l.Addr().String(), cfg)
	return l, c, tr
}

// roleOf returns who holds the read role of tc's stream.
func roleOf(tc *tcpConn) role {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	return tc.role
}

// leaveRoleFree has sc send to c, and c receive, until a Receive has left
// the read role of c's stream (tc) free.
func leaveRoleFree(t *testing.T, ctx context.Context, c, sc *driver.Conn, tc *tcpConn) {
	t.Helper()
	for roleOf(tc) != roleFree {
		if err := sc.Send(ctx, 1, []byte("ping"), true); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Receive(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRoleLeftByWaitingReceive: a Receive registers for a free read role
// (WaitRole), the idle timer fires meanwhile and leaves the role to it,
// and the Receive goes without the role (its message came another way, or
// its context ended). The reader goroutine must still take the role, or
// nobody reads the stream while the application does not Receive (N27).
func TestRoleLeftByWaitingReceive(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cfg := Config{}
	cfg.Engine.Timeout = time.Second
	l, c, tr := listenDial(t, ctx, cfg)
	sc, err := l.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A Receive that takes the role and leaves it free.
	leaveRoleFree(t, ctx, c, sc, tr.conn(c.RemoteAddr()))
	token, stream := tr.WaitRole(c.RemoteAddr())
	if token == nil {
		t.Fatal("WaitRole: no role to wait for")
	}
	time.Sleep(4 * idleDelay) // the idle timer fires
	tr.UnwaitRole(stream, false)
	const n = 5
	for i := range n {
		if err := sc.Send(ctx, 1, []byte{byte(i)}, true); err != nil {
			t.Fatal(err)
		}
	}
	// More than Timeout without a Receive: the peer's heartbeats are
	// answered only if the reader goroutine reads.
	time.Sleep(2 * cfg.Engine.Timeout)
	if err := c.Err(); err != nil {
		t.Fatalf("the connection ended while nobody read its stream: %v", err)
	}
	if q, want := c.Queued(), n*(1+int(unsafe.Sizeof(driver.Message{}))); q != want {
		t.Fatalf("%d bytes queued, want the %d messages read in the background (%d)", q, n, want)
	}
}

// A Receive that took the read role of a connection's stream reads that
// stream, and gives that role back, even if another connection from the
// same address replaced it in the transport meanwhile (N110). Before,
// ReadFor looked the connection up by address again: it read the other
// stream without holding its role, and gave the other's role back, which
// left the first one's lost (its reader goroutine, and Close, waiting for
// it for good).
func TestReadForTheRoleTaken(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, c, tr := listenDial(t, ctx, Config{})
	sc, err := l.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	addr := c.RemoteAddr()
	first := tr.conn(addr)
	leaveRoleFree(t, ctx, c, sc, first)
	r, ok := tr.TakeRole(addr)
	if !ok || r != driver.StreamRole(first) {
		t.Fatalf("TakeRole: %v, %v; want the connection's role", r, ok)
	}
	// Another connection takes the address's place, as a new stream
	// from the same peer address would while the first one winds down.
	_, other := socketPair(t)
	tr.add(other, false)
	second := tr.conn(other.RemoteAddr().(*net.TCPAddr).AddrPort())
	tr.mu.Lock()
	tr.conns[addr] = second
	tr.last.Store(nil)
	tr.mu.Unlock()
	if tr.conn(addr) != second {
		t.Fatal("the address does not find the second connection")
	}
	secondTokens := len(second.token)
	read := make(chan error, 1)
	go func() { read <- tr.ReadFor(ctx, r, func() bool { return true }) }()
	select {
	case err := <-read:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		// Undo what it did, so that the connections can end.
		<-second.token
		<-read
		first.token <- struct{}{}
		tr.mu.Lock()
		tr.conns[addr] = first
		tr.mu.Unlock()
		t.Fatal("ReadFor hangs: it gives back a role that is not free to give")
	}
	if n := len(first.token); n != 1 || roleOf(first) != roleFree {
		t.Errorf("the first connection's role: %d tokens, %v; want it given back, free", n, roleOf(first))
	}
	if n := len(second.token); n != secondTokens {
		t.Errorf("the second connection's role tokens went from %d to %d: ReadFor gave back a role it did not take", secondTokens, n)
	}
	// Put the address back, so that the connections end as usual.
	tr.mu.Lock()
	tr.conns[addr] = first
	tr.mu.Unlock()
}
