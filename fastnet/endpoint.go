package fastnet

import (
	"bytes"
	"cmp"
	"net/netip"
	"slices"
	"unicode/utf8"

	"github.com/fastnet-engine/fastnet/channel"
	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/coalesce"
	"github.com/fastnet-engine/fastnet/internal/fifo"
)

// An Endpoint is one side of Fastnet: a client with its connections to
// servers, or a server with the connections of its clients, all over one
// transport. It is a pure state machine; the package documentation says how
// to drive it. An Endpoint must not be used by more than one goroutine at a
// time.
type Endpoint struct {
	cfg Config

	conns        map[Handle]*conn
	byAddr       map[netip.AddrPort]*conn
	ended        endedConns        // connections ended while their handshake's retries may still come (N123)
	lastConn     *conn             // the connection of the latest datagram, saving a lookup
	lastSent     *conn             // the connection of the latest Send, likewise
	presums      coalesce.Presums  // the digest of the message being handled, computed ahead (handleBundle)
	sums         bundleSums        // handleBundle's digests
	batch        batchSums         // HandleDatagrams' digests, across its bundles
	pre          *batchView        // the bundle HandleDatagrams is handling, if any
	streamPre    *coalesce.Presums // the digest of the Stream packet HandleDatagrams is handling, if computed ahead (N121)
	streamSums   streamSums        // HandleDatagrams' digests on a Stream transport (N121)
	streamSummed uint64            // the messages whose digests streamSums computed together, for tests
	arena        channel.Arena     // the buffers of small delivered messages (N88, N103)
	ids          map[uint32]*conn  // IDs in use by server-role connections (N1, X19)
	served       int               // server-role connections (X19)
	nextHandle   Handle
	pending      int // client: connections still in their handshake

	timers    timerHeap // connections by deadline
	dirty     []*conn   // connections whose deadline changed since settle
	ready     []*conn   // connections with something to transmit, round robin, from readyHead
	readyHead int

	ctl ctlQueue // query answers to send, bounded
	// once holds the channel -1 packets that must not be lost to a
	// query flood ("connected", "abort", "disconnect"), sent before
	// query answers (N35).
	once   ctlQueue
	events []Event
	evHead int
	// evBase counts the events polled before events[0]; lent holds the
	// arena blocks of the message events whose buffers are lent
	// (ReuseMessageBuffers), in the order of those events (N103).
	evBase int
	lent   fifo.Queue[lentBuf]

	// Counters of packets dropped before they reach any connection.
	stray [NumDropReasons]uint64
	// inBundle: a bundle is being handled; bundleCtl has a bit for each
	// kind of channel -1 packet handled in it (N139).
	inBundle  bool
	bundleCtl uint32

	// A server's unvalidated connections, oldest first, and what address
	// validation did (D25).
	unvalidated unvalidatedQueue
	vstats      ValidationStats

	// Admission of MTU estimations (N53): this side's running and
	// waiting, and the peers' being answered.
	mtuRunning int
	mtuQueue   []*conn
	mtuHead    int
	responders []*conn
	estats     EndpointStats

	// recvBudget is the parent of every connection's receive budget:
	// what all of them hold, and the free packet buffers kept for reuse,
	// within Config.EndpointReceiveMemory (D22, N50).
	recvBudget channel.Budget

	// liveReceivers is how many receivers and senders a connection keeps
	// at first before it parks those that fall idle, and liveCap how many
	// it may come to keep (N25); tests lower both.
	liveReceivers, liveCap int

	// lastMsgID is the ID SendTracked gave last (N55).
	lastMsgID MessageID
	// scratch is where PollTransmit polls the packets after a bundle's
	// first (D24); a packet that did not fit stays there, pendingN bytes
	// of pendingConn's, and starts the next datagram (N71).
	scratch     []byte
	pendingConn *conn
	pendingN    int
	// closing lists the connections closed gracefully with something
	// still to send (Close): PollTransmit finishes each once nothing is
	// left (finishDrained).
	closing []*conn
	// noRuns, set only by tests (SetRuns), has bundle poll every packet
	// into scratch rather than write first-time packets in place (N101).
	noRuns bool
	// resendsHeld: no resend is polled or scheduled (HoldResends, N130).
	resendsHeld bool
	holdOrder   []*conn // HoldResends' connections, kept for the next

	// runSent and runTaken count the packets appendRun wrote in place
	// and takeWhole took, for tests (Runs).
	runSent, runTaken uint64
	// runShared counts those of runSent written in a turn of a channel
	// that shared the ring with others (N122).
	runShared uint64
	// batched counts the bundles whose digests HandleDatagrams computed
	// with those of other datagrams (N102), for tests.
	batched uint64
	// now is the latest time the endpoint was given, which Stats reads
	// rates at (N58).
	now clock.Time
	// intros holds the introductions this endpoint takes part in, as
	// introducer or peer (docs/nat.md).
	intros introTable
	// rxLocal is the local address of the datagram being handled
	// (Incoming.Local), and rxFrom its sender: the zero values between
	// datagrams (N149).
	rxLocal netip.Addr
	rxFrom  netip.AddrPort
}

// ctlOut is a channel -1 packet waiting to be sent, from local if that is
// valid (Transmit.Local).
type ctlOut struct {
	to    netip.AddrPort
	local netip.Addr
	c     control
}

// maxCtlOut bounds the queue of query answers, and the "connected" and
// "abort" answers waiting at once: a flood of queries gets answers only as
// fast as the caller drains PollTransmit. A "connected" or "abort" beyond
// it is answered again at the client's next retry; a "disconnect" is never
// dropped (N35).
const maxCtlOut = 1024

// NewEndpoint returns an endpoint configured by cfg, or the error of
// cfg.Validate.
func NewEndpoint(cfg Config) (*Endpoint, error) {
	c, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	return &Endpoint{
		cfg:    c,
		arena:  channel.Arena{Reuse: c.ReuseMessageBuffers},
		conns:  make(map[Handle]*conn),
		byAddr: make(map[netip.AddrPort]*conn),
		ids:    make(map[uint32]*conn),

		// The free buffers kept for reuse: what one connection may hold,
		// within the endpoint's limit, given up as soon as a packet needs
		// their room (N50).
		recvBudget: channel.Budget{Limit: c.EndpointReceiveMemory, MaxFree: c.ConnReceiveMemory,
			Reserve: c.messageMemory()},

		liveReceivers: liveReceivers,
		liveCap:       max(liveReceivers, min(maxLiveReceivers, c.MaxHoldingChannels)),
	}, nil
}

// Config returns the endpoint's configuration with defaults filled in.
func (e *Endpoint) Config() Config { return e.cfg }

// Connect starts a client's handshake with the server at to and returns the
// handle of the new connection. EventConnected, EventRefused or
// EventConnectFailed follows: the connection is client-role, on a Peer
// as on a Client (X19). It fails with ErrWrongRole on a server,
// ErrTooManyHandshakes when Config.MaxPendingHandshakes are under way, and
// ErrAlreadyConnected if a connection to the same address exists.
func (e *Endpoint) Connect(now clock.Time, to netip.AddrPort) (Handle, error) {
	if e.cfg.Role == Server {
		return 0, ErrWrongRole
	}
	if e.pending >= e.cfg.MaxPendingHandshakes {
		return 0, ErrTooManyHandshakes
	}
	if _, dup := e.byAddr[to]; dup {
		return 0, ErrAlreadyConnected
	}
	e.at(now)
	c := e.addConn(now, to, Client)
	e.pending++
	c.startHandshake(now)
	e.touch(c, now)
	return c.handle, nil
}

func (e *Endpoint) addConn(now clock.Time, addr netip.AddrPort, role Role) *conn {
	// Handles have 64 bits (N143): they would wrap after 2^64
	// connections, and one still in use is skipped even then, so two
	// live connections never share one.
	for {
		e.nextHandle++
		if _, used := e.conns[e.nextHandle]; e.nextHandle != 0 && !used {
			break
		}
	}
	c := newConn(e, e.nextHandle, addr, role)
	if addr == e.rxFrom {
		// Made in answer to addr's datagram (a server's, to its
		// "connect?"): it answers from where that datagram went (N149).
		c.local = e.rxLocal
	}
	if role == Server {
		e.served++
	}
	c.startWindow(now)
	e.conns[c.handle] = c
	e.byAddr[addr] = c
	return c
}

// removeConn forgets c entirely.
func (e *Endpoint) removeConn(c *conn) {
	if e.lastConn == c {
		e.lastConn = nil
	}
	if e.lastSent == c {
		e.lastSent = nil
	}
	if e.intros.n() > 0 {
		e.introConnGone(c) // X7
	}
	// Its introduction counts go whether or not an introduction is live:
	// kept, they would pin the ended connection, one more for every
	// client that ever asked (N107).
	delete(e.intros.counts, c)
	if until := c.retryUntil(e.now); until != 0 {
		e.ended.add(c.addr, e.now, until)
	}
	delete(e.conns, c.handle)
	if e.byAddr[c.addr] == c {
		delete(e.byAddr, c.addr)
	}
	if c.role == Server {
		e.served--
		if c.id != 0 && e.ids[c.id] == c {
			delete(e.ids, c.id)
		}
	}
	if c.heapIdx >= 0 {
		e.timers.remove(c.heapIdx)
	}
	if c.state == stateQuerying || c.state == stateConnecting {
		e.pending--
	}
	if c.unvalidated {
		c.unvalidated = false
		e.unvalidated.n--
	}
	c.held, c.heldCharge = nil, 0
	c.mtuWaiting = false
	// What is left of its tracked messages is lost, or dropped, now:
	// before EventDisconnected (N55).
	c.endTracking()
	if c.mtuRunning {
		// Only established connections estimate, and disconnect frees
		// their place with the time; this keeps the count right.
		c.mtuRunning = false
		e.mtuRunning--
	}
	c.state = 0
	// Everything its peer made it hold goes with it (N50).
	c.recvBudget.Detach()
	c.releaseBuffers()
}

// disconnect ends an established connection with err, tells the peer when
// tell is set, and reports EventDisconnected.
func (e *Endpoint) disconnect(now clock.Time, c *conn, err error, tell bool) {
	if c.state == 0 {
		return
	}
	if c.mtuRunning {
		c.mtuRunning = false
		e.releaseEstimation(now) // the next waiting estimation starts (N53)
	}
	if c.unvalidated {
		// The application never heard of it: no event. Its address is
		// not proven: the peer hears why only if the bytes left of its
		// budget carry a "disconnect" (D25).
		if tell {
			if room := int(amplification*c.stats.BytesReceived) - int(c.stats.BytesSent) - 2 - len("disconnect"); room >= 0 {
				var reason string
				switch err := err.(type) {
				case *ProtocolError:
					reason = err.Reason
				case *LocalCloseError:
					reason = err.Reason
				}
				e.queueCtlOnce(c.addr, control{kind: ctlDisconnect, text: cutTo(reason, room)})
			}
		}
		e.removeConn(c)
		return
	}
	if tell {
		var reason string
		switch err := err.(type) {
		case *LocalCloseError:
			reason = err.Reason
		default:
			reason = err.Error()
		}
		e.queueCtlOnce(c.addr, control{kind: ctlDisconnect, text: reason})
	}
	// The final figures, as Stats would have read them just before (N59).
	st := c.snapshot()
	e.removeConn(c)
	e.estats.ConnectionsEnded++
	e.emit(Event{Kind: EventDisconnected, Conn: c.handle, Addr: c.addr, Err: err, Stats: &st})
}

// at notes now as the latest time the endpoint was given.
func (e *Endpoint) at(now clock.Time) {
	if now > e.now {
		e.now = now
	}
}

// advance brings the endpoint's clock up to now, as at, and returns the
// later of the two: the time a call given now acts at, never before what
// the endpoint has seen (Close, CloseAll and Abort, whose ends N123
// times from it).
func (e *Endpoint) advance(now clock.Time) clock.Time {
	e.at(now)
	return e.now
}

// ctlQueue is a FIFO of channel -1 packets to send, consumed from head.
// When the slice is full and at least half of it lies before head, the
// live part moves to the front instead of the slice growing.
type ctlQueue struct {
	q    []ctlOut
	head int
}

func (q *ctlQueue) len() int { return len(q.q) - q.head }

func (q *ctlQueue) push(m ctlOut) {
	if len(q.q) == cap(q.q) && q.head > 0 && 2*q.head >= len(q.q) {
		n := copy(q.q, q.q[q.head:])
		clear(q.q[n:])
		q.q, q.head = q.q[:n], 0
	}
	q.q = append(q.q, m)
}

func (q *ctlQueue) pop() (ctlOut, bool) {
	if q.head == len(q.q) {
		return ctlOut{}, false
	}
	m := q.q[q.head]
	q.q[q.head] = ctlOut{}
	q.head++
	if q.head == len(q.q) {
		q.q, q.head = q.q[:0], 0
	}
	return m, true
}

// queueCtl queues a channel -1 packet, or drops it when the queue is full.
func (e *Endpoint) queueCtl(to netip.AddrPort, c control) {
	if e.ctl.len() < maxCtlOut {
		e.ctl.push(ctlOut{to: to, local: e.localFor(to), c: c})
	}
}

// queueCtlOnce queues a channel -1 packet that a query flood must not
// crowd out (N35): a "disconnect", never dropped (one per connection
// ended), or a "connected" or "abort", dropped only past maxCtlOut waiting
// (the client's retry asks again).
func (e *Endpoint) queueCtlOnce(to netip.AddrPort, c control) {
	if c.kind == ctlDisconnect || e.once.len() < maxCtlOut {
		e.once.push(ctlOut{to: to, local: e.localFor(to), c: c})
	}
}

// localFor returns the local address to send a channel -1 packet to addr
// from (N149): that of addr's connection, if it has one (the zero Addr
// for a connection that leaves it to the socket, a client's); else, if
// the packet answers the datagram being handled, addr's, the address that
// datagram went to; else the zero Addr, the socket's own choice. A packet
// queued while another address's datagram is handled (the punches to an
// introduced peer's candidates, when the introducer's "intro=" arrives)
// does not answer it: that datagram's local address may be of the other
// family, or not the one the route to addr takes.
func (e *Endpoint) localFor(addr netip.AddrPort) netip.Addr {
	if c := e.byAddr[addr]; c != nil {
		return c.local
	}
	if addr == e.rxFrom {
		return e.rxLocal
	}
	return netip.Addr{}
}

// popCtl takes the next channel -1 packet to send, those of queueCtlOnce
// first.
func (e *Endpoint) popCtl() (ctlOut, bool) {
	if m, ok := e.once.pop(); ok {
		return m, true
	}
	return e.ctl.pop()
}

// pushReady appends c to the ready queue. When the slice is full and at
// least half of it lies before readyHead, the live part moves to the front
// instead of the slice growing: pops and pushes stay O(1) amortized, and
// memory within twice what the connections ready at once need.
func (e *Endpoint) pushReady(c *conn) {
	if len(e.ready) == cap(e.ready) && e.readyHead > 0 && 2*e.readyHead >= len(e.ready) {
		n := copy(e.ready, e.ready[e.readyHead:])
		clear(e.ready[n:])
		e.ready, e.readyHead = e.ready[:n], 0
	}
	e.ready = append(e.ready, c)
}

func (e *Endpoint) emit(ev Event) {
	if ev.Kind == EventMessage && e.unvalidated.n > 0 {
		if c := e.conns[ev.Conn]; c != nil && c.unvalidated {
			c.hold(ev) // reported once validated (D25)
			return
		}
	}
	e.reclaimEvents()
	e.events = append(e.events, ev)
}

// reclaimEvents makes room in e.events for one more event, before an
// append, by moving the events not yet polled to the front when the array
// is full and at least half of it holds events already polled. Without it
// an application that polls as many events as come, but is always some
// behind, would never empty the queue, and its array would grow with
// every event it ever polled (N106). Appending then grows the array only
// while more than half of it is events waiting, so its size stays within
// about four times the most events waiting at once.
func (e *Endpoint) reclaimEvents() {
	if len(e.events) < cap(e.events) || e.evHead < len(e.events)/2 {
		return
	}
	n := copy(e.events, e.events[e.evHead:])
	clear(e.events[n:]) // what they refer to is no longer kept alive
	e.evBase += e.evHead
	e.events, e.evHead = e.events[:n], 0
}

// emitMessage reports a message c delivered on channel ch, as emit does.
// It builds the event in its place in the queue: an Event is large, and
// one more copy of it per message measurably slows the engine.
func (e *Endpoint) emitMessage(c *conn, ch int16, m channel.Message) {
	if e.arena.Reuse || c.unvalidated {
		// Apart, with the Event that hold takes: its frame is large,
		// and the common path's is small (N105).
		var held bool
		if m, held = e.lendOrHold(c, ch, m); held {
			return
		}
	}
	if len(e.events) == cap(e.events) {
		e.reclaimEvents()
		e.events = append(e.events, Event{})
	} else {
		e.events = e.events[:len(e.events)+1]
	}
	e.events[len(e.events)-1].setMessage(c, ch, m.Reliable, m.Data)
}

// setMessage makes ev, a place of the event queue, the event of a message
// c delivered on channel ch. The place is written field by field: the
// data, the address only if it differs, and the error, quality,
// statistics and introduction only if the place held an event of another
// kind and one of them is not nil (a message event has none, as
// PollEvent relies on too, and a place polled holds none). While the
// garbage collector marks, each reference written to the heap costs a
// write barrier, nil over nil included, and clearing the place whole
// cost one for each of its seven (N117). The four are tested together,
// after the kind, so that setMessage is inlined, into emitWhole's loop
// among others: tested and written one by one, they made it too large,
// and the call cost 18 instructions of a 64-byte message's 2,990 in a
// full bundle; the test of the kind first saves 10 more. Its cost is the
// inliner's budget (80, go build -gcflags=-m=2): a field more and it is
// called again.
func (ev *Event) setMessage(c *conn, ch int16, reliable bool, data []byte) {
	if ev.Kind != EventMessage && (ev.Err != nil || ev.Quality != nil || ev.Stats != nil || ev.Intro != nil) {
		ev.Err, ev.Quality, ev.Stats, ev.Intro = nil, nil, nil, nil
	}
	if ev.Addr != c.addr {
		ev.Addr = c.addr
	}
	ev.Kind, ev.Conn, ev.ID, ev.Reliable, ev.Outcome = EventMessage, c.handle, 0, reliable, 0
	ev.Channel, ev.MTU, ev.Message, ev.Data = int(ch), 0, 0, data
}

// emitWhole reports the messages of the packets ws, which c's receiver
// of channel ch took at once (channel.Receiver.TakeWhole), whose chunks
// lie in b and whose payloads are payloads, as emitMessage does each:
// copied, or lent with Config.ReuseMessageBuffers, into the arena as the
// receiver copies a message delivered whole (N88, N103). The message
// events of a validated connection are built in their places in the
// queue, one after the other.
func (e *Endpoint) emitWhole(c *conn, ch int16, b []byte, ws []channel.Whole, payloads [][]byte) {
	payloads = payloads[:len(ws)]
	k := len(e.events)
	if c.unvalidated || cap(e.events)-k < len(ws) {
		// Held, or not room for all (emitMessage makes room): one at a
		// time.
		for i := range ws {
			e.emitMessage(c, ch, channel.Message{Reliable: ws[i].H.Reliable, Data: e.arena.Take(payloads[i])})
		}
		return
	}
	// Room for all, so emitMessage would not reclaim any (reclaimEvents).
	e.events = e.events[:k+len(ws)]
	evs := e.events[k:]
	ws, payloads = ws[:len(evs)], payloads[:len(evs)] // no bounds tests in the loop
	a := &e.arena
	if a.Reuse {
		e.lendWhole(c, ch, b, ws, evs)
		return
	}
	for i := range evs {
		// Carved, the event set, then the bytes copied (copySmall):
		// what Copy does, without a call for a small message.
		p := payloads[i]
		data := a.Alloc(len(p))
		evs[i].setMessage(c, ch, ws[i].H.Reliable, data)
		copySmall(data, p)
	}
}

// lendWhole is emitWhole's part for lent buffers (N103, N127): it sets
// evs, the places of the events of ws in the queue, and lends their
// buffers. The messages of 1 to ArenaMax bytes are taken in runs, each
// copied out of b into the arena at once, from the first one's payload
// to the last one's end, with the headers and checksums between them
// (channel.Arena.Span): a run ends where the next message would not fit
// the room of the block it is carved out of, and each message's buffer
// is sliced out of its run's copy with its capacity equal to its
// length, as Carve carves it. One copy and one carving a run cost less
// than one of each a message: 59 instructions a 64-byte message in full
// bundles, for about 28 bytes of the arena a message more while lent. A
// message of 0 or more than ArenaMax bytes is carved alone, as Lend
// carves it: a buffer of its own, not lent.
func (e *Endpoint) lendWhole(c *conn, ch int16, b []byte, ws []channel.Whole, evs []Event) {
	a := &e.arena
	ev := e.evBase + len(e.events) - len(evs)
	ws = ws[:len(evs)]
	for i := 0; i < len(evs); {
		n := ws[i].Msg.Len
		if n == 0 || n > channel.ArenaMax {
			// Not lent: a buffer of its own, as Carve gives one.
			data := a.Copy(ws[i].Payload(b))
			evs[i].setMessage(c, ch, ws[i].H.Reliable, data)
			i++
			continue
		}
		// The run i..j-1, its span b[lo:end], which must fit the room
		// of the current block, or of a block of its own.
		lo := ws[i].Off + ws[i].Msg.HeaderLen
		end := lo + n
		room := a.Room()
		if n > room {
			room = channel.ArenaBlock
		}
		j := i + 1
		for ; j < len(evs); j++ {
			m := ws[j].Msg.Len
			at := ws[j].Off + ws[j].Msg.HeaderLen
			if m == 0 || m > channel.ArenaMax || at < end || at+m-lo > room {
				break
			}
			end = at + m
		}
		blk, span := a.Span(end-lo, j-i)
		copy(span, b[lo:end])
		e.lendEvents(ev+i, j-i, blk)
		for ; i < j; i++ {
			off := ws[i].Off + ws[i].Msg.HeaderLen - lo
			m := ws[i].Msg.Len
			evs[i].setMessage(c, ch, ws[i].H.Reliable, span[off:off+m:off+m])
		}
	}
}

// copySmall is copy(dst, src) for dst as long as src and apart from it,
// without a call for 16 to 64 bytes: two moves of 16 bytes, or two of 32
// through the stack, which overlap when the length is not twice theirs
// (a move of 32 bytes straight from one buffer to another is a call to
// memmove, which must allow for their overlap). emitWhole copies the
// messages of a run with it: a call to copy each cost more than the copy,
// and everything the loop held in registers was stored and loaded again
// around it; 14 instructions of a 64-byte message's 2,937 in a full
// bundle. Its cost is within the inliner's budget (76 of 80, go build
// -gcflags=-m=2).
func copySmall(dst, src []byte) {
	switch n := len(src); {
	case n >= 32 && n <= 64:
		lo, hi := [32]byte(src), [32]byte(src[n-32:])
		*(*[32]byte)(dst) = lo
		*(*[32]byte)(dst[n-32:]) = hi
	case n >= 16 && n < 32:
		*(*[16]byte)(dst) = [16]byte(src)
		*(*[16]byte)(dst[n-16:]) = [16]byte(src[n-16:])
	default:
		copy(dst, src)
	}
}

// lendOrHold is emitMessage's part for a message whose buffer is lent
// (Config.ReuseMessageBuffers) or that is held for a connection not yet
// validated (D25): it returns the message with its data as the event
// carries it, and whether the event was held.
func (e *Endpoint) lendOrHold(c *conn, ch int16, m channel.Message) (channel.Message, bool) {
	if e.arena.Reuse {
		var b *channel.Block
		if b, m.Data = e.lend(m.Data); b != nil && c.unvalidated {
			// Held past the datagrams to come (D25): a buffer of its
			// own, and the lent one back at once.
			m.Data = bytes.Clone(m.Data)
			e.arena.Release(b, 1)
		} else if b != nil {
			e.lendEvents(e.evBase+len(e.events), 1, b)
		}
	}
	if c.unvalidated {
		c.hold(Event{Kind: EventMessage, Conn: c.handle, Addr: c.addr, Channel: int(ch), Reliable: m.Reliable, Data: m.Data})
		return m, true
	}
	return m, false
}

// lend returns the arena block a message's data was lent from, if it
// was, and the data trimmed to its length (Arena.Lend).
func (e *Endpoint) lend(data []byte) (*channel.Block, []byte) {
	if len(data) == 0 || len(data) > channel.ArenaMax {
		return nil, data
	}
	return e.arena.Owner(data), data[:len(data):len(data)]
}

// lentBuf is the arena block of n consecutive message events whose
// buffers are lent, and the number of the first: the events polled
// before it. A burst of small messages carved out of one block takes one.
type lentBuf struct {
	ev, n int
	block *channel.Block
}

// lendEvents notes that the n message events numbered from ev (counting
// the events polled before them) have their buffers lent from block b;
// the events noted come in order.
func (e *Endpoint) lendEvents(ev, n int, b *channel.Block) {
	if k := e.lent.Len(); k > 0 {
		if l := e.lent.At(k - 1); l.block == b && l.ev+l.n == ev {
			l.n += n
			return
		}
	}
	e.lent.Push(lentBuf{ev, n, b})
}

// giveBack returns to the arena the buffers of the message events polled
// since, so that it carves their blocks again once all of a block's are
// back (N103). It runs as a datagram is handled, the only time the arena
// carves: a buffer is then valid until the first datagram after its
// event was polled.
func (e *Endpoint) giveBack() {
	polled := e.evBase + e.evHead
	for e.lent.Len() > 0 {
		l := e.lent.At(0)
		k := min(polled-l.ev, l.n)
		if k <= 0 {
			return
		}
		e.arena.Release(l.block, k)
		if l.ev, l.n = l.ev+k, l.n-k; l.n > 0 {
			return
		}
		e.lent.Pop()
	}
}

// touch follows an input that changed c: its readiness counts at once,
// its deadline when the timer heap is next read (settle), so that the
// several inputs and transmits of one round of I/O recompute it once.
func (e *Endpoint) touch(c *conn, now clock.Time) {
	if c.state == 0 {
		return
	}
	if !c.dirty {
		c.dirty = true
		e.dirty = append(e.dirty, c)
	}
	e.markReady(c, now)
}

// markReady puts c in the ring of connections with something to
// transmit, if it has something and is not there yet.
func (e *Endpoint) markReady(c *conn, now clock.Time) {
	if !c.sendable && c.wantsTransmit(now) {
		c.sendable = true
		e.pushReady(c)
	}
}

// settle recomputes the deadlines of the connections touched since the
// last settle, before the timer heap is read.
func (e *Endpoint) settle() {
	for i, c := range e.dirty {
		e.dirty[i] = nil
		if c.dirty && c.state != 0 {
			c.dirty = false
			e.reschedule(c)
		}
	}
	e.dirty = e.dirty[:0]
}

// reschedule recomputes c's deadline and its place in the timer heap.
func (e *Endpoint) reschedule(c *conn) {
	d := c.nextDeadline()
	switch {
	case d == 0 && c.heapIdx >= 0:
		e.timers.remove(c.heapIdx)
	case d != 0 && c.heapIdx < 0:
		c.deadline = d
		e.timers.push(c)
	case d != 0 && d != c.deadline:
		c.deadline = d
		e.timers.fix(c.heapIdx)
	}
}

// An Incoming is one datagram received, for HandleDatagrams.
type Incoming struct {
	// From is the address it came from.
	From netip.AddrPort
	// Local is the local address it was sent to, where the driver knows
	// it (a socket bound to an unspecified address, on a host of several
	// addresses), else the zero Addr. A server answers each client from
	// the address the client sent to (Transmit.Local, N149).
	Local netip.Addr
	// Data is its payload, which HandleDatagrams does not keep.
	Data []byte
}

// HandleDatagrams feeds the endpoint the datagrams ds, which arrived
// together at now, as a read of several datagrams at once (recvmmsg)
// returns them. It handles them in order, exactly as HandleDatagram
// would one after the other: the same state, datagrams and events
// follow. Only the cost differs: the MD5 checksums (D3) of the whole
// messages that the bundles among ds carry (D24) are computed together
// across the datagrams, not bundle by bundle, which costs less where a
// bundle holds fewer messages than the processor computes side by side
// (N86, N102); on a Stream transport, those of the packets' messages
// (N121). A driver that reads datagrams in batches, or a stream's packets
// several at a time, should hand each batch over in one call.
func (e *Endpoint) HandleDatagrams(now clock.Time, ds []Incoming) {
	if len(ds) == 1 {
		e.handleIncoming(now, &ds[0])
		return
	}
	if e.cfg.Transport == Stream && coalesce.Batched() {
		e.handleStreamBatch(now, ds)
		return
	}
	for len(ds) > 0 {
		k := e.presumBatch(ds)
		for i := range ds[:k] {
			if i < len(e.batch.views) {
				e.pre = &e.batch.views[i]
			}
			e.handleIncoming(now, &ds[i])
		}
		e.pre = nil
		e.endBatch()
		ds = ds[k:]
	}
}

// handleIncoming is HandleDatagram for d, with its local address in
// e.rxLocal, and its sender in e.rxFrom, while it is handled: what the
// endpoint queues later, at a timer, is not an answer to it.
func (e *Endpoint) handleIncoming(now clock.Time, d *Incoming) {
	if !d.Local.IsValid() {
		e.HandleDatagram(now, d.From, d.Data)
		return
	}
	e.rxLocal, e.rxFrom = d.Local, d.From
	e.HandleDatagram(now, d.From, d.Data)
	e.rxLocal, e.rxFrom = netip.Addr{}, netip.AddrPort{}
}

// HandleDatagram feeds the endpoint one datagram (on a Stream transport, one
// deframed packet) that arrived from addr at now. It does not keep b. Bad
// input is dropped and counted, never returned as an error (D23). Its
// local address is not known; HandleDatagrams takes it with each
// datagram (Incoming.Local).
func (e *Endpoint) HandleDatagram(now clock.Time, from netip.AddrPort, b []byte) {
	e.at(now)
	if e.lent.Len() > 0 {
		e.giveBack()
	}
	ch, payload, err := parsePacket(b)
	if err != nil {
		e.drop(nil, DropShort)
		return
	}
	c := e.connAt(from)
	if c != nil && c.unvalidated && e.rxLocal.IsValid() {
		// Until the client proves its address, its connection answers
		// from where its latest datagram went: a forged one sent to
		// another of the server's addresses is undone by the client's
		// next, and the datagram that validates it, sent where the
		// client hears the server's answers from, fixes the address
		// for good (N149).
		c.local = e.rxLocal
	}
	if len(b) > e.maxIncoming() {
		// No transport carries it (D20, D21): a driver's bug or a
		// forgery, and handled it would be charged to no limit.
		e.drop(c, DropTooLarge)
		if c != nil && e.cfg.Transport == Stream && c.established() {
			// A stream loses nothing: a packet dropped from it is a
			// hole in what it carries reliably and in order, which
			// the connection cannot go on past (N147).
			e.disconnect(now, c, &ProtocolError{Reason: "packet longer than the maximum packet size"}, true)
		}
		return
	}
	if c != nil {
		c.tick(now)
		c.countReceived(len(b))
	}
	if ch == chBundle {
		e.handleBundle(now, from, c, payload)
		return
	}
	e.handlePacket(now, from, c, ch, payload)
}

// handlePacket handles one packet on channel ch from addr, whose
// connection, if any, is c: a datagram's, or one of a bundle's (D24),
// which is handled exactly as if it had arrived alone.
func (e *Endpoint) handlePacket(now clock.Time, from netip.AddrPort, c *conn, ch int16, payload []byte) {
	if e.handleUntouched(now, from, c, ch, payload) {
		e.touch(c, now)
	}
}

// handleUntouched is handlePacket but for the touch that follows a packet
// c took, which it reports: a bundle's packets touch their connection
// once, after the last (touch only marks what the next settle and
// PollTransmit look at).
func (e *Endpoint) handleUntouched(now clock.Time, from netip.AddrPort, c *conn, ch int16, payload []byte) bool {
	if ch == chControl {
		e.handleControl(now, from, c, payload)
		return false
	}
	if c == nil || !c.established() {
		// Servers ignore everything but channel -1 from addresses without
		// a connection; clients ignore everything but the handshake's
		// replies until connected (D15).
		e.drop(c, DropNotConnected)
		return false
	}
	c.handlePacket(now, ch, payload)
	if c.unvalidated && ch == chHeartbeat && c.state != 0 {
		e.afterHeartbeat(now, c)
	}
	return true
}

// maxIncoming is the largest datagram the endpoint takes: the largest UDP
// payload on a Datagram transport, whatever MaxPacketSize is (D21), and
// MaxPacketSize on a Stream transport, whose framing refuses longer
// packets (D20).
func (e *Endpoint) maxIncoming() int {
	if e.cfg.Transport == Stream {
		return e.cfg.MaxPacketSize
	}
	return DefaultMaxDatagram
}

// drop counts a dropped packet against c, or against the endpoint when it
// belongs to no connection.
func (e *Endpoint) drop(c *conn, r DropReason) {
	if c != nil {
		c.stats.Dropped[r]++
		return
	}
	e.stray[r]++
}

// HandleTransportClosed tells a Stream endpoint that the transport connection
// to addr is gone: its Fastnet connection is broken (spec "Connection
// Breaking").
func (e *Endpoint) HandleTransportClosed(now clock.Time, addr netip.AddrPort) {
	c := e.byAddr[addr]
	if c == nil {
		return
	}
	if c.established() {
		e.disconnect(now, c, ErrTransportClosed, false)
		return
	}
	e.failHandshake(c, ErrTransportClosed)
}

// HandleTimeout tells the endpoint that time has reached now. Calls before
// NextDeadline do nothing harmful.
func (e *Endpoint) HandleTimeout(now clock.Time) {
	e.at(now)
	e.settle()
	if e.intros.n() > 0 {
		e.introTimeout(now)
	}
	for len(e.timers) > 0 && e.timers[0].deadline <= now {
		c := e.timers[0]
		c.handleTimeout(now)
		if c.state == 0 {
			continue
		}
		// The loop reads the heap: settle c now.
		c.dirty = false
		e.reschedule(c)
		e.markReady(c, now)
		if c.heapIdx >= 0 && c.deadline <= now {
			// What is due is a transmit (a heartbeat, a resend) that
			// PollTransmit produces. Park the connection in the ready
			// ring; PollTransmit re-arms its timer.
			e.timers.remove(c.heapIdx)
			c.deadline = 0
			if !c.sendable {
				c.sendable = true
				e.pushReady(c)
			}
		}
	}
}

// HoldResends holds back, from now while hold is set, every resend that
// comes due (D14): PollTransmit still sends acks, heartbeats and
// first-time data, but no packet again, and NextDeadline leaves resends
// out; cleared, the resends due go with the next PollTransmit. It is for
// a driver whose process was held up, and has datagrams that arrived
// meanwhile still to read: the acks among them may free the packets that
// came due, which resent would count as lost (N130). A resend held back
// is only late: nothing else changes, and the endpoint holds none back
// unless told to.
func (e *Endpoint) HoldResends(now clock.Time, hold bool) {
	if hold == e.resendsHeld {
		return
	}
	now = e.advance(now)
	e.resendsHeld = hold
	// The deadline and readiness to transmit of every connection with
	// reliable packets in flight may change, of no other (sendTimes):
	// taken in the order of their handles, so that what they send comes
	// in the same order on every run, not in the map's.
	cs := e.holdOrder[:0]
	for _, c := range e.conns {
		if len(c.sendChans) > 0 {
			cs = append(cs, c)
		}
	}
	slices.SortFunc(cs, func(a, b *conn) int { return cmp.Compare(a.handle, b.handle) })
	for _, c := range cs {
		e.touch(c, now)
	}
	clear(cs)
	e.holdOrder = cs[:0]
}

// NextDeadline returns when HandleTimeout should next be called; ok is false
// when nothing is scheduled.
func (e *Endpoint) NextDeadline() (deadline clock.Time, ok bool) {
	e.settle()
	intro, ok := e.intros.next()
	if len(e.timers) == 0 {
		return intro, ok
	}
	if ok && intro < e.timers[0].deadline {
		return intro, true
	}
	return e.timers[0].deadline, true
}

// PollTransmit writes the next datagram to send into buf and says where it
// goes; ok is false when there is nothing to send. buf must hold
// Config.MaxPacketSize bytes. Call it until it returns false after every
// Handle* and Send call.
func (e *Endpoint) PollTransmit(now clock.Time, buf []byte) (t Transmit, ok bool) {
	e.at(now)
	buf = buf[:0]
	if c := e.pendingConn; c != nil {
		// A packet polled for a bundle it did not fit (N71).
		e.pendingConn = nil
		if c.state != 0 {
			b := c.bundle(now, append(buf, e.scratch[:e.pendingN]...), c.paceReady(now))
			e.touch(c, now)
			if !c.unvalidated || e.mayTransmit(c, len(b)) {
				c.countSent(len(b))
				return Transmit{To: c.addr, Local: c.local, N: len(b)}, true
			}
		} else if !c.unvalidated {
			// Its connection ended since (an Abort between two
			// calls): the packet goes alone, before the end's
			// "abort", as its message's outcome said it was (an
			// unreliable one's, OutcomeSent, N147).
			b := append(buf, e.scratch[:e.pendingN]...)
			return Transmit{To: c.addr, Local: c.local, N: len(b)}, true
		}
	}
	if len(e.closing) > 0 {
		// What a closing connection had left was written by the calls
		// before (with the packet that waited for a bundle, above).
		e.finishDrained(now)
	}
	// Channel -1 packets first; the test spares the common case, nothing
	// queued, the calls and the copies of an empty ctlOut.
	for e.once.head < len(e.once.q) || e.ctl.head < len(e.ctl.q) {
		m, ok := e.popCtl()
		if !ok {
			break
		}
		b := appendControl(appendPacketHeader(buf, chControl), m.c)
		if c := e.byAddr[m.to]; c != nil {
			if c.unvalidated && !e.mayTransmit(c, len(b)) {
				continue
			}
			if now >= c.win.end {
				c.closeWindow(now)
				e.touch(c, now) // its quality deadline moved
			}
			c.countSent(len(b))
		}
		return Transmit{To: m.to, Local: m.local, N: len(b)}, true
	}
	for e.readyHead < len(e.ready) {
		c := e.ready[e.readyHead]
		e.ready[e.readyHead] = nil
		e.readyHead++
		if e.readyHead == len(e.ready) {
			e.ready, e.readyHead = e.ready[:0], 0
		}
		c.sendable = false
		if c.state == 0 {
			continue
		}
		c.tick(now)
		paced := c.paceReady(now) // before the first packet takes its tokens
		if c.probeShare > 0 {
			c.beginDatagram(paced)
		}
		b, ok := c.poll(now, buf)
		if ok && c.bundleTo {
			b = c.bundle(now, b, paced)
		}
		if c.probeShare > 0 || c.dataTurn {
			c.endDatagram(ok, b, paced)
		}
		if c.state != 0 {
			// Round robin: it goes to the back while it has more.
			e.touch(c, now)
		}
		if ok && c.unvalidated && !e.mayTransmit(c, len(b)) {
			continue // withheld, as if lost (D25)
		}
		if ok {
			c.countSent(len(b))
			return Transmit{To: c.addr, Local: c.local, N: len(b)}, true
		}
	}
	return Transmit{}, false
}

// PollEvent returns the next event; ok is false when there is none.
func (e *Endpoint) PollEvent() (ev Event, ok bool) {
	if e.evHead == len(e.events) {
		return Event{}, false
	}
	p := &e.events[e.evHead]
	ev = *p
	e.popEvent(p)
	return ev, true
}

// NextEvent is PollEvent storing the next event in *ev, if there is one,
// and reporting whether there was: a loop that polls into one variable
// (for ep.NextEvent(&ev) { ... }) copies each event once, where PollEvent's
// result is zeroed and copied twice, about 30 instructions of a 64-byte
// message's 2,840 in a full bundle. *ev is left as it was if there is
// none.
func (e *Endpoint) NextEvent(ev *Event) bool {
	if e.evHead == len(e.events) {
		return false
	}
	p := &e.events[e.evHead]
	*ev = *p
	e.popEvent(p)
	return true
}

// popEvent takes the event at the head of the queue, p, off it once it
// has been copied out (PollEvent, NextEvent).
func (e *Endpoint) popEvent(p *Event) {
	// Do not keep the message, the error or the statistics alive; the
	// rest is overwritten when the place is used again. A message event
	// refers to nothing else (setMessage), and writing nil over nil costs
	// a write barrier each while the garbage collector marks (N117).
	p.Data = nil
	if p.Kind != EventMessage {
		p.Err, p.Quality, p.Stats, p.Intro = nil, nil, nil, nil
	}
	e.evHead++
	if e.evHead == len(e.events) {
		e.evBase += e.evHead
		e.events, e.evHead = e.events[:0], 0
	}
}

// Send queues msg on channel (0..32767) of connection h, reliably or not.
// It copies msg. It returns ErrBadChannel, ErrMessageTooLarge,
// ErrUnknownConn, ErrNotConnected, ErrClosed (closing), or ErrQueueFull,
// after which an EventWritable says when to try again; the endpoint's state
// is unchanged by a failed Send.
func (e *Endpoint) Send(now clock.Time, h Handle, channel int, msg []byte, reliable bool) error {
	return e.send(now, h, channel, msg, reliable, 0)
}

// send is Send, and SendTracked when id is not 0.
func (e *Endpoint) send(now clock.Time, h Handle, channel int, msg []byte, reliable bool, id MessageID) error {
	if channel < 0 || channel > MaxChannel {
		return ErrBadChannel
	}
	if len(msg) > e.cfg.MaxMessageSize {
		return ErrMessageTooLarge
	}
	c := e.lastSent
	if c == nil || c.handle != h {
		c = e.conns[h]
		e.lastSent = c
	}
	switch {
	case c == nil:
		return ErrUnknownConn
	case c.state == stateClosing:
		return ErrClosed
	case !c.established():
		return ErrNotConnected
	}
	now = max(now, e.now) // never before what the endpoint has seen
	// Queued here, not in a method of the connection: the call and its
	// arguments were a tenth of Send's work for a message in a full
	// bundle.
	n := coalesce.EncodedLen(len(msg))
	if c.queued+c.stream.bytes+n > e.cfg.SendQueueSize {
		c.wantWritable = max(c.wantWritable, n)
		return ErrQueueFull
	}
	c.stats.MessagesSent++
	e.estats.MessagesSent++
	if e.cfg.Transport == Stream {
		c.stream.push(int16(channel), msg, reliable, id)
		if id != 0 {
			c.tracked++
		}
	} else {
		cs := c.last
		if cs == nil || cs.id != int16(channel) || cs.snd == nil {
			cs = c.sendChannel(int16(channel)) // else what it would return
		}
		if id != 0 {
			c.track(cs, id, n, reliable) // before Queue: it reads what was queued before
		}
		c.queued += cs.snd.QueueAt(msg, reliable, now)
		if !cs.inRing && cs.snd.MayAppend() { // else an ack puts it back (N41)
			c.joinRing(cs)
		}
	}
	e.at(now)
	if !c.dirty || !c.sendable {
		// Else touch has nothing to do: the connection's deadline is
		// already to be recomputed, and it is ready to transmit.
		e.touch(c, now)
	}
	return nil
}

// Close starts a graceful close of h (D18): its queued and in-flight
// reliable data gets up to Config.Linger to be acknowledged, then
// "disconnect" with reason goes to the peer and EventDisconnected, with a
// *LocalCloseError, is reported. Closing a connection still in its handshake
// abandons it at once with EventConnectFailed.
func (e *Endpoint) Close(now clock.Time, h Handle, reason string) error {
	c := e.conns[h]
	if c == nil {
		return ErrUnknownConn
	}
	now = e.advance(now)
	switch c.state {
	case stateClosing:
		return nil
	case stateQuerying, stateConnecting:
		e.failHandshake(c, &LocalCloseError{Reason: reason})
		return nil
	}
	c.state = stateClosing
	c.closeReason = validReason(reason)
	c.lingerUntil = now.Add(e.cfg.Linger)
	c.closeIfDrained(now)
	if c.state == stateClosing {
		e.closing = append(e.closing, c)
	}
	e.touch(c, now)
	return nil
}

// finishDrained finishes the graceful closes of the connections that have
// nothing left to send nor to be acknowledged (N146). Acks finish the
// others (handleAcks), but over a stream nothing is acked, nor are
// unreliable messages: a close whose last messages were written waited
// its whole Linger.
func (e *Endpoint) finishDrained(now clock.Time) {
	k := 0
	for _, c := range e.closing {
		if c.state != stateClosing {
			continue // ended otherwise (state 0)
		}
		if c.drained() {
			c.finishClose(now)
			continue
		}
		e.closing[k] = c
		k++
	}
	clear(e.closing[k:])
	e.closing = e.closing[:k]
}

// CloseAll closes every established connection as Close does, and ends at
// once the connections still proving their address (D25), of which the
// application has not heard: each such peer is told why within what may
// be sent to its address (N68). A server that shuts down calls it, so
// that a client whose handshake was under way hears of it rather than
// waiting for its timeout. Connections are taken in the order of their
// handles, so that the output is the same on every run.
func (e *Endpoint) CloseAll(now clock.Time, reason string) {
	now = e.advance(now)
	hs := make([]Handle, 0, len(e.conns))
	for h := range e.conns {
		hs = append(hs, h)
	}
	slices.Sort(hs)
	for _, h := range hs {
		c := e.conns[h]
		if c == nil {
			continue
		}
		if c.unvalidated {
			e.disconnect(now, c, &LocalCloseError{Reason: validReason(reason)}, true)
			continue
		}
		e.Close(now, h, reason)
	}
}

// SetReceivePaused stops or resumes the intake of connection h's
// messages on a Datagram transport. While paused, every packet on a
// message channel is dropped (DropPaused) and not acked, as when receive
// memory runs out (D22): the peer resends its reliable packets later, so
// nothing reliable is lost, and the messages already queued inside the
// endpoint still complete. A driver pauses a connection whose application
// falls behind, so that the memory of undelivered messages stays bounded
// without ending the connection. Control packets (heartbeats, acks, MTU
// probes, queries) are still handled. On a Stream transport it returns
// ErrStreamPause: a packet dropped there is never resent, and the driver
// stops reading the stream instead.
func (e *Endpoint) SetReceivePaused(h Handle, paused bool) error {
	c := e.conns[h]
	if c == nil {
		return ErrUnknownConn
	}
	if e.cfg.Transport == Stream {
		return ErrStreamPause
	}
	c.recvPaused = paused
	return nil
}

// Abort closes h at once: queued data is dropped, "disconnect" with reason
// goes to the peer and EventDisconnected is reported.
func (e *Endpoint) Abort(now clock.Time, h Handle, reason string) error {
	c := e.conns[h]
	if c == nil {
		return ErrUnknownConn
	}
	now = e.advance(now)
	if !c.established() {
		e.failHandshake(c, &LocalCloseError{Reason: reason})
		return nil
	}
	e.disconnect(now, c, &LocalCloseError{Reason: validReason(reason)}, true)
	return nil
}

func validReason(s string) string {
	if utf8.ValidString(s) {
		return cutReason(s)
	}
	return cutReason(string([]rune(s)))
}

// Stats returns the statistics of connection h. Once the connection has
// ended it returns false: the EventDisconnected that reported the end
// carries its final statistics (Event.Stats, N59).
func (e *Endpoint) Stats(h Handle) (Stats, bool) {
	c := e.conns[h]
	if c == nil {
		return Stats{}, false
	}
	return c.snapshot(), true
}

// ReceiveMemory returns the memory the endpoint's peers make it hold, as
// counted against Config.EndpointReceiveMemory, which bounds it: what
// every connection holds for what its peer sent (Stats.ReceiveBytes) and
// the free packet buffers kept for reuse (D22, N50).
func (e *Endpoint) ReceiveMemory() int { return e.recvBudget.Used + e.recvBudget.Free() }

// Dropped returns the counts of packets dropped before they reached any
// connection (from unknown addresses, or too short to name a channel),
// indexed by DropReason.
func (e *Endpoint) Dropped() [NumDropReasons]uint64 { return e.stray }

// Bundling reports whether the endpoint packs h's packets into bundles:
// the peer answered "query:ext:bundle=yes" (D24) and echoed a heartbeat
// sent to it in a bundle (N156). A driver that has both
// the acks of what a peer sent and the reply to it to send may then poll
// them together, so that one datagram carries both (N75).
func (e *Endpoint) Bundling(h Handle) bool {
	c := e.conns[h]
	return c != nil && c.bundleTo
}

// ConnID returns the Fastnet connection ID of h, known once connected.
func (e *Endpoint) ConnID(h Handle) (id uint32, ok bool) {
	c := e.conns[h]
	if c == nil || !c.established() {
		return 0, false
	}
	return c.id, true
}

// RemoteAddr returns the peer address of h.
func (e *Endpoint) RemoteAddr(h Handle) (netip.AddrPort, bool) {
	c := e.conns[h]
	if c == nil {
		return netip.AddrPort{}, false
	}
	return c.addr, true
}

// NumConns returns the number of connections, established or not.
func (e *Endpoint) NumConns() int { return len(e.conns) }

// timerHeap orders connections by deadline.
type timerHeap []*conn

// push adds c, which is in no heap.
func (h *timerHeap) push(c *conn) {
	c.heapIdx = len(*h)
	*h = append(*h, c)
	h.up(c.heapIdx)
}

// remove takes out the connection at index i.
func (h *timerHeap) remove(i int) {
	old := *h
	n := len(old) - 1
	c := old[i]
	if i != n {
		old[i] = old[n]
		old[i].heapIdx = i
	}
	old[n] = nil
	*h = old[:n]
	c.heapIdx = -1
	if i != n {
		h.fix(i)
	}
}

// fix restores the order after the deadline at index i changed.
func (h timerHeap) fix(i int) {
	if !h.down(i) {
		h.up(i)
	}
}

func (h timerHeap) up(i int) {
	c := h[i]
	for i > 0 {
		p := (i - 1) / 2
		if h[p].deadline <= c.deadline {
			break
		}
		h[i] = h[p]
		h[i].heapIdx = i
		i = p
	}
	h[i] = c
	c.heapIdx = i
}

// down moves the entry at i towards the leaves; it reports whether it
// moved.
func (h timerHeap) down(i0 int) bool {
	i := i0
	c := h[i]
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && h[r].deadline < h[l].deadline {
			m = r
		}
		if c.deadline <= h[m].deadline {
			break
		}
		h[i] = h[m]
		h[i].heapIdx = i
		i = m
	}
	h[i] = c
	c.heapIdx = i
	return i > i0
}
