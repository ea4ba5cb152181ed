// Package usernat is a userspace NAT over real UDP sockets: fastnettest's
// NAT state machine (docs/nat.md, X22) decides what is mapped, admitted
// and dropped, and one UDP socket bound on the NAT's public address per
// external port carries the datagrams between the NAT and the rest of the
// network. A NAT's inside is whatever calls Send and takes Deliver: a
// net.PacketConn in the same process (Host), or internal hosts that reach
// the NAT over UDP through a gateway socket (Gateway, Client), as the
// "fastnet nat" command runs it.
//
// Hairpinning needs nothing of its own: a datagram from inside to the
// NAT's own public address leaves from its mapping's socket, reaches the
// socket of the other mapping over the host's network, and the state
// machine passes it on or drops it as the configuration says.
package usernat

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/fastnet/fastnettest"
)

// EventKind is what happened to a mapping.
type EventKind uint8

const (
	// MappingCreated: an outbound datagram made a new mapping.
	MappingCreated EventKind = iota + 1
	// MappingExpired: a mapping lapsed, no outbound datagram having
	// refreshed it within the mapping timeout.
	MappingExpired
)

func (k EventKind) String() string {
	switch k {
	case MappingCreated:
		return "created"
	case MappingExpired:
		return "expired"
	}
	return "unknown"
}

// Event is a mapping created or expired.
type Event struct {
	Kind     EventKind
	Inside   netip.AddrPort // the internal host's address
	External netip.AddrPort // the NAT's public address and the mapping's port
	// Remote is, for MappingCreated, where the datagram that made the
	// mapping was going; the zero AddrPort for MappingExpired.
	Remote netip.AddrPort
}

// Config is the setting of a NAT.
type Config struct {
	// Public is the NAT's public IP address, a local address of this
	// host: every external port is a socket bound on it.
	Public netip.Addr
	// NAT is the behaviour, as in the simulator.
	NAT fastnettest.NATConfig
	// Deliver passes an inbound datagram b the NAT admitted, from from,
	// to the internal host inside. b is valid only during the call. It is
	// called from one goroutine per external port, without the NAT's
	// lock, and must not block for long.
	Deliver func(inside, from netip.AddrPort, b []byte)
	// Events, if not nil, is told of each mapping created and each that
	// expired, in the order they happen, with the NAT's lock held: it
	// must not call the NAT's methods.
	Events func(Event)
	// Errors, if not nil, is told of an external port that could not be
	// opened (a datagram whose mapping uses it is dropped), with the
	// NAT's lock held.
	Errors func(error)
}

// NAT is a running userspace NAT.
type NAT struct {
	cfg     Config
	network string // "udp4" or "udp6", the public address's
	nat     *fastnettest.NAT
	clk     *clock.Real

	mu     sync.Mutex
	socks  map[uint16]*net.UDPConn           // by external port, while mapped
	known  map[uint16]fastnettest.NATMapping // the mappings reported created, by external port
	timer  *time.Timer                       // the next expiry to look for
	closed bool
	wg     sync.WaitGroup
}

// New starts a NAT. It panics if cfg.Public is not a valid address or
// cfg.NAT is invalid, as fastnettest.NewNAT does.
func New(cfg Config) *NAT {
	network := "udp6"
	if cfg.Public.Unmap().Is4() {
		network = "udp4"
	}
	return &NAT{
		cfg:     cfg,
		network: network,
		nat:     fastnettest.NewNAT(cfg.Public, cfg.NAT),
		clk:     clock.NewReal(),
		socks:   make(map[uint16]*net.UDPConn),
		known:   make(map[uint16]fastnettest.NATMapping),
	}
}

// Public returns the NAT's public IP address.
func (u *NAT) Public() netip.Addr { return u.nat.Public() }

// Stats returns the state machine's counters.
func (u *NAT) Stats() fastnettest.NATStats {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.nat.Stats()
}

// Live returns the number of mappings live now.
func (u *NAT) Live() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.nat.Live(u.clk.Now())
}

// Send sends b from the internal host inside to remote, from the external
// address the NAT maps inside to for remote, making the mapping if none
// is live.
func (u *NAT) Send(inside, remote netip.AddrPort, b []byte) error {
	remote = netip.AddrPortFrom(remote.Addr().Unmap(), remote.Port())
	u.mu.Lock()
	if u.closed {
		u.mu.Unlock()
		return net.ErrClosed
	}
	made := u.nat.Stats().MappingsCreated
	now := u.clk.Now()
	ext, err := u.nat.Outbound(now, inside, remote)
	if err != nil {
		u.mu.Unlock()
		return err
	}
	if u.nat.Stats().MappingsCreated != made {
		u.created(now, inside, ext, remote)
	}
	s := u.socks[ext.Port()]
	if s == nil {
		// A mapping whose socket could not be opened when it was made.
		u.mu.Unlock()
		return errPortUnavailable
	}
	u.mu.Unlock()
	_, err = s.WriteToUDPAddrPort(b, remote)
	return err
}

var errPortUnavailable = errors.New("usernat: the mapping's external port could not be opened")

// created reports the mapping of inside to ext that a datagram to remote
// made at now, after the expiry of any it replaces, and opens its socket.
func (u *NAT) created(now clock.Time, inside, ext, remote netip.AddrPort) {
	u.expireLocked(now)
	if old, ok := u.known[ext.Port()]; ok {
		// Its port was taken again before the timer saw it lapse.
		u.expired(old)
	}
	for _, m := range u.nat.Mappings(now) {
		if m.External == ext {
			u.known[ext.Port()] = m
		}
	}
	if u.cfg.Events != nil {
		u.cfg.Events(Event{Kind: MappingCreated, Inside: inside, External: ext, Remote: remote})
	}
	s, err := net.ListenUDP(u.network, net.UDPAddrFromAddrPort(ext))
	if err != nil {
		if u.cfg.Errors != nil {
			u.cfg.Errors(err)
		}
	} else {
		u.socks[ext.Port()] = s
		u.wg.Add(1)
		go u.read(s, ext)
	}
	u.scheduleLocked(now)
}

// expired reports the end of m and closes its socket.
func (u *NAT) expired(m fastnettest.NATMapping) {
	delete(u.known, m.External.Port())
	if s := u.socks[m.External.Port()]; s != nil {
		s.Close()
		delete(u.socks, m.External.Port())
	}
	if u.cfg.Events != nil {
		u.cfg.Events(Event{Kind: MappingExpired, Inside: m.Inside, External: m.External})
	}
}

// expireLocked reports the known mappings that are no longer live at now,
// and updates the expiry of the others.
func (u *NAT) expireLocked(now clock.Time) {
	live := make(map[uint16]fastnettest.NATMapping)
	for _, m := range u.nat.Mappings(now) {
		live[m.External.Port()] = m
	}
	var gone []fastnettest.NATMapping
	for port, m := range u.known {
		l, ok := live[port]
		if !ok || l.Inside != m.Inside || l.Remote != m.Remote {
			gone = append(gone, m)
			continue
		}
		u.known[port] = l
	}
	// In the order they lapsed, then by port.
	for len(gone) > 0 {
		k := 0
		for i, m := range gone {
			if m.Expires < gone[k].Expires || m.Expires == gone[k].Expires && m.External.Port() < gone[k].External.Port() {
				k = i
			}
		}
		u.expired(gone[k])
		gone = append(gone[:k], gone[k+1:]...)
	}
}

// scheduleLocked sets the timer for the earliest expiry of a known
// mapping, as known at now.
func (u *NAT) scheduleLocked(now clock.Time) {
	if u.closed || len(u.known) == 0 {
		return
	}
	first := true
	var next clock.Time
	for _, m := range u.known {
		if first || m.Expires < next {
			next, first = m.Expires, false
		}
	}
	d := max(next.Sub(now), 0)
	if u.timer == nil {
		u.timer = time.AfterFunc(d, u.tick)
	} else {
		u.timer.Reset(d)
	}
}

// tick looks for the mappings that have expired.
func (u *NAT) tick() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return
	}
	now := u.clk.Now()
	u.expireLocked(now)
	u.scheduleLocked(now)
}

// read passes what reaches ext to the internal host if the NAT admits it.
func (u *NAT) read(s *net.UDPConn, ext netip.AddrPort) {
	defer u.wg.Done()
	buf := make([]byte, 65536)
	for {
		n, from, err := s.ReadFromUDPAddrPort(buf)
		if err != nil {
			return
		}
		from = netip.AddrPortFrom(from.Addr().Unmap(), from.Port())
		u.mu.Lock()
		inside, err := u.nat.Inbound(u.clk.Now(), from, ext)
		u.mu.Unlock()
		if err == nil {
			u.cfg.Deliver(inside, from, buf[:n])
		}
	}
}

// Close closes every external port and waits for their readers to end.
// Nothing is reported after it returns.
func (u *NAT) Close() error {
	u.mu.Lock()
	if !u.closed {
		u.closed = true
		for _, s := range u.socks {
			s.Close()
		}
		if u.timer != nil {
			u.timer.Stop()
		}
	}
	u.mu.Unlock()
	u.wg.Wait()
	return nil
}
