package udpdriver_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/udpdriver"
)

// mutePC is a socket whose traffic, both ways, stops once muted is set.
type mutePC struct {
	net.PacketConn
	muted atomic.Bool
}

func (m *mutePC) ReadFrom(b []byte) (int, net.Addr, error) {
	for {
		n, a, err := m.PacketConn.ReadFrom(b)
		if err != nil || !m.muted.Load() {
			return n, a, err
		}
	}
}

func (m *mutePC) WriteTo(b []byte, a net.Addr) (int, error) {
	if m.muted.Load() {
		return len(b), nil
	}
	return m.PacketConn.WriteTo(b, a)
}

// TestDialDuringListenerClose: a client that asks to connect while a
// closing listener's connections linger is refused with the reason of
// the close (N144). Its handshake completed and nobody accepted it; the
// engine then shut down without a word to it, and it believed itself
// connected until its Timeout.
func TestDialDuringListenerClose(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := udpdriver.Listen(ctx, "127.0.0.1:0", udpdriver.Config{Engine: fastnet.Config{Linger: 3 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	raw, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pc := &mutePC{PacketConn: raw}
	a, err := udpdriver.DialPacket(ctx, pc, l.Addr().String(), udpdriver.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Abort("")
	sa, err := l.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pc.muted.Store(true) // the first client's network goes silent,
	if err := sa.Send(ctx, 0, []byte("unacked"), true); err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() { l.CloseWithReason("going down"); close(closed) }() // so its connection lingers
	time.Sleep(300 * time.Millisecond)
	dctx, dcancel := context.WithTimeout(ctx, 2*time.Second)
	defer dcancel()
	b, err := udpdriver.Dial(dctx, l.Addr().String(), udpdriver.Config{})
	if err == nil {
		b.Abort("")
		t.Fatal("Dial succeeded against a closing listener")
	}
	if !errors.Is(err, fastnet.ErrRefused) || !strings.Contains(err.Error(), "going down") {
		t.Errorf("Dial against a closing listener: %v, want refused with the reason of the close", err)
	}
	<-closed
}
