package channel

import (
	"encoding/binary"
	"errors"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/coalesce"
	"github.com/fastnet-engine/fastnet/internal/bufpool"
	"github.com/fastnet-engine/fastnet/internal/fifo"
)

// Defaults of ReceiverConfig's zero fields.
const (
	DefaultWindow     = 65536                 // D9
	DefaultMaxMessage = 1 << 20               // largest payload
	DefaultMCI        = 25 * time.Millisecond // D11
)

// The evidence that moves a receive window past a loss longer than the
// window (D27, N37 of docs/protocol.md): SkipEvidence distinct unblocked
// packets beyond the window, their sequence numbers less than the window
// apart, all arrived within SkipEvidenceTime, none more than MaxSkip
// places after the ignore number.
const (
	// DefaultSkipEvidence is ReceiverConfig.SkipEvidence's default.
	DefaultSkipEvidence = 3
	// MaxSkipEvidence bounds ReceiverConfig.SkipEvidence.
	MaxSkipEvidence = 4
	// DefaultSkipEvidenceTime is ReceiverConfig.SkipEvidenceTime's
	// default: a sender that lost more than a window of packets in a row
	// sends far more than three in that time, and resends a lone reliable
	// packet three times within it (D14).
	DefaultSkipEvidenceTime = 5 * time.Second
	// MinCopyGap is how far apart two copies of one reliable packet must
	// arrive to count as two pieces of evidence: resends are at least two
	// resend RTTs apart (D14), copies the network duplicated are not.
	MinCopyGap = 10 * time.Millisecond
	// MaxSkip bounds how far past the ignore number an evidence packet
	// may lie: M/4 (D27).
	MaxSkip = SeqSpace / 4
)

// maxReady bounds the delivered messages a Receiver holds for Poll; while
// it is reached, coalescing pauses until Poll takes some. keptReady is the
// most places of its queue of them a receiver keeps once they are taken.
const (
	maxReady  = 64
	keptReady = 8
)

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
	// Default 3*MaxMessage +
	// 64 KiB, or MessageMemory of a message of MaxMessage cut at the
	// smallest message MTU plus 64 KiB if that is more.
	MaxBytes int
	// Budget, if not nil, is a receive memory budget shared with the
	// connection's other channels; every change of Bytes is added to its
	// Used, and nothing is admitted that would take Used above Limit.
	Budget *Budget
	// MCI is the message coalescing interval of D11: an incomplete
	// unreliable message is dropped once its newest packet is this old.
	// Default DefaultMCI.
	MCI time.Duration
	// SkipEvidence is how many distinct unblocked packets beyond the
	// window, close together, move the window past a loss longer than it
	// (D27). Default DefaultSkipEvidence; values above MaxSkipEvidence
	// are lowered to it, and a value of 1 is raised to 2: one datagram is
	// never evidence.
	SkipEvidence int
	// SkipEvidenceTime bounds the time between the first and the last of
	// the SkipEvidence packets' arrivals. Default DefaultSkipEvidenceTime.
	SkipEvidenceTime time.Duration
	// Presums, if not nil, may hold the digest of the message a packet
	// given to Handle carries whole, computed ahead with those of other
	// messages (coalesce.Presums); Handle then does not compute it again.
	Presums *coalesce.Presums
	// Arena, if not nil, holds the buffers of small messages delivered
	// whole from one packet (see Arena).
	Arena *Arena
}

// Result says what Receiver.Handle did with a packet and so whether to ack
// it (D13: every reliable packet accepted or recognised as a duplicate is
// acked; see Result.Ack).
type Result uint8

// The results of Handle.
const (
	// Accepted: the packet is queued or already delivered.
	Accepted Result = iota + 1
	// Duplicate: a reliable packet already received: already queued, or
	// at or before the ignore number with its R at or before L, so
	// consumed (D8, D26). It is dropped and acked again.
	Duplicate
	// Stale: an unreliable packet at or before the ignore number, or one
	// already queued. Dropped (D8).
	Stale
	// OutOfWindow: more than Window places after the ignore number (D9), or
	// an invalid sequence number. Dropped and not acked. (Enough unblocked
	// packets beyond the window, close together, instead move the window;
	// see Receiver.Handle and D27.)
	OutOfWindow
	// NoMemory: the packet does not fit the memory limits (D22). Dropped
	// and not acked: a reliable packet will be resent.
	NoMemory
	// Rejected: the receiver has failed (Err is not nil) and takes
	// nothing, or this packet made it fail: a reliable packet the window
	// passed that was never consumed (D26), or one that disagrees with a
	// queued reliable packet (N155). Not acked.
	Rejected
	// Corrupt: a reliable packet holding a whole message that fails its
	// checksum or reliability check (D3, D11), dropped before it is acked
	// so that the sender resends an intact copy; or a packet no sender
	// makes: one whose R could never be unblocked at its place (D7, D10),
	// or one that disagrees with the packets queued next to it (N155; an
	// unreliable packet that disagrees with one unreliable neighbour is
	// dropped with it, and an honest one may be so dropped beside a forged
	// one). Not acked; counted as Drops.Malformed.
	Corrupt
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
	case Corrupt:
		return "Corrupt"
	}
	return "Result(?)"
}

// Ack reports whether a reliable packet handled with this result must be
// acked (D13): it was accepted or is a duplicate.
func (r Result) Ack() bool { return r == Accepted || r == Duplicate }

// Drops counts what a Receiver dropped after accepting it, by reason.
type Drops struct {
	// Malformed counts unreliable messages dropped for a bad length,
	// checksum or reliability flag, or inconsistent sequence numbers (D11),
	// packets refused as Corrupt, and queued packets removed as no sender
	// makes them: unreliable ones that disagree with an arriving packet
	// (N155), or that lie inside a reliable message (N158).
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
	// Skipped counts queued unreliable packets dropped because the
	// receive window moved past them on the evidence of D27.
	Skipped uint64
}

// total returns the sum of the counts: a count only grows, so two Drops of
// one receiver with equal totals are equal.
func (d Drops) total() uint64 {
	return d.Malformed + d.Expired + d.Evicted + d.Orphaned + d.Skipped
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
	// ErrPassedReliable: a reliable packet at or before the ignore number
	// whose R is after L, so never delivered (D26). Acking it would
	// report a delivery that did not happen.
	ErrPassedReliable error = &ProtocolError{"reliable packet passed by the receive window was never delivered"}
)

// Message is a message a Receiver delivers.
type Message struct {
	// Reliable is the message's reliability.
	Reliable bool
	// Data is the payload, freshly allocated: it belongs to the caller,
	// unless the receiver's Arena reuses its blocks and lent it (see
	// Arena.Lend and Arena.Owner, N103).
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
	pool   *bufpool.Pool
	budget *Budget

	g Seq // ignore number (D8)
	l Seq // L, the R of the last consumed reliable packet (D7)
	// lAt is the sequence number of that packet (the ignore number when
	// none was consumed yet), if lAtKnown: an unconsumed reliable packet
	// of the sender's lies after it, at least as many places after it as
	// its R lies after L (D26). A reused receiver may not know it, until
	// it consumes a reliable packet.
	lAt      Seq
	lAtKnown bool
	// fresh: the channel has taken nothing, its ignore number never moved
	// (a new receiver, or Reuse at a channel's start), so that its next
	// packet is its first, which starts a message (N154).
	fresh bool

	q         seqRing
	queued    int // packets in q
	bufs      int // the capacities of their buffers
	unrelN    int // unreliable packets in q
	unrelBufs int // the capacities of their buffers
	maxChunk  int // the longest chunk queued so far

	cmg cmgState
	// saved is the current message group that a packet queued before
	// its head displaced, kept while nothing changes it, nor the ignore
	// number moves, and restored when its head is the queue's head again:
	// a forged packet queued before a long message and removed again
	// (N155) would otherwise have the message's packets walked again,
	// as often as the forger likes (N158).
	saved cmgState

	ready      fifo.Queue[Message]
	readyBytes int
	charge     int // Bytes(), as last added to the budget

	deadline clock.Time
	err      error
	drops    Drops
	reported Drops // drops as of the last NewDrops
	holding  bool  // counted in budget.holders

	// The grant: memory promised to the rest of the reliable message at
	// the head of the queue (see updateGrant).
	// It is made of the buffers of its packets still to come, grantBufs,
	// and of the growth of the ring to grantCap places that they need, which
	// any packet growing the ring within grantCap pays from the grant
	// (grantFor); grant is the sum, as added to the Budget.
	grant     int
	grantBufs int
	grantCap  int
	grantSeq  Seq // the message's first packet
	grantRel  Seq // and its R
	grantLen  int // and its packets

	// The latest unblocked packets beyond the window, dropped, kept as
	// evidence that the window must move (D27, skipEvidence).
	evidence  [MaxSkipEvidence - 1]witness
	evidenceN int
}

// witness is a packet seen beyond the receive window (D27).
type witness struct {
	seq  Seq
	l    Seq // L when it arrived
	owed int // Distance(L, need(p)) then: 0 if it was unblocked
	at   clock.Time
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
	rel      Seq  // the head's R
	lastRel  Seq  // the R of the group's last packet
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
		cfg.MaxBytes = max(3*cfg.MaxMessage, MessageMemory(cfg.MaxMessage+coalesce.MaxOverhead, minMessageMTU)) + 64<<10
	}
	if cfg.MCI <= 0 {
		cfg.MCI = DefaultMCI
	}
	if cfg.SkipEvidence <= 0 {
		cfg.SkipEvidence = DefaultSkipEvidence
	}
	cfg.SkipEvidence = min(max(cfg.SkipEvidence, 2), MaxSkipEvidence)
	if cfg.SkipEvidenceTime <= 0 {
		cfg.SkipEvidenceTime = DefaultSkipEvidenceTime
	}
	r := &Receiver{cfg: cfg, budget: cfg.Budget, g: -1, l: 0, lAt: -1, lAtKnown: true, fresh: true}
	// Free chunk buffers are kept so that steady-state reassembly
	// allocates nothing: by the root of the Budget, within its room
	// (Budget), or up to the memory the queue may use.
	switch root := r.budget.rootOrNil(); {
	case root == nil:
		r.pool = &bufpool.Pool{Limit: cfg.MaxBytes}
	case root.MaxFree > 0:
		r.pool = &root.pool
		r.pool.Limit = root.MaxFree
	case root.Limit > 0:
		r.pool = &root.pool
		r.pool.Limit = root.Limit
	default:
		r.pool = &root.pool
		r.pool.Limit = max(r.pool.Limit, cfg.MaxBytes)
	}
	return r
}

// Err returns a *ProtocolError once the peer has broken the protocol on
// reliable data (D11, D26); the receiver then takes nothing more and holds no
// queued packets (messages delivered before the violation can still be
// taken with Poll). After Reset, Err returns a non-protocol error.
func (r *Receiver) Err() error { return r.err }

// Drops returns the cumulative drop counters.
func (r *Receiver) Drops() Drops { return r.drops }

// Dropped reports whether NewDrops has something to return: whether
// anything was dropped since its previous call.
func (r *Receiver) Dropped() bool {
	// The counters only grow: the totals differ if any did.
	return r.drops.total() != r.reported.total()
}

// NewDrops returns what was dropped since its previous call (or since the
// receiver was made or reused).
func (r *Receiver) NewDrops() Drops {
	if r.drops.total() == r.reported.total() {
		return Drops{} // none since the last call, as almost always
	}
	d, p := r.drops, r.reported
	r.reported = d
	return Drops{
		Malformed: d.Malformed - p.Malformed,
		Expired:   d.Expired - p.Expired,
		Evicted:   d.Evicted - p.Evicted,
		Orphaned:  d.Orphaned - p.Orphaned,
		Skipped:   d.Skipped - p.Skipped,
	}
}

// Bytes returns the memory the receiver holds, as counted against MaxBytes
// and the Budget: the arrays of its receive queue, the buffers of its
// queued packets at their capacities, and the payloads of delivered
// messages not yet taken by Poll with their places in its queue of them
// (see memory.go). The Receiver itself, ReceiverSize, is its owner's to
// charge. After Reset it is 0.
func (r *Receiver) Bytes() int { return r.charge }

// NextDeadline returns when the incomplete unreliable message at the head of
// the queue expires (its newest packet plus the MCI), or 0 if none; the
// caller then calls Poll.
func (r *Receiver) NextDeadline() clock.Time { return r.deadline }

// chargeFor computes Bytes for a queue of the given shape: packets in
// buffers of bufs bytes, in a ring of capacity places.
func (r *Receiver) chargeFor(bufs, places int) int {
	return bufs + r.q.bytesWith(places) + r.readyBytes + max(r.ready.Cap()-keptReady, 0)*messageSize
}

// fits reports whether the receiver may hold c bytes, its grant unchanged.
func (r *Receiver) fits(c int) bool { return r.fitsWith(c, r.grant) }

// fitsWith reports whether the receiver may hold c bytes with a grant of
// grant bytes: both within MaxBytes, and within the Budget beside what the
// other receivers hold and were granted.
func (r *Receiver) fitsWith(c, grant int) bool {
	if c+grant > r.cfg.MaxBytes {
		return false
	}
	return r.budget == nil || r.budget.fits(c-r.charge, grant-r.grant, forPacket)
}

// fitsGranted is fitsWith for a grant and what it covers, which may use the
// Budget's Reserve (N50).
func (r *Receiver) fitsGranted(c, grant int) bool {
	if c+grant > r.cfg.MaxBytes {
		return false
	}
	return r.budget == nil || r.budget.fits(c-r.charge, grant-r.grant, forGranted)
}

// setGrant records a new grant of bufs bytes of buffers and a ring of
// capacity places, and passes the change of its total to the budget.
func (r *Receiver) setGrant(bufs, capacity int) {
	r.grantBufs, r.grantCap = bufs, capacity
	r.syncGrant()
}

// syncGrant passes the total of the grant, with the ring as it is now, to
// the budget. A ring that grows pays part of the grant, so the total falls;
// one that shrinks frees at least what it adds back.
func (r *Receiver) syncGrant() {
	if r.grantBufs == 0 && r.grantCap == 0 && r.grant == 0 {
		return // no grant, as almost always: nothing to pass on
	}
	g := r.grantFor(r.grantBufs, r.grantCap, len(r.q.slots))
	if r.budget != nil {
		r.budget.add(0, g-r.grant)
	}
	r.grant = g
}

// grantFor returns the total of a grant of bufs bytes of buffers and a
// ring of grantCap places, with a ring of capacity places: the buffers and
// what growing the ring to grantCap still costs, its base arrays grown to
// baseRing on the way included.
func (r *Receiver) grantFor(bufs, grantCap, capacity int) int {
	ring := 0
	if n := grantCap; n > capacity {
		ring = ringBytes(n)
		if n > baseRing {
			ring += ringBytes(baseRing)
		}
		ring = max(ring-r.q.bytesWith(capacity), 0)
	}
	return bufs + ring
}

// updateGrant promises memory to the rest of the reliable message at the
// head of the queue, once its header is known, if the memory is there
// (D22, D23). Packets of other messages, on this channel or others sharing
// the Budget, cannot take promised memory, so a message once granted
// always completes: without grants, channels that each hold part of a
// message could fill the shared budget between them and none could ever
// complete. A head whose grant does not fit yet waits for one while its
// packets are still taken as long as they fit beside the grants of others;
// it asks again on every Handle and Poll. The grant covers the buffers of
// the packets still to come and the ring they need (N20, N49).
func (r *Receiver) updateGrant() {
	if r.queued == 0 && r.grant == 0 && r.grantBufs == 0 && r.grantCap == 0 {
		return // nothing queued to grant to, nothing granted to take back
	}
	bufs, capacity, packets := 0, 0, 0
	var seq, rel Seq
	if m := &r.cmg; r.err == nil && r.queued > 0 && m.valid && m.start && m.reliable && m.hdrOK {
		if rem := m.hdr.EncodedLen() - m.bytes; rem > 0 {
			head := r.q.at(m.head)
			chunk := max(len(head.data), minMessageMTU)
			k := (rem + chunk - 1) / chunk
			// Packets of the rest already queued past a hole are
			// charged already: the grant is for those still missing.
			missing := k - r.q.count(bmPresent, m.head+m.n, m.head+m.n+k)
			bufs = max(missing, 1) * bufpool.ClassCap(chunk)
			capacity = capFor(max(r.q.off+r.q.span, m.head+m.n+k) - r.q.off)
			seq, rel, packets = r.g.Add(m.head+1), head.rel, m.n+k
		}
	} else if r.err == nil && r.queued > 0 && r.ready.Len() >= maxReady {
		return // not evaluated: Poll will
	}
	want := r.grantFor(bufs, capacity, len(r.q.slots))
	switch {
	case bufs == 0:
		r.setGrant(0, 0)
	case r.grant > 0 && seq == r.grantSeq && want > r.grant && !r.fitsGranted(r.charge, want):
		// Keep the grant it has.
	case r.grant > 0 && seq == r.grantSeq && want <= r.grant:
		r.setGrant(bufs, capacity)
	case r.fitsGranted(r.charge, want):
		r.setGrant(bufs, capacity)
		r.grantSeq, r.grantRel, r.grantLen = seq, rel, packets
	default:
		r.setGrant(0, 0)
	}
}

// inGrant reports whether a packet with header h belongs to the granted
// message: reliable, not a start, among its packets, and R advancing with
// the sequence number from the message's first packet (D10).
func (r *Receiver) inGrant(h Header) bool {
	if r.grant == 0 || !h.Reliable || h.Start {
		return false
	}
	d := Distance(r.grantSeq, h.Seq)
	return d > 0 && d < r.grantLen && Distance(r.grantRel, h.Rel) == d
}

// setCharge records a new Bytes and passes the change to the budget.
func (r *Receiver) setCharge(c int) {
	if c == r.charge {
		return // as after most packets: nothing to pass on
	}
	if r.budget != nil {
		r.budget.add(c-r.charge, 0)
	}
	r.charge = c
}

func (r *Receiver) recharge() {
	r.setCharge(r.chargeFor(r.bufs, len(r.q.slots)))
	r.syncGrant()
	if h := r.queued > 0; h != r.holding && r.budget != nil {
		r.holding = h
		if h {
			r.budget.holders++
		} else {
			r.budget.holders--
		}
	}
}

// mayHold reports whether the receiver may hold queued packets to take a
// packet with header h: it already does, or the Budget's MaxHolders leaves
// room for one more. The upper half of that room is kept for packets that
// start a message and wait for nothing (D7): a receiver holding one can
// complete its message with the packets that follow, which it takes, so
// holders always finish; without the reserve, packets that wait for an
// earlier one refused before them could take every place, and the
// messages they wait for could not begin until backed-off resends came.
func (r *Receiver) mayHold(h Header) bool {
	b := r.budget
	switch {
	case r.holding || b == nil || b.MaxHolders <= 0 || b.holders < b.MaxHolders/2:
		return true
	case b.holders >= b.MaxHolders:
		return false
	}
	return h.Start && need(h.Reliable, h.Rel) == r.l
}

// need returns need(p) of D7: the L a packet waits for.
func need(reliable bool, rel Seq) Seq {
	if reliable {
		return rel.Prev()
	}
	return rel
}

// Handle handles an arriving data packet with header h and chunk, the bytes
// after the header (D8-D11, D22). It copies what it keeps: chunk may be
// reused when Handle returns. A message that arrives whole in one packet
// at the head of an empty queue is decoded straight from chunk.
//
// A reliable packet is refused (NoMemory) if holding it would leave no room
// for the reliable packets still owed before it: once acked it could not
// be given back, and the owed packets could never be stored. An honest
// sender's packets that are refused are simply resent later.
//
// A packet more than Window places after the ignore number is dropped and
// not acked (D9). To keep a channel alive after a loss longer than the
// window (D23), the window moves only on evidence (D27): when such a
// packet is unblocked (D7), only unreliable packets are queued, and it and
// SkipEvidence-1 other unblocked packets seen beyond the window lie within
// the window's width of one another, at most MaxSkip after the ignore
// number, and arrived within SkipEvidenceTime (see witnessed). The ignore
// number then moves to just before the lowest of them, dropping the
// queued unreliable packets it passes (Drops.Skipped), and the packet is
// taken. A reliable packet the window passed but never consumed is then
// a protocol violation, not a duplicate (D26).
//
// A reliable packet that holds a whole message is verified before it is
// acked; if it fails, Handle returns Corrupt (N15 of docs/protocol.md).
//
// The result says whether to ack a reliable packet (Result.Ack). Messages
// the packet completes are taken with Poll.
func (r *Receiver) Handle(now clock.Time, h Header, chunk []byte) Result {
	res, _, _ := r.handle(now, h, chunk, false)
	return res
}

// HandleTake is Handle for a caller that takes at once what the packet
// completes: a message that arrives whole in one packet, with no packet
// queued and no message waiting for Poll, is returned (ok), not kept for
// Poll. The caller then polls as after Handle, for any other message the
// packet completes; the receiver is then as Handle, and Poll taking the
// same messages, would leave it.
func (r *Receiver) HandleTake(now clock.Time, h Header, chunk []byte) (res Result, m Message, ok bool) {
	return r.handle(now, h, chunk, true)
}

// handle is Handle, and HandleTake if take is set.
func (r *Receiver) handle(now clock.Time, h Header, chunk []byte, take bool) (Result, Message, bool) {
	if r.err != nil {
		return Rejected, Message{}, false
	}
	if !h.Seq.Valid() || !h.Rel.Valid() {
		return OutOfWindow, Message{}, false
	}
	d := Distance(r.g, h.Seq)
	if d == 0 || d > SeqSpace/2 {
		// At or before the ignore number (D8).
		if !h.Reliable {
			return Stale, Message{}, false
		}
		if !r.l.Before(h.Rel) {
			return Duplicate, Message{}, false // consumed already: its R is at or before L
		}
		if r.lAtKnown && !(r.lAt.Before(h.Seq) && Distance(r.l, h.Rel) <= Distance(r.lAt, h.Seq)) {
			// Not a packet the window passed: the sender's reliable
			// packets after L lie after the one with R = L, one place
			// at least for each. No sender makes it (forged or
			// damaged): dropped, not acked, and the channel goes on.
			r.drops.Malformed++
			return Corrupt, Message{}, false
		}
		// The window passed a reliable packet that was never consumed: an
		// ack would tell the sender it was delivered. Only a datagram no
		// honest sender makes (forged, corrupted, or one that moved the
		// window on false evidence) leads here; end loudly (D26).
		r.fail(ErrPassedReliable)
		return Rejected, Message{}, false
	}
	// A message that fits in its packet is verified now (D3): a reliable
	// one that fails is dropped before it is acked, so the sender's resend
	// repairs damage the transport let through.
	var msg coalesce.Message
	whole := false
	if h.Start {
		if hdr, err := coalesce.ParseHeader(chunk, r.cfg.MaxMessage); err == nil && hdr.EncodedLen() <= len(chunk) {
			m, err := hdr.MessageWith(r.cfg.Presums, chunk)
			switch {
			case err == nil && m.Reliable == h.Reliable:
				msg, whole = m, true
			case h.Reliable:
				r.drops.Malformed++
				return Corrupt, Message{}, false
			}
		}
	}
	if d > r.cfg.Window {
		nd := Distance(r.l, need(h.Reliable, h.Rel))
		if d > MaxSkip || nd >= r.cfg.Window || r.queued != r.unrelN {
			return OutOfWindow, Message{}, false // D9
		}
		// An unblocked packet says that every packet between G and it is
		// unreliable (no reliable packet before it is still owed, D7,
		// D10), lost or too late to matter; without moving, the window
		// would never move again after a loss longer than it, and the
		// channel would be dead (D23). But one forged, corrupted or
		// stale datagram could say so falsely: the window moves only
		// when several say it together (D27).
		lo, ok := r.witnessed(now, h.Seq, h.Reliable, nd, d)
		if !ok {
			return OutOfWindow, Message{}, false // D9: dropped, not acked, remembered
		}
		r.skip(lo - 1)
		d -= lo - 1
	}
	if !h.Start && d == 1 && r.fresh {
		// A channel's first packet (sequence number 0, D5) starts its
		// first message. One that does not, a datagram of zeros among
		// them (channel 0, sequence number 0, R 0, unreliable), would
		// be discarded as the rest of a message whose start is gone,
		// the ignore number moved past it, and the channel's real
		// first packet, reliable, would then end the connection (D26).
		// No sender makes it: dropped (N154).
		r.drops.Malformed++
		return Corrupt, Message{}, false
	}
	if Distance(r.l, need(h.Reliable, h.Rel)) > d-1 {
		// It waits for more reliable packets than there are places
		// between the ignore number and it, or for an R that L has
		// passed: no sender makes it (D7, D10), and it could never be
		// unblocked. Queued, it would take the place of the packet that
		// really has its sequence number, and at the head fail the
		// channel (reliable) or move the ignore number past that packet
		// (unreliable, D26): one forged or damaged datagram would end
		// the connection. Dropped, and not acked.
		r.drops.Malformed++
		return Corrupt, Message{}, false
	}
	i := d - 1
	if r.q.has(i) {
		s := r.q.at(i)
		switch {
		case h.Reliable && s.reliable():
			return Duplicate, Message{}, false // D8
		case !h.Reliable:
			return Stale, Message{}, false
		}
		// A reliable packet takes the place of an unreliable one with the
		// same sequence number, which no honest sender produces.
		r.remove(i)
		r.recharge()
	}
	removed := r.drops.Malformed
	if r.queued > 0 && !r.agrees(now, i, h) {
		if r.err != nil && h.Reliable {
			return Rejected, Message{}, false
		}
		r.drops.Malformed++
		return Corrupt, Message{}, false
	}
	if whole && r.queued == 0 && r.ready.Len() < maxReady && need(h.Reliable, h.Rel) == r.l {
		return r.fast(h, msg, d, take)
	}
	if !r.store(now, i, h, chunk) {
		if r.drops.Malformed != removed {
			// What waited behind the packets agrees removed goes on.
			r.process(now)
			r.updateGrant()
		}
		return NoMemory, Message{}, false
	}
	r.process(now)
	r.updateGrant()
	return Accepted, Message{}, false
}

// follows reports whether a packet that waits for (need, D7) nb, b places
// after a packet with R ra, can come from the sender of that packet: the
// sender's R never falls, and rises by one for each reliable packet, so b
// waits for at least ra and for at most one more for each place between
// them (N155).
func follows(ra, nb Seq, b int) bool { return Distance(ra, nb) <= b-1 }

// agrees checks a packet with header h arriving at logical index i against
// the queued packets nearest it, before and after, as one sender's packets
// agree (follows); the queued packets agree with one another and with the
// ignore number at L (handle checks the packet against those), so the
// packets it disagrees with lie next to it, on either side (N155). It
// reports whether the packet is to be queued; if not, the caller drops
// it, or, if it failed the channel (a reliable packet), rejects it. What
// disagrees came from no sender: one of the two was forged or damaged. An
// unreliable packet at the head that waited for an R no reliable packet
// will ever carry would hold back the channel for good, acked reliable
// packets behind it: so
//
//   - a reliable packet takes the place of the unreliable packets it
//     disagrees with, nearest first, removing them; if it meets a reliable
//     one that disagrees, acked already and not to be given back, the
//     channel fails (ErrReliableSeq, D26), as it did when such a pair
//     reached the head;
//   - an unreliable packet that disagrees with one neighbour, unreliable,
//     is dropped with it, and what waited behind that one is processed;
//     if it disagrees with a reliable neighbour, or with both, which agree
//     with each other, it is dropped alone.
//
// Each queued packet is removed at most once, and the current group a
// forged packet displaced is kept for when its head heads the queue again
// (N158), so the work is bounded by the packets queued.
func (r *Receiver) agrees(now clock.Time, i int, h Header) bool {
	nd := need(h.Reliable, h.Rel)
	p := r.q.prev(bmPresent, i)
	pOK := p < 0 || follows(r.q.at(p).rel, nd, i-p)
	n := r.q.first(i + 1)
	nOK := n < 0 || follows(h.Rel, need(r.q.at(n).reliable(), r.q.at(n).rel), n-i)
	switch {
	case pOK && nOK:
		return true
	case !h.Reliable:
		switch {
		case !pOK && nOK && !r.q.at(p).reliable():
			r.remove(p)
		case pOK && !nOK && !r.q.at(n).reliable():
			r.remove(n)
		default:
			return false
		}
		r.drops.Malformed++
		r.recharge()
		r.process(now) // what waited behind it may go on
		r.updateGrant()
		return false
	}
	for ; p >= 0 && !follows(r.q.at(p).rel, nd, i-p); p = r.q.prev(bmPresent, p) {
		if r.q.at(p).reliable() {
			r.fail(ErrReliableSeq)
			return false
		}
		r.remove(p)
		r.drops.Malformed++
	}
	for ; n >= 0 && !follows(h.Rel, need(r.q.at(n).reliable(), r.q.at(n).rel), n-i); n = r.q.first(n + 1) {
		if r.q.at(n).reliable() {
			r.fail(ErrReliableSeq)
			return false
		}
		r.remove(n)
		r.drops.Malformed++
	}
	r.recharge()
	return true
}

// witnessed records a packet with sequence number seq, d places after the
// ignore number and beyond the window, that waits for owed reliable packets
// after L (0: it is unblocked), as evidence (D27, N37). It reports whether
// the packet and SkipEvidence-1 of the witnesses kept make the evidence
// that moves the window: distinct sequence numbers less than the window
// apart, the lowest unblocked and each other one unblocked or waiting for
// no more reliable packets than lie between the lowest and it (as the
// packets of a reliable message after an unblocked first one do), all
// still beyond the window with L unchanged, at most MaxSkip after the
// ignore number, and arrived within SkipEvidenceTime of now; copies of one
// reliable packet that arrived MinCopyGap or more apart count as distinct
// (an honest sender's lone reliable packet after a long loss is resent,
// D14, and may be the only packet it has to send). It then
// returns the distance from the ignore number of the lowest of them, and
// forgets the witnesses. Otherwise the packet is kept among the witnesses,
// in place of one no longer valid or of the oldest (of witnesses that
// arrived at one instant, as a batch of datagrams does, the first to
// come).
func (r *Receiver) witnessed(now clock.Time, seq Seq, reliable bool, owed, d int) (lo int, ok bool) {
	w := r.cfg.Window
	type cand struct{ off, owed int }
	var cs [MaxSkipEvidence]cand
	n := 0
	kept := r.evidence[:0]
	for _, e := range r.evidence[:r.evidenceN] {
		o := Distance(r.g, e.seq)
		if e.l != r.l || o <= w || o > MaxSkip || now.Sub(e.at) > r.cfg.SkipEvidenceTime ||
			e.seq == seq && !(reliable && now.Sub(e.at) >= MinCopyGap) {
			continue // no longer evidence, or this packet again too soon
		}
		kept = append(kept, e)
		if o-d < w && d-o < w {
			cs[n] = cand{o, e.owed}
			n++
		}
	}
	r.evidenceN = len(kept)
	cs[n] = cand{d, owed}
	n++
	if k := r.cfg.SkipEvidence; n >= k {
		c := cs[:n]
		for i := 1; i < n; i++ { // insertion sort of at most MaxSkipEvidence
			for j := i; j > 0 && c[j].off < c[j-1].off; j-- {
				c[j], c[j-1] = c[j-1], c[j]
			}
		}
	next:
		for i := 0; i+k <= n; i++ {
			set := c[i : i+k]
			if set[k-1].off-set[0].off >= w || set[0].owed != 0 || d < set[0].off || d > set[k-1].off {
				continue
			}
			for _, x := range set[1:] {
				if x.owed > x.off-set[0].off {
					continue next // it waits for more than can lie before it
				}
			}
			r.evidenceN = 0
			return set[0].off, true
		}
	}
	// Keep SkipEvidence-1 witnesses, as many as evidence needs beside a
	// new packet: more would let older packets count.
	e := witness{seq: seq, l: r.l, owed: owed, at: now}
	if r.evidenceN < min(len(r.evidence), r.cfg.SkipEvidence-1) {
		r.evidence[r.evidenceN] = e
		r.evidenceN++
		return 0, false
	}
	if r.evidenceN == 0 {
		return 0, false
	}
	// The witnesses are kept in the order they came: the oldest, and of
	// those that came at one instant (a batch of datagrams) the first,
	// gives way, and the new one goes last. Replaced in place, the first
	// slot's witness gave way again and again while the others stayed
	// for the rest of the instant, and one forged witness among them
	// kept the honest ones of a whole batch from moving the window.
	oldest := 0
	for i := range r.evidence[:r.evidenceN] {
		if r.evidence[i].at < r.evidence[oldest].at {
			oldest = i
		}
	}
	copy(r.evidence[oldest:r.evidenceN], r.evidence[oldest+1:r.evidenceN])
	r.evidence[r.evidenceN-1] = e
	return 0, false
}

// fast delivers a message that arrives whole in one packet at the head of
// an empty queue straight from the chunk (D11 rule 2 with a one-packet
// group).
// With take, and no message waiting for Poll, the message is returned
// instead: what Poll would have taken is never charged. d is the packet's
// distance from the ignore number, Distance(r.g, h.Seq), which the caller
// has at hand.
func (r *Receiver) fast(h Header, m coalesce.Message, d int, take bool) (Result, Message, bool) {
	// Poll takes the message at once: it may use the Budget's Reserve.
	// The test is the same taken or not, so that a packet is refused or
	// taken alike either way.
	if !r.mayTake(len(m.Payload) + max(r.ready.Len()+1-max(r.ready.Cap(), keptReady), 0)*messageSize) {
		return NoMemory, Message{}, false
	}
	return r.fastFits(h, m, d, take)
}

// mayTake reports whether the receiver may take cost more bytes, as a
// message taken at once, within the memory limits, releasing a kept ring
// if that makes room (fast).
func (r *Receiver) mayTake(cost int) bool {
	return r.fitsGranted(r.charge+cost, r.grant) || r.releaseRing() && r.fitsGranted(r.charge+cost, r.grant)
}

// fastFits is fast once the message is known to fit the memory limits.
func (r *Receiver) fastFits(h Header, m coalesce.Message, d int, take bool) (Result, Message, bool) {
	msg := Message{Reliable: h.Reliable, Data: r.cfg.Arena.Take(m.Payload)}
	take = take && r.ready.Len() == 0
	if !take {
		r.deliver(msg)
	}
	r.q.pay() // a kept ring is paid for by every packet (N39)
	r.consumed(d, h.Reliable, h.Rel)
	r.recharge()
	r.deadline = 0
	if !take {
		return Accepted, Message{}, false
	}
	return Accepted, msg, true
}

// Whole is a data packet that carries one message whole (for TakeWhole):
// its header H; where its chunk, the bytes after the header, lies in the
// buffer given with it, from Off to End; and Msg, the message's header as
// coalesce.ParseHeader parsed it from the chunk. It holds no pointer, so
// that arrays of them cost the garbage collector nothing.
type Whole struct {
	H        Header
	Msg      coalesce.Header
	Off, End int
}

// Payload returns the message's payload within b, the buffer w's chunk
// lies in.
func (w *Whole) Payload(b []byte) []byte {
	lo := w.Off + w.Msg.HeaderLen
	return b[lo : lo+w.Msg.Len : lo+w.Msg.Len]
}

// TakeWhole takes at once, in order, the packets ws, whose chunks lie in
// b, each a message whole in its packet whose MD5 digest, computed ahead
// with others (D3), is in digests, for as long as each is one HandleTake
// would hand over at once: the receiver holds nothing (Settled), the
// packet starts its message and waits for no reliable packet, it is
// within the window and not a duplicate, the message fills the chunk and
// fits MaxMessage, its checksum holds and it fits the memory limits. It
// returns how many packets it took: those are handled exactly as
// HandleTake would have handled them (Accepted, the message taken), and
// their messages are the caller's to deliver, in order, each a copy of
// its Payload made before b is reused; the receiver keeps nothing of
// them. The first it did not take, and those after it, are left for
// HandleTake (N101).
func (r *Receiver) TakeWhole(b []byte, ws []Whole, digests [][coalesce.MD5Len]byte) int {
	if !r.Settled() {
		return 0
	}
	// Settled still holds after each message taken: fast leaves nothing
	// queued, ready, granted, dropped or timed. So what fast charges a
	// message taken at once is its length alone, and what the receiver
	// and its budgets hold can only fall while the run lasts (a ring
	// shrinks, nothing is stored or granted): a message within the room
	// there is at the start fits, as fast's own test would find without
	// giving up anything to make room, and that test, which walks the
	// budgets, is left for a message larger than the room (N101).
	room := r.takeRoom()
	// What fastFits changes at each message taken (the ignore number, L,
	// the ring's debt and with it the ring and the charge) is changed
	// once for the messages taken since the last change (took): nothing
	// reads it in between but the memory test of a message larger than
	// the room, before which it is brought up to date.
	g, l, lAt, known, n := r.g, r.l, r.lAt, r.lAtKnown, 0
	// The window and the message's length are tested each in one
	// comparison, unsigned, of the distance less 1 with the window (from
	// 1 to SeqSpace/2-1, NewReceiver makes sure) and of the length less
	// the least with span: 8 instructions a message less than the tests
	// of each bound.
	if r.cfg.MaxMessage <= coalesce.ShortChecksumMax {
		return 0 // no message with an MD5 checksum fits
	}
	window, span := uint(r.cfg.Window), uint(r.cfg.MaxMessage-(coalesce.ShortChecksumMax+1))
	i := 0
	for ; i < len(ws); i++ {
		w := &ws[i]
		h := &w.H
		if !h.Start || !h.Seq.Valid() || !h.Rel.Valid() || need(h.Reliable, h.Rel) != l {
			break
		}
		// Nothing is queued (Settled), so no place in the window is
		// held: the packet is no duplicate of one queued.
		if d := Distance(g, h.Seq); uint(d-1) >= window {
			break
		}
		// The message fills the chunk (its EncodedLen, with an MD5
		// checksum past ShortChecksumMax bytes).
		hdr := &w.Msg
		if uint(hdr.Len-(coalesce.ShortChecksumMax+1)) > span || hdr.HeaderLen+hdr.Len+coalesce.MD5Len != w.End-w.Off || hdr.Reliable != h.Reliable {
			break
		}
		// The message's MD5 checksum, the last bytes of its chunk,
		// compared 8 bytes at a time.
		sum, digest := b[w.End-coalesce.MD5Len:w.End], &digests[i]
		if binary.LittleEndian.Uint64(sum) != binary.LittleEndian.Uint64(digest[:8]) ||
			binary.LittleEndian.Uint64(sum[8:]) != binary.LittleEndian.Uint64(digest[8:]) {
			break
		}
		if hdr.Len > room {
			r.took(g, l, lAt, known, n)
			g, l, lAt, known, n = r.g, r.l, r.lAt, r.lAtKnown, 0
			if !r.mayTake(hdr.Len) {
				// Refused for memory: HandleTake, given it next,
				// refuses it alike (the ring released stays released).
				return i
			}
		}
		// As fastFits takes it: the ignore number moves to the packet
		// (g.Add(Distance(g, h.Seq)) is h.Seq), L to a reliable one's R.
		g = h.Seq
		if h.Reliable {
			l, lAt, known = h.Rel, h.Seq, true
		}
		n++
	}
	r.took(g, l, lAt, known, n)
	return i
}

// took records that TakeWhole took n more messages at once, as fastFits
// would have after each: the ignore number is then g, L is l (of the
// packet at lAt, if known), the ring
// paid n packets of its debt (N39), and, holding nothing, returns to its
// base arrays once its debt is paid.
func (r *Receiver) took(g, l, lAt Seq, known bool, n int) {
	if n == 0 {
		return
	}
	r.g, r.l, r.lAt, r.lAtKnown = g, l, lAt, known
	r.fresh = false
	r.cmg.valid, r.saved.valid = false, false
	r.q.debt = max(r.q.debt-n, 0)
	r.q.shrink()
	r.recharge()
}

// takeRoom returns the most bytes a message taken at once may have and
// fit the memory limits now, as fitsGranted tests them (a Settled
// receiver charges such a message its length alone, keptReady being at
// least 1), without giving up free buffers or the ring to make room.
func (r *Receiver) takeRoom() int {
	room := r.cfg.MaxBytes - r.charge - r.grant
	for x := r.budget; x != nil; x = x.Parent {
		if x.Limit > 0 {
			room = min(room, x.Limit-x.Used-x.committed-x.pool.Retained)
		}
	}
	return room
}

// skip moves the ignore number k places forward over packets that are all
// unreliable, dropping those queued.
func (r *Receiver) skip(k int) {
	for j := r.q.first(0); j >= 0 && j < k; j = r.q.first(j + 1) {
		r.remove(j)
		r.drops.Skipped++
	}
	r.consumed(k, false, 0)
	r.recharge()
}

// deliver hands a message to Poll.
func (r *Receiver) deliver(m Message) {
	r.ready.Push(m)
	r.readyBytes += len(m.Data)
}

// consumed moves the ignore number k places forward (to the last packet of
// a delivered or dropped group) and, for a delivered reliable group, sets L
// to its last R (D11).
func (r *Receiver) consumed(k int, reliable bool, lastRel Seq) {
	r.g = r.g.Add(k)
	r.fresh = false
	if reliable {
		r.l, r.lAt, r.lAtKnown = lastRel, r.g, true
	}
	r.cmg.valid, r.saved.valid = false, false
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
	if !r.mayHold(h) {
		return false
	}
	if h.Reliable && !r.roomForOwed(i, h, len(chunk)) {
		return false
	}
	buf := bufpool.ClassCap(len(chunk))
	c := r.chargeFor(r.bufs+buf, r.q.capWith(i))
	if !r.fitsWith(c, r.grant) && r.compact(i) {
		c = r.chargeFor(r.bufs+buf, r.q.capWith(i))
	}
	// The granted message pays for its packet's buffer from its grant,
	// and any packet pays for growing the ring to the grant's capacity.
	grantBufs := r.grantBufs
	if r.inGrant(h) {
		grantBufs = max(0, grantBufs-buf)
	}
	grant := r.grantFor(grantBufs, r.grantCap, r.q.capWith(i))
	if !r.fitsWith(c, grant) && !r.headFits(i, h, chunk, c, grant) {
		if !h.Reliable || r.unrelN == 0 {
			return false
		}
		// Would evicting every queued unreliable packet make room?
		places := 1
		if lo := r.q.next(bmRel, 0, true); lo >= 0 {
			places = max(i, r.q.last(bmRel)) - min(i, lo) + 1
		}
		if n := capFor(places); !r.fitsWith(r.chargeFor(r.bufs+buf-r.unrelBufs, n), r.grantFor(grantBufs, r.grantCap, n)) {
			return false
		}
		for !r.fitsWith(c, grant) && r.unrelN > 0 {
			r.remove(r.q.last(bmUnrel))
			r.drops.Evicted++
			r.compact(i)
			c = r.chargeFor(r.bufs+buf, r.q.capWith(i))
			grant = r.grantFor(grantBufs, r.grantCap, r.q.capWith(i))
		}
		if !r.fitsWith(c, grant) {
			return false
		}
	}
	r.q.ensure(i)
	b := r.pool.Get(len(chunk))
	copy(b, chunk)
	var flags uint8
	if h.Reliable {
		flags |= FlagReliable
	} else {
		r.unrelN++
		r.unrelBufs += cap(b)
	}
	if h.Start {
		flags |= FlagStart
	}
	r.q.set(i, slot{data: b, arrived: now, rel: h.Rel, flags: flags})
	r.maxChunk = max(r.maxChunk, len(chunk))
	r.queued++
	r.bufs += cap(b)
	r.grantBufs = grantBufs
	r.recharge()
	if m := &r.cmg; m.valid {
		switch {
		case i < m.head:
			// The packet heads the queue now: the group is kept
			// for when it does again.
			if !r.saved.valid {
				r.saved = *m
			}
			m.valid = false
		case i < m.head+m.n || i == m.head+m.n && m.ended:
			m.valid = false
		}
	}
	if m := &r.saved; m.valid && i >= m.head && (i < m.head+m.n || i == m.head+m.n && m.ended) {
		m.valid = false
	}
	return true
}

// headFits reports whether a reliable packet that begins a message at the
// head of the queue (logical index 0, waiting for nothing) fits with its
// charge c and the grant the rest of its message will need, as
// updateGrant reckons it: such a packet may use the Budget's Reserve, so
// that when messages begun and not granted hold all but the Reserve, a
// new message can still begin and complete (N50).
func (r *Receiver) headFits(i int, h Header, chunk []byte, c, grant int) bool {
	if !h.Reliable || !h.Start || i != 0 || need(true, h.Rel) != r.l {
		return false
	}
	hdr, err := coalesce.ParseHeader(chunk, r.cfg.MaxMessage)
	if err != nil {
		return false
	}
	rem := hdr.EncodedLen() - len(chunk)
	if rem <= 0 {
		return r.fitsGranted(c, grant)
	}
	chunkLen := max(len(chunk), minMessageMTU)
	k := (rem + chunkLen - 1) / chunkLen
	places := r.q.capWith(i)
	capacity := capFor(max(r.q.off+r.q.span, i+1+k) - min(r.q.off, i))
	if r.q.span == 0 {
		capacity = capFor(1 + k)
	}
	missing := k - r.q.count(bmPresent, i+1, i+1+k) // those queued are charged
	return r.fitsGranted(c, grant+r.grantFor(max(missing, 1)*bufpool.ClassCap(chunkLen), capacity, places))
}

// releaseRing returns an empty ring that grew past its base arrays to them
// at once, its debt forgiven (N39), and reports whether it did.
func (r *Receiver) releaseRing() bool {
	if r.queued != 0 || len(r.q.slots) <= baseRing {
		return false
	}
	r.q.debt = 0
	r.q.shrink()
	r.recharge()
	return true
}

// compact fits the ring to its queued packets and logical index i, its
// debt forgiven (N39), when a packet does not fit the memory limits beside
// a ring larger than they need; it reports whether the ring shrank.
// Otherwise a ring kept for its debt, which only packets set and taken
// pay, or grown for packets since evicted, could hold the memory that the
// packets owed before those queued need (roomForOwed reckons the ring they
// need, not the ring there is), and the channel would stall (D23, N49).
func (r *Receiver) compact(i int) bool {
	q := &r.q
	if r.queued == 0 {
		return r.releaseRing()
	}
	n := capFor(max(q.off+q.span, i+1) - min(q.off, i))
	if n >= len(q.slots) {
		return false
	}
	q.relayout(q.off, n)
	q.debt = 0
	r.recharge()
	return true
}

// minMessageMTU is the smallest message MTU an honest sender cuts with: the
// smallest payload MTU, 32, less the data packet header (D12).
const minMessageMTU = 32 - HeaderLen

// roomForOwed reports whether a reliable packet with header h and n chunk
// bytes at logical index i leaves room for the reliable packets still owed
// before it. An acked reliable packet cannot be given back, so if reliable
// packets were let in until memory is full, a reliable packet missing
// before them could never be stored and the channel would deadlock (D22,
// D23). The owed packets are counted with R (D7): the reliable packets
// between the ignore number and h carry R = L+1 .. need(h), so those not
// queued are still to come. Each is reckoned as long as the longest chunk
// seen (at least the smallest message MTU), in its buffer, with the ring
// covering it. Queued
// unreliable packets do not count: they are evicted when needed. Owed
// packets of an honest sender are then always taken when they arrive.
func (r *Receiver) roomForOwed(i int, h Header, n int) bool {
	if r.inGrant(h) && need(true, r.grantRel) == r.l {
		// The granted message waits for nothing before it, so every
		// packet owed before this one is its own, which its grant holds
		// room for (N20).
		return true
	}
	// Even with nothing reliable queued: a packet far ahead, once acked,
	// needs the ring to span from the ignore number to it for the packets
	// owed before it; taken when that could never fit, it held the
	// channel's memory and every packet before it was refused for good
	// (FuzzSimDelivery, N50).
	owed := Distance(r.l, need(h.Reliable, h.Rel))
	missing := min(owed, i) - r.q.count(bmRel, 0, i)
	if missing <= 0 {
		return true
	}
	rem := missing * bufpool.ClassCap(max(r.maxChunk, n, minMessageMTU))
	// The owed packets lie somewhere after the ignore number: reckon the
	// ring from index 0 to the last reliable packet, as compact would
	// make it once unreliable packets beyond are evicted.
	places := capFor(max(i, r.q.last(bmRel)) + 1)
	c := r.chargeFor(r.bufs-r.unrelBufs+bufpool.ClassCap(n)+rem, places)
	if places > baseRing && len(r.q.base) < baseRing {
		// A ring past baseRing keeps base arrays beside it, and they
		// may grow to baseRing on the way there (as grantFor reckons
		// it): reckoned at their size now, a packet was taken whose
		// owed packets could then never fit.
		c += ringBytes(baseRing) - ringBytes(max(len(r.q.base), minRing))
	}
	return r.fitsWith(c, r.grantFor(r.grantBufs, r.grantCap, places))
}

// remove drops the packet at logical index i (the caller recharges).
func (r *Receiver) remove(i int) {
	s := r.q.take(i)
	r.queued--
	r.bufs -= cap(s.data)
	if !s.reliable() {
		r.unrelN--
		r.unrelBufs -= cap(s.data)
	}
	if root := r.budget.rootOrNil(); root == nil || root.roomToKeep() {
		r.pool.Put(s.data)
	}
	if m := &r.cmg; m.valid && i <= m.head+m.n {
		m.valid = false
	}
	if m := &r.saved; m.valid && i >= m.head && i <= m.head+m.n {
		m.valid = false
	}
	if r.queued == 0 {
		r.q.shrink()
	}
}

// removeIn drops the packet at logical index i, just past the current
// group, which stays as it was.
func (r *Receiver) removeIn(i int) {
	m := r.cmg
	r.remove(i)
	r.cmg = m
	r.recharge()
}

// release drops every queued packet.
func (r *Receiver) release() {
	for j := r.q.first(0); j >= 0; j = r.q.first(j + 1) {
		r.remove(j)
	}
	r.cmg.valid, r.saved.valid = false, false
	r.recharge()
	r.setGrant(0, 0)
}

// Settled reports whether Poll would give nothing and change nothing, and
// Dropped and NextDeadline report nothing: no queued packet, no message
// ready, no memory granted, no deadline, no error and no drop not yet
// taken by NewDrops. A receiver that just delivered a message whole from
// its packet (HandleTake) usually is, and its caller need not poll it.
func (r *Receiver) Settled() bool {
	return r.queued == 0 && r.ready.Len() == 0 && r.deadline == 0 && r.err == nil &&
		r.grant == 0 && r.grantBufs == 0 && r.grantCap == 0 && r.drops.total() == r.reported.total()
}

// Idle reports whether the receiver holds nothing and waits for nothing: no
// queued packets, no delivered message left for Poll, no memory granted,
// no deadline and no error. Its whole state is then Position; Bytes is
// then what the Receiver and the arrays it keeps for reuse cost.
func (r *Receiver) Idle() bool {
	return r.queued == 0 && !r.holding && r.ready.Len() == 0 &&
		r.grant == 0 && r.deadline == 0 && r.err == nil
}

// Position returns the ignore number (D8) and L, the R of the last
// consumed reliable packet (D7): what a channel must remember of its
// receiving half between messages.
func (r *Receiver) Position() (g, l Seq) { return r.g, r.l }

// LAt returns the sequence number of the packet whose R is L, when the
// receiver knows it (ok), for ReuseAt.
func (r *Receiver) LAt() (s Seq, ok bool) { return r.lAt, r.lAtKnown }

// ReuseAt is Reuse for a receiver that continues a channel whose packet
// with R = l had sequence number lAt (known, from LAt).
func (r *Receiver) ReuseAt(g, l, lAt Seq, known bool) bool {
	if !r.Reuse(g, l) {
		return false
	}
	r.lAt, r.lAtKnown = lAt, known
	r.fresh = false // a channel that was used
	return true
}

// Reuse makes an idle receiver continue at ignore number g and L l, with
// its drop counters at zero: the receiver of a channel that gave up its
// state, or of another channel of the same connection (same configuration
// and Budget), without allocating. A receiver that is not idle is left
// as it is, and Reuse reports false.
func (r *Receiver) Reuse(g, l Seq) bool {
	if !r.Idle() {
		return false
	}
	r.g, r.l = g, l
	// A channel that never consumed anything starts where a new
	// receiver does; of any other, ReuseAt says where L's packet was.
	r.lAt, r.lAtKnown = g, g == -1 && l == 0
	r.fresh = g == -1 && l == 0
	r.evidenceN = 0
	r.drops, r.reported = Drops{}, Drops{}
	r.cmg, r.saved = cmgState{}, cmgState{}
	r.maxChunk = 0
	return true
}

// Reset drops everything the receiver holds, queued packets and messages
// not yet taken by Poll, and the arrays it keeps, and gives their memory
// back to the Budget: Bytes is then 0. It is for a receiver that is given
// up, with its channel or connection or alone; the receiver takes nothing
// more afterwards (Handle returns Rejected).
func (r *Receiver) Reset() {
	r.release()
	r.q.reset()
	r.ready.Reset(0)
	r.readyBytes = 0
	if r.err == nil {
		r.err = errReset
	}
	r.recharge()
	r.deadline = 0
}

// errReset is Err after Reset: not a protocol violation.
var errReset = errors.New("channel: receiver reset")

// Poll returns the next delivered message, if any, after applying the
// coalescing rules at now (so an expired unreliable message at the head no
// longer holds back what follows it).
func (r *Receiver) Poll(now clock.Time) (Message, bool) {
	r.process(now)
	if r.ready.Len() == 0 {
		r.updateGrant()
		return Message{}, false
	}
	m := *r.ready.At(0)
	r.ready.Pop()
	r.readyBytes -= len(m.Data)
	if r.ready.Len() == 0 {
		// An idle receiver keeps a small queue of delivered messages,
		// a failed one none.
		keep := keptReady
		if r.err != nil {
			keep = 0
		}
		r.ready.Reset(keep)
	}
	r.recharge()
	r.updateGrant()
	return m, true
}

// process applies the coalescing rules to the head of the queue while they
// make progress (D11).
func (r *Receiver) process(now clock.Time) {
	r.deadline = 0
	for r.err == nil && r.queued > 0 && r.ready.Len() < maxReady {
		g := r.group()
		act := coalesce.Decide(g, now, r.cfg.MCI)
		if act == coalesce.Deliver {
			if data, ok := r.assemble(); ok {
				r.deliver(Message{Reliable: r.cmg.reliable, Data: data})
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
			if g.Blocked {
				// Unreliable packets that wait for reliable packets
				// that cannot lie before them: none came from the
				// sender (see handle). The ignore number stays, so
				// that the packets really sent at their places are
				// still taken. Since the queue agrees with the
				// ignore number at L (N155) no packets lead here; the
				// rule stays, so that nothing could stall if any did.
				r.drops.Malformed++
				r.dropGroup()
				continue
			}
			if g.Start {
				r.drops.Malformed++
			} else {
				r.drops.Orphaned++
			}
			r.consumeGroup(false)
		case coalesce.Fail:
			switch {
			case g.Blocked:
				r.fail(ErrReliableSeq) // unreached since N155, as above
			case !g.Start:
				r.fail(ErrNoStart)
			default:
				r.fail(ErrMalformedReliable)
			}
			return
		}
	}
}

// fail records that the peer broke the protocol and drops every queued
// packet (D11, D26).
func (r *Receiver) fail(err error) {
	r.err = err
	r.release()
	r.q.reset() // it takes nothing more
	if r.ready.Len() == 0 {
		r.ready.Reset(0)
	}
	r.recharge()
	r.deadline = 0
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

// dropGroup removes the current message group from the queue without
// moving the ignore number.
func (r *Receiver) dropGroup() {
	m := r.cmg
	for i := m.head; i < m.head+m.n; i++ {
		r.remove(i)
	}
	r.cmg.valid = false
	r.recharge()
}

// group returns the facts about the current message group (D10) that
// coalesce.Decide needs, extending the cached group with packets that
// arrived since the last look.
func (r *Receiver) group() coalesce.Group {
	m := &r.cmg
	if !m.valid {
		h := r.q.first(0)
		if r.saved.valid && r.saved.head == h {
			*m = r.saved // nothing changed it (N158)
			r.saved.valid = false
		} else {
			s := r.q.at(h)
			*m = cmgState{valid: true, head: h, reliable: s.reliable(), start: s.start(), rel: s.rel}
		}
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
		// A message the receive memory can never hold: its bytes and a
		// place for each of its packets, at least one more, are less
		// than it would cost.
		m.hdrOK && !g.Complete && need+slotSize*(m.n+1) > r.cfg.MaxBytes
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
			r.saved.valid = false
			continue
		}
		if !r.q.has(i) {
			return // a hole: wait
		}
		s := r.q.at(i)
		if m.reliable && m.start && !s.reliable() {
			// An unreliable packet inside a reliable message whose
			// start is here and which is not complete yet (its
			// header says so): no sender puts one there. One
			// forged with the R of the packet before it agrees with
			// its neighbours (N155), and ending the group here would
			// fail the channel as a malformed reliable message: it is
			// dropped, and the place waits for the real packet
			// (N158).
			r.removeIn(i)
			r.drops.Malformed++
			return
		}
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
		if m.start && !m.hdrOK {
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
