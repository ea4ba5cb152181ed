package fastnet

import (
	"encoding/binary"
	"net/netip"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
)

// Hole punching and the direct connection (X9-X16, docs/nat.md). Once the
// go ("intro=") has arrived, each peer checks every candidate address of
// the other with punch packets whose mac only holders of the
// introduction's token can compute, and a path is proved at a side when
// an answer echoes the nonce this side sent to that very address (X11).
// The initiator A then runs the handshake of D15 to the first address it
// proved, as the client of the new connection; the target B takes a
// "connect?" only from an address it proved (X12). B decides the end: at
// PunchTimeout (once extended by a second if it proved an address but no
// "connect?" came) it forgets the token and tells A through the
// introducer ("intro^", X13), with gid 0 since no relay is used.

const (
	punchEvery       = 100 * time.Millisecond // the reflexive candidate's checks (X11)
	punchGrace       = time.Second            // B's one extension (X13)
	punchAnswerGap   = 10 * time.Millisecond  // one answer per address per gap (X11, X14)
	maxPunchAnswers  = 64                     // answers per introduction (X14)
	maxPeerReflexive = 4                      // X9
	// decideSlack is what A waits beyond PunchTimeout and B's grace for
	// B's decision to come through the introducer (X13).
	decideSlack = 2 * time.Second
	maxPaths    = 1 + maxCands + maxPeerReflexive
)

// pathKind is how a side learned a candidate address (X9).
type pathKind uint8

const (
	pathReflexive pathKind = iota + 1
	pathLocal
	pathPeerReflexive
)

// punchPath is one remote address an introduction checks (X11).
type punchPath struct {
	addr       netip.AddrPort
	kind       pathKind
	nonce      [8]byte // this side's question for addr
	proved     bool
	lastAnswer clock.Time
	ack        []byte // the latest "punch." sent to addr (A resends it, X12)
}

// IntroPath says how an introduced connection reaches its peer.
type IntroPath uint8

const (
	// PathDirect: over an address proved by hole punching (X11, X12).
	PathDirect IntroPath = iota + 1
	// PathRelay: through a group on the URP relay the introducer named,
	// when punching found no direct path (X13). The engine never makes
	// such a connection itself; a driver that joins the group reports it.
	PathRelay
)

// punching reports whether in still checks: its token is live.
func (in *intro) punchLive() bool {
	return (in.side == sideInitiator || in.side == sideTarget) && in.state == introGoing
}

// path returns in's path for addr, nil if none.
func (in *intro) path(addr netip.AddrPort) *punchPath {
	for i := range in.npaths {
		if in.paths[i].addr == addr {
			return &in.paths[i]
		}
	}
	return nil
}

// addPath adds addr as a candidate of kind, with a nonce of its own.
func (e *Endpoint) addPath(in *intro, addr netip.AddrPort, kind pathKind) *punchPath {
	if p := in.path(addr); p != nil || in.npaths == maxPaths {
		return p
	}
	p := &in.paths[in.npaths]
	in.npaths++
	*p = punchPath{addr: addr, kind: kind}
	binary.BigEndian.PutUint64(p.nonce[:], e.cfg.Rand.Uint64())
	if kind == pathPeerReflexive {
		in.prflx++
	}
	return p
}

// myRole is this side's role byte in the punch packets (X10).
func (in *intro) myRole() uint8 {
	if in.side == sideInitiator {
		return 0
	}
	return 1
}

// sendPunch queues a punch packet of kind for p's address.
func (e *Endpoint) sendPunch(in *intro, p *punchPath, kind extKind, echo [8]byte) []byte {
	m := extMsg{kind: kind, id: in.id, role: in.myRole(), nonce: p.nonce, echo: echo}
	raw := appendExt(nil, &m, &in.token)
	e.queueCtl(p.addr, control{kind: ctlExt, raw: raw})
	return raw
}

// startPunch starts the checks of X11 for in, whose go has just arrived:
// a "punch?" to every candidate at once.
func (e *Endpoint) startPunch(now clock.Time, in *intro) {
	in.punching = true
	in.punchStart, in.punchTick = now, 0
	in.punchEnd = now.Add(e.cfg.Punch.PunchTimeout)
	in.punchAt = now.Add(punchEvery)
	if in.side == sideInitiator {
		in.decideBy = in.punchEnd.Add(punchGrace + decideSlack)
	}
	e.addPath(in, in.peerAddr, pathReflexive)
	for _, a := range in.peerCands.slice() {
		e.addPath(in, a, pathLocal)
	}
	for i := range in.npaths {
		e.sendPunch(in, &in.paths[i], extPunchAsk, [8]byte{})
	}
	e.intros.schedule(in)
}

// punchTimer runs in's punch timers due at now: the checks' schedule,
// B's decision, A's bound on waiting for it.
func (e *Endpoint) punchTimer(now clock.Time, in *intro) {
	if in.punching && now >= in.punchAt {
		if now >= in.punchEnd {
			in.punching = false
		} else {
			in.punchTick++
			for i := range in.npaths {
				p := &in.paths[i]
				switch p.kind {
				case pathReflexive:
					e.sendPunch(in, p, extPunchAsk, [8]byte{})
				case pathLocal:
					if t := in.punchTick; t == 1 || t == 2 || t == 4 || t == 8 {
						e.sendPunch(in, p, extPunchAsk, [8]byte{})
					}
				}
			}
			// A late call skips the checks it missed rather than
			// sending them at once.
			in.punchTick = max(in.punchTick, int(now.Sub(in.punchStart)/punchEvery))
			in.punchAt = in.punchStart.Add(time.Duration(in.punchTick+1) * punchEvery)
		}
	}
	if in.side == sideTarget && now >= in.punchEnd {
		proved := false
		for i := range in.npaths {
			proved = proved || in.paths[i].proved
		}
		if proved && !in.graceUsed {
			in.graceUsed = true
			in.punchEnd = in.punchEnd.Add(punchGrace)
		} else {
			e.fallBack(now, in)
			return
		}
	}
	if in.side == sideInitiator && in.decideBy != 0 && now >= in.decideBy && in.direct == nil {
		e.introEnd(now, in, &IntroError{Code: IntroNoPeer})
		return
	}
	e.intros.schedule(in)
}

// fallBack is B's decision that punching failed (X13): the token is
// forgotten, so that a late "connect?" is refused, and A hears of it
// through the introducer. No relay is used: gid 0.
func (e *Endpoint) fallBack(now clock.Time, in *intro) {
	password := relayPassword(&in.token)
	in.punching = false
	in.token, in.npaths = [16]byte{}, 0
	if in.countedTaken {
		in.countedTaken = false
		e.intros.takingPart--
	}
	if in.via == nil {
		e.forget(in) // nobody to tell
		return
	}
	if in.relay != "" {
		// The application hosts the group, and RelayHosted sends its id.
		in.state = introHosting
		x := in.public()
		x.RelayPassword = password
		e.emit(Event{Kind: EventRelayHost, Conn: in.via.handle, Addr: in.peerAddr, Intro: x})
		e.intros.schedule(in)
		return
	}
	e.decide(now, in, 0)
}

// decide sends B's decision, "intro^" with the relay group gid (0: none),
// to S, repeated until echoed (X13).
func (e *Endpoint) decide(now clock.Time, in *intro, gid uint32) {
	in.state, in.gid, in.every = introFellBack, gid, 0
	e.sendExt(in.via, &extMsg{kind: extIntroRelay, id: in.id, gid: gid})
	in.retry(now)
	e.intros.schedule(in)
}

// RelayHosted tells the endpoint that the application hosts, for the
// introduction id, the URP group gid that an EventRelayHost asked for, or
// that it could not (gid 0); the introducer passes it on to the initiator
// (X13). It returns ErrUnknownIntro if id names no introduction waiting
// for it.
func (e *Endpoint) RelayHosted(now clock.Time, id IntroID, gid uint32) error {
	in := e.intros.byID[id]
	if in == nil || in.side != sideTarget || in.state != introHosting || in.via == nil {
		return ErrUnknownIntro
	}
	e.at(now)
	e.decide(now, in, gid)
	return nil
}

// relayPassword is the password of the relay group of an introduction
// (X13): the first 4 bytes of HMAC-SHA256(token, "fastnet relay
// password"), a big-endian u32, 1 if that is 0 (U3: 0 means none).
func relayPassword(token *[16]byte) uint32 {
	mac := punchMAC(token, []byte("fastnet relay password"))
	if p := binary.BigEndian.Uint32(mac[:4]); p != 0 {
		return p
	}
	return 1
}

// introEnd ends A's introduction with err, kept until its lifetime ends to
// echo the introducer's repeats (X7).
func (e *Endpoint) introEnd(now clock.Time, in *intro, err *IntroError) {
	if err != nil {
		e.introReport(in, err)
	}
	if !in.askDone {
		in.askDone = true
		e.intros.asking--
	}
	in.state, in.punching, in.decideBy = introFailed, false, 0
	in.token, in.npaths = [16]byte{}, 0
	if in.direct != nil {
		c := in.direct
		in.direct, c.punch = nil, nil
		if c.state == stateQuerying || c.state == stateConnecting {
			// Ended without an error when it goes on over the relay
			// (EventRelayJoin): the handshake over the path the punch
			// proved, still under way, is given up for it (N146).
			reason := "introduction goes over the relay"
			if err != nil {
				reason = err.Error()
			}
			e.failHandshake(c, &LocalCloseError{Reason: reason})
		}
	}
	e.intros.schedule(in)
}

// handlePunch handles the punch packet p, parsed as m, from addr (X10,
// X11). One that names no live introduction of this side, carries this
// side's own role or a mac that does not verify is dropped as bad-punch,
// never answered; so is one over the limits of X14.
func (e *Endpoint) handlePunch(now clock.Time, from netip.AddrPort, c *conn, p []byte, m *extMsg) {
	in := e.intros.byID[m.id]
	if in == nil || !in.punchLive() || m.role == in.myRole() || !punchValid(&in.token, p) {
		e.drop(c, DropBadPunch)
		return
	}
	path := in.path(from)
	switch m.kind {
	case extPunchAsk:
		if path == nil {
			if in.prflx >= maxPeerReflexive {
				e.drop(c, DropBadPunch)
				return
			}
			path = e.addPath(in, from, pathPeerReflexive)
		}
		if !e.mayAnswer(now, in, path) {
			e.drop(c, DropBadPunch)
			return
		}
		e.sendPunch(in, path, extPunchAnswer, m.nonce)
	case extPunchAnswer, extPunchAck:
		if path == nil || m.echo != path.nonce {
			e.drop(c, DropBadPunch) // proves nothing (X11, X15)
			return
		}
		e.prove(now, in, path)
		if m.kind == extPunchAnswer && e.mayAnswer(now, in, path) {
			path.ack = e.sendPunch(in, path, extPunchAck, m.nonce)
		}
	}
	if in.side == sideInitiator && in.direct == nil {
		if path != nil && path.proved {
			e.dialProved(now, in, path)
		}
	}
}

// mayAnswer reports whether in may answer once more to p's address: one
// answer per punchAnswerGap per address, maxPunchAnswers in all (X14).
func (e *Endpoint) mayAnswer(now clock.Time, in *intro, p *punchPath) bool {
	if in.answers >= maxPunchAnswers || p.lastAnswer != 0 && now < p.lastAnswer.Add(punchAnswerGap) {
		return false
	}
	in.answers++
	p.lastAnswer = now
	return true
}

func (e *Endpoint) prove(now clock.Time, in *intro, p *punchPath) {
	p.proved = true
}

// dialProved starts A's handshake to the proved address of p (X12): a
// client-role connection, whose retries each follow the latest "punch."
// for the address.
func (e *Endpoint) dialProved(now clock.Time, in *intro, p *punchPath) {
	if old := e.byAddr[p.addr]; old != nil {
		return // the application dialled it by hand (X19)
	}
	in.punching = false
	if e.pending >= e.cfg.MaxPendingHandshakes {
		// The bound Connect keeps to (ErrTooManyHandshakes) holds for
		// the handshakes an introduction starts too (N109).
		e.introEnd(now, in, &IntroError{Code: IntroTooManyHandshakes})
		return
	}
	c := e.addConn(now, p.addr, Client)
	e.pending++
	c.punch, in.direct, in.directAddr = in, c, p.addr
	c.startHandshake(now)
	e.touch(c, now)
	e.intros.schedule(in)
}

// repeatPunchAck sends again the latest "punch." for the address of c, a
// connection A dials over a proved path, before a handshake retry (X12).
func (e *Endpoint) repeatPunchAck(c *conn) {
	in := c.punch
	if in == nil || !in.punchLive() {
		return
	}
	if p := in.path(c.addr); p != nil && p.ack != nil {
		e.queueCtl(c.addr, control{kind: ctlExt, raw: p.ack})
	}
}

// introducedBy returns the live introduction in which this side is the
// target and addr is proved (X12); unproved reports whether addr is a
// candidate of one, not yet proved.
func (e *Endpoint) introducedBy(addr netip.AddrPort) (in *intro, unproved bool) {
	for _, x := range e.intros.heap {
		if x.side != sideTarget || !x.punchLive() {
			continue
		}
		if p := x.path(addr); p != nil {
			if p.proved {
				return x, false
			}
			unproved = true
		}
	}
	return nil, unproved
}

// directInfo returns what the events of a connection made by in say of
// it: the introduction, and that its path is direct (X12).
func (in *intro) directInfo(addr netip.AddrPort) *Introduction {
	x := in.public()
	x.Path, x.Addr = PathDirect, addr
	return x
}

// introRelay handles "intro^" (X13): at S from the target, echoed and
// passed on to the initiator until it echoes; at the initiator from S,
// echoed, and the end of its attempt; at the target from S, the echo
// that ends its repeats.
func (e *Endpoint) introRelay(now clock.Time, c *conn, m *extMsg) {
	in := e.intros.byID[m.id]
	switch {
	case in != nil && in.side == sideIntroducer && in.state == introGoing && c == in.b && e.introducee(c):
		e.sendExt(c, m) // the echo
		if !in.forwarded {
			in.forwarded, in.gid = true, m.gid
			e.sendExt(in.a, m)
			in.every = 0
			in.retry(now)
			e.intros.schedule(in)
		}
	case in != nil && in.side == sideIntroducer && c == in.a && in.forwarded:
		in.retryAt = 0 // A echoed
		e.intros.schedule(in)
	case in != nil && in.side == sideInitiator && c == in.via && e.toIntroducer(c):
		e.sendExt(c, m) // the echo
		switch {
		case in.state != introGoing:
		case m.gid == 0 || in.relay == "":
			// No group, or one on no relay this side knows.
			e.introEnd(now, in, &IntroError{Code: IntroNoPath})
		default:
			x := in.public()
			x.RelayGroup, x.RelayPassword = m.gid, relayPassword(&in.token)
			e.emit(Event{Kind: EventRelayJoin, Conn: in.via.handle, Addr: in.peerAddr, Intro: x})
			e.introEnd(now, in, nil)
		}
	case in != nil && in.side == sideTarget && c == in.via && in.state == introFellBack:
		in.retryAt = 0 // S echoed
		e.intros.schedule(in)
	default:
		e.drop(c, DropBadIntro)
	}
}
