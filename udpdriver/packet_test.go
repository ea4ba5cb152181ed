package udpdriver_test

import (
	"bytes"
	"context"
	"net"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/driver"
	"github.com/fastnet-engine/fastnet/udpdriver"
)

// opaque hides a socket's type, so that the driver treats it as a
// net.PacketConn of the caller's own.
type opaque struct{ net.PacketConn }

// oddAddr is an address that is not an IP address and port.
type oddAddr struct{}

func (oddAddr) Network() string { return "odd" }
func (oddAddr) String() string  { return "somewhere" }

// noisy is a net.PacketConn that first reads one datagram from an address
// the driver cannot use.
type noisy struct {
	net.PacketConn
	done bool
}

func (n *noisy) ReadFrom(b []byte) (int, net.Addr, error) {
	if !n.done {
		n.done = true
		return copy(b, "noise"), oddAddr{}, nil
	}
	return n.PacketConn.ReadFrom(b)
}

func udpSocket(t *testing.T) *net.UDPConn {
	t.Helper()
	uc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	return uc
}

// echo serves l until it closes, sending every message back.
func echo(ctx context.Context, l *driver.Listener) {
	for {
		c, err := l.Accept(ctx)
		if err != nil {
			return
		}
		go func() {
			for m, err := c.Receive(ctx); err == nil; m, err = c.Receive(ctx) {
				c.Send(ctx, m.Channel, m.Data, m.Reliable)
			}
		}()
	}
}

// TestBringYourOwnSocket runs a server and a client over sockets the test
// opened, UDP sockets and opaque net.PacketConns, with a message large
// enough to be cut into many packets.
func TestBringYourOwnSocket(t *testing.T) {
	tests := []struct {
		name         string
		server, dial func(*net.UDPConn) net.PacketConn
	}{
		{"udp both", func(uc *net.UDPConn) net.PacketConn { return uc }, func(uc *net.UDPConn) net.PacketConn { return uc }},
		{"opaque server", func(uc *net.UDPConn) net.PacketConn { return opaque{uc} }, func(uc *net.UDPConn) net.PacketConn { return uc }},
		{"opaque both", func(uc *net.UDPConn) net.PacketConn { return opaque{uc} }, func(uc *net.UDPConn) net.PacketConn { return &noisy{PacketConn: uc} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			suc := udpSocket(t)
			l, err := udpdriver.ListenPacket(ctx, tt.server(suc), udpdriver.Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			go echo(ctx, l)
			c, err := udpdriver.DialPacket(ctx, tt.dial(udpSocket(t)), suc.LocalAddr().String(), udpdriver.Config{})
			if err != nil {
				t.Fatal(err)
			}
			msg := bytes.Repeat([]byte("fastnet "), 20000) // 160 kB
			if err := c.Send(ctx, 3, msg, true); err != nil {
				t.Fatal(err)
			}
			m, err := c.Receive(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if m.Channel != 3 || !bytes.Equal(m.Data, msg) {
				t.Fatalf("got %d bytes on channel %d, want the %d sent on 3", len(m.Data), m.Channel, len(msg))
			}
			if tt.name == "opaque both" {
				if got := c.DriverStats().BadAddr; got != 1 {
					t.Errorf("BadAddr = %d, want 1", got)
				}
			}
			if err := c.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			// The endpoint owned the socket: it is closed.
			if _, err := suc.WriteTo([]byte{0}, suc.LocalAddr()); err == nil {
				l.Close()
				if _, err := suc.WriteTo([]byte{0}, suc.LocalAddr()); err == nil {
					t.Error("the server's socket is still open after Listener.Close")
				}
			}
		})
	}
}

func TestBringYourOwnSocketNil(t *testing.T) {
	ctx := context.Background()
	if _, err := udpdriver.ListenPacket(ctx, nil, udpdriver.Config{}); err == nil {
		t.Error("ListenPacket(nil) succeeded")
	}
	if _, err := udpdriver.DialPacket(ctx, nil, "127.0.0.1:1", udpdriver.Config{}); err == nil {
		t.Error("DialPacket(nil) succeeded")
	}
}
