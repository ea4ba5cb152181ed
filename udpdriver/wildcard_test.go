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
			go serveEcho(ctx, l)
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

// hostIPv6 returns an IPv6 address of this host other than loopback and
// link-local, which a socket bound to [::] answers ::1 from only if it
// names it (the route back to ::1 prefers ::1), or false.
func hostIPv6() (netip.Addr, bool) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return netip.Addr{}, false
	}
	for _, a := range addrs {
		p, err := netip.ParsePrefix(a.String())
		if err != nil {
			continue
		}
		if ip := p.Addr(); ip.Is6() && !ip.Is4In6() && ip.IsGlobalUnicast() {
			if c, err := net.ListenUDP("udp6", &net.UDPAddr{IP: ip.AsSlice()}); err == nil {
				c.Close()
				return ip, true
			}
		}
	}
	return netip.Addr{}, false
}

// wildcardServer is what TestWildcardServers dials: a Listener or a Peer.
type wildcardServer interface {
	Accept(ctx context.Context) (*udpdriver.Conn, error)
	Addr() net.Addr
	Close() error
}

// TestWildcardServers (N149): every way of opening a socket that peers
// dial (Listen, ListenPacket, Open, OpenPacket), bound to an unspecified
// address, with batched calls and offload or without, answers a client
// that dialed an address of the host other than the one the route back
// prefers: 127.0.0.2 (IPv4, on 0.0.0.0 and on [::]), and an IPv6 address
// other than ::1 where the host has one, dialed from ::1.
func TestWildcardServers(t *testing.T) {
	type target struct {
		bind, network string
		addr          netip.Addr
	}
	var targets []target
	if probe, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 2)}); err == nil {
		probe.Close()
		second := netip.MustParseAddr("127.0.0.2")
		targets = append(targets, target{"0.0.0.0:0", "udp4", second}, target{"[::]:0", "udp", second})
	}
	if ip, ok := hostIPv6(); ok {
		targets = append(targets, target{"[::]:0", "udp6", ip})
	}
	if len(targets) == 0 {
		t.Skip("no second local address here (127.0.0.2, an IPv6 address other than ::1)")
	}
	opens := []struct {
		name string
		open func(ctx context.Context, network, bind string, cfg udpdriver.Config) (wildcardServer, error)
	}{
		{"Listen", func(ctx context.Context, _, bind string, cfg udpdriver.Config) (wildcardServer, error) {
			return udpdriver.Listen(ctx, bind, cfg)
		}},
		{"ListenPacket", func(ctx context.Context, network, bind string, cfg udpdriver.Config) (wildcardServer, error) {
			pc, err := net.ListenPacket(network, bind)
			if err != nil {
				return nil, err
			}
			return udpdriver.ListenPacket(ctx, pc, cfg)
		}},
		{"Open", func(ctx context.Context, _, bind string, cfg udpdriver.Config) (wildcardServer, error) {
			cfg.Engine.AcceptStrangers = true
			return udpdriver.Open(ctx, bind, cfg)
		}},
		{"OpenPacket", func(ctx context.Context, network, bind string, cfg udpdriver.Config) (wildcardServer, error) {
			pc, err := net.ListenPacket(network, bind)
			if err != nil {
				return nil, err
			}
			cfg.Engine.AcceptStrangers = true
			return udpdriver.OpenPacket(ctx, pc, cfg)
		}},
	}
	cfgs := []struct {
		name string
		cfg  udpdriver.Config
	}{{"default", udpdriver.Config{}}, {"NoBatch", udpdriver.Config{NoBatch: true}}, {"NoOffload", udpdriver.Config{NoOffload: true}}}
	for _, tg := range targets {
		for _, o := range opens {
			for _, c := range cfgs {
				t.Run(tg.bind+"/"+tg.addr.String()+"/"+o.name+"/"+c.name, func(t *testing.T) {
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					defer cancel()
					srv, err := o.open(ctx, tg.network, tg.bind, c.cfg)
					if err != nil {
						t.Fatal(err)
					}
					defer srv.Close()
					go serveEcho(ctx, srv)
					addr := netip.AddrPortFrom(tg.addr, uint16(srv.Addr().(*net.UDPAddr).Port)).String()
					cli := c.cfg
					cli.Engine = fastnet.Config{ConnectTimeout: 3 * time.Second}
					conn, err := udpdriver.Dial(ctx, addr, cli)
					if err != nil {
						t.Fatalf("Dial(%s): %v", addr, err)
					}
					defer conn.Close()
					if err := conn.Send(ctx, 1, []byte("x"), true); err != nil {
						t.Fatal(err)
					}
					if m, err := conn.Receive(ctx); err != nil || string(m.Data) != "x" {
						t.Fatalf("echo: %q, %v", m.Data, err)
					}
				})
			}
		}
	}
}
