package driver

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/internal/udpio"
)

// slowClose is a socket whose Close, once the socket is closed, waits
// for release and then fails with errSlowClose.
type slowClose struct {
	socket
	closing, release chan struct{}
}

var errSlowClose = errors.New("slow close")

func (s slowClose) Close() error {
	s.uc.Close()
	close(s.closing)
	<-s.release
	return errSlowClose
}

// TestCloseWaitsForEngineClose: the Close of a dialed connection whose
// engine is already shutting down, on its own since the connection ended
// (N142), returns once that is done, with what closing the transport
// returned. It returned at once, nil, the socket perhaps still open.
func TestCloseWaitsForEngineClose(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	se, err := NewEngine(fastnet.Config{Role: fastnet.Server, Transport: fastnet.Datagram}, Options{CombineWrites: true})
	if err != nil {
		t.Fatal(err)
	}
	suc, err := udpio.Listen(ctx, "udp4", "127.0.0.1:0", udpio.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l := se.NewListener(net.UDPAddrFromAddrPort(suc.LocalAddr()))
	se.Start(socket{suc})
	defer se.Close()
	ce, err := NewEngine(fastnet.Config{Role: fastnet.Client, Transport: fastnet.Datagram}, Options{CombineWrites: true})
	if err != nil {
		t.Fatal(err)
	}
	cuc, err := udpio.Listen(ctx, "udp4", "127.0.0.1:0", udpio.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tr := slowClose{socket{cuc}, make(chan struct{}), make(chan struct{})}
	ce.Start(tr)
	c, err := ce.Dial(ctx, suc.LocalAddr())
	if err != nil {
		t.Fatal(err)
	}
	sc, err := l.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sc.CloseWithReason("bye")
	<-c.Done()
	select {
	case <-tr.closing: // the engine closes on its own
	case <-ctx.Done():
		t.Fatal("the ended connection's engine did not close")
	}
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while the engine's transport was still closing", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(tr.release)
	if err := <-closed; !errors.Is(err, errSlowClose) {
		t.Errorf("Close = %v, want the transport's %v", err, errSlowClose)
	}
}
