package udpdriver_test

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/udpdriver"
)

// TestDialWildcardServerAtSecondAddress (N149) dials a server bound to the IPv4
// wildcard at a local address that is not the one the system picks as the
// source of its answers (127.0.0.2, where the route back to the client
// prefers 127.0.0.1): the answers must come from the address dialed, or
// the client's connected socket never sees them.
func TestDialWildcardServerAtSecondAddress(t *testing.T) {
	probe, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 2)})
	if err != nil {
		t.Skipf("no loopback address 127.0.0.2 here: %v", err)
	}
	probe.Close()
	for _, listen := range []string{"0.0.0.0:0", ":0"} {
		t.Run(listen, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			l, err := udpdriver.Listen(ctx, listen, udpdriver.Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			port := l.Addr().(*net.UDPAddr).Port
			go func() {
				for {
					c, err := l.Accept(ctx)
					if err != nil {
						return
					}
					go func() {
						for {
							m, err := c.Receive(ctx)
							if err != nil {
								return
							}
							c.Send(ctx, m.Channel, m.Data, m.Reliable)
						}
					}()
				}
			}()
			addr := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.2"), uint16(port)).String()
			// Where the server's answer to a "connect?" sent to
			// 127.0.0.2 comes from.
			raw, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Close()
			raw.WriteToUDPAddrPort(append([]byte{0xff, 0xff}, "connect?"...), netip.MustParseAddrPort(addr))
			raw.SetReadDeadline(time.Now().Add(2 * time.Second))
			var b [2048]byte
			if _, from, err := raw.ReadFromUDPAddrPort(b[:]); err == nil && from.String() != addr {
				t.Errorf("the answer to a datagram sent to %s came from %s", addr, from)
			}
			c, err := udpdriver.Dial(ctx, addr, udpdriver.Config{Engine: fastnet.Config{ConnectTimeout: 3 * time.Second}})
			if err != nil {
				t.Fatalf("Dial(%s): %v", addr, err)
			}
			defer c.Close()
			if err := c.Send(ctx, 1, []byte("x"), true); err != nil {
				t.Fatal(err)
			}
			if m, err := c.Receive(ctx); err != nil || string(m.Data) != "x" {
				t.Fatalf("echo: %q, %v", m.Data, err)
			}
		})
	}
}
