package driver_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/netip"
	"time"

	"github.com/fastnet-engine/fastnet/driver"
	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/tcpdriver"
	"github.com/fastnet-engine/fastnet/udpdriver"
)

// serve answers every message in capitals on the channel it came on, with
// the same reliability, until the listener closes.
func serve(ctx context.Context, l *driver.Listener) {
	for {
		c, err := l.Accept(ctx)
		if err != nil {
			return // the listener is closed
		}
		go func() {
			for m, err := c.Receive(ctx); err == nil; m, err = c.Receive(ctx) {
				c.Send(ctx, m.Channel, bytes.ToUpper(m.Data), m.Reliable)
			}
		}()
	}
}

// A server that answers every message in capitals on the channel it came
// on, and a client over UDP that sends it one.
func Example_udp() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	l, err := udpdriver.Listen(ctx, "127.0.0.1:0", udpdriver.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	go serve(ctx, l)

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

// The same over TCP: only the package that opens the socket changes.
func Example_tcp() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	l, err := tcpdriver.Listen(ctx, "127.0.0.1:0", tcpdriver.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	go serve(ctx, l)

	c, err := tcpdriver.Dial(ctx, l.Addr().String(), tcpdriver.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if err := c.Send(ctx, 42, []byte("over tcp"), true); err != nil {
		log.Fatal(err)
	}
	m, err := c.Receive(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("channel %d: %s\n", m.Channel, m.Data)
	// Output: channel 42: OVER TCP
}

// Asking what went wrong: a server that refuses, then one that closes.
func Example_errors() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	full := fastnet.Config{Accept: func(addr netip.AddrPort) error { return errors.New("server full") }}
	l, err := udpdriver.Listen(ctx, "127.0.0.1:0", udpdriver.Config{Engine: full})
	if err != nil {
		log.Fatal(err)
	}
	_, err = udpdriver.Dial(ctx, l.Addr().String(), udpdriver.Config{})
	var refused *fastnet.RefusedError
	if errors.As(err, &refused) {
		fmt.Println("refused:", refused.Reason)
	}
	l.Close()

	l, err = udpdriver.Listen(ctx, "127.0.0.1:0", udpdriver.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	c, err := udpdriver.Dial(ctx, l.Addr().String(), udpdriver.Config{})
	if err != nil {
		log.Fatal(err)
	}
	s, err := l.Accept(ctx)
	if err != nil {
		log.Fatal(err)
	}
	s.CloseWithReason("game over")

	_, err = c.Receive(ctx)
	var pc *fastnet.PeerClosedError
	switch {
	case errors.As(err, &pc):
		fmt.Println("the server closed the connection:", pc.Reason)
	case errors.Is(err, fastnet.ErrTimeout):
		fmt.Println("the server went away")
	}
	fmt.Println("ended:", errors.Is(err, fastnet.ErrClosed))
	// Output:
	// refused: server full
	// the server closed the connection: game over
	// ended: true
}

// Reading a connection's statistics while it runs.
func Example_statistics() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	l, err := udpdriver.Listen(ctx, "127.0.0.1:0", udpdriver.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	go serve(ctx, l)
	c, err := udpdriver.Dial(ctx, l.Addr().String(), udpdriver.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	for i := range 10 {
		c.Send(ctx, 0, fmt.Appendf(nil, "message %d", i), true)
	}
	for range 10 {
		if _, err := c.Receive(ctx); err != nil {
			log.Fatal(err)
		}
	}
	s := c.Stats()
	fmt.Println("sent:", s.MessagesSent, "delivered:", s.MessagesDelivered)
	fmt.Println("round trip measured:", s.RTT > 0 || s.MinRTT > 0)
	// Output:
	// sent: 10 delivered: 10
	// round trip measured: true
}

// Shutting a server down: Listener.Close closes every connection
// gracefully, the clients hear why, and Accept returns net.ErrClosed.
func Example_shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	l, err := udpdriver.Listen(ctx, "127.0.0.1:0", udpdriver.Config{})
	if err != nil {
		log.Fatal(err)
	}
	accepted := make(chan error, 1)
	go func() {
		for {
			s, err := l.Accept(ctx)
			if err != nil {
				accepted <- err
				return
			}
			go func() { // one echo
				if m, err := s.Receive(ctx); err == nil {
					s.Send(ctx, m.Channel, m.Data, m.Reliable)
				}
			}()
		}
	}()
	c, err := udpdriver.Dial(ctx, l.Addr().String(), udpdriver.Config{})
	if err != nil {
		log.Fatal(err)
	}
	c.Send(ctx, 0, []byte("ping"), true)
	if _, err := c.Receive(ctx); err != nil {
		log.Fatal(err)
	}

	l.CloseWithReason("maintenance")
	fmt.Println("Accept:", errors.Is(<-accepted, net.ErrClosed))
	<-c.Done()
	var pc *fastnet.PeerClosedError
	if errors.As(c.Err(), &pc) {
		fmt.Println("client heard:", pc.Reason)
	}
	// Output:
	// Accept: true
	// client heard: maintenance
}
