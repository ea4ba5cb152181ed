package tcpdriver

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/fastnet"
)

// TestDialAfterTransportClosed: a server that closes the TCP connection
// before the dial has reached the endpoint (the reader saw the end
// first) fails the dial at once with fastnet.ErrTransportClosed (N145).
// The end was reported for a connection the endpoint did not have yet,
// and the dial waited its whole ConnectTimeout: the first dial of a
// fresh process often lost that race.
func TestDialAfterTransportClosed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
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
