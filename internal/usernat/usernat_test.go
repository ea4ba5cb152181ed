package usernat

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/fastnet/fastnettest"
)

// publicAddr returns the loopback address 127.0.0.x for a NAT's public
// address, skipping the test where it cannot be bound.
func publicAddr(t *testing.T, x byte) netip.Addr {
	t.Helper()
	a := netip.AddrFrom4([4]byte{127, 0, 0, x})
	c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(a, 0)))
	if err != nil {
		t.Skipf("no loopback address %v here: %v", a, err)
	}
	c.Close()
	return a
}

func listen(t *testing.T) *net.UDPConn {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func addrOf(c net.PacketConn) netip.AddrPort { return c.LocalAddr().(*net.UDPAddr).AddrPort() }

// gateway starts a Gateway on a loopback socket with public address
// public, and returns it with the channel of its events.
func gateway(t *testing.T, public netip.Addr, cfg fastnettest.NATConfig) (*Gateway, chan Event) {
	t.Helper()
	events := make(chan Event, 100)
	g := NewGateway(listen(t), Config{Public: public, NAT: cfg, Events: func(e Event) { events <- e }})
	done := make(chan error, 1)
	go func() { done <- g.Serve() }()
	t.Cleanup(func() {
		g.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return g, events
}

func client(t *testing.T, g *Gateway) *Client {
	t.Helper()
	c := NewClient(listen(t), g.Addr())
	t.Cleanup(func() { c.Close() })
	return c
}

func nextEvent(t *testing.T, events chan Event, within time.Duration) Event {
	t.Helper()
	select {
	case e := <-events:
		return e
	case <-time.After(within):
		t.Fatalf("no mapping event within %v", within)
	}
	return Event{}
}

// read returns the next datagram c gets, failing the test after 5 s.
func read(t *testing.T, c net.PacketConn) (string, netip.AddrPort) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 2048)
	n, from, err := c.ReadFrom(buf)
	if err != nil {
		t.Fatal(err)
	}
	return string(buf[:n]), from.(*net.UDPAddr).AddrPort()
}

func send(t *testing.T, c net.PacketConn, to netip.AddrPort, s string) {
	t.Helper()
	if _, err := c.WriteTo([]byte(s), net.UDPAddrFromAddrPort(to)); err != nil {
		t.Fatal(err)
	}
}

// waitStats waits until ok holds of the NAT's counters, for 5 s.
func waitStats(t *testing.T, u *NAT, ok func(fastnettest.NATStats) bool) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); !ok(u.Stats()); {
		if time.Now().After(end) {
			t.Fatalf("counters %+v", u.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestGatewayMapping sends through a port-restricted gateway NAT to a
// server and back, keeps a stranger out, and sees the mapping created,
// expire after its timeout, and a new one made on the next port.
func TestGatewayMapping(t *testing.T) {
	const timeout = time.Second
	public := publicAddr(t, 41)
	cfg := fastnettest.PortRestricted.Config()
	cfg.MappingTimeout = timeout
	g, events := gateway(t, public, cfg)
	c := client(t, g)
	server, stranger := listen(t), listen(t)

	start := time.Now()
	send(t, c, addrOf(server), "out")
	ext := netip.AddrPortFrom(public, fastnettest.DefaultFirstPort)
	if e := nextEvent(t, events, 5*time.Second); e != (Event{Kind: MappingCreated, Inside: addrOf(c), External: ext, Remote: addrOf(server)}) {
		t.Fatalf("event %+v", e)
	}
	if s, from := read(t, server); s != "out" || from != ext {
		t.Fatalf("server got %q from %v, want %q from %v", s, from, "out", ext)
	}
	send(t, stranger, ext, "stranger")
	waitStats(t, g.NAT(), func(s fastnettest.NATStats) bool { return s.Filtered == 1 })
	// (Another datagram out refreshes the mapping, however slow this
	// machine has been since the first.)
	send(t, c, addrOf(server), "out")
	read(t, server)
	send(t, server, ext, "back")
	if s, from := read(t, c); s != "back" || from != addrOf(server) {
		t.Fatalf("client got %q from %v, want %q from %v", s, from, "back", addrOf(server))
	}

	e := nextEvent(t, events, 5*time.Second)
	if e != (Event{Kind: MappingExpired, Inside: addrOf(c), External: ext}) {
		t.Fatalf("event %+v", e)
	}
	if took := time.Since(start); took < timeout {
		t.Fatalf("expired after %v, before the timeout %v", took, timeout)
	}
	send(t, c, addrOf(server), "again")
	next := netip.AddrPortFrom(public, fastnettest.DefaultFirstPort+1)
	if e := nextEvent(t, events, 5*time.Second); e.Kind != MappingCreated || e.External != next {
		t.Fatalf("event %+v, want a mapping at %v", e, next)
	}
	if s, from := read(t, server); s != "again" || from != next {
		t.Fatalf("server got %q from %v", s, from)
	}
}

// TestGatewayRefresh: outbound datagrams keep a mapping alive past its
// timeout.
func TestGatewayRefresh(t *testing.T) {
	const timeout = time.Second
	public := publicAddr(t, 42)
	cfg := fastnettest.FullCone.Config()
	cfg.MappingTimeout = timeout
	g, events := gateway(t, public, cfg)
	c := client(t, g)
	server := listen(t)
	start := time.Now()
	var gap time.Duration // the longest time between two refreshes
	for last := start; time.Since(start) < 5*timeout/2; {
		send(t, c, addrOf(server), "keep")
		gap, last = max(gap, time.Since(last)), time.Now()
		read(t, server)
		time.Sleep(timeout / 20)
	}
	if gap >= timeout/2 {
		t.Skipf("this machine let %v pass between two datagrams out: too slow to tell", gap)
	}
	if e := nextEvent(t, events, time.Second); e.Kind != MappingCreated {
		t.Fatalf("event %+v", e)
	}
	select {
	case e := <-events:
		t.Fatalf("%+v while refreshed", e)
	default:
	}
	if e := nextEvent(t, events, 5*time.Second); e.Kind != MappingExpired {
		t.Fatalf("event %+v", e)
	}
	if n := g.NAT().Stats().MappingsCreated; n != 1 {
		t.Fatalf("%d mappings made", n)
	}
}

// TestGatewayHairpinning: two hosts behind one full cone NAT; one sends to
// the other's external address. With hairpinning it arrives from the
// sender's external address; without, it is dropped.
func TestGatewayHairpinning(t *testing.T) {
	for i, hp := range []bool{true, false} {
		t.Run(map[bool]string{true: "on", false: "off"}[hp], func(t *testing.T) {
			public := publicAddr(t, byte(43+i))
			cfg := fastnettest.FullCone.Config()
			cfg.Hairpinning = hp
			g, _ := gateway(t, public, cfg)
			a, b := client(t, g), client(t, g)
			server := listen(t)
			send(t, a, addrOf(server), "a")
			_, extA := read(t, server)
			send(t, b, addrOf(server), "b")
			_, extB := read(t, server)
			send(t, a, extB, "hairpin")
			if hp {
				if s, from := read(t, b); s != "hairpin" || from != extA {
					t.Fatalf("b got %q from %v, want %q from %v", s, from, "hairpin", extA)
				}
				if s := g.NAT().Stats(); s.Hairpinned != 1 {
					t.Fatalf("counters %+v", s)
				}
				return
			}
			waitStats(t, g.NAT(), func(s fastnettest.NATStats) bool { return s.HairpinDropped == 1 })
			send(t, server, extB, "marker")
			if s, _ := read(t, b); s != "marker" {
				t.Fatalf("b got %q, want the marker only", s)
			}
		})
	}
}

// TestGatewayMalformed: datagrams to the gateway without its header are
// counted and dropped, and the gateway goes on.
func TestGatewayMalformed(t *testing.T) {
	public := publicAddr(t, 45)
	g, _ := gateway(t, public, fastnettest.FullCone.Config())
	raw := listen(t)
	for _, b := range [][]byte{{}, {4, 127, 0}, {9, 1, 2, 3, 4, 5, 6}, {6, 1, 2, 3, 4, 5, 6}} {
		if _, err := raw.WriteToUDPAddrPort(b, g.Addr()); err != nil {
			t.Fatal(err)
		}
	}
	c := client(t, g)
	server := listen(t)
	send(t, c, addrOf(server), "fine")
	if s, _ := read(t, server); s != "fine" {
		t.Fatalf("server got %q", s)
	}
	if n := g.Malformed(); n != 4 {
		t.Fatalf("%d malformed datagrams counted, want 4", n)
	}
}

// TestHeader round-trips both families.
func TestHeader(t *testing.T) {
	for _, s := range []string{"127.0.0.1:7000", "[::1]:65535", "[2001:db8::1]:1", "[::ffff:10.0.0.1]:9"} {
		ap := netip.MustParseAddrPort(s)
		got, payload, err := parseHeader(append(appendHeader(nil, ap), "x"...))
		want := netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
		if err != nil || got != want || string(payload) != "x" {
			t.Errorf("%s: %v %q %v", s, got, payload, err)
		}
	}
}
