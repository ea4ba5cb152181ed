package udpdriver_test

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"time"

	"github.com/fastnet-engine/fastnet/udpdriver"
)

// A server that answers every message in capitals on the channel it came
// on, and a client that sends it one.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	l, err := udpdriver.Listen(ctx, "127.0.0.1:0", udpdriver.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept(ctx)
			if err != nil {
				return // the listener is closed
			}
			go func() { // until the client has gone
				for m, err := c.Receive(ctx); err == nil; m, err = c.Receive(ctx) {
					c.Send(ctx, m.Channel, bytes.ToUpper(m.Data), m.Reliable)
				}
			}()
		}
	}()

	c, err := udpdriver.Dial(ctx, l.Addr().String(), udpdriver.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if err := c.Send(ctx, 7, []byte("hello, fastnet"), true); err != nil {
		log.Fatal(err)
	}
	m, err := c.Receive(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("channel %d, reliable %v: %s\n", m.Channel, m.Reliable, m.Data)
	// Output: channel 7, reliable true: HELLO, FASTNET
}
