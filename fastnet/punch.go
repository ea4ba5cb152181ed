package fastnet

import (
	"net/netip"
)

// The punch extension (docs/nat.md): introductions through a server both
// peers are connected to, and hole punching between them. It is
// negotiated per connection in the style of bundles (X2, N69): once
// connected, each side that speaks it asks
//
//	query:ext:punch          (15 bytes)
//
// with each of its first punchAsks originated heartbeats until it has the
// answer
//
//	query:ext:punch=yes      (19 bytes, less than 3 times the query: D25)
//
// A strict 1.0 peer never answers, so it is never sent any literal of the
// extension; if one reaches it anyway it drops it as an unknown channel
// -1 literal. Over a Stream transport nothing is negotiated: TCP is not
// punch-capable.

// punchAsks is how many times a connection asks "query:ext:punch" (X2):
// as many as "query:ext:bundle".
const punchAsks = bundleAsks

// punchOn reports whether the endpoint speaks the punch extension: on a
// Datagram transport, as an introducer or a peer (Role Peer), unless
// Config.Punch.Disabled (X2).
func (e *Endpoint) punchOn() bool {
	p := &e.cfg.Punch
	return e.cfg.Transport == Datagram && !p.Disabled && (p.Introducer || e.cfg.Role == Peer)
}

// askPunch queues "query:ext:punch" for c's peer while c may still ask:
// established and (a server's) validated, not yet answered, and fewer
// than punchAsks times so far. It is called when c originates a
// heartbeat, and when a server's connection is validated (X2).
func (c *conn) askPunch() {
	c.askExtension(c.punchTo, &c.punchAsks, c.ep.punchOn(), ctlQueryPunch)
}

// punchControl handles the two literals of X2 from addr, whose connection,
// if any, is c. The query is answered for anyone, statelessly, as every
// query is (D15); the answer marks c as a connection whose peer speaks the
// extension. An endpoint that does not speak it drops both, as a strict
// 1.0 peer does.
func (e *Endpoint) punchControl(from netip.AddrPort, c *conn, m control) {
	if !e.punchOn() {
		e.drop(c, DropBadControl)
		return
	}
	switch m.kind {
	case ctlQueryPunch:
		e.queueCtl(from, control{kind: ctlPunchYes})
	case ctlPunchYes:
		if c == nil || !c.established() {
			e.drop(c, DropNotConnected)
			return
		}
		c.punchTo = true
	}
}

// PunchNegotiated reports whether the peer of connection h answered
// "query:ext:punch=yes": it speaks introductions and hole punching (X2).
func (e *Endpoint) PunchNegotiated(h Handle) bool {
	c := e.conns[h]
	return c != nil && c.punchTo
}
