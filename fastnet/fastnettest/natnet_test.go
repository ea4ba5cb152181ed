package fastnettest

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/fastnet"
)

// natWorld is a network with one NAT at natIP, a client fake at inX behind
// it sending to an echo server at y1p1, and two more public fakes at y1p2
// and y2p1 that record what reaches them.
type natWorld struct {
	n                  *Network
	nat                *NAT
	cli, srv, y12, y21 *fake
}

func newNATWorld(t *testing.T, seed uint64, cfg NATConfig) *natWorld {
	t.Helper()
	w := &natWorld{
		n:   NewNetwork(seed),
		cli: &fake{record: true},
		srv: &fake{record: true, echo: -1},
		y12: &fake{record: true},
		y21: &fake{record: true},
	}
	w.nat = w.n.AddNAT(natIP, cfg)
	w.n.AddBehind(w.nat, inX, w.cli)
	w.n.Add(y1p1, w.srv)
	w.n.Add(y1p2, w.y12)
	w.n.Add(y2p1, w.y21)
	return w
}

// A client behind each kind of NAT reaches a public server, which sees it
// at the NAT's external address and answers there; the answer reaches the
// client from the server's address. Strangers sending to the same
// external address get through as the filtering behaviour says (X22).
func TestNetworkNATClientServer(t *testing.T) {
	tests := []struct {
		typ      NATType
		sameHost bool // y1p2 (the server's IP, another port) gets through
		other    bool // y2p1 gets through
	}{
		{FullCone, true, true},
		{AddressRestricted, true, false},
		{PortRestricted, false, false},
		{Symmetric, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.typ.String(), func(t *testing.T) {
			w := newNATWorld(t, 1, tc.typ.Config())
			w.cli.send(y1p1, []byte("hello"))
			run(t, w.n, time.Second)
			if len(w.srv.got) != 1 || w.srv.got[0].from != ext(20000) {
				t.Fatalf("server got %+v, want one datagram from %v", w.srv.got, ext(20000))
			}
			if len(w.cli.got) != 1 || w.cli.got[0].from != y1p1 || string(w.cli.got[0].b) != "hello" {
				t.Fatalf("client got %+v, want the echo from %v", w.cli.got, y1p1)
			}
			w.n.Inject(y1p2, ext(20000), []byte("same host"))
			w.n.Inject(y2p1, ext(20000), []byte("other host"))
			w.n.Inject(y2p1, ext(20001), []byte("no mapping"))
			run(t, w.n, time.Second)
			var want []string
			if tc.sameHost {
				want = append(want, "same host")
			}
			if tc.other {
				want = append(want, "other host")
			}
			var got []string
			for _, a := range w.cli.got[1:] {
				got = append(got, string(a.b))
			}
			if len(got) != len(want) || len(got) > 0 && (got[0] != want[0] || got[len(got)-1] != want[len(want)-1]) {
				t.Fatalf("client got %q, want %q", got, want)
			}
			dropped := uint64(3 - len(want))
			if s := w.n.Stats(); s.NAT != dropped {
				t.Errorf("LinkStats.NAT %d, want %d", s.NAT, dropped)
			}
			checkAccounting(t, w.n)
		})
	}
}

// A symmetric NAT gives each destination its own external port.
func TestNetworkNATSymmetricPorts(t *testing.T) {
	w := newNATWorld(t, 1, Symmetric.Config())
	w.cli.send(y1p2, []byte("a"))
	w.cli.send(y2p1, []byte("b"))
	run(t, w.n, time.Second)
	if w.y12.got[0].from != ext(20000) || w.y21.got[0].from != ext(20001) {
		t.Fatalf("seen from %v and %v", w.y12.got[0].from, w.y21.got[0].from)
	}
}

// A mapping left idle past its timeout drops what the server sends later;
// the server's datagrams do not refresh it.
func TestNetworkNATMappingExpires(t *testing.T) {
	cfg := PortRestricted.Config()
	cfg.MappingTimeout = 30 * time.Second
	w := newNATWorld(t, 1, cfg)
	w.srv.echo = 0
	w.cli.send(y1p1, []byte("hi"))
	run(t, w.n, 20*time.Second)
	w.n.Inject(y1p1, ext(20000), []byte("at 20 s"))
	run(t, w.n, 20*time.Second)
	w.n.Inject(y1p1, ext(20000), []byte("at 40 s"))
	run(t, w.n, time.Second)
	if len(w.cli.got) != 1 || string(w.cli.got[0].b) != "at 20 s" {
		t.Fatalf("client got %+v", w.cli.got)
	}
	if s := w.nat.Stats(); s.NoMapping != 1 {
		t.Fatalf("NAT stats %+v", s)
	}
}

// Two hosts behind one NAT reach each other at their private addresses,
// and at their external ones only with hairpinning, arriving from the
// sender's external address.
func TestNetworkNATSameLAN(t *testing.T) {
	for _, hp := range []bool{false, true} {
		cfg := FullCone.Config()
		cfg.Hairpinning = hp
		n := NewNetwork(1)
		nat := n.AddNAT(natIP, cfg)
		a, b := &fake{record: true}, &fake{record: true}
		srv := &fake{}
		n.AddBehind(nat, inX, a)
		n.AddBehind(nat, inX2, b)
		n.Add(y1p1, srv)
		n.SetPath(inX, inX2, Link{Delay: time.Millisecond})
		a.send(y1p1, nil) // 20000
		b.send(y1p1, nil) // 20001
		run(t, n, time.Second)
		a.send(inX2, []byte("lan"))
		a.send(ext(20001), []byte("hairpin"))
		run(t, n, time.Second)
		want := at(time.Second + time.Millisecond)
		if len(b.got) == 0 || b.got[0].from != inX || string(b.got[0].b) != "lan" || b.got[0].at != want {
			t.Fatalf("hairpinning %v: LAN datagram %+v", hp, b.got)
		}
		if hp {
			if len(b.got) != 2 || b.got[1].from != ext(20000) || string(b.got[1].b) != "hairpin" || b.got[1].at != want {
				t.Fatalf("hairpinned datagram %+v", b.got[1:])
			}
		} else if len(b.got) != 1 || nat.Stats().HairpinDropped != 1 {
			t.Fatalf("without hairpinning: got %+v, stats %+v", b.got, nat.Stats())
		}
	}
}

// Private addresses do not route between LANs, nor from the Internet.
func TestNetworkNATNoRouteToPrivate(t *testing.T) {
	n := NewNetwork(1)
	n1 := n.AddNAT(natIP, FullCone.Config())
	n2 := n.AddNAT(netip.MustParseAddr("203.0.113.2"), FullCone.Config())
	other := netip.MustParseAddrPort("10.1.0.1:5000")
	a, b, pub := &fake{record: true}, &fake{record: true}, &fake{record: true}
	n.AddBehind(n1, inX, a)
	n.AddBehind(n2, other, b)
	n.Add(y1p1, pub)
	a.send(other, []byte("x"))
	pub.send(inX, []byte("y"))
	run(t, n, time.Second)
	if len(b.got)+len(a.got) != 0 {
		t.Fatalf("private addresses routed: %+v %+v", a.got, b.got)
	}
	if s := n.Stats(); s.NoRoute != 2 {
		t.Fatalf("stats %+v", s)
	}
	checkAccounting(t, n)
}

// The link between two nodes applies whatever the NAT maps: the path set
// between the private address and the server delays both ways.
func TestNetworkNATLinks(t *testing.T) {
	w := newNATWorld(t, 1, PortRestricted.Config())
	w.n.SetPath(inX, y1p1, Link{Delay: 30 * time.Millisecond})
	w.cli.send(y1p1, []byte("ping"))
	run(t, w.n, time.Second)
	if len(w.cli.got) != 1 || w.cli.got[0].at != at(60*time.Millisecond) {
		t.Fatalf("echo %+v, want it at 60 ms", w.cli.got)
	}
	if s := w.n.LinkStats(y1p1, inX); s.Delivered != 1 {
		t.Fatalf("server to client link %+v", s)
	}
}

// A NAT with random ports, loss and jitter replays exactly from its seed.
func TestNetworkNATSameSeedSameTrace(t *testing.T) {
	trace := func() []byte {
		cfg := Symmetric.Config()
		cfg.Ports = PortRandom
		w := newNATWorld(t, 7, cfg)
		var buf bytes.Buffer
		w.n.Trace = &buf
		w.n.SetDefaultLink(Link{Loss: 0.2, Delay: 10 * time.Millisecond, Jitter: 5 * time.Millisecond})
		w.cli.startTicker(w.n.Now(), y1p1, 10*time.Millisecond, 50, 40)
		for i := range 20 {
			w.cli.send(netip.AddrPortFrom(y2p1.Addr(), uint16(1000+i)), []byte("x"))
		}
		run(t, w.n, 2*time.Second)
		return buf.Bytes()
	}
	a, b := trace(), trace()
	if !bytes.Equal(a, b) || len(a) == 0 {
		t.Fatalf("traces differ (%d and %d bytes)", len(a), len(b))
	}
}

func TestNetworkNATPanics(t *testing.T) {
	n := NewNetwork(1)
	nat := n.AddNAT(natIP, NATConfig{})
	other := NewNetwork(2).AddNAT(natIP, NATConfig{})
	n.Add(y1p1, &fake{})
	for name, f := range map[string]func(){
		"AddNAT taken":         func() { n.AddNAT(natIP, NATConfig{}) },
		"AddNAT of a node's":   func() { n.AddNAT(y1p1.Addr(), NATConfig{}) },
		"Add at the NAT's IP":  func() { n.Add(ext(1), &fake{}) },
		"AddBehind foreign":    func() { n.AddBehind(other, inX, &fake{}) },
		"AddBehind nil":        func() { n.AddBehind(nil, inX, &fake{}) },
		"AddNAT bad config":    func() { n.AddNAT(netip.MustParseAddr("203.0.113.9"), NATConfig{Mapping: 7}) },
		"AddNAT invalid":       func() { n.AddNAT(netip.Addr{}, NATConfig{}) },
		"AddBehind taken addr": func() { n.AddBehind(nat, y1p1, &fake{}) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

// The engine itself behind a symmetric NAT: a client connects to a public
// server and exchanges messages; the server knows it by its external
// address.
func TestNetworkNATEngine(t *testing.T) {
	n := NewNetwork(3)
	nat := n.AddNAT(natIP, Symmetric.Config())
	srv, err := fastnet.NewEndpoint(fastnet.Config{Role: fastnet.Server, Rand: n.Rand()})
	if err != nil {
		t.Fatal(err)
	}
	cli, err := fastnet.NewEndpoint(fastnet.Config{Role: fastnet.Client, Rand: n.Rand()})
	if err != nil {
		t.Fatal(err)
	}
	n.Add(y1p1, srv)
	n.AddBehind(nat, inX, cli)
	n.SetDefaultLink(Link{Loss: 0.1, Delay: 20 * time.Millisecond})
	h, err := cli.Connect(n.Now(), y1p1)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.RunUntilCond(func() bool { return len(n.Events(inX)) > 0 }, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := cli.Send(n.Now(), h, 1, []byte("through the NAT"), true); err != nil {
		t.Fatal(err)
	}
	got := func() bool {
		for _, ev := range n.Events(y1p1) {
			if ev.Kind == fastnet.EventMessage {
				return true
			}
		}
		return false
	}
	if err := n.RunUntilCond(got, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	for _, ev := range n.Events(y1p1) {
		if ev.Kind == fastnet.EventConnected && ev.Addr != ext(20000) {
			t.Errorf("server sees the client at %v, want %v", ev.Addr, ext(20000))
		}
	}
}
