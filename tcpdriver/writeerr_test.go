package tcpdriver_test

import (
	"context"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/tcpdriver"
)

// TestWriteErrorsCounted fills a connection whose client stops reading,
// then closes the server: the write left blocked fails at the close's
// deadline, and the failure is counted in DriverStats.WriteErrors (N48).
func TestWriteErrorsCounted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := tcpdriver.Config{WriteQueue: 64 << 10}
	cfg.Engine.Linger = 100 * time.Millisecond
	l := listenTCP(t, ctx, cfg)
	// The client stops reading its stream after its first message
	// (ReceiveQueue 1, and nothing calls Receive): TCP holds the server.
	c, err := tcpdriver.Dial(ctx, l.Addr().String(), tcpdriver.Config{ReceiveQueue: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Abort("")
	sc, err := l.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	msg := make([]byte, 64<<10)
	for {
		sctx, scancel := context.WithTimeout(ctx, 500*time.Millisecond)
		err := sc.Send(sctx, 1, msg, true)
		scancel()
		if err != nil {
			break // blocked: the socket's buffers are full
		}
	}
	if n := l.DriverStats().WriteErrors; n != 0 {
		t.Fatalf("%d write errors before the close", n)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if n := l.DriverStats().WriteErrors; n == 0 {
		t.Error("the write the close cut short was not counted")
	}
}
