package impair_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/fastnet-engine/fastnet/impair"
	"github.com/fastnet-engine/fastnet/udpdriver"
)

// A Fastnet echo over a path with 20 ms of delay each way and 10 % loss:
// the client dials the relay, not the server, and reliable messages arrive
// all the same.
func Example() {
	ctx := context.Background()
	srv, err := udpdriver.Listen(ctx, "127.0.0.1:0", udpdriver.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	go func() {
		c, err := srv.Accept(ctx)
		if err != nil {
			return
		}
		for {
			m, err := c.Receive(ctx)
			if err != nil {
				return
			}
			c.Send(ctx, m.Channel, m.Data, m.Reliable)
		}
	}()

	r, err := impair.Listen(ctx, "127.0.0.1:0", srv.Addr().String(), impair.Config{
		Loss:  0.1,
		Delay: 20 * time.Millisecond,
		Seed:  1,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()

	c, err := udpdriver.Dial(ctx, r.Addr().String(), udpdriver.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	for i := range 3 {
		if err := c.Send(ctx, 0, fmt.Appendf(nil, "message %d", i), true); err != nil {
			log.Fatal(err)
		}
	}
	for range 3 {
		m, err := c.Receive(ctx)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s\n", m.Data)
	}
	fmt.Println("relayed through", r.Stats().Clients, "client socket")
	// Output:
	// message 0
	// message 1
	// message 2
	// relayed through 1 client socket
}
