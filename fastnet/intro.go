package fastnet

import (
	"container/heap"
	"encoding/binary"
	"errors"
	"net/netip"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
)

// Introductions over the connections to an introducer (X4-X8,
// docs/nat.md). An introducer S opens an introduction when a peer A asks
// ("intro?") for a target B by the id of B's connection to S, offers it to
// B ("intro>"), and on B's consent ("intro+") sends both the go ("intro=")
// with a fresh token; a refusal ("intro-"), no answer, or a connection
// that ends gives A a failure ("intro!"). Channel -1 is not acknowledged:
// the asker repeats at 200 ms, doubling, at most every second, and the
// answerer answers every copy from its state (X7).

// Errors of Endpoint.Introduce.
var (
	// ErrNoIntroducer is returned by Introduce for a connection whose
	// peer has not answered "query:ext:punch=yes" (X2), or that is not a
	// client-role connection.
	ErrNoIntroducer = errors.New("fastnet: the connection's peer does not introduce")
	// ErrTooManyIntros is returned by Introduce when
	// Config.Punch.MaxIntros introductions are under way.
	ErrTooManyIntros = errors.New("fastnet: too many introductions under way")
	// ErrUnknownIntro is returned by RelayHosted for an introduction
	// that does not wait for a relay group.
	ErrUnknownIntro = errors.New("fastnet: no introduction waits for that")
	// ErrIntroFailed is matched by every *IntroError.
	ErrIntroFailed = errors.New("fastnet: introduction failed")
)

// IntroCode says why an introduction failed: the codes 1-5 of "intro!"
// (X6), and the failures an initiator finds by itself.
type IntroCode uint8

// Failure codes of an introduction.
const (
	IntroUnknownTarget IntroCode = 1 // no such target, it is the asker, or it does not speak the extension (X4)
	IntroRefused       IntroCode = 2 // the target refused; IntroError.Reason is its reason (X5)
	IntroNoConsent     IntroCode = 3 // the target did not answer within the consent timeout (X7)
	IntroBusy          IntroCode = 4 // the introducer's limits (X4)
	IntroPeerGone      IntroCode = 5 // the target's connection to the introducer ended meanwhile (X7)
	// IntroNoIntroducer: no answer from the introducer within
	// Config.Punch.IntroTimeout (X7), or the connection to it ended.
	IntroNoIntroducer IntroCode = 16
	// IntroNoPeer: the initiator heard neither a connection nor the
	// target's decision within PunchTimeout + 3 s of the go (X13).
	IntroNoPeer IntroCode = 17
	// IntroNoPath: the target found no direct path, and no relay was
	// used (X13).
	IntroNoPath IntroCode = 18
	// IntroTooManyHandshakes: a path was proved while this side had
	// Config.MaxPendingHandshakes handshakes under way, so it did not
	// dial the peer (N109).
	IntroTooManyHandshakes IntroCode = 19
)

var introCodeText = map[IntroCode]string{
	IntroUnknownTarget:     "unknown target",
	IntroRefused:           "refused by the target",
	IntroNoConsent:         "no answer from the target",
	IntroBusy:              "introducer busy",
	IntroPeerGone:          "the target left the introducer",
	IntroNoIntroducer:      "no answer from the introducer",
	IntroNoPeer:            "no answer from the peer",
	IntroNoPath:            "no direct path and no relay",
	IntroTooManyHandshakes: "too many handshakes under way",
}

// IntroError says which step of an introduction failed. It matches
// ErrIntroFailed.
type IntroError struct {
	Code   IntroCode
	Reason string // IntroRefused: the target's reason
}

func (e *IntroError) Error() string {
	s := "fastnet: introduction failed: " + introCodeText[e.Code]
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	return s
}

// Is reports whether target is ErrIntroFailed.
func (e *IntroError) Is(target error) bool { return target == ErrIntroFailed }

// Introduction describes an introduction this Peer takes part in, as
// EventIntroduced and EventIntroFailed report it (X8).
type Introduction struct {
	// ID names the introduction; zero before the introducer's go.
	ID IntroID
	// Req is the initiator's number for its request, as Introduce
	// returned it; 0 at the target.
	Req uint32
	// Via is the connection to the introducer.
	Via Handle
	// Initiator is set on the side that asked (A), clear on the target.
	Initiator bool
	// PeerID is the other peer's connection id at the introducer.
	PeerID uint32
	// PeerAddr is the other peer's reflexive address, PeerCands its local
	// candidates (X9).
	PeerAddr  netip.AddrPort
	PeerCands []netip.AddrPort
	// Relay is the "host:port" of the URP relay the introducer named, if
	// any (X13).
	Relay string
	// TTL is the introduction's lifetime from the go (X7).
	TTL time.Duration
	// RelayGroup and RelayPassword, on EventRelayJoin, are the URP group
	// on Relay the target hosts and its password; on EventRelayHost the
	// password the group must have (X13). They are what urpdriver.Listen
	// (Config.Password) and urpdriver.Dial take.
	RelayGroup, RelayPassword uint32
	// Path and Addr, on the events of a connection an introduction made
	// (EventConnected, and EventRefused or EventConnectFailed of the
	// initiator's handshake): how it reaches the peer, and at which
	// address (X12).
	Path IntroPath
	Addr netip.AddrPort
}

// IntroOffer is what a target learns before it consents (X5, X8), as
// PunchConfig.Consent is given it.
type IntroOffer struct {
	Via         Handle         // the connection to the introducer
	ID          IntroID        // the introduction
	InitiatorID uint32         // the initiator's connection id at the introducer
	Addr        netip.AddrPort // the initiator's reflexive address
	Cands       []netip.AddrPort
}

// introSide is the part an endpoint plays in an introduction.
type introSide uint8

const (
	sideIntroducer introSide = iota + 1 // S
	sideInitiator                       // A
	sideTarget                          // B
)

// introState is where an introduction is, at one side.
type introState uint8

const (
	introAsking   introState = iota + 1 // A: "intro?" sent, no answer yet
	introOffered                        // S: "intro>" sent; B: accepted, "intro+" sent
	introRefused                        // B: refused, remembered to answer repeats
	introGoing                          // "intro=" sent (S) or received (A, B)
	introFailed                         // S: "intro!" sent, kept to answer repeats; A: ended, kept to echo "intro^"
	introFellBack                       // B: punching failed, "intro^" sent (X13)
	introHosting                        // B: punching failed, the application hosts a relay group (X13)
)

const (
	introRetry    = 200 * time.Millisecond // X7
	introMaxRetry = time.Second
	introFailKeep = 10 * time.Second // S keeps a failure to answer repeats (X7)
	// repeatGap and maxRepeats bound S's answers to the repeats of one
	// side's request or consent (N134): one per repeatGap, half of the
	// asker's shortest interval, and maxRepeats in all, more than an
	// asker repeating until IntroTimeout sends.
	repeatGap  = introRetry / 2
	maxRepeats = 32
	// maxRemembered bounds the decisions a target remembers, refusals
	// included; past it the oldest refusal is forgotten to make room,
	// and with none to forget an offer is refused "busy" and not
	// remembered (N135).
	maxRemembered = 64
)

// intro is one introduction, at one side.
type intro struct {
	side  introSide
	state introState
	id    IntroID
	req   uint32
	// a and b are the connections of the initiator and the target (S);
	// via the connection to the introducer (A, B).
	a, b, via *conn
	// target is the target's id (S, A), or the other peer's (A, B after
	// the go; B's offer: the initiator's).
	target       uint32
	aCands       candList // S: the initiator's candidates
	bCands       candList // S: the target's
	peerAddr     netip.AddrPort
	peerCands    candList
	token        [16]byte
	ttl          time.Duration
	relay        string
	code         uint8 // S: the failure sent
	reason       string
	retryAt      clock.Time
	every        time.Duration
	endAt        clock.Time // when this side gives up or forgets
	at           clock.Time // heap key: the earlier of retryAt and endAt
	heapIdx      int
	countedLive  bool   // S: counted in its requester's and target's live counts
	countedTaken bool   // B: counted in takingPart
	forwarded    bool   // S: "intro^" passed on to A (X13)
	askDone      bool   // A: no longer counted in asking
	gid          uint32 // B: the relay group its "intro^" names (X13)

	// S: when it last answered a repeat of A's request and of B's
	// consent, and how many it answered (N134).
	repeatA, repeatB   clock.Time
	repeatsA, repeatsB int

	// Punching (A, B; holepunch.go): the candidates checked, the
	// peer-reflexive ones among them and the answers sent (X9, X14); the
	// schedule of checks from punchStart, every punchEvery until punchEnd
	// (B: once extended, graceUsed); A's bound on B's decision, and the
	// connection it dials over a proved path (X12, X13).
	paths                             [maxPaths]punchPath
	npaths, prflx, answers, punchTick int
	punching, graceUsed               bool
	punchStart, punchAt, punchEnd     clock.Time
	decideBy                          clock.Time
	direct                            *conn
	directAddr                        netip.AddrPort
}

// introCounts are an introducer's counts for one connection (X4).
type introCounts struct {
	live   int // introductions it asked for, offered or going
	offers int // offers to it, offered or going
	tokens float64
	filled clock.Time
}

// introTable holds the introductions of an endpoint.
type introTable struct {
	heap       introHeap // every introduction, by its next deadline
	byID       map[IntroID]*intro
	byReq      map[uint32]*intro // A: by request number
	sReq       map[sReqKey]*intro
	counts     map[*conn]*introCounts
	nextReq    uint32
	asking     int // A: introductions asked for and not ended
	takingPart int // B: accepted, live
	remembered int // B: decisions kept
}

type sReqKey struct {
	c   *conn
	req uint32
}

func (t *introTable) n() int { return len(t.heap) }

func (t *introTable) next() (clock.Time, bool) {
	if len(t.heap) == 0 {
		return 0, false
	}
	return t.heap[0].at, true
}

func (t *introTable) init() {
	if t.byID == nil {
		t.byID = make(map[IntroID]*intro)
		t.byReq = make(map[uint32]*intro)
		t.sReq = make(map[sReqKey]*intro)
		t.counts = make(map[*conn]*introCounts)
	}
}

// schedule sets in's deadlines and its place in the heap.
func (t *introTable) schedule(in *intro) {
	in.at = in.deadline()
	if in.heapIdx < 0 {
		heap.Push(&t.heap, in)
	} else {
		heap.Fix(&t.heap, in.heapIdx)
	}
}

// deadline returns when in has something to do next.
func (in *intro) deadline() clock.Time {
	d := clock.Earliest(in.retryAt, in.endAt)
	if in.punchLive() {
		if in.punching {
			d = clock.Earliest(d, in.punchAt)
		}
		if in.side == sideTarget {
			d = clock.Earliest(d, in.punchEnd)
		}
		if in.side == sideInitiator && in.direct == nil {
			d = clock.Earliest(d, in.decideBy)
		}
	}
	return d
}

// introHeap orders introductions by deadline (container/heap).
type introHeap []*intro

func (h introHeap) Len() int           { return len(h) }
func (h introHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h introHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIdx, h[j].heapIdx = i, j
}
func (h *introHeap) Push(x any) {
	in := x.(*intro)
	in.heapIdx = len(*h)
	*h = append(*h, in)
}
func (h *introHeap) Pop() any {
	old := *h
	in := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	in.heapIdx = -1
	return in
}

// forget ends in at this side.
func (e *Endpoint) forget(in *intro) {
	t := &e.intros
	if in.heapIdx >= 0 {
		heap.Remove(&t.heap, in.heapIdx)
	}
	if t.byID[in.id] == in {
		delete(t.byID, in.id)
	}
	if in.direct != nil {
		in.direct.punch, in.direct = nil, nil
	}
	switch in.side {
	case sideIntroducer:
		e.introUncount(in)
		delete(t.sReq, sReqKey{in.a, in.req})
	case sideInitiator:
		delete(t.byReq, in.req)
		if !in.askDone {
			t.asking--
		}
	case sideTarget:
		t.remembered--
		if in.countedTaken {
			in.countedTaken = false
			t.takingPart--
		}
	}
}

// retry arms in's next repeat: 200 ms after the first, doubling, at most
// every second (X7).
func (in *intro) retry(now clock.Time) {
	if in.every == 0 {
		in.every = introRetry
	} else {
		in.every = min(2*in.every, introMaxRetry)
	}
	in.retryAt = now.Add(in.every)
}

// sendExt queues the extension literal m for to's peer, a connection to an
// introducer or of one (X14: S's own validated connections).
func (e *Endpoint) sendExt(to *conn, m *extMsg) {
	e.queueCtlOnce(to.addr, control{kind: ctlExt, raw: appendExt(nil, m, nil)})
}

// handleExt handles a literal of the extension from addr, whose
// connection, if any, is c.
func (e *Endpoint) handleExt(now clock.Time, from netip.AddrPort, c *conn, p []byte) {
	if !e.punchOn() {
		e.drop(c, DropBadControl) // unknown to a strict 1.0 peer (X2)
		return
	}
	m, err := parseExt(p)
	if err != nil {
		e.drop(c, DropBadControl) // X3
		return
	}
	e.intros.init()
	switch m.kind {
	case extIntroReq:
		e.introRequest(now, c, &m)
	case extIntroOffer:
		e.introOffer(now, c, &m)
	case extIntroAccept, extIntroRefuse:
		e.introAnswer(now, c, &m)
	case extIntroGo:
		e.introGo(now, c, &m)
	case extIntroFail:
		e.introFail(c, &m)
	case extIntroRelay:
		e.introRelay(now, c, &m)
	default:
		e.handlePunch(now, from, c, p, &m)
	}
}

// introducee reports whether c is a connection an introducer takes
// introduction messages on: of its server role, established, validated,
// and negotiated (X2).
func (e *Endpoint) introducee(c *conn) bool {
	return e.cfg.Punch.Introducer && c != nil && c.role == Server && c.established() && !c.unvalidated && c.punchTo
}

// toIntroducer reports whether c is a Peer's connection to an introducer
// it negotiated with (X2, X16).
func (e *Endpoint) toIntroducer(c *conn) bool {
	return e.cfg.Role == Peer && c != nil && c.role == Client && c.established() && c.punchTo
}

// keepCands returns the candidates of l that X9 keeps: private and
// global unicast addresses with a port, other than reflexive.
func keepCands(l *candList, reflexive netip.AddrPort) (out candList) {
	for _, a := range l.slice() {
		if a.Port() != 0 && a != reflexive && candidateIP(a.Addr().Unmap()) {
			out.add(netip.AddrPortFrom(a.Addr().Unmap(), a.Port()))
		}
	}
	return out
}

var candPrefixes = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("fc00::/7"),
	netip.MustParsePrefix("2000::/3"),
}

// candidateIP reports whether ip may be a local candidate (X9).
func candidateIP(ip netip.Addr) bool {
	if ip.Zone() != "" {
		return false
	}
	for _, p := range candPrefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// ---- S: the introducer ----

func (e *Endpoint) countsOf(c *conn) *introCounts {
	k := e.intros.counts[c]
	if k == nil {
		k = &introCounts{tokens: float64(e.cfg.Punch.IntroBurst), filled: e.now}
		e.intros.counts[c] = k
	}
	return k
}

// bucketHas refills c's bucket to now and reports whether it holds a
// token (X4: IntroBurst, filled at IntroRate a second).
func (k *introCounts) bucketHas(now clock.Time, p *PunchConfig) bool {
	if now > k.filled {
		k.tokens = min(float64(p.IntroBurst), k.tokens+now.Sub(k.filled).Seconds()*float64(p.IntroRate))
		k.filled = now
	}
	return k.tokens >= 1
}

func (e *Endpoint) introUncount(in *intro) {
	if !in.countedLive {
		return
	}
	in.countedLive = false
	e.intros.counts[in.a].live--
	e.intros.counts[in.b].offers--
}

// introRequest handles A's "intro?" at S (X4).
func (e *Endpoint) introRequest(now clock.Time, c *conn, m *extMsg) {
	t := &e.intros
	if !e.introducee(c) {
		e.drop(c, DropBadIntro)
		return
	}
	if in := t.sReq[sReqKey{c, m.req}]; in != nil {
		// The same request again: answered from its state (X4, X7),
		// at most once per repeatGap and maxRepeats in all, and only
		// if it names the same target. A request is 17 bytes, its
		// go up to about 330, and the request numbers are small:
		// forged repeats in A's name drew 20 times their bytes at A
		// (N134).
		if m.target != in.target {
			e.drop(c, DropBadIntro)
			return
		}
		switch {
		case in.state != introGoing && in.state != introFailed:
			// Offered: the answer is still to come.
		case !repeatDue(now, &in.repeatA, &in.repeatsA):
		case in.state == introGoing:
			e.sendGo(in, in.a)
		default:
			e.sendExt(c, &extMsg{kind: extIntroFail, req: in.req, code: in.code, reason: in.reason})
		}
		return
	}
	b := e.ids[m.target]
	if b == nil || b == c || !e.introducee(b) {
		// One code for all three (X4, X8).
		e.sendExt(c, &extMsg{kind: extIntroFail, req: m.req, code: uint8(IntroUnknownTarget)})
		e.introduced(c, m.target, &IntroError{Code: IntroUnknownTarget})
		return
	}
	p := &e.cfg.Punch
	ka, kb := e.countsOf(c), e.countsOf(b)
	busy := ka.live >= p.MaxIntros || !ka.bucketHas(now, p) || kb.offers >= p.MaxOffers
	for _, x := range t.heap {
		if x.side == sideIntroducer && x.countedLive && (x.a == c && x.b == b || x.a == b && x.b == c) {
			busy = true // one per pair
		}
	}
	if busy {
		e.sendExt(c, &extMsg{kind: extIntroFail, req: m.req, code: uint8(IntroBusy)})
		e.introduced(c, m.target, &IntroError{Code: IntroBusy})
		return
	}
	ka.tokens--
	ka.live++
	kb.offers++
	in := &intro{side: sideIntroducer, state: introOffered, req: m.req, a: c, b: b, target: b.id,
		aCands: keepCands(&m.cands, c.addr), heapIdx: -1, countedLive: true}
	for {
		binary.BigEndian.PutUint64(in.id[:], e.cfg.Rand.Uint64())
		if _, used := t.byID[in.id]; !used {
			break
		}
	}
	t.byID[in.id] = in
	t.sReq[sReqKey{c, m.req}] = in
	in.endAt = now.Add(p.ConsentTimeout)
	e.sendOffer(in)
	in.retry(now)
	t.schedule(in)
}

func (e *Endpoint) sendOffer(in *intro) {
	e.sendExt(in.b, &extMsg{kind: extIntroOffer, id: in.id, target: in.a.id, addr: in.a.addr, cands: in.aCands})
}

// sendGo sends "intro=" to one side of a going introduction (X6).
func (e *Endpoint) sendGo(in *intro, to *conn) {
	m := extMsg{kind: extIntroGo, id: in.id, token: in.token, ttl: uint32(e.cfg.Punch.TTL / time.Millisecond),
		relay: e.cfg.Punch.Relay}
	if to == in.a {
		m.req, m.role, m.target, m.addr, m.cands = in.req, 0, in.b.id, in.b.addr, in.bCands
	} else {
		m.role, m.target, m.addr, m.cands = 1, in.a.id, in.a.addr, in.aCands
	}
	e.sendExt(to, &m)
}

// introAnswer handles B's "intro+" or "intro-" at S (X5, X6).
func (e *Endpoint) introAnswer(now clock.Time, c *conn, m *extMsg) {
	in := e.intros.byID[m.id]
	if in == nil || in.side != sideIntroducer || in.b != c || !e.introducee(c) {
		e.drop(c, DropBadIntro) // X16: only from the target
		return
	}
	switch {
	case in.state == introOffered && m.kind == extIntroAccept:
		for i := range 2 {
			binary.BigEndian.PutUint64(in.token[8*i:], e.cfg.Rand.Uint64())
		}
		in.bCands = keepCands(&m.cands, c.addr)
		in.state = introGoing
		in.retryAt, in.endAt = 0, now.Add(e.cfg.Punch.TTL)
		e.intros.schedule(in)
		e.sendGo(in, in.a)
		e.sendGo(in, in.b)
		in.repeatA, in.repeatB = now, now // a repeat is answered repeatGap after
		e.introduced(in.a, in.target, nil)
	case in.state == introOffered:
		e.introFailAt(now, in, IntroRefused, m.reason)
	case in.state == introGoing && m.kind == extIntroAccept:
		if repeatDue(now, &in.repeatB, &in.repeatsB) {
			e.sendGo(in, in.b) // B lost its "intro=" (X7)
		}
	}
}

// repeatDue reports whether S answers a repeat now, given when it last
// answered one of that side, *last, and how many, *n, which it updates
// if so (N134).
func repeatDue(now clock.Time, last *clock.Time, n *int) bool {
	if *n >= maxRepeats || now < last.Add(repeatGap) {
		return false
	}
	*last, *n = now, *n+1
	return true
}

// introduced reports at the introducer what became of a's request to be
// introduced to target (EventIntroduction).
func (e *Endpoint) introduced(a *conn, target uint32, err *IntroError) {
	ev := Event{Kind: EventIntroduction, Conn: a.handle, Addr: a.addr, ID: target}
	if err != nil {
		ev.Err = err
	}
	e.emit(ev)
}

// introFailAt ends S's introduction in with an "intro!" to A, kept to
// answer A's repeats (X7).
func (e *Endpoint) introFailAt(now clock.Time, in *intro, code IntroCode, reason string) {
	in.state, in.code, in.reason = introFailed, uint8(code), cutTo(reason, maxExtText)
	e.introUncount(in)
	e.sendExt(in.a, &extMsg{kind: extIntroFail, req: in.req, code: in.code, reason: in.reason})
	in.repeatA = now
	e.introduced(in.a, in.target, &IntroError{Code: code, Reason: in.reason})
	in.retryAt, in.endAt = 0, now.Add(introFailKeep)
	e.intros.schedule(in)
}

// introConnGone ends what depended on c, a connection that ends (X7).
func (e *Endpoint) introConnGone(c *conn) {
	t := &e.intros
	var gone []*intro
	for _, in := range t.heap {
		if in.a == c || in.b == c || in.via == c || in.direct == c {
			gone = append(gone, in)
		}
	}
	for _, in := range gone {
		switch {
		case in.direct == c:
			// A's handshake over the proved path ended: so does the
			// introduction, token included (X12, X16).
		case in.side == sideIntroducer && in.b == c && in.state == introOffered && in.a.state != 0:
			e.introFailAt(e.now, in, IntroPeerGone, "")
			continue
		case in.side == sideInitiator && in.state == introAsking:
			e.introReport(in, &IntroError{Code: IntroNoIntroducer})
		case in.side == sideInitiator || in.side == sideTarget:
			if in.state == introGoing {
				in.via = nil // punching goes on without the introducer
				continue
			}
		}
		e.forget(in)
	}
}

// ---- A: the initiator ----

// Introduce asks the introducer at the other end of via to introduce this
// Peer to the peer whose connection to it has the id target (X4), and
// returns the request's number, which the events of the introduction carry
// (Introduction.Req). EventIntroduced follows when the target consented,
// or EventIntroFailed. It fails with ErrWrongRole unless the endpoint is a
// Peer, ErrUnknownConn, ErrNotConnected, ErrNoIntroducer when via's peer
// has not negotiated the extension (X2), and ErrTooManyIntros when
// Config.Punch.MaxIntros are under way.
func (e *Endpoint) Introduce(now clock.Time, via Handle, target uint32) (uint32, error) {
	if e.cfg.Role != Peer {
		return 0, ErrWrongRole
	}
	c := e.conns[via]
	switch {
	case c == nil:
		return 0, ErrUnknownConn
	case !c.established():
		return 0, ErrNotConnected
	case !e.toIntroducer(c):
		return 0, ErrNoIntroducer
	case e.intros.asking >= e.cfg.Punch.MaxIntros:
		return 0, ErrTooManyIntros
	}
	e.at(now)
	t := &e.intros
	t.init()
	for {
		t.nextReq++
		if _, used := t.byReq[t.nextReq]; t.nextReq != 0 && !used {
			break
		}
	}
	in := &intro{side: sideInitiator, state: introAsking, req: t.nextReq, via: c, target: target, heapIdx: -1}
	t.byReq[in.req] = in
	t.asking++
	in.endAt = now.Add(e.cfg.Punch.IntroTimeout)
	e.sendRequest(in)
	in.retry(now)
	t.schedule(in)
	return in.req, nil
}

func (e *Endpoint) sendRequest(in *intro) {
	m := extMsg{kind: extIntroReq, req: in.req, target: in.target}
	for _, a := range e.cfg.Punch.Candidates {
		m.cands.add(a)
	}
	e.sendExt(in.via, &m)
}

// introFail handles S's "intro!" at A (X6).
func (e *Endpoint) introFail(c *conn, m *extMsg) {
	in := e.intros.byReq[m.req]
	if in == nil || in.via != c || in.state != introAsking || !e.toIntroducer(c) {
		e.drop(c, DropBadIntro) // X16, X18
		return
	}
	e.introReport(in, &IntroError{Code: IntroCode(m.code), Reason: m.reason})
	e.forget(in)
}

// introReport reports the failure of A's introduction in.
func (e *Endpoint) introReport(in *intro, err *IntroError) {
	var via Handle
	if in.via != nil { // nil once the introducer's connection ended (X7)
		via = in.via.handle
	}
	e.emit(Event{Kind: EventIntroFailed, Conn: via, Addr: in.peerAddr, Err: err, Intro: in.public()})
}

// public returns what the application is told of in.
func (in *intro) public() *Introduction {
	x := &Introduction{ID: in.id, Req: in.req, Initiator: in.side == sideInitiator, PeerID: in.target,
		PeerAddr: in.peerAddr, PeerCands: in.peerCands.slice(), Relay: in.relay, TTL: in.ttl}
	if in.via != nil {
		x.Via = in.via.handle
	}
	return x
}

// ---- B: the target ----

// introOffer handles S's "intro>" at B (X5).
func (e *Endpoint) introOffer(now clock.Time, c *conn, m *extMsg) {
	t := &e.intros
	if !e.toIntroducer(c) {
		e.drop(c, DropBadIntro) // X16
		return
	}
	if in := t.byID[m.id]; in != nil {
		if in.side != sideTarget || in.via != c {
			e.drop(c, DropBadIntro)
			return
		}
		e.sendDecision(in) // the same answer again (X5)
		return
	}
	if t.remembered >= maxRemembered && !e.forgetOldestRefusal() {
		e.sendExt(c, &extMsg{kind: extIntroRefuse, id: m.id, reason: "busy"})
		return
	}
	p := &e.cfg.Punch
	in := &intro{side: sideTarget, id: m.id, via: c, target: m.target, peerAddr: m.addr,
		peerCands: keepCands(&m.cands, m.addr), heapIdx: -1}
	var refusal string
	switch {
	case t.takingPart >= p.MaxOffers:
		refusal = "busy"
	case p.Consent == nil:
		refusal = "no consent"
	default:
		if err := p.Consent(IntroOffer{Via: c.handle, ID: m.id, InitiatorID: m.target, Addr: m.addr,
			Cands: in.peerCands.slice()}); err != nil {
			refusal = cutTo(validReason(err.Error()), maxExtText)
		}
	}
	t.byID[in.id] = in
	t.remembered++
	if refusal != "" {
		// Remembered while the introducer may repeat its offer: it
		// stops once it has the refusal, or at its ConsentTimeout
		// (X7), of which this side knows its own (N135). Kept for the
		// lifetime, refusals filled the table of maxRemembered
		// decisions: two peers refused, asking twice a second, locked
		// the target out of every introduction.
		in.state, in.reason = introRefused, refusal
		in.endAt = now.Add(p.ConsentTimeout + introMaxRetry)
	} else {
		in.state, in.countedTaken = introOffered, true
		t.takingPart++
		in.endAt = now.Add(p.ConsentTimeout) // forgotten without "intro=" (X7)
		in.retry(now)
	}
	e.sendDecision(in)
	t.schedule(in)
}

// forgetOldestRefusal makes room among the decisions a target remembers
// by forgetting its oldest refusal, the one that ends first (N135), and
// reports whether there was one. A repeat of that offer is then asked
// of the application again.
func (e *Endpoint) forgetOldestRefusal() bool {
	var oldest *intro
	for _, in := range e.intros.heap {
		if in.side == sideTarget && in.state == introRefused && (oldest == nil || in.endAt < oldest.endAt) {
			oldest = in
		}
	}
	if oldest == nil {
		return false
	}
	e.forget(oldest)
	return true
}

func (e *Endpoint) sendDecision(in *intro) {
	switch in.state {
	case introRefused:
		e.sendExt(in.via, &extMsg{kind: extIntroRefuse, id: in.id, reason: in.reason})
	case introOffered:
		m := extMsg{kind: extIntroAccept, id: in.id}
		for _, a := range e.cfg.Punch.Candidates {
			m.cands.add(a)
		}
		e.sendExt(in.via, &m)
	}
}

// ---- A and B: the go ----

// introGo handles S's "intro=" at A (role 0, answering its request) or B
// (role 1, answering its consent) (X6, X16).
func (e *Endpoint) introGo(now clock.Time, c *conn, m *extMsg) {
	t := &e.intros
	var in *intro
	if m.role == 0 {
		in = t.byReq[m.req]
		if in != nil && (in.side != sideInitiator || in.state != introAsking && in.id != m.id) {
			in = nil
		}
	} else if m.req == 0 {
		in = t.byID[m.id]
		if in != nil && (in.side != sideTarget || in.state != introOffered && in.state != introGoing) {
			in = nil
		}
	}
	if in == nil || in.via != c || !e.toIntroducer(c) {
		e.drop(c, DropBadIntro) // X16, X18
		return
	}
	if in.state == introGoing {
		return // a repeat
	}
	if _, used := t.byID[m.id]; used && in.side == sideInitiator {
		e.drop(c, DropBadIntro) // an id this side already uses
		return
	}
	in.state, in.id, in.token = introGoing, m.id, m.token
	t.byID[in.id] = in
	in.ttl = time.Duration(m.ttl) * time.Millisecond
	in.target, in.peerAddr, in.peerCands, in.relay = m.target, m.addr, keepCands(&m.cands, m.addr), m.relay
	// Kept at least until the punching has had its time and the
	// target's decision its way through the introducer (X13), whatever
	// ttl the introducer sent: a shorter one ended the introduction
	// with no outcome at either side, and an Introduce waiting for one
	// waited for good (N133).
	in.retryAt, in.endAt = 0, now.Add(max(in.ttl, e.introLife()))
	t.schedule(in)
	e.emit(Event{Kind: EventIntroduced, Conn: c.handle, Addr: in.peerAddr, Intro: in.public()})
	e.startPunch(now, in)
}

// introLife is the least time a peer keeps an introduction after its go
// (N133): its punching, the target's grace, the initiator's wait for the
// decision, and a retry of the decision's "intro^".
func (e *Endpoint) introLife() time.Duration {
	return e.cfg.Punch.PunchTimeout + punchGrace + decideSlack + introMaxRetry
}

// ---- timers ----

// introTimeout runs the introductions' timers due at now (X7).
func (e *Endpoint) introTimeout(now clock.Time) {
	t := &e.intros
	for len(t.heap) > 0 && t.heap[0].at <= now {
		in := t.heap[0]
		if now >= in.endAt {
			switch {
			case in.side == sideIntroducer && in.state == introOffered:
				e.introFailAt(now, in, IntroNoConsent, "")
				continue
			case in.side == sideInitiator && in.state == introAsking:
				e.introReport(in, &IntroError{Code: IntroNoIntroducer})
			case in.side == sideInitiator && in.state == introGoing && in.direct == nil:
				// Never without an outcome (N133).
				e.introReport(in, &IntroError{Code: IntroNoPeer})
			}
			e.forget(in)
			continue
		}
		if in.punchLive() && (in.retryAt == 0 || now < in.retryAt) {
			e.punchTimer(now, in)
			continue
		}
		switch {
		case in.side == sideIntroducer && in.state == introOffered:
			e.sendOffer(in)
		case in.side == sideInitiator && in.state == introAsking:
			e.sendRequest(in)
		case in.side == sideTarget && in.state == introOffered:
			e.sendDecision(in)
		case in.side == sideIntroducer && in.forwarded:
			e.sendExt(in.a, &extMsg{kind: extIntroRelay, id: in.id, gid: in.gid}) // until A echoes (X7, X13)
		case in.side == sideTarget && in.state == introFellBack:
			e.sendExt(in.via, &extMsg{kind: extIntroRelay, id: in.id, gid: in.gid}) // until S echoes
		}
		in.retry(now)
		t.schedule(in)
	}
}
