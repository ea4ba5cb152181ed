package udpdriver_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/udpdriver"
)

// echoServer listens on addr and echoes every message of every
// connection until the test ends.
func echoServer(t *testing.T, ctx context.Context, addr string) *udpdriver.Listener {
	t.Helper()
	l, err := udpdriver.Listen(ctx, addr, udpdriver.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go serveEcho(ctx, l)
	return l
}

// acceptor is what serveEcho serves: a Listener, or a Peer.
type acceptor interface {
	Accept(ctx context.Context) (*udpdriver.Conn, error)
}

// serveEcho echoes every message of every connection a accepts, until
// ctx is done or a is closed.
func serveEcho(ctx context.Context, a acceptor) {
	for {
		c, err := a.Accept(ctx)
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
}

// dialEcho dials addr and has one message echoed.
func dialEcho(ctx context.Context, addr string) error {
	c, err := udpdriver.Dial(ctx, addr, udpdriver.Config{Engine: fastnet.Config{ConnectTimeout: 2 * time.Second}})
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Send(ctx, 1, []byte("x"), true); err != nil {
		return err
	}
	m, err := c.Receive(ctx)
	if err != nil {
		return err
	}
	if string(m.Data) != "x" {
		return fmt.Errorf("echoed %q", m.Data)
	}
	return nil
}

// TestDialUnspecifiedAddress dials a local server at the unspecified
// address of each family, as net.Dial reads it (the local system), and
// at the address its wildcard listener reports: each reaches the server.
func TestDialUnspecifiedAddress(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l := echoServer(t, ctx, ":0")
	port := l.Addr().(*net.UDPAddr).Port
	for _, addr := range []string{
		l.Addr().String(),
		fmt.Sprintf("0.0.0.0:%d", port),
		fmt.Sprintf("[::]:%d", port),
		fmt.Sprintf("[::ffff:0.0.0.0]:%d", port),
	} {
		if err := dialEcho(ctx, addr); err != nil {
			t.Errorf("Dial(%s): %v", addr, err)
		}
	}
}

// TestDialLinkLocalZone dials a server at an IPv6 link-local address of
// this host, with its zone given by name and by number: the zone reaches
// the socket, and the server's answers, which the socket reports with
// the interface's name, are taken for the server's.
func TestDialLinkLocalZone(t *testing.T) {
	var ll netip.Addr
	var ifi net.Interface
	ifs, _ := net.Interfaces()
	for _, i := range ifs {
		if i.Flags&net.FlagUp == 0 {
			continue
		}
		addrs, _ := i.Addrs()
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Is6() && p.Addr().IsLinkLocalUnicast() {
				ll, ifi = p.Addr(), i
				break
			}
		}
		if ll.IsValid() {
			break
		}
	}
	if !ll.IsValid() {
		t.Skip("no interface here has an IPv6 link-local address")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l := echoServer(t, ctx, "[::]:0")
	port := uint16(l.Addr().(*net.UDPAddr).Port)
	for _, zone := range []string{ifi.Name, strconv.Itoa(ifi.Index)} {
		addr := netip.AddrPortFrom(ll.WithZone(zone), port).String()
		if err := dialEcho(ctx, addr); err != nil {
			t.Errorf("Dial(%s): %v", addr, err)
		}
	}
}
