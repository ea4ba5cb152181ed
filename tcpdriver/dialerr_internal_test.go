package tcpdriver

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/driver"
	"github.com/fastnet-engine/fastnet/fastnet"
)

// closingListener returns a TCP listener that closes every connection as
// it accepts it, until the test ends.
func closingListener(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ln
}

// TestDialServerCloses: a server that closes the TCP connection before
// the handshake completes (not a Fastnet server, or one that dropped it
// among too many handshakes) fails the dial with a *net.OpError that
// matches fastnet.ErrTransportClosed, as Dial documents (N144), not with
// the *CloseError of a connection that was established.
func TestDialServerCloses(t *testing.T) {
	ln := closingListener(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, ln.Addr().String(), Config{})
	if err == nil {
		c.Abort("")
		t.Fatal("Dial succeeded")
	}
	var oe *net.OpError
	var ce *driver.CloseError
	if !errors.As(err, &oe) || oe.Op != "dial" || !errors.Is(err, fastnet.ErrTransportClosed) || errors.As(err, &ce) {
		t.Errorf("Dial = %v: want a *net.OpError matching fastnet.ErrTransportClosed, no *CloseError", err)
	}
}

// TestDialAfterTransportClosed: a server that closes the TCP connection
// before the dial has reached the endpoint (the reader saw the end
// first) fails the dial at once with fastnet.ErrTransportClosed (N145).
// The end was reported for a connection the endpoint did not have yet,
// and the dial waited its whole ConnectTimeout: the first dial of a
// fresh process often lost that race.
func TestDialAfterTransportClosed(t *testing.T) {
	ln := closingListener(t)
	cfg := Config{}
	cfg.Engine.Role = fastnet.Client
	cfg.Engine.ConnectTimeout = 10 * time.Second
	e, err := newEngine(cfg)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	tr := newTransport(e, cfg)
	e.Start(tr)
	defer e.Close()
	remote := tr.add(nc, false)
	// Until the reader has seen the end.
	c := tr.conn(remote)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		c.mu.Lock()
		gone := c.rerr != nil
		c.mu.Unlock()
		if gone {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the reader did not see the server close")
		}
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := e.Dial(ctx, remote)
	if err == nil {
		conn.Abort("")
		t.Fatal("Dial succeeded")
	}
	if !errors.Is(err, fastnet.ErrTransportClosed) || time.Since(start) > 5*time.Second {
		t.Errorf("Dial after the transport closed: %v after %v, want fastnet.ErrTransportClosed at once", err, time.Since(start).Round(time.Millisecond))
	}
}
