package fastnettest

import (
	"errors"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
)

// Addresses of the NAT tests: one NAT, two internal hosts, two remote
// hosts with two ports each.
var (
	natIP = netip.MustParseAddr("203.0.113.1")
	inX   = netip.MustParseAddrPort("192.168.1.10:5000")
	inX2  = netip.MustParseAddrPort("192.168.1.11:5000")
	y1p1  = netip.MustParseAddrPort("198.51.100.1:7000")
	y1p2  = netip.MustParseAddrPort("198.51.100.1:7001")
	y2p1  = netip.MustParseAddrPort("198.51.100.2:7000")
)

func ext(port uint16) netip.AddrPort { return netip.AddrPortFrom(natIP, port) }

// mustOut is Outbound that fails the test on an error.
func mustOut(t *testing.T, nat *NAT, now clock.Time, in, remote netip.AddrPort) netip.AddrPort {
	t.Helper()
	e, err := nat.Outbound(now, in, remote)
	if err != nil {
		t.Fatalf("Outbound(%v, %v): %v", in, remote, err)
	}
	return e
}

// RFC 4787 section 4.1: which destinations share an external port. X:x
// sends to Y1:y1, then Y1:y2, then Y2:y1, then X2 to Y1:y1; with
// sequential ports from 20000 the ports are exact.
func TestNATMappingBehaviour(t *testing.T) {
	tests := []struct {
		m    Mapping
		want [4]uint16 // X to y1p1, y1p2, y2p1; X2 to y1p1
	}{
		{EndpointIndependentMapping, [4]uint16{20000, 20000, 20000, 20001}},
		{AddressDependentMapping, [4]uint16{20000, 20000, 20001, 20002}},
		{AddressAndPortDependentMapping, [4]uint16{20000, 20001, 20002, 20003}},
	}
	for _, tc := range tests {
		t.Run(tc.m.String(), func(t *testing.T) {
			nat := NewNAT(natIP, NATConfig{Mapping: tc.m})
			now := at(0)
			got := [4]uint16{
				mustOut(t, nat, now, inX, y1p1).Port(),
				mustOut(t, nat, now, inX, y1p2).Port(),
				mustOut(t, nat, now, inX, y2p1).Port(),
				mustOut(t, nat, now, inX2, y1p1).Port(),
			}
			if got != tc.want {
				t.Errorf("ports %v, want %v", got, tc.want)
			}
			// The same datagram again reuses its mapping.
			if e := mustOut(t, nat, now, inX, y2p1); e != ext(tc.want[2]) {
				t.Errorf("second datagram to y2p1 from %v, want %v", e, ext(tc.want[2]))
			}
			if e, ok := nat.Lookup(now, inX, y1p2); !ok || e != ext(tc.want[1]) {
				t.Errorf("Lookup(X, y1p2) = %v, %v; want %v", e, ok, ext(tc.want[1]))
			}
		})
	}
}

// RFC 4787 section 5: which senders a mapping made by X:x sending to
// Y1:y1 admits, for every mapping behaviour with every filtering
// behaviour (filtering is by what the mapping sent to).
func TestNATFilteringBehaviour(t *testing.T) {
	tests := []struct {
		f    Filtering
		want [4]error // inbound from y1p1, y1p2, y2p1, and y1p1 to an unmapped port
	}{
		{EndpointIndependentFiltering, [4]error{nil, nil, nil, ErrNATNoMapping}},
		{AddressDependentFiltering, [4]error{nil, nil, ErrNATFiltered, ErrNATNoMapping}},
		{AddressAndPortDependentFiltering, [4]error{nil, ErrNATFiltered, ErrNATFiltered, ErrNATNoMapping}},
	}
	for _, m := range []Mapping{EndpointIndependentMapping, AddressDependentMapping, AddressAndPortDependentMapping} {
		for _, tc := range tests {
			t.Run(m.String()+"/"+tc.f.String(), func(t *testing.T) {
				nat := NewNAT(natIP, NATConfig{Mapping: m, Filtering: tc.f})
				now := at(0)
				e := mustOut(t, nat, now, inX, y1p1)
				for i, from := range []netip.AddrPort{y1p1, y1p2, y2p1, y1p1} {
					to := e
					if i == 3 {
						to = ext(e.Port() + 1)
					}
					in, err := nat.Inbound(now, from, to)
					if !errors.Is(err, tc.want[i]) {
						t.Errorf("from %v to %v: %v, want %v", from, to, err, tc.want[i])
					}
					if err == nil && in != inX {
						t.Errorf("from %v passed to %v, want %v", from, in, inX)
					}
				}
			})
		}
	}
	// Sending to a second remote admits it as well.
	nat := NewNAT(natIP, PortRestricted.Config())
	e := mustOut(t, nat, at(0), inX, y1p1)
	if _, err := nat.Inbound(at(0), y2p1, e); !errors.Is(err, ErrNATFiltered) {
		t.Fatalf("before X sent to y2p1: %v", err)
	}
	mustOut(t, nat, at(0), inX, y2p1)
	if _, err := nat.Inbound(at(0), y2p1, e); err != nil {
		t.Fatalf("after X sent to y2p1: %v", err)
	}
}

// The presets are RFC 4787's behaviours under their classic names.
func TestNATTypes(t *testing.T) {
	tests := []struct {
		t    NATType
		name string
		m    Mapping
		f    Filtering
	}{
		{FullCone, "full cone", EndpointIndependentMapping, EndpointIndependentFiltering},
		{AddressRestricted, "address-restricted", EndpointIndependentMapping, AddressDependentFiltering},
		{PortRestricted, "port-restricted", EndpointIndependentMapping, AddressAndPortDependentFiltering},
		{Symmetric, "symmetric", AddressAndPortDependentMapping, AddressAndPortDependentFiltering},
	}
	for _, tc := range tests {
		c := tc.t.Config()
		if tc.t.String() != tc.name || c.Mapping != tc.m || c.Filtering != tc.f {
			t.Errorf("%v: %q, %v, %v; want %q, %v, %v", int(tc.t), tc.t, c.Mapping, c.Filtering, tc.name, tc.m, tc.f)
		}
	}
	if s := NATType(9).String(); s != "NATType(9)" {
		t.Errorf("unknown type: %q", s)
	}
}

// A mapping lasts MappingTimeout after the last datagram that refreshed
// it: outbound ones always (REQ-6), inbound ones only with
// InboundRefresh. Each admitted remote address times out on its own.
func TestNATMappingTimeout(t *testing.T) {
	const to = 30 * time.Second
	t.Run("outbound refresh", func(t *testing.T) {
		nat := NewNAT(natIP, NATConfig{Filtering: AddressAndPortDependentFiltering, MappingTimeout: to})
		e := mustOut(t, nat, at(0), inX, y1p1)
		mustOut(t, nat, at(10*time.Second), inX, y1p1) // refreshes to 40 s
		if _, err := nat.Inbound(at(40*time.Second-1), y1p1, e); err != nil {
			t.Fatalf("just before expiry: %v", err)
		}
		// Inbound traffic did not refresh it.
		if _, err := nat.Inbound(at(40*time.Second), y1p1, e); !errors.Is(err, ErrNATNoMapping) {
			t.Fatalf("at expiry: %v, want ErrNATNoMapping", err)
		}
		if n := nat.Live(at(40 * time.Second)); n != 0 {
			t.Fatalf("%d mappings live after expiry", n)
		}
		// A new mapping takes the next port.
		if e2 := mustOut(t, nat, at(41*time.Second), inX, y1p1); e2 != ext(20001) {
			t.Fatalf("new mapping %v, want %v", e2, ext(20001))
		}
		if s := nat.Stats(); s.MappingsCreated != 2 || s.NoMapping != 1 || s.Inbound != 1 || s.Outbound != 3 {
			t.Fatalf("stats %+v", s)
		}
	})
	t.Run("inbound refresh", func(t *testing.T) {
		nat := NewNAT(natIP, NATConfig{Filtering: AddressAndPortDependentFiltering, MappingTimeout: to, InboundRefresh: true})
		e := mustOut(t, nat, at(0), inX, y1p1)
		for s := 20 * time.Second; s <= 100*time.Second; s += 20 * time.Second {
			if _, err := nat.Inbound(at(s), y1p1, e); err != nil {
				t.Fatalf("inbound at %v: %v", s, err)
			}
		}
		if _, err := nat.Inbound(at(130*time.Second), y1p1, e); !errors.Is(err, ErrNATNoMapping) {
			t.Fatalf("30 s after the last: %v", err)
		}
	})
	t.Run("permissions", func(t *testing.T) {
		nat := NewNAT(natIP, NATConfig{Filtering: AddressDependentFiltering, MappingTimeout: to})
		e := mustOut(t, nat, at(0), inX, y2p1)
		mustOut(t, nat, at(20*time.Second), inX, y1p1)
		// y2 was last sent to at 0 s: its admission has lapsed at 30 s,
		// while the mapping lives on until 50 s for y1.
		if _, err := nat.Inbound(at(35*time.Second), y2p1, e); !errors.Is(err, ErrNATFiltered) {
			t.Fatalf("y2 at 35 s: %v, want ErrNATFiltered", err)
		}
		if _, err := nat.Inbound(at(35*time.Second), y1p2, e); err != nil {
			t.Fatalf("y1 (another port) at 35 s: %v", err)
		}
	})
	t.Run("default", func(t *testing.T) {
		nat := NewNAT(natIP, NATConfig{})
		e := mustOut(t, nat, at(0), inX, y1p1)
		if _, err := nat.Inbound(at(DefaultMappingTimeout-1), y2p1, e); err != nil {
			t.Fatalf("before 2 minutes: %v", err)
		}
		if _, err := nat.Inbound(at(DefaultMappingTimeout), y2p1, e); !errors.Is(err, ErrNATNoMapping) {
			t.Fatalf("at 2 minutes: %v", err)
		}
	})
}

// Mappings lists the live mappings, by external port, with what keys
// them and when each expires; a refresh moves the expiry, and an expired
// one is gone from the list whether or not anything forgot it.
func TestNATMappings(t *testing.T) {
	const to = 30 * time.Second
	for _, tc := range []struct {
		m      Mapping
		remote [2]netip.AddrPort // keys of X's mapping to y1p1, of X2's to y2p1
	}{
		{EndpointIndependentMapping, [2]netip.AddrPort{}},
		{AddressDependentMapping, [2]netip.AddrPort{netip.AddrPortFrom(y1p1.Addr(), 0), netip.AddrPortFrom(y2p1.Addr(), 0)}},
		{AddressAndPortDependentMapping, [2]netip.AddrPort{y1p1, y2p1}},
	} {
		t.Run(tc.m.String(), func(t *testing.T) {
			nat := NewNAT(natIP, NATConfig{Mapping: tc.m, MappingTimeout: to})
			if got := nat.Mappings(at(0)); len(got) != 0 {
				t.Fatalf("a new NAT has %v", got)
			}
			mustOut(t, nat, at(0), inX, y1p1)
			mustOut(t, nat, at(5*time.Second), inX2, y2p1)
			mustOut(t, nat, at(10*time.Second), inX, y1p1) // X's refreshed to 40 s
			want := []NATMapping{
				{Inside: inX, External: ext(20000), Remote: tc.remote[0], Expires: at(40 * time.Second)},
				{Inside: inX2, External: ext(20001), Remote: tc.remote[1], Expires: at(35 * time.Second)},
			}
			if got := nat.Mappings(at(20 * time.Second)); !slices.Equal(got, want) {
				t.Fatalf("at 20 s: %v, want %v", got, want)
			}
			if got := nat.Mappings(at(35 * time.Second)); !slices.Equal(got, want[:1]) {
				t.Fatalf("at 35 s: %v, want %v", got, want[:1])
			}
			if got := nat.Mappings(at(40 * time.Second)); len(got) != 0 {
				t.Fatalf("at 40 s: %v, want none", got)
			}
		})
	}
}

// Hairpinning (REQ-9): X sends to X2's external address; the datagram
// reaches X2 from X's external address, filtered like any other.
func TestNATHairpinning(t *testing.T) {
	for _, hp := range []bool{false, true} {
		for _, typ := range []NATType{FullCone, PortRestricted} {
			cfg := typ.Config()
			cfg.Hairpinning = hp
			nat := NewNAT(natIP, cfg)
			e2 := mustOut(t, nat, at(0), inX2, y1p1) // X2's mapping: 20000
			ex := mustOut(t, nat, at(0), inX, e2)    // X to it: 20001
			in, err := nat.Inbound(at(0), ex, e2)
			switch {
			case !hp:
				if !errors.Is(err, ErrNATHairpin) {
					t.Errorf("%v, off: %v, want ErrNATHairpin", typ, err)
				}
			case typ == PortRestricted:
				// X2 never sent to X's external address.
				if !errors.Is(err, ErrNATFiltered) {
					t.Errorf("%v, on: %v, want ErrNATFiltered", typ, err)
				}
				mustOut(t, nat, at(0), inX2, ex)
				if in, err := nat.Inbound(at(0), ex, e2); err != nil || in != inX2 {
					t.Errorf("%v, on, after X2 sent to X: %v, %v", typ, in, err)
				}
			default:
				if err != nil || in != inX2 {
					t.Errorf("%v, on: %v, %v; want %v", typ, in, err, inX2)
				}
			}
			s := nat.Stats()
			if hp && s.Hairpinned == 0 || !hp && s.HairpinDropped != 1 {
				t.Errorf("%v, hairpinning %v: stats %+v", typ, hp, s)
			}
		}
	}
}

func TestNATPortAssignment(t *testing.T) {
	t.Run("preserving", func(t *testing.T) {
		nat := NewNAT(natIP, NATConfig{Ports: PortPreserving})
		if e := mustOut(t, nat, at(0), inX, y1p1); e != ext(20000) {
			t.Errorf("port 5000 is below FirstPort: %v", e)
		}
		a := netip.MustParseAddrPort("192.168.1.10:40000")
		b := netip.MustParseAddrPort("192.168.1.11:40000")
		if e := mustOut(t, nat, at(0), a, y1p1); e != ext(40000) {
			t.Errorf("first host on 40000: %v", e)
		}
		if e := mustOut(t, nat, at(0), b, y1p1); e != ext(20001) {
			t.Errorf("second host on 40000: %v, want the next sequential port", e)
		}
	})
	t.Run("random", func(t *testing.T) {
		draw := func() []uint16 {
			nat := NewNAT(natIP, NATConfig{Mapping: AddressAndPortDependentMapping, Ports: PortRandom, Rand: rand.New(rand.NewPCG(1, 2))})
			var ports []uint16
			seen := map[uint16]bool{}
			for i := range 100 {
				p := mustOut(t, nat, at(0), inX, netip.AddrPortFrom(y1p1.Addr(), uint16(1000+i))).Port()
				if p < DefaultFirstPort || seen[p] {
					t.Fatalf("port %d: below the range or taken", p)
				}
				seen[p] = true
				ports = append(ports, p)
			}
			return ports
		}
		a, b := draw(), draw()
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("the same seed drew %d and %d", a[i], b[i])
			}
		}
	})
	t.Run("exhausted", func(t *testing.T) {
		nat := NewNAT(natIP, NATConfig{Mapping: AddressAndPortDependentMapping, FirstPort: 65534, MappingTimeout: time.Second})
		mustOut(t, nat, at(0), inX, y1p1)
		mustOut(t, nat, at(0), inX, y1p2)
		if _, err := nat.Outbound(at(0), inX, y2p1); !errors.Is(err, ErrNATPortsExhausted) {
			t.Fatalf("third mapping: %v", err)
		}
		// Once the first two expire their ports are free again.
		if e := mustOut(t, nat, at(time.Second), inX, y2p1); e.Port() < 65534 {
			t.Fatalf("after expiry: %v", e)
		}
		if s := nat.Stats(); s.PortsExhausted != 1 {
			t.Fatalf("stats %+v", s)
		}
	})
	t.Run("sweep", func(t *testing.T) {
		// A symmetric NAT that makes a mapping a second, each living 10 s,
		// keeps about 10 live and not every one it ever made.
		nat := NewNAT(natIP, NATConfig{Mapping: AddressAndPortDependentMapping, Filtering: AddressAndPortDependentFiltering, MappingTimeout: 10 * time.Second})
		for i := range 5000 {
			mustOut(t, nat, at(time.Duration(i)*time.Second), inX, netip.AddrPortFrom(y1p1.Addr(), uint16(1+i)))
		}
		if n := len(nat.byKey); n > 200 {
			t.Fatalf("%d mappings kept", n)
		}
		if n := nat.Live(at(5000 * time.Second)); n != 9 {
			t.Fatalf("%d live, want 9", n)
		}
	})
}

func TestNATConfigValidated(t *testing.T) {
	for _, c := range []NATConfig{
		{Mapping: 3}, {Filtering: 3}, {Ports: 3}, {MappingTimeout: -1}, {Ports: PortRandom},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewNAT(%+v) did not panic", c)
				}
			}()
			NewNAT(natIP, c)
		}()
	}
}
