package udpdriver_test

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"net"
	"time"

	"github.com/fastnet-engine/fastnet/udpdriver"
)

// A server on a socket the application opened itself, here to choose its
// address and buffer sizes (the same serves a socket already known to a
// NAT, or a net.PacketConn of its own making): ListenPacket takes it over,
// and closing the listener closes it.
func ExampleListenPacket() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	uc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		log.Fatal(err)
	}
	l, err := udpdriver.ListenPacket(ctx, uc, udpdriver.Config{SocketBuffer: 1 << 20})
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
			go func() {
				for m, err := c.Receive(ctx); err == nil; m, err = c.Receive(ctx) {
					c.Send(ctx, m.Channel, bytes.ToUpper(m.Data), m.Reliable)
				}
			}()
		}
	}()

	c, err := udpdriver.Dial(ctx, uc.LocalAddr().String(), udpdriver.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if err := c.Send(ctx, 3, []byte("own socket"), true); err != nil {
		log.Fatal(err)
	}
	m, err := c.Receive(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("channel %d: %s\n", m.Channel, m.Data)
	// Output: channel 3: OWN SOCKET
}
