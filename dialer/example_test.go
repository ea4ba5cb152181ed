package dialer_test

import (
	"context"
	"fmt"
	"time"

	"github.com/fastnet-engine/fastnet/dialer"
	"github.com/fastnet-engine/fastnet/tcpdriver"
)

// A client that reaches its server over UDP where it can and over TCP
// where it must.
func ExampleDial() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A server that listens over TCP only, on a port where nothing
	// listens over UDP.
	l, err := tcpdriver.Listen(ctx, "127.0.0.1:0", tcpdriver.Config{})
	if err != nil {
		panic(err)
	}
	defer l.Close()
	go func() {
		if c, err := l.Accept(ctx); err == nil {
			m, _ := c.Receive(ctx)
			c.Send(ctx, m.Channel, m.Data, true)
		}
	}()

	c, path, err := dialer.Dial(ctx, l.Addr().String(), dialer.Config{})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	c.Send(ctx, 1, []byte("hello"), true)
	m, err := c.Receive(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Printf("over %v: %s\n", path, m.Data)
	// Output: over tcp: hello
}
