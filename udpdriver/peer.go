package udpdriver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/fastnet-engine/fastnet/driver"
	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/internal/udpio"
	"github.com/fastnet-engine/fastnet/urp/urpdriver"
)

// Peer is a Fastnet endpoint of role fastnet.Peer on one UDP socket
// (docs/nat.md, X19): it dials servers and peers, accepts the peers an
// introducer introduces to it, and asks an introducer for introductions,
// all through the one socket and so through one NAT mapping. Its
// connections do not own it: closing one leaves the others and the socket
// open, and Close ends them all.
//
// When punching finds no direct path and the introducer names a URP relay
// (X13), the Peer falls back to it by itself: as the target it hosts the
// introduction's group on the relay (urpdriver.Listen) and hands the
// initiator's connection to Accept; as the initiator, Introduce joins the
// group (urpdriver.Dial). Such a connection runs over the relay's TCP
// connection, not the Peer's socket, and its path is fastnet.PathRelay.
type Peer struct {
	e    *driver.Engine
	l    *Listener
	cand []netip.AddrPort
	cfg  fastnet.Config // the engine's, for the relayed connections

	mu          sync.Mutex
	waits       map[uint32]*introWait           // Introduce calls, by request number
	intros      map[*Conn]*fastnet.Introduction // introduced connections, while open
	relays      map[*Conn]io.Closer             // relayed connections, while open, and what ends each
	relayed     []*Conn                         // relayed connections for Accept
	relayNotify chan struct{}                   // closed and replaced when one is added to relayed
	closed      bool
}

// introWait is one Introduce call waiting for its outcome.
type introWait struct {
	done  chan struct{} // closed once c, err or relay is set
	c     *Conn
	err   error
	relay *fastnet.Introduction // EventRelayJoin's: the group to join (X13)
}

// RelayError is Introduce's error when the target found no direct path
// and hosts a group on the URP relay the introducer named (X13), but
// joining it and connecting to the target there failed. Err is
// urpdriver.Dial's error. It matches fastnet.ErrIntroFailed.
type RelayError struct {
	Relay string
	Group uint32
	Err   error
}

func (e *RelayError) Error() string {
	return fmt.Sprintf("udpdriver: no direct path, and joining group %d on relay %s failed: %v", e.Group, e.Relay, e.Err)
}

// Is reports whether target is fastnet.ErrIntroFailed.
func (e *RelayError) Is(target error) bool { return target == fastnet.ErrIntroFailed }

// Unwrap returns Err.
func (e *RelayError) Unwrap() error { return e.Err }

// The bounds of the relay fallback (X13), variables for the tests.
var (
	// relayHostWait bounds the target's hosting of the group: its
	// decision must reach the initiator within the 2 s the initiator
	// waits for it beyond the punch.
	relayHostWait = 1500 * time.Millisecond
	// relayJoinWait is RelayTimeout, the initiator's bound on joining.
	relayJoinWait = 5 * time.Second
	// relayAcceptWait bounds how long the target's group waits for the
	// initiator: the decision's way through the introducer, and
	// RelayTimeout.
	relayAcceptWait = 8 * time.Second
)

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
	uc, err := udpio.Listen(ctx, "udp", addr, listenOptions(cfg))
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
	return openOn(ownSocket(pc, listenOptions(cfg)), pc, cfg)
}

func openOn(uc *udpio.Conn, pc net.PacketConn, cfg Config) (*Peer, error) {
	p := &Peer{waits: make(map[uint32]*introWait), intros: make(map[*Conn]*fastnet.Introduction),
		relays: make(map[*Conn]io.Closer), relayNotify: make(chan struct{})}
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
	p.e, p.l, p.cand, p.cfg = e, l, cfg.Engine.Punch.Candidates, cfg.Engine
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
// introduction made (this Peer consented, X5), directly (X12) or through
// the relay (X13), or a stranger's if Engine.AcceptStrangers is set. It
// fails as Listener.Accept does.
func (p *Peer) Accept(ctx context.Context) (*Conn, error) {
	for {
		p.mu.Lock()
		if len(p.relayed) > 0 {
			c := p.relayed[0]
			p.relayed[0] = nil
			p.relayed = p.relayed[1:]
			p.mu.Unlock()
			return c, nil
		}
		notify := p.relayNotify
		p.mu.Unlock()
		actx, cancel := context.WithCancel(ctx)
		go func() {
			select {
			case <-notify:
				cancel()
			case <-actx.Done():
			}
		}()
		c, err := p.l.Accept(actx)
		cancel()
		if err != nil && ctx.Err() == nil && isClosed(notify) {
			continue // a relayed connection came
		}
		return c, err
	}
}

// isClosed reports whether ch is closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

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
// the id target (X4), and returns the connection to that peer with the
// path it takes: fastnet.PathDirect once the punch proved a path and the
// handshake over it completed (X11, X12), or fastnet.PathRelay when the
// punch found none and the target hosts a group on the URP relay the
// introducer named, which Introduce joins (X13). A relayed connection runs
// over its own TCP connection to the relay; it does not own the Peer, and
// Close ends it with the others.
//
// A failure of the introduction is a *fastnet.IntroError (errors.As) whose
// Code says which step failed: the target unknown, refusing or silent, the
// introducer busy or silent, no direct path and no relay. A failure to
// join the relay group is a *RelayError. Both match
// fastnet.ErrIntroFailed. If via's peer has not negotiated the extension
// within a few seconds, the error matches fastnet.ErrNoIntroducer. The
// engine bounds every step, and the relay's join is bounded by
// RelayTimeout (5 s), so Introduce returns within about 25 seconds
// without a deadline on ctx; if the Peer closes meanwhile it returns at
// once, with an error that matches driver.ErrListenerClosed.
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
	// The engine settles every introduction it runs, but not once it
	// has shut down: the Peer closed meanwhile (N144).
	closed := false
	select {
	case <-w.done:
	case <-ctx.Done():
	case <-p.e.Done():
		closed = true
	}
	p.mu.Lock()
	delete(p.waits, req)
	c, err, relay := w.c, w.err, w.relay
	p.mu.Unlock()
	switch {
	case c != nil:
		return c, fastnet.PathDirect, nil
	case err != nil:
		return nil, 0, wrap(err)
	case closed:
		return nil, 0, wrap(driver.ErrListenerClosed)
	case relay != nil:
		c, err := p.joinRelay(ctx, relay)
		if err != nil {
			return nil, 0, wrap(err)
		}
		return c, fastnet.PathRelay, nil
	}
	return nil, 0, wrap(ctx.Err())
}

// relayConfig is the engine configuration of a relayed connection: the
// Peer's, without what belongs to its socket and its introductions.
func (p *Peer) relayConfig() fastnet.Config {
	cfg := p.cfg
	cfg.Role, cfg.Transport = 0, 0
	cfg.Punch = fastnet.PunchConfig{}
	cfg.AcceptStrangers = false
	cfg.MTU.Path = nil
	return cfg
}

// bounded returns a context that ends after d, with parent, or when the
// Peer's engine shuts down.
func (p *Peer) bounded(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(parent, d)
	go func() {
		select {
		case <-p.e.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// joinRelay is the initiator's fallback (X13): it joins the group the
// target hosts, within RelayTimeout, and connects to the target there.
func (p *Peer) joinRelay(ctx context.Context, x *fastnet.Introduction) (*Conn, error) {
	jctx, cancel := p.bounded(ctx, relayJoinWait)
	c, err := urpdriver.Dial(jctx, x.Relay, x.RelayGroup, x.RelayPassword, urpdriver.Config{Engine: p.relayConfig()})
	cancel()
	if err != nil {
		return nil, &RelayError{Relay: x.Relay, Group: x.RelayGroup, Err: err}
	}
	if !p.addRelayed(c, x, c, false) {
		c.Abort("peer closed")
		return nil, driver.ErrListenerClosed
	}
	return c, nil
}

// addRelayed records c, a connection through the relay that x made, and
// what ends it, for Introduction and Close, and for Accept if accept is
// set; false if the Peer is closed.
func (p *Peer) addRelayed(c *Conn, x *fastnet.Introduction, end io.Closer, accept bool) bool {
	rx := *x
	rx.Path, rx.Addr = fastnet.PathRelay, c.RemoteAddr()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.intros[c], p.relays[c] = &rx, end
	if accept {
		p.relayed = append(p.relayed, c)
		close(p.relayNotify)
		p.relayNotify = make(chan struct{})
	}
	go func() {
		<-c.Done()
		p.mu.Lock()
		delete(p.intros, c)
		delete(p.relays, c)
		if i := slices.Index(p.relayed, c); i >= 0 {
			p.relayed = slices.Delete(p.relayed, i, i+1)
		}
		p.mu.Unlock()
	}()
	return true
}

// hostRelay is the target's fallback (X13): it hosts the group x asks for
// on the relay, reports its id (0 if it could not) and waits for the
// initiator's connection, which it hands to Accept. The group takes that
// one member: once the connection is up the group is locked, so that the
// relay refuses any other join, and the connection of a member that
// joined before (only one that knows the password can) is aborted. The
// group ends with the connection.
func (p *Peer) hostRelay(x *fastnet.Introduction) {
	hctx, cancel := p.bounded(context.Background(), relayHostWait)
	l, err := urpdriver.Listen(hctx, x.Relay, urpdriver.Config{Engine: p.relayConfig(), Password: x.RelayPassword})
	cancel()
	var gid uint32
	if err == nil {
		gid, _ = l.Group()
	}
	if err := p.e.RelayHosted(x.ID, gid); err != nil || gid == 0 {
		if l != nil {
			l.Close() // too late: the introduction is over
		}
		return
	}
	actx, cancel := p.bounded(context.Background(), relayAcceptWait)
	c, err := l.Accept(actx)
	cancel()
	if err == nil {
		// Should the lock fail, the aborts below still keep the group to
		// c; the relay connection has then most likely ended, and c with
		// it.
		lctx, cancel := p.bounded(context.Background(), relayHostWait)
		l.Lock(lctx)
		cancel()
	}
	if err != nil || !p.addRelayed(c, x, l.Listener, true) {
		l.Close()
		return
	}
	p.e.Go(func() {
		for {
			o, err := l.Accept(context.Background())
			if err != nil {
				return
			}
			o.Abort("the group takes one member")
		}
	})
	select {
	case <-c.Done():
	case <-p.e.Done():
	}
	l.Close()
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
			p.e.Go(func() { p.hostRelay(x) })
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
		w.relay = x // Introduce joins the group
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
// configured linger), the relayed ones included, and closes its socket.
func (p *Peer) Close() error {
	p.mu.Lock()
	p.closed = true
	var ends []io.Closer
	for _, end := range p.relays {
		ends = append(ends, end)
	}
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, end := range ends {
		wg.Go(func() { end.Close() })
	}
	wg.Wait()
	return p.l.CloseWithReason("")
}
