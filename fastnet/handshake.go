package fastnet

import (
	"errors"
	"net/netip"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/mtu"
)

// Channel -1: status queries, the handshake and disconnect (D15, D18).
//
//	query:fastnet          ->  query:fastnet=yes
//	query:version          ->  query:version=1.0
//	connect?               ->  connected <u32 id>  |  abort <UTF-8 reason>
//	disconnect <UTF-8 reason>                       (either side, D18)

// errServerFull is the reason a server full of connections refuses another.
var errServerFull = errors.New("server full")

// errNotIntroduced is the reason a Peer refuses a "connect?" from an
// address no introduction proved (X12, X19).
var errNotIntroduced = errors.New("not introduced")

// errConnEnded is the reason of the "abort" that answers a late retry of
// the handshake of a connection that ended (N123).
var errConnEnded = errors.New("connection ended")

// startHandshake sends the client's first queries (D15).
func (c *conn) startHandshake(now clock.Time) {
	c.state = stateQuerying
	c.started = now
	c.sendQueries(now)
}

func (c *conn) sendQueries(now clock.Time) {
	e := c.ep
	if !c.gotFastnet {
		e.queueCtl(c.addr, control{kind: ctlQueryFastnet})
	}
	if !c.gotVersion {
		e.queueCtl(c.addr, control{kind: ctlQueryVersion})
	}
	c.armRetry(now)
}

// armRetry schedules the next retry on a Datagram transport; a reliable
// transport sends each packet once (D15).
func (c *conn) armRetry(now clock.Time) {
	if c.ep.cfg.Transport == Datagram {
		c.retryAt = now.Add(c.ep.cfg.ConnectRetry)
	} else {
		c.retryAt = 0
	}
}

// handshakeTimeout retries the current step or gives up.
func (c *conn) handshakeTimeout(now clock.Time) {
	if now >= c.started.Add(c.ep.cfg.ConnectTimeout) {
		c.ep.failHandshake(c, ErrTimeout)
		return
	}
	if c.retryAt == 0 || now < c.retryAt {
		return
	}
	e := c.ep
	if c.punch != nil {
		e.repeatPunchAck(c) // before each retry, so that B proves A's address (X12)
	}
	if c.state == stateQuerying {
		c.sendQueries(now)
		return
	}
	e.queueCtl(c.addr, control{kind: ctlConnect})
	c.armRetry(now)
}

// failHandshake abandons a connection that never became established.
func (e *Endpoint) failHandshake(c *conn, err error) {
	kind := EventConnectFailed
	if errors.Is(err, ErrRefused) {
		kind = EventRefused
	}
	var intro *Introduction
	if c.punch != nil {
		intro = c.punch.directInfo(c.addr) // X12
	}
	e.removeConn(c)
	e.emit(Event{Kind: kind, Conn: c.handle, Addr: c.addr, Err: err, Intro: intro})
}

// handleControl handles a channel -1 payload from addr; c is the connection
// with that address, if any.
func (e *Endpoint) handleControl(now clock.Time, from netip.AddrPort, c *conn, p []byte) {
	if k := extKindOf(p); k != 0 {
		e.handleExt(now, from, c, p)
		if c != nil && c.state != 0 {
			e.touch(c, now)
		}
		return
	}
	m, err := parseControl(p)
	if err != nil {
		e.drop(c, DropBadControl)
		return
	}
	if e.inBundle {
		// A bundle of a thousand queries drew a thousand answers, each
		// a datagram of its own (N139): a kind already handled in
		// this bundle is dropped, and counted.
		bit := uint32(1) << m.kind
		if e.bundleCtl&bit != 0 {
			e.drop(c, DropRepeatedControl)
			return
		}
		e.bundleCtl |= bit
	}
	if m.kind == ctlQueryBundle || m.kind == ctlBundleYes {
		e.bundleControl(now, from, c, m) // either role (D24)
	} else if m.kind == ctlQueryPunch || m.kind == ctlPunchYes {
		e.punchControl(from, c, m) // either role (X2)
	} else if c != nil && c.role == Client || c == nil && e.cfg.Role == Client {
		// By the connection's role; from an address without one, by
		// the server's rules unless this is a client (X19).
		e.clientControl(now, c, m)
	} else {
		e.serverControl(now, from, c, m, 2+len(p))
	}
	if c != nil {
		e.touch(c, now)
	}
}

// serverControl handles a channel -1 payload that arrived in a datagram of
// n bytes.
func (e *Endpoint) serverControl(now clock.Time, from netip.AddrPort, c *conn, m control, n int) {
	switch m.kind {
	case ctlQueryFastnet:
		// Answered for anyone, always (D15), statelessly: the answer is
		// less than 3 times the query (D25).
		e.queueCtl(from, control{kind: ctlFastnetYes})
	case ctlQueryVersion:
		e.queueCtl(from, control{kind: ctlVersion, text: Version})
	case ctlConnect:
		if c != nil {
			if c.mayBeRetry(now) {
				// A repeated "connect?": the client may have lost our
				// answer; the same ID again and nothing else (D15).
				e.queueCtlOnce(from, control{kind: ctlConnected, id: c.id})
				return
			}
			// Too late to be a retry: a new client on the old one's
			// address (D28, N34).
			e.disconnect(now, c, ErrPeerRestarted, false)
		}
		e.accept(now, from, n)
	case ctlDisconnect:
		if c != nil {
			c.peerClosed = true
			e.disconnect(now, c, &PeerClosedError{Reason: m.text}, false)
		}
	default:
		e.drop(c, DropBadControl)
	}
}

// reject refuses the client at addr with reason: an "abort" for it, and
// EventRejected for the application (N67).
func (e *Endpoint) reject(addr netip.AddrPort, reason string) {
	e.queueCtlOnce(addr, control{kind: ctlAbort, text: reason})
	e.estats.ConnectionsRefused++
	e.emit(Event{Kind: EventRejected, Addr: addr, Err: &RefusedError{Reason: reason}})
}

// accept opens an unvalidated connection for a "connect?" of n bytes from
// addr, or refuses it (D25).
func (e *Endpoint) accept(now clock.Time, from netip.AddrPort, n int) {
	// A refusal goes to an address not yet validated: it may be at most
	// 3 times the "connect?" (D25), so a long reason is cut (N33).
	room := amplification*n - 2 - len("abort")
	if e.cfg.Transport == Stream {
		room = maxReason // the transport's handshake proved the address
	}
	if e.ended.retry(from, now) {
		// A retry of the handshake of a connection that ended, held in
		// the network: its client is told of the end, which it may not
		// have heard (N17), rather than given a new connection that its
		// old one would keep alive (N123).
		e.queueCtlOnce(from, control{kind: ctlAbort, text: cutTo(errConnEnded.Error(), room)})
		e.estats.LateRetriesRefused++
		return
	}
	var via *intro
	if e.cfg.Role == Peer {
		var unproved bool
		via, unproved = e.introducedBy(from)
		switch {
		case via == nil && unproved:
			// A candidate of a live introduction, not proved yet: A's
			// next retry follows a "punch." that proves it (X12).
			e.drop(nil, DropNotConnected)
			return
		case via == nil && !e.cfg.AcceptStrangers:
			e.reject(from, cutTo(errNotIntroduced.Error(), room))
			return
		}
	}
	if e.validated() >= e.cfg.MaxConnections {
		e.reject(from, cutTo(errServerFull.Error(), room))
		return
	}
	if e.cfg.Accept != nil {
		if err := e.cfg.Accept(from); err != nil {
			e.reject(from, cutTo(validReason(err.Error()), room))
			return
		}
	}
	datagram := e.cfg.Transport == Datagram // over a Stream, the transport's handshake proved the address (N33)
	if datagram && e.unvalidated.n >= e.cfg.MaxUnvalidated {
		// The oldest unvalidated connection makes room, silently.
		if old := e.unvalidated.oldest(); old != nil {
			e.vstats.Evicted++
			e.disconnect(now, old, ErrTimeout, false)
		}
	}
	c := e.addConn(now, from, Server)
	if via != nil {
		// B answers the "connect?": the introduction is over, its token
		// forgotten (X12, X16).
		c.intro = via.directInfo(from)
		e.forget(via)
	}
	c.id = e.newID()
	e.ids[c.id] = c
	if datagram {
		c.unvalidated = true
		c.validateBy = now.Add(e.cfg.ValidationTimeout)
		c.recvBudget.Limit = e.cfg.UnvalidatedReceiveMemory
		c.countReceived(n)
		e.unvalidated.push(c)
		c.hb.startChallenge(e.cfg.Rand, e.cfg.ConnectRetry/2)
	}
	e.queueCtlOnce(from, control{kind: ctlConnected, id: c.id})
	c.establish(now)
	if !c.unvalidated {
		e.estats.ConnectionsOpened++
		e.emit(Event{Kind: EventConnected, Conn: c.handle, Addr: from, ID: c.id, Intro: c.intro})
	}
	e.touch(c, now)
}

// validated returns the number of a server's validated connections, those
// counted against Config.MaxConnections: server-role ones only (X19).
func (e *Endpoint) validated() int { return e.served - e.unvalidated.n }

// afterHeartbeat validates c once its client echoed the challenge, or ends
// it silently if the client echoed a value never sent (D25).
func (e *Endpoint) afterHeartbeat(now clock.Time, c *conn) {
	switch {
	case c.hb.forged:
		e.vstats.Forged++
		e.disconnect(now, c, ErrTimeout, false)
	case c.hb.echoed:
		e.validate(now, c)
	}
}

// validate makes c a connection like any other once its client proved it
// receives at its address (D25): it now counts against MaxConnections (and
// is refused if they are full), the application hears of it, and what it
// sent meanwhile is delivered.
func (e *Endpoint) validate(now clock.Time, c *conn) {
	e.unvalidated.n--
	c.unvalidated = false
	c.hb.endChallenge(heartbeatInterval(e.cfg.Timeout))
	e.vstats.Validated++
	if e.validated() > e.cfg.MaxConnections {
		// Full since its "connect?" (D25): refused now. The client
		// already counts itself connected; abort ends its connection
		// as refused (N33).
		e.vstats.Refused++
		e.removeConn(c)
		e.reject(c.addr, errServerFull.Error())
		return
	}
	c.recvBudget.Limit = e.cfg.ConnReceiveMemory
	c.startMTU(now)
	c.askBundles() // not before: the query would spend the challenge's budget (N73)
	c.askPunch()   // likewise (X2)
	e.estats.ConnectionsOpened++
	e.emit(Event{Kind: EventConnected, Conn: c.handle, Addr: c.addr, ID: c.id, Intro: c.intro})
	for i, ev := range c.held {
		e.emit(ev)
		c.held[i] = Event{}
	}
	c.held = nil
	// Reported: the application holds them now (N50).
	c.recvBudget.Give(c.heldCharge)
	c.heldCharge = 0
	e.touch(c, now)
}

// mayBeRetry reports whether a "connect?" from c's address at now may still
// be a retry of c's handshake (D28): until the client's heartbeats have
// been heard for longer than a retry could have been delayed behind them,
// max(1 s, 4 RTTs) counted from the first (N34).
func (c *conn) mayBeRetry(now clock.Time) bool {
	if c.hb.firstHeard == 0 {
		return true
	}
	return now.Sub(c.hb.firstHeard) < max(time.Second, 4*c.hb.srtt)
}

// newID draws a connection ID unique among established connections, from
// the configured random source so that runs replay. Zero is never used.
func (e *Endpoint) newID() uint32 {
	for {
		id := e.cfg.Rand.Uint32()
		if _, used := e.ids[id]; id != 0 && !used {
			return id
		}
	}
}

func (e *Endpoint) clientControl(now clock.Time, c *conn, m control) {
	if c == nil {
		e.drop(nil, DropNotConnected)
		return
	}
	switch c.state {
	case stateQuerying:
		switch m.kind {
		case ctlFastnetYes:
			c.gotFastnet = true
		case ctlVersion:
			if m.text != Version {
				e.failHandshake(c, &IncompatibleError{Version: m.text})
				return
			}
			c.gotVersion = true
		case ctlAbort:
			e.failHandshake(c, &RefusedError{Reason: m.text})
			return
		default:
			e.drop(c, DropNotConnected)
			return
		}
		if c.gotFastnet && c.gotVersion {
			c.state = stateConnecting
			e.queueCtl(c.addr, control{kind: ctlConnect})
			c.armRetry(now)
		}
	case stateConnecting:
		switch m.kind {
		case ctlConnected:
			c.id = m.id
			e.pending--
			c.establish(now)
			e.estats.ConnectionsOpened++
			if in := c.punch; in != nil {
				// Connected over the proved path: the introduction is
				// over, its token forgotten (X12, X16).
				c.intro = in.directInfo(c.addr)
				e.forget(in)
			}
			e.emit(Event{Kind: EventConnected, Conn: c.handle, Addr: c.addr, ID: c.id, Intro: c.intro})
		case ctlAbort:
			e.failHandshake(c, &RefusedError{Reason: m.text})
		default:
			// Late query answers and the like: disregarded (D15).
			e.drop(c, DropNotConnected)
		}
	default:
		switch m.kind {
		case ctlDisconnect:
			e.disconnect(now, c, &PeerClosedError{Reason: m.text}, false)
		case ctlAbort:
			// A server refuses a connection it has answered "connected"
			// when its validation finds the server full (D25, N33).
			e.disconnect(now, c, &RefusedError{Reason: m.text}, false)
		case ctlConnected, ctlFastnetYes, ctlVersion:
			// Answers to our retries that crossed the first answer.
		default:
			e.drop(c, DropBadControl)
		}
	}
}

// establish starts an established connection's timers: the first heartbeat
// goes out at once (D16), and MTU estimation begins (D19).
func (c *conn) establish(now clock.Time) {
	c.state = stateConnected
	c.retryAt = 0
	c.hb.start(now)
	if !c.hb.server {
		// A client's heartbeats count down from a value drawn at
		// random, as a server's count up from one (D25): one that went
		// in a bundle proves, echoed, that the peer reads bundles, and
		// a forger who made the server echo a value it guessed would
		// otherwise prove it for a peer that drops them (N156).
		c.hb.startAt(int16(-1 - c.ep.cfg.Rand.IntN(32768)))
	}
	if c.role == Client && c.ep.cfg.Transport == Datagram {
		// The server may be validating this client's address (D25): its
		// heartbeats give the server the bytes it may answer with, and
		// it echoes every challenge, so they go out every ConnectRetry
		// for a while (N33).
		c.hb.early, c.hb.earlyUntil = c.ep.cfg.ConnectRetry, now.Add(c.ep.cfg.ValidationTimeout)
	}
	if !c.unvalidated {
		c.startMTU(now)
	} else if c.ep.cfg.Transport == Datagram {
		// No probes until validated (D25); the client's are answered.
		c.responder = mtu.NewResponder()
	}
}

// IncompatibleError says which version a server that is not a Fastnet 1.0
// server claimed. It matches ErrIncompatible.
type IncompatibleError struct {
	Version string
}

func (e *IncompatibleError) Error() string {
	return "fastnet: incompatible protocol version: server speaks " + e.Version + ", not " + Version
}

// Is reports whether target is ErrIncompatible.
func (e *IncompatibleError) Is(target error) bool { return target == ErrIncompatible }
