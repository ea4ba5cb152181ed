package fastnet

import (
	"errors"
	"net/netip"

	"github.com/fastnet-engine/fastnet/clock"
)

// Channel -1: status queries, the handshake and disconnect (D15, D18).
//
//	query:fastnet          ->  query:fastnet=yes
//	query:version          ->  query:version=1.0
//	connect?               ->  connected <u32 id>  |  abort <UTF-8 reason>
//	disconnect <UTF-8 reason>                       (either side, D18)

// errServerFull is the reason a server full of connections refuses another.
var errServerFull = errors.New("server full")

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
	if c.state == stateQuerying {
		c.sendQueries(now)
		return
	}
	c.ep.queueCtl(c.addr, control{kind: ctlConnect})
	c.armRetry(now)
}

// failHandshake abandons a connection that never became established.
func (e *Endpoint) failHandshake(c *conn, err error) {
	kind := EventConnectFailed
	if errors.Is(err, ErrRefused) {
		kind = EventRefused
	}
	e.removeConn(c)
	e.emit(Event{Kind: kind, Conn: c.handle, Addr: c.addr, Err: err})
}

// handleControl handles a channel -1 payload from addr; c is the connection
// with that address, if any.
func (e *Endpoint) handleControl(now clock.Time, from netip.AddrPort, c *conn, p []byte) {
	m, err := parseControl(p)
	if err != nil {
		e.drop(c, DropBadControl)
		return
	}
	if e.cfg.Role == Server {
		e.serverControl(now, from, c, m)
	} else {
		e.clientControl(now, c, m)
	}
	if c != nil {
		e.touch(c, now)
	}
}

func (e *Endpoint) serverControl(now clock.Time, from netip.AddrPort, c *conn, m control) {
	switch m.kind {
	case ctlQueryFastnet:
		// Answered for anyone, always (D15).
		e.queueCtl(from, control{kind: ctlFastnetYes})
	case ctlQueryVersion:
		e.queueCtl(from, control{kind: ctlVersion, text: Version})
	case ctlConnect:
		if c != nil {
			// A repeated "connect?": the client may have lost our
			// answer; the same ID again and nothing else (D15).
			e.queueCtl(from, control{kind: ctlConnected, id: c.id})
			return
		}
		e.accept(now, from)
	case ctlDisconnect:
		if c != nil {
			e.disconnect(now, c, &PeerClosedError{Reason: m.text}, false)
		}
	default:
		e.drop(c, DropBadControl)
	}
}

// accept establishes a connection from addr, or refuses it.
func (e *Endpoint) accept(now clock.Time, from netip.AddrPort) {
	if len(e.conns) >= e.cfg.MaxConnections {
		e.queueCtl(from, control{kind: ctlAbort, text: errServerFull.Error()})
		return
	}
	if e.cfg.Accept != nil {
		if err := e.cfg.Accept(from); err != nil {
			e.queueCtl(from, control{kind: ctlAbort, text: validReason(err.Error())})
			return
		}
	}
	c := e.addConn(from)
	c.id = e.newID()
	e.ids[c.id] = c
	e.queueCtl(from, control{kind: ctlConnected, id: c.id})
	c.establish(now)
	e.emit(Event{Kind: EventConnected, Conn: c.handle, Addr: from, ID: c.id})
	e.touch(c, now)
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
			e.emit(Event{Kind: EventConnected, Conn: c.handle, Addr: c.addr, ID: c.id})
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
	c.startMTU(now)
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
