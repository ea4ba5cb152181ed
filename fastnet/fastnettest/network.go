package fastnettest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/fastnet"
)

// A Node is what the network drives: a sans-IO endpoint, fed datagrams and
// timeouts and drained of datagrams and events. *fastnet.Endpoint satisfies
// it; see it for the contract of each method.
type Node interface {
	HandleDatagram(now clock.Time, from netip.AddrPort, b []byte)
	HandleTimeout(now clock.Time)
	NextDeadline() (clock.Time, bool)
	PollTransmit(now clock.Time, buf []byte) (fastnet.Transmit, bool)
	PollEvent() (fastnet.Event, bool)
}

var _ Node = (*fastnet.Endpoint)(nil)

// A BatchNode is a Node that takes datagrams that arrived together in one
// call (Network.Batch). *fastnet.Endpoint satisfies it.
type BatchNode interface {
	Node
	HandleDatagrams(now clock.Time, ds []fastnet.Incoming)
}

var _ BatchNode = (*fastnet.Endpoint)(nil)

// A TransportNode is a Node on a connection-based transport, told when the
// transport connection to a peer is gone. *fastnet.Endpoint satisfies it.
type TransportNode interface {
	Node
	HandleTransportClosed(now clock.Time, addr netip.AddrPort)
}

var _ TransportNode = (*fastnet.Endpoint)(nil)

// Errors of the Run methods.
var (
	// ErrLivelock: the network kept busy without virtual time moving on
	// (Network.MaxStepsPerInstant), or RunUntilIdle ran out of steps.
	ErrLivelock = errors.New("fastnettest: livelock")
	// ErrIdle: RunUntilCond found nothing left to happen before its
	// condition held.
	ErrIdle = errors.New("fastnettest: network idle before the condition held")
	// ErrTimeLimit: RunUntilCond reached its time limit before its condition
	// held.
	ErrTimeLimit = errors.New("fastnettest: time limit reached before the condition held")
)

// DefaultMaxStepsPerInstant is the number of steps the Run methods take at
// one instant of virtual time before they report ErrLivelock, when
// Network.MaxStepsPerInstant is zero.
const DefaultMaxStepsPerInstant = 1 << 20

// minTransmitBuffer is the size of the buffer passed to PollTransmit, unless
// a node's configuration asks for more.
const minTransmitBuffer = 65536

// A Network is a deterministic simulated network in virtual time: nodes at
// addresses, and links between them that delay, drop, duplicate, reorder and
// corrupt datagrams. Every random draw comes from one PCG seeded by
// NewNetwork, and ties are broken by the order of sending, so a run is a
// function of the seed and of what the test does between steps.
//
// The network runs on the calling goroutine only: it starts no goroutines
// and never sleeps. Tests call methods of the nodes (Connect, Send, Close)
// between steps or from OnEvent; every Step first collects what such calls
// made the nodes want to send.
type Network struct {
	// Filter, if set, sees every datagram as it is sent, before the link
	// acts on it. It may inspect and change b, but not keep it; returning
	// false drops the datagram. It must not call the nodes.
	Filter func(from, to netip.AddrPort, b []byte) bool

	// OnEvent, if set, is called with every event of a node, when the
	// node produces it. It may call methods of any node (to send a reply
	// on EventConnected, say); the network collects what they send.
	OnEvent func(at clock.Time, node netip.AddrPort, ev fastnet.Event)

	// Trace, if set, receives one line of text per datagram sent, dropped
	// and delivered, per timeout fired and per event, each beginning with
	// the virtual time in seconds since clock.Epoch. The format is stable:
	// the same seed and the same test give the same bytes.
	Trace io.Writer

	// DiscardEvents stops the network from keeping events for Events and
	// TakeEvents, as a long run must; OnEvent still sees them. The
	// network keeps a copy of the Data of a node's messages if the node's
	// Config sets ReuseMessageBuffers; OnEvent sees the lent buffer, as
	// an application that polled it would.
	DiscardEvents bool

	// MaxStepsPerInstant bounds the steps the Run methods take without
	// virtual time moving on before they report ErrLivelock. Zero means
	// DefaultMaxStepsPerInstant.
	MaxStepsPerInstant int

	// Batch hands the datagrams that arrive at a node at one instant, one
	// after another, to it together, as a driver that reads several
	// datagrams at once (recvmmsg) does before it polls the node: through
	// HandleDatagrams if the node is a BatchNode (as *fastnet.Endpoint
	// is), or else one by one, and then polls it once. Datagrams that
	// cross a NAT are handed over one by one.
	//
	// With ReadEvery, each node reads only at the multiples of ReadEvery
	// (from clock.Epoch), as a loop that reads its socket once a tick
	// does: what arrived since its last read, NAT or not, is handed over
	// then, at that instant, after the arrivals of the instant and before
	// the node's deadline. Until then it is still in flight (InFlight),
	// delivered only at the read (LinkStats, Trace), and dropped if
	// CloseTransport cuts its link meanwhile.
	Batch     bool
	ReadEvery time.Duration

	now    clock.Time
	rng    *rand.Rand
	nodes  []*node // in the order added, which breaks ties between deadlines
	byAddr map[netip.AddrPort]*node
	links  map[linkKey]*link
	def    Link // for pairs without SetLink
	q      flightQueue
	seq    uint64

	bottlenecks []*Bottleneck // made by NewBottleneck
	departs     int           // kindDepart events in q, superseded ones included
	pool        bufPool
	buf         []byte             // passed to PollTransmit
	tbuf        []byte             // a trace line being built
	batch       []fastnet.Incoming // datagrams being handed over together (Batch)
	inboxed     int                // datagrams in the nodes' inboxes (ReadEvery)

	nats map[netip.Addr]*NAT // made by AddNAT, by external IP

	dirty        bool       // OnEvent ran, or a node was added: any node may have output
	instant      clock.Time // the instant of the latest step
	instantSteps int        // steps taken at it
}

// inboxed is a datagram in a node's inbox: it came over l, sent in l's
// epoch, from from.
type inboxed struct {
	l     *link
	epoch uint32
	from  netip.AddrPort
	b     []byte
}

// node is the network's state of one Node.
type node struct {
	addr     netip.AddrPort
	n        Node
	deadline clock.Time // NextDeadline when last asked; 0 if none
	events   []fastnet.Event
	lends    bool // its messages' Data is lent (ReuseMessageBuffers, N103)
	nat      *NAT // the NAT it is behind (AddBehind), if any
	// inbox holds the datagrams that arrived since the node last read,
	// and readAt when it reads next (Batch with ReadEvery); 0 if none.
	// They are still in flight: a cut of their link (CloseTransport)
	// drops them at the read.
	inbox  []inboxed
	readAt clock.Time

	// The link of the latest datagram sent, which is most often the link
	// of the next one.
	last *link
}

// NewNetwork returns an empty network whose virtual clock reads
// clock.Epoch and whose random draws are a function of seed. Its default
// link is the zero Link.
func NewNetwork(seed uint64) *Network {
	return &Network{
		now:    clock.Epoch,
		rng:    rand.New(rand.NewPCG(seed, 0x666173746e657474)),
		byAddr: make(map[netip.AddrPort]*node),
		links:  make(map[linkKey]*link),
		buf:    make([]byte, minTransmitBuffer),
	}
}

// Now returns the network's virtual time. Tests pass it as now to the
// methods of nodes they call between steps.
func (n *Network) Now() clock.Time { return n.now }

// Rand returns the network's source of randomness, for tests that want
// their own draws to follow from the same seed. Drawing from it changes the
// network's later draws, deterministically.
func (n *Network) Rand() *rand.Rand { return n.rng }

// Add puts node at addr. A node whose Config method (as *fastnet.Endpoint
// has) reports a MaxPacketSize above 65536 gets a transmit buffer that
// large. Add panics if addr is invalid or taken.
func (n *Network) Add(addr netip.AddrPort, nd Node) {
	if !addr.IsValid() {
		panic("fastnettest: Add of an invalid address")
	}
	if n.byAddr[addr] != nil || n.nats[addr.Addr()] != nil {
		panic("fastnettest: Add of a taken address " + addr.String())
	}
	st := &node{addr: addr, n: nd}
	if c, ok := nd.(interface{ Config() fastnet.Config }); ok {
		cfg := c.Config()
		if size := cfg.MaxPacketSize; size > len(n.buf) {
			n.buf = make([]byte, size)
		}
		st.lends = cfg.ReuseMessageBuffers
	}
	n.nodes = append(n.nodes, st)
	n.byAddr[addr] = st
	n.dirty = true
}

// SetLink sets the link that datagrams from from to to travel. It panics
// if l is invalid (a probability outside [0, 1], a negative duration or
// size, a Reliable link with loss or a Bottleneck, a Bottleneck of another
// network).
func (n *Network) SetLink(from, to netip.AddrPort, l Link) {
	if err := n.validate(l); err != nil {
		panic(err)
	}
	lk := n.link(from, to)
	lk.cfg = l
	lk.explicit = true
}

// SetPath sets the link both ways between a and b.
func (n *Network) SetPath(a, b netip.AddrPort, l Link) {
	n.SetLink(a, b, l)
	n.SetLink(b, a, l)
}

// SetDefaultLink sets the link of every pair of addresses not given one by
// SetLink or SetPath. It panics if l is invalid.
func (n *Network) SetDefaultLink(l Link) {
	if err := n.validate(l); err != nil {
		panic(err)
	}
	n.def = l
	for _, lk := range n.links {
		if !lk.explicit {
			lk.cfg = l
		}
	}
}

// LinkStats returns the counters of the link from from to to.
func (n *Network) LinkStats(from, to netip.AddrPort) LinkStats {
	if lk := n.links[linkKey{from, to}]; lk != nil {
		return lk.stats
	}
	return LinkStats{}
}

// Stats returns the sum of the counters of every link.
func (n *Network) Stats() LinkStats {
	var s LinkStats
	for _, lk := range n.links {
		s.add(lk.stats)
	}
	return s
}

// InFlight returns the number of datagrams on their way, those in the
// queue of a Bottleneck, and those that arrived at a node that has not
// read them yet (Batch with ReadEvery), included.
func (n *Network) InFlight() int {
	k := n.q.len() - n.departs + n.inboxed
	for _, b := range n.bottlenecks {
		k += len(b.q) - b.head
	}
	return k
}

// validate checks l for this network.
func (n *Network) validate(l Link) error {
	if err := l.validate(); err != nil {
		return err
	}
	if l.Bottleneck != nil && l.Bottleneck.n != n {
		return fmt.Errorf("fastnettest: Link.Bottleneck was made by another network")
	}
	return nil
}

// Events returns the events node addr has produced so far (since the last
// TakeEvents). The caller must not modify the slice.
func (n *Network) Events(addr netip.AddrPort) []fastnet.Event {
	if st := n.byAddr[addr]; st != nil {
		return st.events[:len(st.events):len(st.events)]
	}
	return nil
}

// TakeEvents returns the events node addr has produced since the last
// TakeEvents and forgets them.
func (n *Network) TakeEvents(addr netip.AddrPort) []fastnet.Event {
	st := n.byAddr[addr]
	if st == nil {
		return nil
	}
	evs := st.events
	st.events = nil
	return evs
}

// Inject sends the datagram b from from to to as if a node at from had sent
// it, whether or not there is one: the link from from to to acts on it as on
// any other. It copies b. Use it to play an attacker or a broken peer.
func (n *Network) Inject(from, to netip.AddrPort, b []byte) {
	c := n.pool.get(len(b))
	copy(c, b)
	if n.nats != nil {
		var nat *NAT
		if st := n.byAddr[from]; st != nil {
			nat = st.nat
		}
		n.route(from, nat, to, c)
		return
	}
	n.transmit(n.link(from, to), c)
}

// CloseTransport cuts the connection-based transport between a and b, as a
// TCP reset does: datagrams in flight between them are dropped, and each of
// the two that is a TransportNode hears HandleTransportClosed with the
// other's address. Datagrams sent afterwards travel as before, as over a
// new connection.
func (n *Network) CloseTransport(a, b netip.AddrPort) {
	n.collect()
	for _, k := range [2]linkKey{{a, b}, {b, a}} {
		lk := n.link(k.from, k.to)
		lk.epoch++
		lk.busyUntil = 0
		lk.lastArrival = 0
	}
	if n.Trace != nil {
		n.tbuf = appendTime(n.tbuf[:0], n.now)
		n.tbuf = append(n.tbuf, " cut "...)
		n.tbuf = a.AppendTo(n.tbuf)
		n.tbuf = append(n.tbuf, " - "...)
		n.tbuf = b.AppendTo(n.tbuf)
		n.writeTrace()
	}
	for _, p := range [2][2]netip.AddrPort{{a, b}, {b, a}} {
		if st := n.byAddr[p[0]]; st != nil {
			if tn, ok := st.n.(TransportNode); ok {
				tn.HandleTransportClosed(n.now, p[1])
				n.flush(st)
			}
		}
	}
	n.sync()
}

// link returns the state of the link from from to to, creating it with the
// default link if needed.
func (n *Network) link(from, to netip.AddrPort) *link {
	k := linkKey{from, to}
	lk := n.links[k]
	if lk == nil {
		lk = &link{linkKey: k, cfg: n.def, dst: n.byAddr[to]}
		n.links[k] = lk
	}
	return lk
}

// Step collects what the nodes want to send, then advances virtual time to
// the earlier of the next arrival and the next deadline of a node (or,
// with Batch and ReadEvery, its next read), and delivers that datagram or
// fires that timeout; arrivals go before reads and reads before deadlines
// at the same instant, and earlier-added nodes before later ones.
// After every input to a node, Step drains the node's PollTransmit and
// PollEvent. Step returns false, doing nothing, when nothing is scheduled.
func (n *Network) Step() bool {
	n.collect()
	_, ok := n.step()
	n.sync()
	return ok
}

// RunFor steps until virtual time has advanced by d, then sets the clock
// to that instant.
func (n *Network) RunFor(d time.Duration) error {
	return n.RunUntil(n.now.Add(d))
}

// RunUntil steps through everything scheduled up to t, then sets the clock
// to t (if it is later than now).
func (n *Network) RunUntil(t clock.Time) error {
	n.collect()
	for {
		at, ok := n.next()
		if !ok || at > t {
			break
		}
		if err := n.runStep(); err != nil {
			return err
		}
	}
	n.now = max(n.now, t)
	return nil
}

// RunUntilIdle steps until nothing is scheduled: no datagram in flight
// (nor unread, ReadEvery) and no node with a deadline. It returns
// ErrLivelock if that takes more than maxSteps steps.
func (n *Network) RunUntilIdle(maxSteps int) error {
	n.collect()
	for i := 0; ; i++ {
		if _, ok := n.next(); !ok {
			return nil
		}
		if i >= maxSteps {
			return fmt.Errorf("%w: still busy after %d steps, at %v", ErrLivelock, maxSteps, n.now.Sub(clock.Epoch))
		}
		if err := n.runStep(); err != nil {
			return err
		}
	}
}

// RunUntilCond steps until cond returns true, checking it before the first
// step and after each one. It returns ErrTimeLimit, with the clock set to
// the limit, if cond is still false when virtual time would pass now+limit,
// and ErrIdle if nothing is left to happen.
func (n *Network) RunUntilCond(cond func() bool, limit time.Duration) error {
	end := n.now.Add(limit)
	n.collect()
	for !cond() {
		at, ok := n.next()
		if !ok {
			return fmt.Errorf("%w (at %v)", ErrIdle, n.now.Sub(clock.Epoch))
		}
		if at > end {
			n.now = max(n.now, end)
			return fmt.Errorf("%w (%v)", ErrTimeLimit, limit)
		}
		if err := n.runStep(); err != nil {
			return err
		}
	}
	return nil
}

// runStep takes one step for a Run method, watching for livelock.
func (n *Network) runStep() error {
	n.step()
	if n.now != n.instant {
		n.instant, n.instantSteps = n.now, 0
	}
	n.instantSteps++
	limit := n.MaxStepsPerInstant
	if limit == 0 {
		limit = DefaultMaxStepsPerInstant
	}
	if n.instantSteps > limit {
		return fmt.Errorf("%w: %d steps at %v without time moving on", ErrLivelock, n.instantSteps, n.now.Sub(clock.Epoch))
	}
	n.sync()
	return nil
}

// next returns the instant of the next step, if anything is scheduled.
func (n *Network) next() (clock.Time, bool) {
	at, pkt, st, _ := n.peek()
	return at, pkt || st != nil
}

// peek finds the next thing to happen at instant at: the arrival of the
// first packet (pkt), or else the read of node st's inbox (read, with
// Batch and ReadEvery) or its deadline. At one instant, arrivals come
// first, then reads, then deadlines.
func (n *Network) peek() (at clock.Time, pkt bool, st *node, read bool) {
	var rd *node // the node whose read is due first
	for _, s := range n.nodes {
		if s.deadline != 0 && (st == nil || s.deadline < st.deadline) {
			st = s
		}
		if s.readAt != 0 && (rd == nil || s.readAt < rd.readAt) {
			rd = s
		}
	}
	if st != nil {
		at = max(st.deadline, n.now)
	}
	// A read goes before a deadline at the same instant, and a time
	// past is now: a deadline already past does not come before a read
	// due now.
	if rd != nil && (st == nil || max(rd.readAt, n.now) <= at) {
		st, at, read = rd, max(rd.readAt, n.now), true
	}
	if n.q.len() > 0 && (st == nil || n.q.next() <= at) {
		return n.q.next(), true, nil, false
	}
	return at, false, st, read
}

// step does the next thing, and reports its instant and whether there was
// one.
func (n *Network) step() (clock.Time, bool) {
	at, pkt, st, read := n.peek()
	switch {
	case read:
		n.now = at
		n.read(st)
	case pkt:
		pat, p := n.q.pop()
		n.now = max(n.now, pat)
		switch p.kind {
		case kindArrive:
			if n.Batch && n.ReadEvery == 0 && p.hop == nil {
				n.deliverBatch(p)
			} else {
				n.deliver(p)
			}
		case kindEnter:
			if p.epoch != p.l.epoch {
				n.drop(p.l, p.b, dropCut)
				break
			}
			p.bn.enter(p.l, p.epoch, p.b, p.hop)
		case kindDepart:
			n.departs--
			p.bn.depart(p.gen)
		}
	case st != nil:
		n.now = at
		if n.Trace != nil {
			n.tbuf = appendTime(n.tbuf[:0], n.now)
			n.tbuf = append(n.tbuf, " timeout "...)
			n.tbuf = st.addr.AppendTo(n.tbuf)
			n.writeTrace()
		}
		st.n.HandleTimeout(n.now)
		n.flush(st)
	default:
		return 0, false
	}
	return n.now, true
}

func (n *Network) deliver(p packet) {
	l := p.l
	if p.epoch != l.epoch {
		n.drop(l, p.b, dropCut)
		return
	}
	dst, from := l.dst, l.from
	if p.hop != nil {
		var ok bool
		if dst, from, ok = n.arrive(l, p); !ok {
			return
		}
	}
	if n.Batch && n.ReadEvery > 0 {
		// Kept until the node reads, at the next multiple of ReadEvery,
		// and delivered then.
		if len(dst.inbox) == 0 {
			e := time.Duration(n.now - clock.Epoch)
			dst.readAt = clock.Epoch.Add((e + n.ReadEvery - 1) / n.ReadEvery * n.ReadEvery)
		}
		dst.inbox = append(dst.inbox, inboxed{l: l, epoch: p.epoch, from: from, b: p.b})
		n.inboxed++
		return
	}
	n.delivered(l, p.b)
	dst.n.HandleDatagram(n.now, from, p.b)
	n.pool.put(p.b)
	n.flush(dst)
}

// delivered counts b, which came over l, as delivered, and traces it.
func (n *Network) delivered(l *link, b []byte) {
	l.stats.Delivered++
	l.stats.DeliveredBytes += uint64(len(b))
	if n.Trace != nil {
		n.traceRecv(l, b)
	}
}

// read hands st what its inbox holds, but for what a cut of its link
// dropped meanwhile (Batch with ReadEvery).
func (n *Network) read(st *node) {
	n.batch = n.batch[:0]
	for i, d := range st.inbox {
		st.inbox[i] = inboxed{}
		if d.epoch != d.l.epoch {
			n.drop(d.l, d.b, dropCut)
			continue
		}
		n.delivered(d.l, d.b)
		n.batch = append(n.batch, fastnet.Incoming{From: d.from, Data: d.b})
	}
	n.inboxed -= len(st.inbox)
	st.inbox, st.readAt = st.inbox[:0], 0
	if len(n.batch) > 0 {
		n.handOver(st, n.batch)
	}
}

// handOver gives ds, datagrams from the pool, to dst together (Batch),
// returns them to the pool, and polls dst.
func (n *Network) handOver(dst *node, ds []fastnet.Incoming) {
	if bn, ok := dst.n.(BatchNode); ok {
		bn.HandleDatagrams(n.now, ds)
	} else {
		for _, d := range ds {
			dst.n.HandleDatagram(n.now, d.From, d.Data)
		}
	}
	for i, d := range ds {
		n.pool.put(d.Data)
		ds[i] = fastnet.Incoming{}
	}
	n.flush(dst)
}

// deliverBatch delivers p, which crosses no NAT, with the datagrams that
// arrive right after it at the same instant at the same node (Batch).
func (n *Network) deliverBatch(p packet) {
	dst := p.l.dst
	n.batch = n.batch[:0]
	for {
		if l := p.l; p.epoch != l.epoch {
			n.drop(l, p.b, dropCut)
		} else {
			n.delivered(l, p.b)
			n.batch = append(n.batch, fastnet.Incoming{From: l.from, Data: p.b})
		}
		if n.q.len() == 0 || n.q.next() != n.now {
			break
		}
		if q := n.q.peek(); q.kind != kindArrive || q.hop != nil || q.l.dst != dst {
			break
		}
		_, p = n.q.pop()
	}
	if len(n.batch) > 0 {
		n.handOver(dst, n.batch)
	}
}

// collect drains every node, at the start of a method that steps, since
// the test may have called any node since the last step.
func (n *Network) collect() {
	n.dirty = true
	n.sync()
}

// sync drains every node if OnEvent or the test may have called one.
func (n *Network) sync() {
	for n.dirty {
		n.dirty = false
		for _, st := range n.nodes {
			n.flush(st)
		}
	}
}

// flush drains st's PollTransmit, then its PollEvent, and asks its next
// deadline, as the endpoint contract requires after every input.
func (n *Network) flush(st *node) {
	for {
		for {
			tx, ok := st.n.PollTransmit(n.now, n.buf)
			if !ok {
				break
			}
			if tx.N < 0 || tx.N > len(n.buf) {
				panic(fmt.Sprintf("fastnettest: node %v returned Transmit.N %d for a buffer of %d", st.addr, tx.N, len(n.buf)))
			}
			b := n.pool.get(tx.N)
			copy(b, n.buf[:tx.N])
			if n.nats != nil {
				n.route(st.addr, st.nat, tx.To, b)
				continue
			}
			lk := st.last
			if lk == nil || lk.to != tx.To {
				lk = n.link(st.addr, tx.To)
				st.last = lk
			}
			n.transmit(lk, b)
		}
		got := false
		for {
			ev, ok := st.n.PollEvent()
			if !ok {
				break
			}
			got = true
			n.event(st, ev)
		}
		// OnEvent may have made st send; without it, polling events
		// cannot have.
		if !got || n.OnEvent == nil {
			break
		}
	}
	st.deadline = 0
	if d, ok := st.n.NextDeadline(); ok {
		st.deadline = max(d, 1)
	}
}

func (n *Network) event(st *node, ev fastnet.Event) {
	if !n.DiscardEvents {
		kept := ev
		if st.lends && kept.Data != nil {
			// Kept past the node's next input, where the endpoint
			// reuses a lent buffer: a copy of its own.
			kept.Data = bytes.Clone(kept.Data)
		}
		st.events = append(st.events, kept)
	}
	if n.Trace != nil {
		n.tbuf = appendTime(n.tbuf[:0], n.now)
		n.tbuf = append(n.tbuf, " event "...)
		n.tbuf = st.addr.AppendTo(n.tbuf)
		n.tbuf = append(n.tbuf, ' ')
		n.tbuf = AppendEvent(n.tbuf, ev)
		n.writeTrace()
	}
	if n.OnEvent != nil {
		n.OnEvent(n.now, st.addr, ev)
		n.dirty = true
	}
}
