package fastnettest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
)

// NATs, in the terms of RFC 4787 (NAT behavioral requirements for unicast
// UDP). A NAT has one external (public) IP address. When a datagram from an
// internal address and port X:x leaves for a remote Y:y, the NAT picks a
// mapping, whose external port p the datagram then comes from; which
// datagrams share a mapping is the NAT's mapping behaviour. When a datagram
// from Y:y arrives at the external address and port p, the NAT passes it to
// X:x only if a mapping holds p and its filtering behaviour admits Y:y.
//
// The design of hole punching that these models check is in docs/nat.md
// (X22 describes the models, X23 gives the table of NAT pairs).

// Mapping is a NAT's mapping behaviour (RFC 4787 section 4.1): which
// outbound datagrams of one internal address and port share one external
// port.
type Mapping uint8

const (
	// EndpointIndependentMapping reuses one mapping for every remote
	// address and port (REQ-1's "MUST").
	EndpointIndependentMapping Mapping = iota
	// AddressDependentMapping makes a mapping per remote IP address.
	AddressDependentMapping
	// AddressAndPortDependentMapping makes a mapping per remote address
	// and port: a "symmetric" NAT.
	AddressAndPortDependentMapping
)

func (m Mapping) String() string { return behaviour("Mapping", uint8(m)) }

// behaviour names a Mapping or Filtering value v of the type named typ:
// both have the same three kinds in the same order.
func behaviour(typ string, v uint8) string {
	names := [...]string{"endpoint-independent", "address-dependent", "address-and-port-dependent"}
	if int(v) < len(names) {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", typ, v)
}

// Filtering is a NAT's filtering behaviour (RFC 4787 section 5): which
// remote addresses may send through a mapping.
type Filtering uint8

const (
	// EndpointIndependentFiltering admits any remote address and port.
	EndpointIndependentFiltering Filtering = iota
	// AddressDependentFiltering admits a remote IP address the mapping
	// has sent to, from any port.
	AddressDependentFiltering
	// AddressAndPortDependentFiltering admits only a remote address and
	// port the mapping has sent to.
	AddressAndPortDependentFiltering
)

func (f Filtering) String() string { return behaviour("Filtering", uint8(f)) }

// PortAssignment is how a NAT picks the external port of a new mapping.
type PortAssignment uint8

const (
	// PortSequential takes the next free port after the last one taken,
	// from NATConfig.FirstPort, wrapping back to it after 65535.
	PortSequential PortAssignment = iota
	// PortPreserving takes the internal port if it is free (RFC 4787
	// section 4.2.1), and otherwise the next sequential one.
	PortPreserving
	// PortRandom draws a free port uniformly from FirstPort..65535.
	PortRandom
)

// DefaultMappingTimeout is the mapping timeout of a NATConfig whose
// MappingTimeout is zero: the least RFC 4787 REQ-5 allows.
const DefaultMappingTimeout = 2 * time.Minute

// DefaultFirstPort is the first external port of a NATConfig whose
// FirstPort is zero.
const DefaultFirstPort = 20000

// NATConfig is the behaviour of a NAT. The zero value is a full cone NAT
// (endpoint-independent mapping and filtering) with 2-minute mappings,
// sequential ports from 20000, and no hairpinning.
type NATConfig struct {
	Mapping   Mapping
	Filtering Filtering

	// MappingTimeout is how long a mapping, and each remote address it
	// admits, lasts after the last datagram that refreshed it. Zero means
	// DefaultMappingTimeout. Outbound datagrams always refresh (REQ-6);
	// InboundRefresh makes admitted inbound ones refresh too.
	MappingTimeout time.Duration
	InboundRefresh bool

	// Hairpinning makes the NAT pass a datagram from an internal host to
	// its own external address on to the internal host that address maps
	// to, coming from the sender's external address and port (REQ-9),
	// and filtered like any inbound datagram. Without it such datagrams
	// are dropped.
	Hairpinning bool

	// Ports is how external ports are chosen, from FirstPort (zero means
	// DefaultFirstPort) to 65535.
	Ports     PortAssignment
	FirstPort uint16

	// Rand is the source of PortRandom's draws. Network.AddNAT gives the
	// network's when it is nil; NewNAT requires it for PortRandom.
	Rand *rand.Rand
}

func (c NATConfig) validate() error {
	switch {
	case c.Mapping > AddressAndPortDependentMapping:
		return fmt.Errorf("fastnettest: NATConfig.Mapping %d is unknown", c.Mapping)
	case c.Filtering > AddressAndPortDependentFiltering:
		return fmt.Errorf("fastnettest: NATConfig.Filtering %d is unknown", c.Filtering)
	case c.Ports > PortRandom:
		return fmt.Errorf("fastnettest: NATConfig.Ports %d is unknown", c.Ports)
	case c.MappingTimeout < 0:
		return fmt.Errorf("fastnettest: NATConfig.MappingTimeout %v is negative", c.MappingTimeout)
	case c.Ports == PortRandom && c.Rand == nil:
		return fmt.Errorf("fastnettest: NATConfig.Ports is PortRandom without a Rand")
	}
	return nil
}

// NATType names the four classic kinds of NAT, each a NATConfig preset.
type NATType uint8

const (
	// FullCone: endpoint-independent mapping and filtering.
	FullCone NATType = iota + 1
	// AddressRestricted: endpoint-independent mapping, address-dependent
	// filtering.
	AddressRestricted
	// PortRestricted: endpoint-independent mapping, address-and-port-
	// dependent filtering.
	PortRestricted
	// Symmetric: address-and-port-dependent mapping and filtering.
	Symmetric
)

var natTypeNames = [...]string{"", "full cone", "address-restricted", "port-restricted", "symmetric"}

func (t NATType) String() string {
	if t != 0 && int(t) < len(natTypeNames) {
		return natTypeNames[t]
	}
	return fmt.Sprintf("NATType(%d)", t)
}

// OpensDirectPath reports whether hole punching opens a direct path
// between two peers behind different NATs of types a and b (0: no NAT),
// as X23 of docs/nat.md reasons it out from the rules of these models: it
// does unless one side is symmetric and the other port-restricted or
// symmetric.
func OpensDirectPath(a, b NATType) bool {
	hard := func(x NATType) bool { return x == PortRestricted || x == Symmetric }
	return !(a == Symmetric && hard(b) || b == Symmetric && hard(a))
}

// Config returns the preset of t, with the defaults of NATConfig
// otherwise. It panics for an unknown t.
func (t NATType) Config() NATConfig {
	switch t {
	case FullCone:
		return NATConfig{Mapping: EndpointIndependentMapping, Filtering: EndpointIndependentFiltering}
	case AddressRestricted:
		return NATConfig{Mapping: EndpointIndependentMapping, Filtering: AddressDependentFiltering}
	case PortRestricted:
		return NATConfig{Mapping: EndpointIndependentMapping, Filtering: AddressAndPortDependentFiltering}
	case Symmetric:
		return NATConfig{Mapping: AddressAndPortDependentMapping, Filtering: AddressAndPortDependentFiltering}
	}
	panic("fastnettest: unknown NATType " + t.String())
}

// Reasons a NAT does not pass an inbound datagram, and the one reason it
// cannot map an outbound one.
var (
	// ErrNATNoMapping: no live mapping holds the external port.
	ErrNATNoMapping = errors.New("fastnettest: no NAT mapping for that port")
	// ErrNATFiltered: the mapping does not admit the sender.
	ErrNATFiltered = errors.New("fastnettest: filtered by the NAT")
	// ErrNATHairpin: a datagram from inside to the NAT's own external
	// address, with hairpinning off.
	ErrNATHairpin = errors.New("fastnettest: hairpinning is off")
	// ErrNATPortsExhausted: every external port is in use.
	ErrNATPortsExhausted = errors.New("fastnettest: NAT ports exhausted")
)

// NATStats counts what a NAT did.
type NATStats struct {
	MappingsCreated uint64 // mappings made, whether still live or not
	Outbound        uint64 // datagrams translated on their way out
	Inbound         uint64 // datagrams passed in (hairpinned ones included)
	Hairpinned      uint64 // datagrams passed from inside back inside
	// Inbound datagrams dropped, by reason.
	NoMapping, Filtered, HairpinDropped uint64
	// Outbound datagrams dropped for want of a port.
	PortsExhausted uint64
}

// A NAT is one network address translator with one external IP address, in
// virtual time: a pure state machine that Network drives (see
// Network.AddNAT), and that a test or a userspace NAT over real sockets can
// drive itself. Each method takes the instant it acts at, which must not
// decrease from call to call. Mappings expire lazily: a mapping whose time
// has passed is gone for every decision made after it, whether or not
// anything has looked at it since.
//
// A NAT used directly, outside a Network:
//
//	nat := fastnettest.NewNAT(netip.MustParseAddr("203.0.113.1"), fastnettest.PortRestricted.Config())
//	ext, _ := nat.Outbound(now, inside, server)   // 203.0.113.1:20000
//	in, err := nat.Inbound(now, server, ext)      // inside, nil
//	_, err = nat.Inbound(now, stranger, ext)      // ErrNATFiltered
type NAT struct {
	public  netip.Addr
	cfg     NATConfig
	timeout time.Duration
	first   uint16
	next    uint16 // PortSequential's next candidate

	byKey   map[mapKey]*natMapping
	byPort  map[uint16]*natMapping
	sweepAt int // sweep expired mappings once byKey reaches this size

	stats NATStats
	n     *Network // the network it belongs to, if any
}

// mapKey names a mapping: the internal address and, as the mapping
// behaviour says, none, the IP or all of the remote address.
type mapKey struct {
	inside, remote netip.AddrPort
}

type natMapping struct {
	key     mapKey
	ext     uint16
	expires clock.Time
	// The remote addresses it admits (filtering other than
	// endpoint-independent), each until an instant: the IP with port 0
	// for address-dependent filtering, the address and port otherwise.
	perms       map[netip.AddrPort]clock.Time
	permSweepAt int
}

// NewNAT returns a NAT with the external address public and behaviour cfg.
// It panics if public is not a valid IP or cfg is invalid.
func NewNAT(public netip.Addr, cfg NATConfig) *NAT {
	if !public.IsValid() {
		panic("fastnettest: NewNAT of an invalid address")
	}
	if err := cfg.validate(); err != nil {
		panic(err)
	}
	t := &NAT{
		public:  public.Unmap(),
		cfg:     cfg,
		timeout: cfg.MappingTimeout,
		first:   cfg.FirstPort,
		byKey:   make(map[mapKey]*natMapping),
		byPort:  make(map[uint16]*natMapping),
		sweepAt: 64,
	}
	if t.timeout == 0 {
		t.timeout = DefaultMappingTimeout
	}
	if t.first == 0 {
		t.first = DefaultFirstPort
	}
	t.next = t.first
	return t
}

// Public returns the NAT's external IP address.
func (t *NAT) Public() netip.Addr { return t.public }

// Config returns the NAT's configuration.
func (t *NAT) Config() NATConfig { return t.cfg }

// Stats returns the NAT's counters.
func (t *NAT) Stats() NATStats { return t.stats }

// Live returns the number of mappings live at now.
func (t *NAT) Live(now clock.Time) int {
	k := 0
	for _, m := range t.byKey {
		if now < m.expires {
			k++
		}
	}
	return k
}

// key returns the key of the mapping a datagram from inside to remote
// uses.
func (t *NAT) key(inside, remote netip.AddrPort) mapKey {
	switch t.cfg.Mapping {
	case AddressDependentMapping:
		return mapKey{inside, netip.AddrPortFrom(remote.Addr(), 0)}
	case AddressAndPortDependentMapping:
		return mapKey{inside, remote}
	}
	return mapKey{inside: inside}
}

// perm returns the key under which a mapping admits remote.
func (t *NAT) perm(remote netip.AddrPort) netip.AddrPort {
	if t.cfg.Filtering == AddressDependentFiltering {
		return netip.AddrPortFrom(remote.Addr(), 0)
	}
	return remote
}

// live returns the mapping of k if it is live at now, forgetting it if it
// has expired.
func (t *NAT) live(now clock.Time, k mapKey) *natMapping {
	m := t.byKey[k]
	if m != nil && now >= m.expires {
		t.forget(m)
		m = nil
	}
	return m
}

func (t *NAT) forget(m *natMapping) {
	delete(t.byKey, m.key)
	if t.byPort[m.ext] == m {
		delete(t.byPort, m.ext)
	}
}

// Outbound translates a datagram from the internal address inside to the
// remote address at now: it returns the external address the datagram
// comes from, making a mapping if none is live, and refreshes the mapping
// and its admission of remote. The error is ErrNATPortsExhausted if a new
// mapping is needed and no port is free.
func (t *NAT) Outbound(now clock.Time, inside, remote netip.AddrPort) (netip.AddrPort, error) {
	k := t.key(inside, remote)
	m := t.live(now, k)
	if m == nil {
		port, ok := t.allocate(now, inside.Port())
		if !ok {
			t.stats.PortsExhausted++
			return netip.AddrPort{}, ErrNATPortsExhausted
		}
		if len(t.byKey) >= t.sweepAt {
			t.sweep(now)
		}
		m = &natMapping{key: k, ext: port}
		t.byKey[k] = m
		t.byPort[port] = m
		t.stats.MappingsCreated++
	}
	until := now.Add(t.timeout)
	m.expires = until
	if t.cfg.Filtering != EndpointIndependentFiltering {
		if m.perms == nil {
			m.perms = make(map[netip.AddrPort]clock.Time)
		}
		p := t.perm(remote)
		if _, ok := m.perms[p]; !ok && len(m.perms) >= max(m.permSweepAt, 64) {
			for q, u := range m.perms {
				if now >= u {
					delete(m.perms, q)
				}
			}
			m.permSweepAt = 2 * len(m.perms)
		}
		m.perms[p] = until
	}
	t.stats.Outbound++
	return netip.AddrPortFrom(t.public, m.ext), nil
}

// Inbound decides on a datagram from remote that reaches the external
// address ext at now: it returns the internal address to pass it to, or
// ErrNATNoMapping, ErrNATFiltered or ErrNATHairpin. A remote address with
// the NAT's own IP is a hairpinned datagram from inside, whose source is
// already translated (Outbound). With InboundRefresh an admitted datagram
// refreshes the mapping and its admission of remote.
func (t *NAT) Inbound(now clock.Time, remote, ext netip.AddrPort) (netip.AddrPort, error) {
	hairpin := remote.Addr() == t.public
	if hairpin && !t.cfg.Hairpinning {
		t.stats.HairpinDropped++
		return netip.AddrPort{}, ErrNATHairpin
	}
	m := t.byPort[ext.Port()]
	if ext.Addr() != t.public || m == nil || now >= m.expires {
		if m != nil && now >= m.expires {
			t.forget(m)
		}
		t.stats.NoMapping++
		return netip.AddrPort{}, ErrNATNoMapping
	}
	if t.cfg.Filtering != EndpointIndependentFiltering {
		p := t.perm(remote)
		if until, ok := m.perms[p]; !ok || now >= until {
			t.stats.Filtered++
			return netip.AddrPort{}, ErrNATFiltered
		}
		if t.cfg.InboundRefresh {
			m.perms[p] = now.Add(t.timeout)
		}
	}
	if t.cfg.InboundRefresh {
		m.expires = now.Add(t.timeout)
	}
	t.stats.Inbound++
	if hairpin {
		t.stats.Hairpinned++
	}
	return m.key.inside, nil
}

// Lookup returns the external address that a datagram from inside to
// remote would come from at now, if a live mapping already gives one. It
// changes nothing.
func (t *NAT) Lookup(now clock.Time, inside, remote netip.AddrPort) (netip.AddrPort, bool) {
	m := t.byKey[t.key(inside, remote)]
	if m == nil || now >= m.expires {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(t.public, m.ext), true
}

// Owner returns the internal address whose live mapping holds the
// external port of ext at now, whether or not its filter would admit a
// given sender. It changes nothing.
func (t *NAT) Owner(now clock.Time, ext netip.AddrPort) (netip.AddrPort, bool) {
	m := t.byPort[ext.Port()]
	if ext.Addr() != t.public || m == nil || now >= m.expires {
		return netip.AddrPort{}, false
	}
	return m.key.inside, true
}

// NATMapping describes one live mapping of a NAT.
type NATMapping struct {
	Inside   netip.AddrPort // the internal address it maps
	External netip.AddrPort // the NAT's address and the mapping's port
	// Remote is the part of the remote address that the mapping
	// behaviour keys it by: none (the zero AddrPort) for
	// endpoint-independent mapping, the IP with port 0 for
	// address-dependent, the address and port otherwise.
	Remote  netip.AddrPort
	Expires clock.Time // the instant it expires unless refreshed
}

// Mappings returns the mappings live at now, by external port. It changes
// nothing: a userspace NAT can see from it which mappings have expired
// (those it knew that are no longer there) and when the next one will.
func (t *NAT) Mappings(now clock.Time) []NATMapping {
	var out []NATMapping
	for _, m := range t.byKey {
		if now < m.expires {
			out = append(out, NATMapping{Inside: m.key.inside, External: netip.AddrPortFrom(t.public, m.ext), Remote: m.key.remote, Expires: m.expires})
		}
	}
	slices.SortFunc(out, func(a, b NATMapping) int { return int(a.External.Port()) - int(b.External.Port()) })
	return out
}

// allocate picks a free external port at now for a mapping of an internal
// address with port want.
func (t *NAT) allocate(now clock.Time, want uint16) (uint16, bool) {
	switch t.cfg.Ports {
	case PortPreserving:
		if want >= t.first && t.free(now, want) {
			return want, true
		}
	case PortRandom:
		span := 65536 - int(t.first)
		for range 64 {
			if p := t.first + uint16(t.cfg.Rand.IntN(span)); t.free(now, p) {
				return p, true
			}
		}
	}
	for range 65536 - int(t.first) {
		p := t.next
		if t.next == 65535 {
			t.next = t.first
		} else {
			t.next++
		}
		if t.free(now, p) {
			return p, true
		}
	}
	return 0, false
}

// free reports whether no live mapping holds port at now, forgetting an
// expired one that does.
func (t *NAT) free(now clock.Time, port uint16) bool {
	m := t.byPort[port]
	if m == nil {
		return true
	}
	if now >= m.expires {
		t.forget(m)
		return true
	}
	return false
}

// sweep forgets the mappings expired at now, so that a long run of new
// mappings does not keep every old one.
func (t *NAT) sweep(now clock.Time) {
	for _, m := range t.byKey {
		if now >= m.expires {
			t.forget(m)
		}
	}
	t.sweepAt = max(64, 2*len(t.byKey))
}
