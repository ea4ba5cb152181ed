// Command kcp is the kcp-go peer of the bench command (bench/): kcp-go v5
// in its fast mode, nodelay 1, interval 10 ms, fast resend after 2
// duplicate acks, no congestion window (SetNoDelay(1, 10, 2, 1)), on both
// sides, with windows of 1,024 segments each way instead of the
// library's 32 (its command-line tools raise them too: 32 segments a round
// trip would measure the window, not the library). No encryption, no
// forward error correction; every message is one KCP message (message
// mode, the library's default). KCP is reliable only: W1-W3.
//
// The bench command builds it and starts it for both roles (see
// peerkit's child protocol).
package main

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"time"

	"github.com/fastnet-engine/fastnet/bench/peers/peerkit"
	kcp "github.com/xtaci/kcp-go/v5"
)

// The fast mode and window sizes (segments).
const (
	noDelay    = 1
	intervalMS = 10
	resend     = 2
	noCwnd     = 1
	window     = 1024
)

type peer struct{}

func (peer) Supports(w peerkit.Workload) bool {
	return w.Name == "W1" || w.Name == "W2" || w.Name == "W3"
}

func (peer) Listen(ctx context.Context, w peerkit.Workload) (string, func(context.Context) (peerkit.Conn, error), io.Closer, error) {
	l, err := kcp.ListenWithOptions("127.0.0.1:0", nil, 0, 0)
	if err != nil {
		return "", nil, nil, err
	}
	accept := func(ctx context.Context) (peerkit.Conn, error) {
		stop := context.AfterFunc(ctx, func() { l.SetDeadline(time.Now()) })
		defer stop()
		s, err := l.AcceptKCP()
		if err != nil {
			return nil, err
		}
		return newConn(s), nil
	}
	return l.Addr().String(), accept, l, nil
}

func (peer) Dial(ctx context.Context, addr string, w peerkit.Workload) (peerkit.Conn, error) {
	s, err := kcp.DialWithOptions(addr, nil, 0, 0)
	if err != nil {
		return nil, err
	}
	return newConn(s), nil
}

// conn is one KCP session.
type conn struct {
	s           *kcp.UDPSession
	buf         []byte
	interrupted atomic.Bool
}

func newConn(s *kcp.UDPSession) *conn {
	s.SetNoDelay(noDelay, intervalMS, resend, noCwnd)
	s.SetWindowSize(window, window)
	return &conn{s: s, buf: make([]byte, 64<<10)}
}

func (c *conn) Send(b []byte, reliable bool) error {
	if !reliable {
		return errors.New("kcp-go sends only reliably")
	}
	_, err := c.s.Write(b)
	return err
}

// Flush has nothing to do: a write is sent at once (no write delay).
func (c *conn) Flush() error { return nil }

func (c *conn) Receive() ([]byte, bool, error) {
	if c.interrupted.Load() {
		return nil, false, peerkit.ErrInterrupted
	}
	n, err := c.s.Read(c.buf)
	if err != nil {
		if c.interrupted.Load() {
			return nil, false, peerkit.ErrInterrupted
		}
		return nil, false, err
	}
	return c.buf[:n], true, nil
}

func (c *conn) Interrupt() {
	c.interrupted.Store(true)
	c.s.SetReadDeadline(time.Now())
}

func (c *conn) Close() error { return c.s.Close() }

func main() { peerkit.Main(peer{}) }
