package udpdriver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/fastnet-engine/fastnet/driver"
	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/internal/udpio"
)

// Peer is a Fastnet endpoint of role fastnet.Peer on one UDP socket
// (docs/nat.md, X19): it dials servers and peers, accepts the peers an
// introducer introduces to it, and asks an introducer for introductions,
// all through the one socket and so through one NAT mapping. Its
// connections do not own it: closing one leaves the others and the socket
// open, and Close ends them all.
type Peer struct {
	e    *driver.Engine
	l    *Listener
	cand []netip.AddrPort

	mu     sync.Mutex
	waits  map[uint32]*introWait           // Introduce calls, by request number
	intros map[*Conn]*fastnet.Introduction // introduced connections, while open
}

// introWait is one Introduce call waiting for its outcome.
type introWait struct {
	done chan struct{} // closed once c or err is set
	c    *Conn
	err  error
}

// RelayError is Introduce's error when the target found no direct path and
// hosts a group on the URP relay the introducer named instead (X13): the
// application may join it with urpdriver.Dial(ctx, Relay, Group,
// Password, ...). It matches fastnet.ErrIntroFailed.
type RelayError struct {
	Relay           string
	Group, Password uint32
}

func (e *RelayError) Error() string {
	return fmt.Sprintf("udpdriver: no direct path: the peer hosts group %d on relay %s", e.Group, e.Relay)
}

// Is reports whether target is fastnet.ErrIntroFailed.
func (e *RelayError) Is(target error) bool { return target == fastnet.ErrIntroFailed }

// negotiationWait bounds how long Introduce waits for the connection to
// the introducer to negotiate the punch extension (X2), which a new
// connection does with its first heartbeats. A variable for the tests.
var negotiationWait = 5 * time.Second

// Open starts a Peer on the UDP address addr ("host:port"; ":0" picks a
// port). cfg.Engine.Role is set to fastnet.Peer. cfg.Engine.Punch.Consent
// decides the introductions other peers ask for (nil refuses them all,
// X5), and cfg.Engine.AcceptStrangers whether a peer nobody introduced may
// connect (X19). Unless set, cfg.Engine.Punch.Candidates are filled with
// the socket's addresses on this host's interfaces (X9).
func Open(ctx context.Context, addr string, cfg Config) (*Peer, error) {
	uc, err := udpio.Listen(ctx, "udp", addr, socketOptions(cfg))
	if err != nil {
		return nil, fmt.Errorf("udpdriver: open %s: %w", addr, err)
	}
	return openOn(uc, nil, cfg)
}

// OpenPacket starts a Peer on pc, which it owns from then on (see
// ListenPacket for what a socket of the caller's own gets).
func OpenPacket(ctx context.Context, pc net.PacketConn, cfg Config) (*Peer, error) {
	if pc == nil {
		return nil, errors.New("udpdriver: OpenPacket: nil net.PacketConn")
	}
	return openOn(ownSocket(pc, cfg), pc, cfg)
}

func openOn(uc *udpio.Conn, pc net.PacketConn, cfg Config) (*Peer, error) {
	p := &Peer{waits: make(map[uint32]*introWait), intros: make(map[*Conn]*fastnet.Introduction)}
	cfg.Engine.Role = fastnet.Peer
	if cfg.Engine.Punch.Candidates == nil {
		if ap, ok := udpio.AddrPort(localAddr(uc, pc)); ok {
			cfg.Engine.Punch.Candidates = localCandidates(ap)
		}
	}
	cfg.intro = p.hear
	e, l, err := startOn(uc, pc, cfg)
	if err != nil {
		return nil, err
	}
	p.e, p.l, p.cand = e, l, cfg.Engine.Punch.Candidates
	return p, nil
}

// localCandidates returns the addresses of a socket bound to ap on this
// host's interfaces: ap itself if it names one address, else one address
// of each family the socket can use on each interface, at most four (X9).
// The engine keeps only private, unique-local and global ones.
func localCandidates(ap netip.AddrPort) []netip.AddrPort {
	if !ap.Addr().IsUnspecified() {
		return []netip.AddrPort{ap}
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var out []netip.AddrPort
	for _, a := range addrs {
		pfx, err := netip.ParsePrefix(a.String())
		if err != nil {
			continue
		}
		ip := pfx.Addr().Unmap()
		if ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.Zone() != "" || ap.Addr().Is4() && !ip.Is4() {
			continue
		}
		out = append(out, netip.AddrPortFrom(ip, ap.Port()))
		if len(out) == 4 {
			break
		}
	}
	return out
}

// Addr returns the address of the Peer's socket.
func (p *Peer) Addr() net.Addr { return p.l.Addr() }

// Candidates returns the local candidates the Peer reports (X9).
func (p *Peer) Candidates() []netip.AddrPort { return append([]netip.AddrPort(nil), p.cand...) }

// Dial connects to the Fastnet server or peer at addr ("host:port") from
// the Peer's socket and returns the established connection, which does not
// own the Peer. It fails as udpdriver.Dial does, except that a port where
// nothing listens is noticed by the handshake's timeout.
func (p *Peer) Dial(ctx context.Context, addr string) (*Conn, error) {
	raddr, err := resolve(ctx, addr)
	if err != nil {
		return nil, err
	}
	c, err := p.e.Connect(ctx, raddr)
	if err != nil {
		return nil, dialError(raddr, err)
	}
	return c, nil
}

// Accept returns the next connection a peer made to this one: one an
// introduction made (this Peer consented, X5, X12), or a stranger's if
// Engine.AcceptStrangers is set. It fails as Listener.Accept does.
func (p *Peer) Accept(ctx context.Context) (*Conn, error) { return p.l.Accept(ctx) }

// Introduction returns the introduction that made c, if one did and c is
// still open: with whom (PeerID, the other peer's connection id at the
// introducer), and the path (X12).
func (p *Peer) Introduction(c *Conn) (*fastnet.Introduction, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	x, ok := p.intros[c]
	return x, ok
}

// Introduce asks the introducer at the other end of via, a connection
// this Peer dialed, to introduce it to the peer whose connection there has
// the id target (X4), and returns the connection to that peer once the
// punch proved a path and the handshake over it completed (X11, X12), with
// the path it takes (fastnet.PathDirect).
//
// A failure of the introduction is a *fastnet.IntroError (errors.As) whose
// Code says which step failed: the target unknown, refusing or silent, the
// introducer busy or silent, no direct path. When the target hosts a relay
// group instead (X13) the error is a *RelayError. Both match
// fastnet.ErrIntroFailed. If via's peer has not negotiated the extension
// within a few seconds, the error matches fastnet.ErrNoIntroducer. The
// engine bounds every step, so Introduce returns within about 20 seconds
// without a deadline on ctx.
func (p *Peer) Introduce(ctx context.Context, via *Conn, target uint32) (*Conn, fastnet.IntroPath, error) {
	w := &introWait{done: make(chan struct{})}
	var req uint32
	started := func(r uint32) {
		req = r
		p.mu.Lock()
		p.waits[r] = w
		p.mu.Unlock()
	}
	wrap := func(err error) error {
		return fmt.Errorf("udpdriver: introduce to %d via %s: %w", target, via.RemoteAddr(), err)
	}
	limit := time.Now().Add(negotiationWait)
	for {
		err := p.e.Introduce(via, target, started)
		if err == nil {
			break
		}
		if !errors.Is(err, fastnet.ErrNoIntroducer) || time.Now().After(limit) {
			return nil, 0, wrap(err)
		}
		select { // the connection has not negotiated the extension yet (X2)
		case <-time.After(20 * time.Millisecond):
		case <-via.Done():
			return nil, 0, wrap(via.Err())
		case <-ctx.Done():
			return nil, 0, wrap(ctx.Err())
		}
	}
	select {
	case <-w.done:
	case <-ctx.Done():
	}
	p.mu.Lock()
	delete(p.waits, req)
	c, err := w.c, w.err
	p.mu.Unlock()
	switch {
	case c != nil:
		return c, fastnet.PathDirect, nil
	case err != nil:
		return nil, 0, wrap(err)
	}
	return nil, 0, wrap(ctx.Err())
}

// hear is the engine's hook for the events of introductions
// (driver.Options.Intro), called under the engine's lock.
func (p *Peer) hear(ev fastnet.Event, c *Conn) {
	x := ev.Intro
	if x == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if ev.Kind == fastnet.EventConnected && c != nil {
		p.intros[c] = x
		p.e.Go(func() { p.forgetWhenDone(c) })
	}
	if !x.Initiator {
		if ev.Kind == fastnet.EventRelayHost {
			// This driver hosts no relay group: the initiator hears
			// that there is no path (X13).
			p.e.Go(func() { p.e.RelayHosted(x.ID, 0) })
		}
		return
	}
	w := p.waits[x.Req]
	if w == nil || w.c != nil || w.err != nil {
		if ev.Kind == fastnet.EventConnected && c != nil {
			// Introduce gave up before the connection came.
			p.e.Go(func() { c.Abort("introduction abandoned") })
		}
		return
	}
	switch ev.Kind {
	case fastnet.EventConnected:
		w.c = c
	case fastnet.EventIntroFailed, fastnet.EventRefused, fastnet.EventConnectFailed:
		w.err = ev.Err
		if w.err == nil {
			w.err = &fastnet.IntroError{Code: fastnet.IntroNoPeer}
		}
	case fastnet.EventRelayJoin:
		w.err = &RelayError{Relay: x.Relay, Group: x.RelayGroup, Password: x.RelayPassword}
	default:
		return
	}
	close(w.done)
}

func (p *Peer) forgetWhenDone(c *Conn) {
	<-c.Done()
	p.mu.Lock()
	delete(p.intros, c)
	p.mu.Unlock()
}

// DriverStats returns the driver's counters of the Peer's endpoint.
func (p *Peer) DriverStats() DriverStats { return p.e.Stats() }

// Close ends every connection of the Peer gracefully (each gets the
// configured linger) and closes its socket.
func (p *Peer) Close() error { return p.l.CloseWithReason("") }
