package tcpdriver_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/driver"
	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/tcpdriver"
)

// TestDialServerCloses: a server that closes the TCP connection before
// the handshake completes (not a Fastnet server, or one that dropped it
// among too many handshakes) fails the dial with a *net.OpError that
// matches fastnet.ErrTransportClosed, as Dial documents (N144), not with
// the *CloseError of a connection that was established.
func TestDialServerCloses(t *testing.T) {
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
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := tcpdriver.Dial(ctx, ln.Addr().String(), tcpdriver.Config{})
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
