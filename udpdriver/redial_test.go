package udpdriver

import (
	"context"
	"testing"
	"time"
)

// N123: a Peer dials a server, closes the connection, and dials it again
// from its one socket: the second dial connects, the server having heard
// its "disconnect".
func TestPeerRedialAfterClose(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := Listen(ctx, "127.0.0.1:0", Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan *Conn, 2)
	go func() {
		for {
			c, err := l.Accept(ctx)
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	p, err := Open(ctx, "127.0.0.1:0", Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := p.Dial(ctx, l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	sc := <-accepted
	c.Close()
	select {
	case <-sc.Done(): // the server heard the "disconnect"
	case <-ctx.Done():
		t.Fatal("server never heard the close")
	}
	c2, err := p.Dial(ctx, l.Addr().String())
	if err != nil {
		t.Fatalf("second dial from the same Peer: %v", err)
	}
	c2.Close()
}
