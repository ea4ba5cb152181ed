package dialer

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/driver"
	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/tcpdriver"
	"github.com/fastnet-engine/fastnet/udpdriver"
)

// Tests of X21 (docs/nat.md) over loopback sockets.

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// noLeaks fails the test if goroutines it started are still running a
// while after it and its cleanups end. Call it first.
func noLeaks(t *testing.T) {
	base := runtime.NumGoroutine()
	t.Cleanup(func() {
		for deadline := time.Now().Add(3 * time.Second); runtime.NumGoroutine() > base; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				t.Errorf("goroutines leaked: %d before, %d after:\n%s", base, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
				return
			}
		}
	})
}

// echo accepts connections on l and sends back every message, until l is
// closed.
func echo(ctx context.Context, l *driver.Listener) {
	go func() {
		for {
			c, err := l.Accept(ctx)
			if err != nil {
				return
			}
			go func() {
				for m, err := c.Receive(ctx); err == nil; m, err = c.Receive(ctx) {
					c.Send(ctx, m.Channel, m.Data, m.Reliable)
				}
			}()
		}
	}()
}

// listenUDP starts an echo server over UDP on addr.
func listenUDP(t *testing.T, ctx context.Context, addr string, cfg udpdriver.Config) *driver.Listener {
	t.Helper()
	l, err := udpdriver.Listen(ctx, addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	echo(ctx, l)
	return l
}

// listenTCP starts an echo server over TCP on addr.
func listenTCP(t *testing.T, ctx context.Context, addr string) (*driver.Listener, error) {
	l, err := tcpdriver.Listen(ctx, addr, tcpdriver.Config{})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { l.Close() })
	echo(ctx, l)
	return l, nil
}

// freePort returns a loopback address whose port had a TCP and a UDP
// socket a moment ago, both closed since: most likely nothing listens
// there on either.
func freePort(t *testing.T) string {
	t.Helper()
	for range 20 {
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		pc, err := net.ListenPacket("udp4", addr)
		ln.Close()
		if err == nil {
			pc.Close()
			return addr
		}
	}
	t.Fatal("no port free for both TCP and UDP")
	return ""
}

// silentUDP binds a UDP socket on addr that reads and drops everything: a
// server whose UDP never answers, without the ICMP error that an unbound
// port draws.
func silentUDP(t *testing.T, addr string) {
	t.Helper()
	pc, err := net.ListenPacket("udp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			if _, _, err := pc.ReadFrom(buf); err != nil {
				return
			}
		}
	}()
}

// silentTCP accepts TCP connections on addr and never writes to them,
// counting them.
func silentTCP(t *testing.T, addr string) *atomic.Int32 {
	t.Helper()
	n, err := trySilentTCP(t, addr)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// trySilentTCP is silentTCP, returning the error when addr cannot be
// bound: a port the system picked for UDP may be taken over TCP, by a
// listener or by a connection's end still in TIME_WAIT.
func trySilentTCP(t *testing.T, addr string) (*atomic.Int32, error) {
	t.Helper()
	ln, err := net.Listen("tcp4", addr)
	if err != nil {
		return nil, err
	}
	var n atomic.Int32
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			conns = append(conns, c)
		}
	}()
	return &n, nil
}

// roundTrip checks that c carries a message both ways.
func roundTrip(t *testing.T, ctx context.Context, c *driver.Conn) {
	t.Helper()
	if err := c.Send(ctx, 2, []byte("ping"), true); err != nil {
		t.Fatal(err)
	}
	m, err := c.Receive(ctx)
	if err != nil || string(m.Data) != "ping" {
		t.Fatalf("echo: %q, %v", m.Data, err)
	}
}

// shortConfig makes each handshake give up after timeout.
func shortConfig(timeout time.Duration) Config {
	var c Config
	c.UDP.Engine.ConnectTimeout = timeout
	c.TCP.Engine.ConnectTimeout = timeout
	return c
}

func dial(t *testing.T, ctx context.Context, addr string, cfg Config) (*driver.Conn, Path, time.Duration) {
	t.Helper()
	start := time.Now()
	c, path, err := Dial(ctx, addr, cfg)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("Dial after %v: %v", took, err)
	}
	t.Cleanup(func() { c.Close() })
	return c, path, took
}

// Only UDP listens: UDP wins long before TCP would start.
func TestDialUDP(t *testing.T) {
	noLeaks(t)
	ctx := testContext(t)
	l := listenUDP(t, ctx, "127.0.0.1:0", udpdriver.Config{})
	c, path, took := dial(t, ctx, l.Addr().String(), Config{})
	if path != UDP || took >= DefaultDelay {
		t.Fatalf("path %v after %v, want udp within %v", path, took, DefaultDelay)
	}
	roundTrip(t, ctx, c)
}

// Both dials at once, only UDP listening: TCP's refusal does not end the
// dial; UDP wins.
func TestDialUDPBesideRefusedTCP(t *testing.T) {
	noLeaks(t)
	ctx := testContext(t)
	l := listenUDP(t, ctx, "127.0.0.1:0", udpdriver.Config{})
	c, path, _ := dial(t, ctx, l.Addr().String(), Config{Delay: -1})
	if path != UDP {
		t.Fatalf("path %v, want udp", path)
	}
	roundTrip(t, ctx, c)
}

// Only TCP listens. With nothing bound to the UDP port the UDP dial fails
// at once where the system reports the port unreachable (Linux, N65), and
// TCP starts then instead of after the delay; with a UDP socket that
// swallows datagrams silently, as a firewall that drops UDP does, TCP
// starts after the delay. TCP wins either way.
func TestDialTCPOnly(t *testing.T) {
	for _, tc := range []struct {
		name   string
		silent bool
		delay  time.Duration
	}{
		{"nothing-on-udp", false, 2 * time.Second},
		{"silent-udp", true, 100 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			noLeaks(t)
			ctx := testContext(t)
			addr := listenTCPOnly(t, ctx, tc.silent)
			c, path, took := dial(t, ctx, addr, Config{Delay: tc.delay})
			if path != TCP {
				t.Fatalf("path %v, want tcp", path)
			}
			switch {
			case tc.silent && took < tc.delay:
				t.Errorf("took %v: TCP started before the delay of %v", took, tc.delay)
			case !tc.silent && runtime.GOOS == "linux" && took >= tc.delay:
				t.Errorf("took %v: TCP waited for the delay although UDP had failed", took)
			}
			roundTrip(t, ctx, c)
		})
	}
}

// listenTCPOnly starts an echo server over TCP on a port where nothing
// listens over UDP, or, with silent, where silentUDP does, and returns its
// address.
func listenTCPOnly(t *testing.T, ctx context.Context, silent bool) string {
	t.Helper()
	for range 20 {
		addr := freePort(t)
		if _, err := listenTCP(t, ctx, addr); err == nil {
			if silent {
				silentUDP(t, addr)
			}
			return addr
		}
	}
	t.Fatal("no port free for both TCP and UDP")
	return ""
}

// listenBoth starts echo servers over UDP and TCP on one port.
func listenBoth(t *testing.T, ctx context.Context) string {
	t.Helper()
	for range 20 {
		l := listenUDP(t, ctx, "127.0.0.1:0", udpdriver.Config{})
		if _, err := listenTCP(t, ctx, l.Addr().String()); err == nil {
			return l.Addr().String()
		}
	}
	t.Fatal("no port free for both TCP and UDP")
	return ""
}

// Both listen: UDP wins; and with both dials started at once, whichever
// wins works and the other is gone when Dial returns.
func TestDialBoth(t *testing.T) {
	noLeaks(t)
	ctx := testContext(t)
	addr := listenBoth(t, ctx)
	c, path, _ := dial(t, ctx, addr, Config{})
	if path != UDP {
		t.Fatalf("path %v, want udp", path)
	}
	roundTrip(t, ctx, c)
	paths := map[Path]int{}
	for range 10 {
		c, path, _ := dial(t, ctx, addr, Config{Delay: -1})
		roundTrip(t, ctx, c)
		paths[path]++
		c.Close()
	}
	t.Logf("racing both: %v", paths)
}

// A server that refuses over UDP is believed: no TCP dial follows. The
// delay is long so that only the refusal's handling could start TCP: a
// refusal that takes longer than a short delay under load would let the
// timer start it (and TCP's connection is then aborted, as designed).
func TestDialRefusedOverUDP(t *testing.T) {
	noLeaks(t)
	ctx := testContext(t)
	var cfg udpdriver.Config
	cfg.Engine.Accept = func(netip.AddrPort) error { return errors.New("go away") }
	var l *driver.Listener
	var accepted *atomic.Int32
	for range 20 {
		l = listenUDP(t, ctx, "127.0.0.1:0", cfg)
		var err error
		if accepted, err = trySilentTCP(t, l.Addr().String()); err == nil {
			break
		}
		l.Close()
	}
	if accepted == nil {
		t.Fatal("no port free for both TCP and UDP")
	}
	_, path, err := Dial(ctx, l.Addr().String(), Config{Delay: 5 * time.Second})
	var refused *fastnet.RefusedError
	if !errors.As(err, &refused) || refused.Reason != "go away" || path != UDP {
		t.Fatalf("Dial: %v, %v; want the server's refusal over udp", path, err)
	}
	time.Sleep(50 * time.Millisecond)
	if n := accepted.Load(); n != 0 {
		t.Fatalf("TCP was dialed %d times after a refusal over UDP", n)
	}
}

// Neither transport answers: the dial fails within its bound, the longer
// of the UDP handshake's timeout and the delay plus the TCP handshake's,
// and the error says both timed out.
func TestDialNeitherAnswers(t *testing.T) {
	noLeaks(t)
	ctx := testContext(t)
	addr := freePort(t)
	silentUDP(t, addr)
	accepted := silentTCP(t, addr)
	const timeout, delay = 300 * time.Millisecond, 100 * time.Millisecond
	cfg := shortConfig(timeout)
	cfg.Delay = delay
	start := time.Now()
	_, _, err := Dial(ctx, addr, cfg)
	took := time.Since(start)
	var de *Error
	if !errors.As(err, &de) || !errors.Is(de.UDP, fastnet.ErrTimeout) || !errors.Is(de.TCP, fastnet.ErrTimeout) {
		t.Fatalf("Dial: %v; want both to time out", err)
	}
	if bound := delay + timeout; took < timeout || took > bound+time.Second {
		t.Fatalf("failed after %v, want within %v to %v and a margin", took, timeout, bound)
	}
	if accepted.Load() != 1 {
		t.Fatalf("TCP accepted %d connections, want 1", accepted.Load())
	}
	if !errors.Is(err, fastnet.ErrTimeout) {
		t.Fatal("errors.Is does not see the transports' errors")
	}
}

// Nothing listens on either: the dial fails at once (on Linux, where
// both refusals come from the system) with both reasons.
func TestDialNeitherListening(t *testing.T) {
	noLeaks(t)
	ctx := testContext(t)
	start := time.Now()
	_, _, err := Dial(ctx, freePort(t), Config{Delay: 5 * time.Second})
	took := time.Since(start)
	var de *Error
	if !errors.As(err, &de) || de.TCP == nil {
		t.Fatalf("Dial: %v", err)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("%v does not match ECONNREFUSED", err)
	}
	if runtime.GOOS == "linux" && took > time.Second {
		t.Errorf("failed after %v, want at once", took)
	}
}

// A context that ends stops the dial at once, and TCP is not started
// after it.
func TestDialContextEnds(t *testing.T) {
	noLeaks(t)
	addr := freePort(t)
	silentUDP(t, addr)
	accepted := silentTCP(t, addr)
	ctx, cancel := context.WithTimeout(testContext(t), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, _, err := Dial(ctx, addr, Config{Delay: time.Second})
	var de *Error
	if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &de) || de.TCP != nil {
		t.Fatalf("Dial: %v; want the context's end, TCP untried", err)
	}
	if took := time.Since(start); took > 500*time.Millisecond {
		t.Fatalf("returned %v after the dial started", took)
	}
	if accepted.Load() != 0 {
		t.Fatal("TCP dialed after the context ended")
	}
}

func TestPathAndErrorStrings(t *testing.T) {
	for p, want := range map[Path]string{UDP: "udp", TCP: "tcp", 9: "Path(9)"} {
		if p.String() != want {
			t.Errorf("%d: %q, want %q", p, p, want)
		}
	}
	e := &Error{UDP: errors.New("a")}
	if e.Error() != "dialer: udp: a" || len(e.Unwrap()) != 1 {
		t.Errorf("%q", e.Error())
	}
	e.TCP = errors.New("b")
	if e.Error() != "dialer: udp: a; tcp: b" || len(e.Unwrap()) != 2 {
		t.Errorf("%q", e.Error())
	}
}
