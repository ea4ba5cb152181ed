package channel

import (
	"errors"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/coalesce"
)

// Defaults of ReceiverConfig's zero fields.
const (
	DefaultWindow     = 65536                 // D9
	DefaultMaxMessage = 1 << 20               // largest payload
	DefaultMCI        = 25 * time.Millisecond // D11
)

// PacketOverhead is the memory charged for each queued packet beyond its
// chunk bytes, for the bookkeeping that holds it (D22).
const PacketOverhead = 32

// maxReady bounds the delivered messages a Receiver holds for Poll; while
// it is reached, coalescing pauses until Poll takes some.
const maxReady = 64

// ReceiverConfig holds a Receiver's settings and limits. A zero field takes
// its default.
type ReceiverConfig struct {
	// Window is W of D9: a packet more than Window places after the ignore
	// number is dropped and not acked. Default DefaultWindow; values of
	// SeqSpace/2 or more are lowered to SeqSpace/2-1.
	Window int
	// MaxMessage is the largest message payload; a message header
	// announcing more makes the message malformed. Default
	// DefaultMaxMessage.
	MaxMessage int
	// MaxBytes bounds the memory this channel holds (see Receiver.Bytes).
	// Default 3*MaxMessage + 64 KiB.
	MaxBytes int
	// Budget, if not nil, is a receive memory budget shared with the
	// connection's other channels; every change of Bytes is added to its
	// Used, and nothing is admitted that would take Used above Limit.
	Budget *Budget
	// MCI is the message coalescing interval of D11: an incomplete
	// unreliable message is dropped once its newest packet is this old.
	// Default DefaultMCI.
	MCI time.Duration
}

// Budget is a receive memory budget shared by the channels of one
// connection (D22). Its zero value has no limit. Receivers sharing a budget
// also share its free list of packet buffers, whose retained bytes are
// bounded by Limit.
type Budget struct {
	// Used is the sum of the Bytes of the receivers sharing the budget.
	Used int
	// Limit bounds Used; 0 or less means no shared limit.
	Limit int

	pool bufPool
}

// Result says what Receiver.Handle did with a packet and so whether to ack
// it (D13: every reliable packet accepted or recognised as a duplicate is
// acked; see Result.Ack).
type Result uint8

// The results of Handle.
const (
	// Accepted: the packet is queued or already delivered.
	Accepted Result = iota + 1
	// Duplicate: a reliable packet already received (at or before the
	// ignore number, or already queued). It is dropped and acked again
	// (D8).
	Duplicate
	// Stale: an unreliable packet at or before the ignore number, or one
	// already queued. Dropped (D8).
	Stale
	// OutOfWindow: more than Window places after the ignore number (D9), or
	// an invalid sequence number. Dropped and not acked.
	OutOfWindow
	// NoMemory: the packet does not fit the memory limits (D22). Dropped
	// and not acked: a reliable packet will be resent.
	NoMemory
	// Rejected: the receiver has failed (Err is not nil) and takes nothing.
	Rejected
)

func (r Result) String() string {
	switch r {
	case Accepted:
		return "Accepted"
	case Duplicate:
		return "Duplicate"
	case Stale:
		return "Stale"
	case OutOfWindow:
		return "OutOfWindow"
	case NoMemory:
		return "NoMemory"
	case Rejected:
		return "Rejected"
	}
	return "Result(?)"
}

// Ack reports whether a reliable packet handled with this result must be
// acked (D13): it was accepted or is a duplicate.
func (r Result) Ack() bool { return r == Accepted || r == Duplicate }

// Drops counts what a Receiver dropped after accepting it, by reason.
type Drops struct {
	// Malformed counts unreliable messages dropped for a bad length,
	// checksum or reliability flag, or inconsistent sequence numbers (D11).
	Malformed uint64
	// Expired counts unreliable message groups dropped because they stayed
	// incomplete for the MCI (D11 rule 3).
	Expired uint64
	// Evicted counts unreliable packets evicted to make room for reliable
	// ones (D22).
	Evicted uint64
	// Orphaned counts unreliable message groups dropped because the packet
	// that started their message was lost.
	Orphaned uint64
}

// ErrProtocol is what every error of Receiver.Err matches with errors.Is:
// the peer broke the protocol on reliable data, and the connection must be
// closed with that reason (D11).
var ErrProtocol = errors.New("channel: peer broke the protocol")

// ProtocolError is the type of Receiver.Err's errors; Reason says how the
// peer broke the protocol.
type ProtocolError struct{ Reason string }

func (e *ProtocolError) Error() string { return "channel: peer broke the protocol: " + e.Reason }

// Is makes every ProtocolError match ErrProtocol.
func (e *ProtocolError) Is(target error) bool { return target == ErrProtocol }

// The reasons a Receiver fails (D11, last paragraph).
var (
	// ErrMalformedReliable: a reliable message with a bad length, checksum
	// or reliability flag.
	ErrMalformedReliable error = &ProtocolError{"malformed reliable message"}
	// ErrNoStart: a reliable packet continues no message.
	ErrNoStart error = &ProtocolError{"reliable packet continues no message"}
	// ErrReliableSeq: reliable sequence numbers that no sender produces.
	ErrReliableSeq error = &ProtocolError{"inconsistent reliable sequence numbers"}
)

// Message is a message a Receiver delivers.
type Message struct {
	// Reliable is the message's reliability.
	Reliable bool
	// Data is the payload, freshly allocated: it belongs to the caller.
	Data []byte
}

// A Receiver is the receiving half of one message channel (D7-D11, D22,
// D23). Handle queues arriving packets; Poll yields, in order, the messages
// they complete; NextDeadline says when the MCI of an incomplete unreliable
// message runs out. The coalescing rules (coalesce.Decide) run on every
// Handle and Poll, repeated while they make progress, so that nothing
// stalls: a blocked head waits only for reliable packets a sender still
// owes, an incomplete unreliable message expires after the MCI, and a
// message that can never complete is dropped (unreliable) or fails the
// receiver (reliable).
//
// Memory held is bounded by ReceiverConfig.MaxBytes and the Budget; see
// Bytes. Create one with NewReceiver. A Receiver is not safe for
// concurrent use.
type Receiver struct {
	cfg    ReceiverConfig
	pool   *bufPool
	budget *Budget

	g Seq // ignore number (D8)
	l Seq // L, the R of the last consumed reliable packet (D7)

	q         seqRing
	queued    int // packets in q
	data      int // chunk bytes in q
	unrelN    int // unreliable packets in q
	unrelData int // their chunk bytes

	cmg cmgState

	ready      fifo[Message]
	readyBytes int
	charge     int // Bytes(), as last added to the budget

	deadline clock.Time
	err      error
	drops    Drops
}

// cmgState caches the current message group (D10) between evaluations, so
// that a message arriving in many packets is scanned once, not once per
// packet.
type cmgState struct {
	valid    bool
	head     int // logical index of the head packet
	n        int // packets in the group
	bytes    int // their chunk bytes
	newest   clock.Time
	reliable bool
	start    bool
	rel      Seq // the head's R
	lastRel  Seq // the R of the group's last packet
	ended    bool // the group can take no more packets
	tooLarge bool // the header announces more than MaxMessage
	hdr      coalesce.Header
	hdrOK    bool
	hdrBuf   [coalesce.MaxHeaderLen]byte
	hdrHave  int
}

// NewReceiver returns the receiver of one message channel: ignore number
// -1 and L 0 (D7, D8).
func NewReceiver(cfg ReceiverConfig) *Receiver {
	if cfg.Window <= 0 {
		cfg.Window = DefaultWindow
	}
	cfg.Window = min(cfg.Window, SeqSpace/2-1)
	if cfg.MaxMessage <= 0 {
		cfg.MaxMessage = DefaultMaxMessage
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = 3*cfg.MaxMessage + 64<<10
	}
	if cfg.MCI <= 0 {
		cfg.MCI = DefaultMCI
	}
	r := &Receiver{cfg: cfg, budget: cfg.Budget, g: -1, l: 0}
	if r.budget != nil {
		r.pool = &r.budget.pool
	} else {
		r.pool = &bufPool{}
	}
	return r
}

// Err returns a *ProtocolError once the peer has broken the protocol on
// reliable data (D11); the receiver then takes nothing more.
func (r *Receiver) Err() error { return r.err }

// Drops returns the cumulative drop counters.
func (r *Receiver) Drops() Drops { return r.drops }

// Bytes returns the memory the receiver holds, as counted against MaxBytes
// and the Budget: the chunk bytes of queued packets plus PacketOverhead per
// queued packet, plus the payloads of delivered messages not yet taken by
// Poll. A queue whose packets are spread thin over a ring grown past 64
// places is charged PacketOverhead per two places of the ring if that is
// more, so that sparse packets cannot pin large rings for free.
func (r *Receiver) Bytes() int { return r.charge }

// NextDeadline returns when the incomplete unreliable message at the head of
// the queue expires (its newest packet plus the MCI), or 0 if none; the
// caller then calls Poll.
func (r *Receiver) NextDeadline() clock.Time { return r.deadline }

// chargeFor computes Bytes for a queue of the given shape.
func (r *Receiver) chargeFor(queued, data, ringCap int) int {
	units := queued
	if ringCap > baseRing {
		units = max(units, ringCap/2)
	}
	return data + r.readyBytes + PacketOverhead*units
}

// fits reports whether the receiver may hold c bytes.
func (r *Receiver) fits(c int) bool {
	if c > r.cfg.MaxBytes {
		return false
	}
	b := r.budget
	return b == nil || b.Limit <= 0 || b.Used-r.charge+c <= b.Limit
}

// setCharge records a new Bytes and passes the change to the budget.
func (r *Receiver) setCharge(c int) {
	if r.budget != nil {
		r.budget.Used += c - r.charge
		if r.budget.pool.limit < r.budget.Limit {
			r.budget.pool.limit = r.budget.Limit
		}
	} else if r.pool.limit < r.cfg.MaxBytes {
		r.pool.limit = r.cfg.MaxBytes
	}
	r.charge = c
}

func (r *Receiver) recharge() { r.setCharge(r.chargeFor(r.queued, r.data, r.q.cap())) }

// need returns need(p) of D7: the L a packet waits for.
func need(reliable bool, rel Seq) Seq {
	if reliable {
		return rel.Prev()
	}
	return rel
}

// Handle handles an arriving data packet with header h and chunk, the bytes
// after the header (D8-D11, D22). It copies what it keeps: chunk may be
// reused when Handle returns. The result says whether to ack a reliable
// packet (Result.Ack). Messages the packet completes are taken with Poll.
func (r *Receiver) Handle(now clock.Time, h Header, chunk []byte) Result {
	if r.err != nil {
		return Rejected
	}
	if !h.Seq.Valid() || !h.Rel.Valid() {
		return OutOfWindow
	}
	d := Distance(r.g, h.Seq)
	switch {
	case d == 0 || d > SeqSpace/2:
		// At or before the ignore number (D8).
		if h.Reliable {
			return Duplicate
		}
		return Stale
	case d > r.cfg.Window:
		return OutOfWindow // D9
	}
	i := d - 1
	if r.q.has(i) {
		s := r.q.at(i)
		switch {
		case h.Reliable && s.reliable():
			return Duplicate // D8
		case !h.Reliable:
			return Stale
		}
		// A reliable packet takes the place of an unreliable one with the
		// same sequence number, which no honest sender produces.
		r.remove(i)
		r.recharge()
	}
	if r.queued == 0 && r.ready.len() < maxReady && h.Start && need(h.Reliable, h.Rel) == r.l {
		if res, ok := r.fast(h, chunk); ok {
			return res
		}
	}
	if !r.store(now, i, h, chunk) {
		return NoMemory
	}
	r.process(now)
	return Accepted
}

// fast delivers a message that arrives whole in one packet at the head of
// an empty queue straight from the chunk (D11 rule 2 with a one-packet
// group). It reports false, leaving everything unchanged, if the packet is
// not such a message.
func (r *Receiver) fast(h Header, chunk []byte) (Result, bool) {
	m, err := coalesce.ParseMessage(chunk, r.cfg.MaxMessage)
	if err != nil || m.Reliable != h.Reliable {
		return 0, false
	}
	c := r.charge + len(m.Payload)
	if !r.fits(c) {
		return NoMemory, true
	}
	r.deliver(h.Reliable, append(make([]byte, 0, len(m.Payload)), m.Payload...))
	r.consumed(Distance(r.g, h.Seq), h.Reliable, h.Rel)
	r.recharge()
	r.deadline = 0
	return Accepted, true
}

// deliver hands a message to Poll.
func (r *Receiver) deliver(reliable bool, data []byte) {
	r.ready.push(Message{Reliable: reliable, Data: data})
	r.readyBytes += len(data)
}

// consumed moves the ignore number k places forward (to the last packet of
// a delivered or dropped group) and, for a delivered reliable group, sets L
// to its last R (D11).
func (r *Receiver) consumed(k int, reliable bool, lastRel Seq) {
	r.g = r.g.Add(k)
	if reliable {
		r.l = lastRel
	}
	r.cmg.valid = false
	if r.queued == 0 {
		r.q.shrink()
	} else {
		r.q.advance(k)
	}
}

// store queues a packet at logical index i, evicting unreliable packets to
// make room for a reliable one (D22). It reports false if the packet does
// not fit.
func (r *Receiver) store(now clock.Time, i int, h Header, chunk []byte) bool {
	ringCap := max(r.q.cap(), ringCapFor(i))
	c := r.chargeFor(r.queued+1, r.data+len(chunk), ringCap)
	if !r.fits(c) {
		if !h.Reliable || r.unrelN == 0 ||
			!r.fits(r.chargeFor(r.queued+1-r.unrelN, r.data+len(chunk)-r.unrelData, ringCap)) {
			return false
		}
		for !r.fits(c) {
			j := r.q.lastUnreliable()
			r.remove(j)
			r.drops.Evicted++
			c = r.chargeFor(r.queued+1, r.data+len(chunk), ringCap)
		}
	}
	r.q.ensure(i)
	buf := r.pool.get(len(chunk))
	copy(buf, chunk)
	var flags uint8
	if h.Reliable {
		flags |= FlagReliable
	} else {
		r.unrelN++
		r.unrelData += len(chunk)
	}
	if h.Start {
		flags |= FlagStart
	}
	r.q.set(i, slot{data: buf, arrived: now, rel: h.Rel, flags: flags})
	r.queued++
	r.data += len(chunk)
	r.recharge()
	if m := &r.cmg; m.valid && (i < m.head+m.n || i == m.head+m.n && m.ended) {
		m.valid = false
	}
	return true
}

// remove drops the packet at logical index i (the caller recharges).
func (r *Receiver) remove(i int) {
	s := r.q.take(i)
	r.queued--
	r.data -= len(s.data)
	if !s.reliable() {
		r.unrelN--
		r.unrelData -= len(s.data)
	}
	r.pool.put(s.data)
	if m := &r.cmg; m.valid && i <= m.head+m.n {
		m.valid = false
	}
}

// Poll returns the next delivered message, if any, after applying the
// coalescing rules at now (so an expired unreliable message at the head no
// longer holds back what follows it).
func (r *Receiver) Poll(now clock.Time) (Message, bool) {
	r.process(now)
	if r.ready.len() == 0 {
		return Message{}, false
	}
	m := *r.ready.at(0)
	r.ready.pop()
	r.readyBytes -= len(m.Data)
	r.recharge()
	if r.ready.len() == 0 {
		r.ready.reset(maxReady)
	}
	return m, true
}

// process applies the coalescing rules to the head of the queue while they
// make progress (D11).
func (r *Receiver) process(now clock.Time) {
	r.deadline = 0
	for r.err == nil && r.queued > 0 && r.ready.len() < maxReady {
		g := r.group()
		act := coalesce.Decide(g, now, r.cfg.MCI)
		if act == coalesce.Deliver {
			if data, ok := r.assemble(); ok {
				r.deliver(r.cmg.reliable, data)
				r.consumeGroup(true)
				continue
			}
			g.Malformed = true
			act = coalesce.Decide(g, now, r.cfg.MCI)
		}
		switch act {
		case coalesce.Wait:
			if !g.Blocked && !g.Reliable {
				r.deadline = g.Newest.Add(r.cfg.MCI)
			}
			return
		case coalesce.Expire:
			r.drops.Expired++
			r.consumeGroup(false)
		case coalesce.Discard:
			if g.Start || g.Blocked {
				r.drops.Malformed++
			} else {
				r.drops.Orphaned++
			}
			r.consumeGroup(false)
		case coalesce.Fail:
			switch {
			case g.Blocked:
				r.err = ErrReliableSeq
			case !g.Start:
				r.err = ErrNoStart
			default:
				r.err = ErrMalformedReliable
			}
			return
		}
	}
}

// consumeGroup removes the current message group from the queue, moves the
// ignore number to its last packet and, if it was delivered reliable, sets
// L (D11).
func (r *Receiver) consumeGroup(delivered bool) {
	m := r.cmg
	for i := m.head; i < m.head+m.n; i++ {
		r.remove(i)
	}
	r.consumed(m.head+m.n, delivered && m.reliable, m.lastRel)
	r.recharge()
}

// group returns the facts about the current message group (D10) that
// coalesce.Decide needs, extending the cached group with packets that
// arrived since the last look.
func (r *Receiver) group() coalesce.Group {
	m := &r.cmg
	if !m.valid {
		h := r.q.first(0)
		s := r.q.at(h)
		*m = cmgState{valid: true, head: h, reliable: s.reliable(), start: s.start(), rel: s.rel}
	}
	r.extend()
	head := r.q.at(m.head)
	nd := need(m.reliable, head.rel)
	g := coalesce.Group{
		Blocked:  nd != r.l,
		Gap:      m.head > 0,
		Start:    m.start,
		Reliable: m.reliable,
		Newest:   m.newest,
	}
	// The reliable packets R = L+1 .. need(h) must all lie between the
	// ignore number and the head (D7, D10); if they cannot, the head never
	// unblocks.
	g.Unblockable = g.Blocked && Distance(r.l, nd) > m.head
	need := 0
	if m.hdrOK {
		need = m.hdr.EncodedLen()
		g.Complete = m.bytes >= need
	}
	g.Malformed = m.tooLarge ||
		m.hdrOK && m.bytes > need ||
		m.ended && !g.Complete ||
		// A message the receive memory can never hold.
		m.hdrOK && !g.Complete && need+PacketOverhead*(m.n+1) > r.cfg.MaxBytes
	return g
}

// extend adds the packets that follow the cached group to it while D10
// allows: consecutive, not a start of message, the head's reliability and
// (unreliable) the head's R or (reliable) R advancing with the sequence
// number. It stops once the group holds the whole message.
func (r *Receiver) extend() {
	m := &r.cmg
	for !m.ended && !m.tooLarge && !(m.hdrOK && m.bytes >= m.hdr.EncodedLen()) {
		i := m.head + m.n
		if i >= r.cfg.Window {
			head := r.q.at(m.head)
			if m.head == 0 || need(m.reliable, head.rel) != r.l {
				m.ended = true // the rest could never enter the window
				return
			}
			// The group is cut off by the window edge only because packets
			// before the head are missing. The head is unblocked, so they
			// can only be unreliable packets (D10): give up on them and move
			// the ignore number up to the head (D9's window then moves with
			// it), or the rest of the group could never arrive.
			r.g = r.g.Add(m.head)
			r.q.advance(m.head)
			m.head = 0
			continue
		}
		if !r.q.has(i) {
			return // a hole: wait
		}
		s := r.q.at(i)
		if m.n > 0 && (s.start() || s.reliable() != m.reliable ||
			!m.reliable && s.rel != m.rel ||
			m.reliable && Distance(m.rel, s.rel) != m.n) {
			m.ended = true
			return
		}
		m.n++
		m.bytes += len(s.data)
		m.newest = max(m.newest, s.arrived)
		m.lastRel = s.rel
		if !m.hdrOK {
			m.hdrHave += copy(m.hdrBuf[m.hdrHave:], s.data)
			switch h, err := coalesce.ParseHeader(m.hdrBuf[:m.hdrHave], r.cfg.MaxMessage); err {
			case nil:
				m.hdr, m.hdrOK = h, true
			case coalesce.ErrTooLarge:
				m.tooLarge = true
			}
		}
	}
}

// assemble decodes the complete current group: it copies the payload out of
// the chunks and verifies the checksum and the reliability flag (D11 rule
// 2). It reports false if the message is malformed.
func (r *Receiver) assemble() ([]byte, bool) {
	m := &r.cmg
	hl, n := m.hdr.HeaderLen, m.hdr.Len
	if m.hdr.Reliable != m.reliable || m.bytes != m.hdr.EncodedLen() {
		return nil, false
	}
	data := make([]byte, n)
	var sum [coalesce.MD5Len]byte
	pos := 0 // offset of the current chunk in the encoding
	for i := m.head; i < m.head+m.n; i++ {
		c := r.q.at(i).data
		// Payload bytes: encoding offsets [hl, hl+n).
		if lo, hi := max(pos, hl), min(pos+len(c), hl+n); lo < hi {
			copy(data[lo-hl:], c[lo-pos:hi-pos])
		}
		// Checksum bytes: offsets [hl+n, end).
		if lo := max(pos, hl+n); lo < pos+len(c) {
			copy(sum[lo-hl-n:], c[lo-pos:])
		}
		pos += len(c)
	}
	if !coalesce.VerifyChecksum(data, sum[:coalesce.ChecksumLen(n)]) {
		return nil, false
	}
	return data, true
}
