package channel

import (
	"encoding/binary"
	"math"
	"math/bits"
	"slices"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/coalesce"
	"github.com/fastnet-engine/fastnet/internal/bufpool"
	"github.com/fastnet-engine/fastnet/internal/fifo"
)

// A Sender is the sending half of one message channel (D5, D7, D12, D14).
// Messages are queued whole and cut into chunks lazily, at the message MTU
// given when each packet is sent, so an MTU change applies to the packets
// sent after it. Reliable packets stay in flight until acked and are resent,
// byte for byte, on a Fibonacci schedule.
//
// Create one with NewSender. A Sender is not safe for concurrent use.
type Sender struct {
	id  int16
	seq Seq // the next packet's sequence number (D5)
	rel Seq // R, the reliable sequence number (D7)

	pending fifo.Queue[*message] // messages with chunks not yet sent
	queued  int                  // encoded bytes not yet sent for the first time

	recs     []record // in-flight reliable packets; dead ones are free
	freeRecs []int32
	sendNo   int64                // packets sent for the first time so far
	sentSum  int64                // chunk bytes sent for the first time so far
	bySeq    fifo.Queue[seqEntry] // in-flight records in the order they were sent
	deadSeq  int                  // dead entries in bySeq, exactly: 0 means every entry is live
	// headLive says bySeq's first entry is live: oldest found it so, and
	// no record was freed since.
	headLive bool
	// buckets holds the resend buckets of packets resent at least once;
	// bucket 0 has no queue of its own (buckets[0] stays empty): its
	// packets, never resent, are bySeq's live entries whose record has
	// no resends, in the same order, from zeroNo on.
	buckets [numBuckets]fifo.Queue[bucketEntry]
	live    [numBuckets]int // live entries per bucket; live[0] unused, bucket 0 being bySeq's
	// zeroNo bounds bucket 0 from below: every live record with a no
	// below it has been resent.
	zeroNo   int64
	nonEmpty uint64 // bit b set while bucket b may have packets
	used     uint64 // bit b set if buckets[b] had entries since idle
	// grown says the sender, idle, keeps arrays of bookkeeping of more
	// than idleKeepSlots places (idle, Shrink).
	grown bool

	inFlight      int
	inFlightBytes int
	resends       uint64
	last          clock.Time // the latest time seen, so schedules never go back

	bufs bufpool.Pool
	msgs []*message // free message structs

	ahead int // if positive, replaces MaxAhead (SetMaxAhead)
}

// message is a queued encoded message and the state of its cutting.
type message struct {
	buf      []byte // the encoding, from bufs
	off      int    // bytes already sent for the first time
	refs     int    // in-flight packets whose chunks alias buf
	reliable bool
	deferred bool       // its MD5 checksum is still to be computed (fillSums)
	at       clock.Time // when it was queued (QueueAt), 0 if not known
}

// record is one in-flight reliable packet. Its chunk is held as its place
// in its message's buffer, which does not change while the packet is in
// flight (refs), not as a slice of it: one reference fewer to write when
// the packet is sent and to clear when it is acked, 12 instructions a
// reliable message in full bundles.
type record struct {
	msg     *message // owner of the chunk
	off, n  int      // the chunk: msg.buf[off:off+n]
	no      int64    // the packet's index among first sends
	sum     int64    // sentSum before the packet
	first   clock.Time
	last    clock.Time // the latest (re)send
	seq     Seq
	rel     Seq
	resends uint32
	ticket  uint32 // changes whenever the record is rescheduled or freed
	start   bool
	live    bool
}

// seqEntry refers to a record from bySeq; valid while the record is live and
// still has number no.
type seqEntry struct {
	no  int64
	idx int32
	seq Seq // the record's, which never changes: read without the record
}

// bucketEntry refers to a record from a resend bucket other than bucket 0;
// valid while the record is live and its ticket unchanged.
type bucketEntry struct {
	idx    int32
	ticket uint32
}

// The resend schedule (D14): a packet resent n times so far is due
// RTT*fib(n+2) after its previous send. Packets wait in one FIFO bucket per
// n (the last bucket collecting every larger n): within a bucket the due
// times are in send order, so the earliest due resend is at the front of
// one of the buckets and finding it never scans the packets in flight.
// Bucket 0, the packets not yet resent, holds them in the order they were
// first sent, which is bySeq's: it is read from bySeq rather than kept
// in a queue of its own, which saves a push and a pop per reliable
// packet (a shortcut of N116, with no change of behaviour).
const numBuckets = 64

// fib[n] is the Fibonacci number with fib(0) = fib(1) = 1 (D14), from a
// table as the specification asks.
var fib = func() (t [numBuckets + 2]int64) {
	t[0], t[1] = 1, 1
	for i := 2; i < len(t); i++ {
		t[i] = t[i-1] + t[i-2]
	}
	return t
}()

// Retention bounds of a Sender's free lists.
const (
	senderRetain  = 4 << 20   // bytes of free message buffers kept while busy
	idleRetain    = 256 << 10 // and once idle
	maxFreeMsgs   = 32768     // free message structs kept while busy: 64-byte messages in a 1 MiB send queue are about 12,000, in 4 MiB about 48,000
	idleKeepSlots = 4096      // in-flight bookkeeping kept when idle
)

// NewSender returns the sender of message channel id. Its first packet has
// sequence number 0 and R starts at 0 (D5, D7).
func NewSender(id int16) *Sender {
	return &Sender{id: id, bufs: bufpool.Pool{Limit: senderRetain}}
}

// ID returns the channel the sender was created for.
func (s *Sender) ID() int16 { return s.id }

// ResendInterval returns the time from a reliable packet's previous send to
// its next resend after n resends so far: rtt*fib(n+2), capped at
// maxInterval if maxInterval > 0 (D14). An rtt below 1 ns counts as 1 ns.
func ResendInterval(n int, rtt, maxInterval time.Duration) time.Duration {
	rtt = max(rtt, 1)
	f := fib[min(max(n, 0)+2, len(fib)-1)]
	d := time.Duration(math.MaxInt64)
	// The product, unless it overflows: tested with the full product,
	// not a division, which costs tens of cycles at each packet sent.
	if hi, lo := bits.Mul64(uint64(f), uint64(rtt)); hi == 0 && lo <= math.MaxInt64 {
		d = time.Duration(lo)
	}
	if maxInterval > 0 && d > maxInterval {
		d = maxInterval
	}
	return d
}

// Queue copies msg, encodes it as one message (coalesce.AppendMessage) and
// queues it behind the messages already queued; its MD5 checksum may be
// computed only when its first packet leaves, with those of the messages
// behind it (fillSums). It returns the encoded
// length, which is added to QueuedBytes. The caller has checked the
// message against its size limits.
func (s *Sender) Queue(msg []byte, reliable bool) int {
	return s.QueueAt(msg, reliable, 0)
}

// QueueAt is Queue for a message queued at now: DropExpired can drop it,
// if it is unreliable, while it waits.
func (s *Sender) QueueAt(msg []byte, reliable bool, now clock.Time) int {
	n := coalesce.EncodedLen(len(msg))
	var m *message
	if k := len(s.msgs); k > 0 {
		// The place is left as it is, which saves a write barrier while
		// the garbage collector marks (N117): m lives on while queued
		// or in flight, and the list drops a struct only when full
		// (release), by which time pushes have written every place
		// below the full length again, or by trimMsgs and Reset, which
		// let go of its array.
		m = s.msgs[k-1]
		s.msgs = s.msgs[:k-1]
		// The buffer m kept (release) leaves the pool's count, and
		// stays with m for a message of n's size class.
		if b := m.buf; b != nil {
			s.bufs.Retained -= cap(b)
			if cap(b) != bufpool.ClassCap(n) {
				s.putBuf(m)
			}
		}
	} else {
		m = new(message)
	}
	if m.buf == nil {
		m.buf = s.bufs.Get(n)
	}
	// m.buf holds n bytes (Get, or kept): the encoding is written into it
	// and m.buf re-sliced, not set anew, for the same reason; a message
	// whose checksum is deferred is written in place, each byte once
	// (N128).
	m.buf = m.buf[:n] // past its capacity, this would panic
	if len(msg) <= maxDeferred && coalesce.Batched() {
		m.deferred = coalesce.PutMessageDeferred(m.buf, msg, reliable)
	} else {
		coalesce.AppendMessage(m.buf[:0], msg, reliable)
		m.deferred = false
	}
	m.off, m.refs, m.reliable, m.at = 0, 0, reliable, now
	s.pending.Push(m)
	s.queued += n
	return n
}

// DropExpired drops the unreliable messages at the front of the queue
// that were queued (QueueAt) before before and of which nothing was sent:
// messages that waited too long to be of use (D30). It stops at the first
// message that is reliable, started, or younger, and returns the number of
// messages dropped and their encoded bytes, which are taken off
// QueuedBytes.
func (s *Sender) DropExpired(before clock.Time) (msgs, bytes int) {
	for s.Expires(before) {
		m := *s.pending.At(0)
		s.pending.Pop()
		msgs++
		bytes += len(m.buf)
		s.queued -= len(m.buf)
		s.release(m)
	}
	return msgs, bytes
}

// Expires reports whether DropExpired(before) would drop a message.
func (s *Sender) Expires(before clock.Time) bool {
	if s.pending.Len() == 0 {
		return false
	}
	m := *s.pending.At(0)
	return !m.reliable && m.off == 0 && m.at != 0 && m.at < before
}

// QueuedBytes returns the encoded bytes queued and not yet sent for the
// first time.
func (s *Sender) QueuedBytes() int { return s.queued }

// HasNew reports whether a packet is waiting to be sent for the first time.
func (s *Sender) HasNew() bool { return s.pending.Len() > 0 }

// MaxAhead bounds how far a sender's sequence numbers run past its oldest
// unacked reliable packet: a packet whose sequence number is MaxAhead (M/4)
// or more places after it waits until that packet is acked (N41). Past
// M/2 sequence numbers would alias (D6): an ack or a receiver could take
// a new packet for the old one. M/4 keeps every packet in flight within
// the range a receiver's window may move across on evidence (D27).
const MaxAhead = SeqSpace / 4

// SetMaxAhead lowers the bound of MaxAhead for this sender to n places
// (n <= 0 or above MaxAhead restores MaxAhead). A connection sets it to
// its receive window: the peer drops a packet more than W places past its
// ignore number unacked (D9), and that number cannot pass the oldest
// unacked reliable packet, so with a peer whose W is this side's, sending
// further ahead only wastes the path (N41).
func (s *Sender) SetMaxAhead(n int) {
	if n <= 0 || n > MaxAhead {
		n = 0
	}
	s.ahead = n
}

// MayAppend reports whether AppendNew would send a packet: one is queued,
// and its sequence number is less than MaxAhead places after the oldest
// unacked reliable packet (N41).
func (s *Sender) MayAppend() bool { return s.pending.Len() > 0 && !s.seqBlocked() }

// seqBlocked reports whether the next sequence number is MaxAhead or more
// places after the oldest unacked reliable packet.
func (s *Sender) seqBlocked() bool {
	return s.oldest() >= 0 && Distance(s.bySeq.At(0).seq, s.seq) >= s.maxAhead()
}

func (s *Sender) maxAhead() int {
	if s.ahead > 0 {
		return s.ahead
	}
	return MaxAhead
}

// NextReliable reports whether the next packet AppendNew would send is
// reliable (so the caller can hold it back while too many reliable bytes
// are in flight, D22).
func (s *Sender) NextReliable() bool {
	return s.pending.Len() > 0 && (*s.pending.At(0)).reliable
}

// NextLen returns the length of the chunk AppendNew would cut next at
// messageMTU (a messageMTU below 1 counting as 1), 0 if nothing is
// queued.
func (s *Sender) NextLen(messageMTU int) int {
	if s.pending.Len() == 0 {
		return 0
	}
	m := *s.pending.At(0)
	return min(max(messageMTU, 1), len(m.buf)-m.off)
}

// Sent describes a packet appended by AppendNew.
type Sent struct {
	// Header is the packet's header: Reliable reports that the packet is
	// reliable and now in flight, Start that it starts its message, Seq
	// and Rel are its sequence number and reliable sequence number.
	// (Two fields in all, so that the compiler keeps a Sent in
	// registers: one of five, copied through memory as a whole after its
	// fields were stored one by one, stalled every packet on the store
	// forwarding, N101.)
	Header
	// Bytes is the chunk's length: the bytes taken off QueuedBytes and, for
	// a reliable packet, added to the in-flight bytes.
	Bytes int
}

// AppendNew cuts the next chunk of the oldest queued message, at most
// messageMTU bytes (D12; a messageMTU below 1 counts as 1), and appends the
// packet, header and chunk, to b. The packet gets the next sequence number;
// the first chunk of a message carries the start flag and every chunk the
// message's reliability. A reliable packet advances R first and carries the
// new R; an unreliable one carries the current R (D7). A reliable packet
// stays in flight, sent at now, until HandleAck. If nothing is queued, b is
// returned unchanged with a zero Sent, and so it is while the next
// sequence number is MaxAhead or more places after the oldest unacked
// reliable packet (see MayAppend).
func (s *Sender) AppendNew(b []byte, now clock.Time, messageMTU int) ([]byte, Sent) {
	if !s.MayAppend() {
		return b, Sent{}
	}
	now = s.tick(now)
	m := *s.pending.At(0)
	n := min(max(messageMTU, 1), len(m.buf)-m.off)
	b, h := s.cut(b, m, n, now)
	return b, Sent{Header: h, Bytes: n}
}

// cut appends to b the packet of the next n bytes of m, the oldest
// queued message, sent at now (AppendNew), and returns its header.
func (s *Sender) cut(b []byte, m *message, n int, now clock.Time) ([]byte, Header) {
	if m.deferred {
		s.fillSums()
	}
	chunk := m.buf[m.off : m.off+n : m.off+n]
	h := Header{Reliable: m.reliable, Start: m.off == 0, Seq: s.seq}
	if m.reliable {
		s.rel = s.rel.Next()
	}
	h.Rel = s.rel
	b = append(h.Append(b), chunk...)
	if m.reliable {
		s.track(m, n, h, now)
	}
	s.seq = s.seq.Next()
	s.sendNo++
	s.sentSum += int64(n)
	m.off += n
	s.queued -= n
	if m.off == len(m.buf) {
		s.pending.Pop()
		if m.refs == 0 {
			s.release(m)
		}
		if s.pending.Len() == 0 && s.inFlight == 0 {
			// Idle after unreliable messages, which no ack follows.
			s.trimMsgs(idleKeepSlots)
		}
	}
	return b, h
}

// RunLimit bounds the packets AppendRun appends after its first, which
// its caller has found may go.
type RunLimit struct {
	// End bounds the length of the slice appended to: a frame that
	// would take it past End is not appended.
	End int
	// MTU is the message MTU: the most chunk bytes of a packet (D12; below
	// 1 counts as 1).
	MTU int
	// Max is the most packets appended.
	Max int
	// Expire, if set, ends the run before an unreliable message not yet
	// begun that was queued before Before (Expires).
	Expire bool
	Before clock.Time
	// Reliable bounds the reliable packets after the first: one is
	// appended only while those appended before it, each counted as its
	// chunk's bytes plus Overhead, add up to Reliable at most.
	Reliable, Overhead int
	// Frames ends the run once the frames appended, less their length
	// fields, add up to Frames bytes or more.
	Frames int
}

// Run is what AppendRun appended.
type Run struct {
	Packets, Bytes int // packets, and their chunks' bytes
	// Reliable and ReliableBytes are those of the packets that are
	// reliable, now in flight.
	Reliable, ReliableBytes int
}

// AppendRun appends to b, as AppendNew would one after the other, the
// packets of the queued messages while the sender may (MayAppend) and
// lim allows, each in a frame: the length of the rest of the frame in two
// bytes, big-endian, then tag in two bytes, then the packet, header and
// chunk. It is how a run of one channel's packets is written into a
// bundle (D24) in one call (N111). The first packet is appended if it
// fits lim.End and the sender may append: lim's other bounds are for
// those after it.
func (s *Sender) AppendRun(b []byte, now clock.Time, tag uint16, lim RunLimit) ([]byte, Run) {
	var r Run
	if s.pending.Len() == 0 {
		return b, r
	}
	now = s.tick(now)
	mtu := max(lim.MTU, 1)
	ahead := s.maxAhead()
	// The packets the run may send before MaxAhead stops it: none past
	// MaxAhead after the oldest packet in flight, if any (seqBlocked),
	// and acks come between runs only. Each packet sent is one place
	// further from it, and the run stops short of MaxAhead (at most M/4,
	// N41), so the distance never wraps.
	room := math.MaxInt
	if s.oldest() >= 0 {
		room = ahead - Distance(s.bySeq.At(0).seq, s.seq)
	}
	// An unreliable message not yet begun that was queued before before
	// ends the run: none does unless lim.Expire.
	before := clock.Time(math.MinInt64)
	if lim.Expire {
		before = lim.Before
	}
	frames, cost := 0, 0
	for room > 0 && s.pending.Len() > 0 {
		m := *s.pending.At(0)
		n := min(mtu, len(m.buf)-m.off)
		size := 2 + HeaderLen + n
		if len(b)+2+size > lim.End {
			break
		}
		if r.Packets > 0 {
			if r.Packets >= lim.Max || frames >= lim.Frames {
				break
			}
			if m.reliable {
				if cost > lim.Reliable {
					break
				}
			} else if m.off == 0 && m.at != 0 && m.at < before {
				break
			}
		}
		room--
		frames += size
		r.Packets++
		r.Bytes += n
		// Shortcuts, with no change of behaviour, for what cut does
		// with a message sent whole: the frame written into b's spare
		// capacity (putFrame), an unreliable message released at once
		// (N111). The unreliable and the reliable case are written out
		// apart: one body for both cost 16 and 26 instructions a
		// message more in full bundles.
		if at := len(b); n == len(m.buf) && cap(b)-at >= 2+size {
			if m.deferred {
				s.fillSums()
			}
			b = b[:at+2+size]
			if !m.reliable {
				seq := s.seq
				putFrame(b[at:], size, tag, FlagStart, seq, s.rel)
				copy(b[at+4+HeaderLen:], m.buf)
				s.seq = seq.Next()
				s.sendNo++
				s.sentSum += int64(n)
				m.off = n
				s.queued -= n
				s.pending.Pop()
				// No packet in flight refers to m.
				if !s.keepFree(m) {
					s.releaseBare(m)
				}
				if s.pending.Len() == 0 && s.inFlight == 0 {
					s.trimMsgs(idleKeepSlots) // as cut does
				}
				continue
			}
			s.rel = s.rel.Next()
			h := Header{Reliable: true, Start: true, Seq: s.seq, Rel: s.rel}
			putFrame(b[at:], size, tag, FlagReliable|FlagStart, h.Seq, h.Rel)
			copy(b[at+4+HeaderLen:], m.buf)
			// What track does, written out: the call, its nine
			// arguments and the loop's values saved around it, cost
			// 37 instructions a reliable message in full bundles.
			// TestAppendRunIsAppendNewInARow compares the records
			// and entries with track's.
			idx := s.takeRecord()
			rec := &s.recs[idx]
			rec.msg, rec.off, rec.n, rec.no, rec.sum, rec.first, rec.last = m, 0, n, s.sendNo, s.sentSum, now, now
			rec.seq, rec.rel, rec.resends, rec.start, rec.live = h.Seq, h.Rel, 0, true, true
			m.refs++
			s.bySeq.Push(seqEntry{no: s.sendNo, idx: idx, seq: h.Seq})
			s.nonEmpty |= 1
			s.inFlight++
			s.inFlightBytes += n
			s.seq = h.Seq.Next()
			s.sendNo++
			s.sentSum += int64(n)
			m.off = n
			s.queued -= n
			s.pending.Pop()
			if room > ahead {
				room = ahead - 1 // the first in flight: this one
			}
			r.Reliable++
			r.ReliableBytes += n
			cost += n + lim.Overhead
			continue
		}
		b = append(b, byte(size>>8), byte(size), byte(tag>>8), byte(tag))
		var h Header
		b, h = s.cut(b, m, n, now)
		if h.Reliable {
			if room > ahead {
				room = ahead - 1 // the first in flight: this one
			}
			r.Reliable++
			r.ReliableBytes += n
			cost += n + lim.Overhead
		}
	}
	return b, r
}

// putFrame writes at the start of f, which holds a frame of size bytes
// after its length field and at least one byte more, the frame's length
// field, tag and packet header (AppendRun): the first eight bytes in one
// store, R in four, the last of which the chunk's first byte then
// overwrites.
func putFrame(f []byte, size int, tag uint16, flags byte, seq, rel Seq) {
	_ = f[4+HeaderLen]
	binary.BigEndian.PutUint64(f, uint64(size)<<48|uint64(tag)<<32|uint64(flags)<<24|uint64(seq)&0xffffff)
	binary.BigEndian.PutUint32(f[8:], uint32(rel)<<8)
}

// Deferred checksums. Where digests computed together cost less than one
// at a time (coalesce.Batched), a queued message of up to maxDeferred
// bytes gets its MD5 checksum (D3) just before its first packet leaves,
// together with those of up to sumBatch-1 messages queued behind it,
// looked for among the next sumScan.
const (
	maxDeferred = 4096
	sumBatch    = 2 * coalesce.BatchLanes
	sumScan     = 2 * sumBatch
)

// fillSums computes the deferred checksums of the messages at the front
// of the queue, the first among them.
func (s *Sender) fillSums() {
	if s.pending.Len() == 1 || !(*s.pending.At(1)).deferred {
		// Alone: nothing to compute it with.
		m := *s.pending.At(0)
		coalesce.FillChecksum(m.buf)
		m.deferred = false
		return
	}
	// Each message taken is marked as no longer deferred at once, before
	// FillChecksums fills it, which nothing between the two can see: a
	// second pass over the messages cost 10 instructions a message.
	var encs [sumBatch][]byte
	k := 0
	for i := 0; i < s.pending.Len() && i < sumScan && k < sumBatch; i++ {
		if m := *s.pending.At(i); m.deferred {
			encs[k] = m.buf
			m.deferred = false
			k++
		}
	}
	coalesce.FillChecksums(encs[:k])
}

// tick keeps time from going back: schedules are kept in send order.
func (s *Sender) tick(now clock.Time) clock.Time {
	if now < s.last {
		return s.last
	}
	s.last = now
	return now
}

// track puts a reliable packet in flight: the chunk of the n bytes of m
// from m.off. AppendRun writes it out for the messages it sends whole.
func (s *Sender) track(m *message, n int, h Header, now clock.Time) {
	idx := s.takeRecord()
	// Every field set in place: a composite literal was built on the
	// stack field by field and copied over whole, which stalls on the
	// store forwarding (N101).
	// The ticket is left as it is: drop changed it when the place was
	// freed, and no entry has it since.
	r := &s.recs[idx]
	r.msg, r.off, r.n, r.no, r.sum, r.first, r.last = m, m.off, n, s.sendNo, s.sentSum, now, now
	r.seq, r.rel, r.resends, r.start, r.live = h.Seq, h.Rel, 0, h.Start, true
	m.refs++
	// In bucket 0 through its entry in bySeq (numBuckets).
	s.bySeq.Push(seqEntry{no: s.sendNo, idx: idx, seq: h.Seq})
	s.nonEmpty |= 1
	s.inFlight++
	s.inFlightBytes += n
}

// takeRecord returns the index of a free place in recs for a record
// (track, and AppendRun for the messages it sends whole): the one freed
// last, or a new one.
func (s *Sender) takeRecord() int32 {
	if k := len(s.freeRecs); k > 0 {
		idx := s.freeRecs[k-1]
		s.freeRecs = s.freeRecs[:k-1]
		return idx
	}
	return s.addRecord()
}

// addRecord adds a place at the end of recs, for takeRecord when no place
// is free, and returns its index.
func (s *Sender) addRecord() int32 {
	if len(s.recs) == cap(s.recs) {
		// Doubled: append grows a large array by a quarter, and the
		// arrays a burst grows through would add up to five times the
		// last.
		recs := make([]record, len(s.recs), max(2*len(s.recs), 16))
		copy(recs, s.recs)
		s.recs = recs
	}
	s.recs = append(s.recs, record{})
	return int32(len(s.recs) - 1)
}

// schedule puts record idx, resent at least once, in the bucket of its
// resend count.
func (s *Sender) schedule(idx int32) {
	r := &s.recs[idx]
	b := min(int(r.resends), numBuckets-1)
	s.buckets[b].Push(bucketEntry{idx: idx, ticket: r.ticket})
	s.live[b]++
	s.nonEmpty |= 1 << b
	s.used |= 1 << b
}

// release returns a fully sent, unreferenced message to the free lists.
// A free message struct keeps its buffer, if the pool has room for it, and
// the pool counts it as retained: the next message of the same size class
// takes the two together, not each from its own list (N111).
func (s *Sender) release(m *message) {
	if !s.keepFree(m) {
		s.releaseBare(m)
	}
}

// releaseBare is release past keepFree, for the hot paths that inline
// keepFree: m goes on the free list without its buffer, or, the list
// full, its buffer back to the pool.
func (s *Sender) releaseBare(m *message) {
	if len(s.msgs) < maxFreeMsgs {
		m.buf = nil // the pool has no room for it
		s.msgs = append(s.msgs, m)
		return
	}
	s.bufs.Put(m.buf)
	m.buf = nil
}

// keepFree is release's common case, small enough to be inlined where a
// message is released on the hot paths (AppendRun, drop): it puts m on
// the free list with its buffer, counted as retained, if the list and the
// pool have room for both, and reports whether it did.
func (s *Sender) keepFree(m *message) bool {
	if c := cap(m.buf); len(s.msgs) < maxFreeMsgs && s.bufs.Retained+c <= s.bufs.Limit {
		s.bufs.Retained += c
		s.msgs = append(s.msgs, m)
		return true
	}
	return false
}

// putBuf hands the buffer a free message struct kept (release) to the
// pool, for a message of another size class (QueueAt), and sets m.buf to
// nil.
func (s *Sender) putBuf(m *message) {
	s.bufs.Put(m.buf)
	m.buf = nil
}

// trimBufs lets go of free buffers, the pool's and those free message
// structs keep, until at most keep bytes are retained.
func (s *Sender) trimBufs(keep int) {
	s.bufs.Trim(keep)
	for i := len(s.msgs) - 1; i >= 0 && s.bufs.Retained > keep; i-- {
		if m := s.msgs[i]; m.buf != nil {
			s.bufs.Retained -= cap(m.buf)
			m.buf = nil
		}
	}
}

// front returns the index of the record at the front of bucket b, dropping
// stale entries, or -1 if the bucket is empty.
func (s *Sender) front(b int) int32 {
	if b == 0 {
		return s.front0()
	}
	q := &s.buckets[b]
	for q.Len() > 0 {
		e := *q.At(0)
		if r := &s.recs[e.idx]; r.live && r.ticket == e.ticket {
			return e.idx
		}
		q.Pop()
	}
	s.nonEmpty &^= 1 << b
	return -1
}

// front0 is front for bucket 0: the first live entry of bySeq from zeroNo
// on whose record was never resent. It moves zeroNo up to that entry, or
// past every entry if there is none.
func (s *Sender) front0() int32 {
	n := s.bySeq.Len()
	i := 0
	if n > 0 && s.bySeq.At(0).no < s.zeroNo {
		i = s.seqIndex(s.zeroNo)
	}
	for ; i < n; i++ {
		e := s.bySeq.At(i)
		if r := &s.recs[e.idx]; r.live && r.no == e.no && r.resends == 0 {
			s.zeroNo = e.no
			return e.idx
		}
	}
	s.zeroNo = s.sendNo
	s.nonEmpty &^= 1
	return -1
}

// seqIndex returns the place in bySeq of the first entry whose no is no or
// more, bySeq.Len() if there is none.
func (s *Sender) seqIndex(no int64) int {
	// bySeq is sorted by no, which its entries hold once each: with no
	// dead entry before it, no's entry is no-base.no places on.
	base := s.bySeq.At(0).no
	if lo := int(no - base); lo < s.bySeq.Len() && s.bySeq.At(lo).no == no {
		return lo
	}
	lo, hi := 0, s.bySeq.Len()
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if s.bySeq.At(mid).no < no {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// earliest returns the bucket whose front packet is due first and its due
// time, or -1 if nothing is in flight.
func (s *Sender) earliest(rtt, maxInterval time.Duration) (int, clock.Time) {
	best, due := -1, clock.Time(0)
	for m := s.nonEmpty; m != 0; m &= m - 1 {
		b := bits.TrailingZeros64(m)
		idx := s.front(b)
		if idx < 0 {
			continue
		}
		d := ResendInterval(b, rtt, maxInterval)
		t := s.recs[idx].last
		if t > clock.Time(math.MaxInt64-d) {
			t = clock.Time(math.MaxInt64)
		} else {
			t = t.Add(d)
		}
		if best < 0 || t < due {
			best, due = b, t
		}
	}
	return best, due
}

// NextResend returns when the earliest reliable packet in flight is due to
// be resent with the given RTT and cap (D14), or 0 if nothing is in flight.
func (s *Sender) NextResend(rtt, maxInterval time.Duration) clock.Time {
	_, due := s.earliest(rtt, maxInterval)
	return due
}

// Resent describes a packet appended by AppendResend.
type Resent struct {
	// Prev is the packet's send before this one.
	Prev clock.Time
	// N is the number of times it was resent, this time included.
	N uint32
	// Bytes is the chunk's length.
	Bytes int
}

// AppendResend appends to b the in-flight packet due earliest, if it is due
// at now, exactly as it was first sent (same header, same chunk), and
// schedules its next resend (D14). It reports whether it appended a packet,
// and which.
func (s *Sender) AppendResend(b []byte, now clock.Time, rtt, maxInterval time.Duration) ([]byte, Resent, bool) {
	bk, due := s.earliest(rtt, maxInterval)
	if bk < 0 || due > now {
		return b, Resent{}, false
	}
	now = s.tick(now)
	idx := s.front(bk)
	r := &s.recs[idx]
	if bk == 0 {
		s.zeroNo = r.no + 1 // it leaves bucket 0
	} else {
		s.buckets[bk].Pop()
		s.live[bk]--
	}
	b = Header{Reliable: true, Start: r.start, Seq: r.seq, Rel: r.rel}.Append(b)
	b = append(b, r.msg.buf[r.off:r.off+r.n]...)
	rs := Resent{Prev: r.last, N: r.resends + 1, Bytes: r.n}
	r.resends++
	r.last = now
	r.ticket++
	s.schedule(idx)
	s.resends++
	return b, rs, true
}

// Acked describes a packet freed by HandleAck.
type Acked struct {
	// Bytes is the packet's chunk length, to take off the caller's
	// in-flight bytes.
	Bytes int
	// First is when the packet was first sent and Last its latest send.
	// An ack of a packet never resent times a round trip (D30).
	First, Last clock.Time
	// AckedCount holds its resends and its R. (Four fields in all, so
	// that the compiler keeps an Acked in registers, as for Sent.)
	AckedCount
}

// AckedCount is the part of Acked that counts: the packet's resends so
// far, and its reliable sequence number R (D7), counting reliable packets
// only, as Oldest does.
type AckedCount struct {
	Resends uint32
	Rel     Seq
}

// Oldest describes the oldest reliable packet in flight, if any: its
// reliable sequence number R (D7), its latest send and its resends so far.
// An ack of a reliable packet sent several places after it tells a sender
// it was probably lost before its resend is due (D30).
func (s *Sender) Oldest() (rel Seq, last clock.Time, resends uint32, ok bool) {
	f := s.oldest()
	if f < 0 {
		return 0, 0, 0, false
	}
	r := &s.recs[f]
	return r.rel, r.last, r.resends, true
}

// HandleAck handles an ack of packet seq (D13). It reports whether the ack
// freed an in-flight packet, and which. Acks of unknown, unreliable or
// already acked packets are ignored.
func (s *Sender) HandleAck(seq Seq) (a Acked, ok bool) {
	if s.inFlight == 0 {
		// Nothing to free, as for the repeats (N29) that follow the
		// entries that freed the last packets in flight.
		return Acked{}, false
	}
	if s.headLive {
		if e := *s.bySeq.At(0); e.seq == seq {
			// The oldest packet in flight, as acks in order find it:
			// its record is live (headLive), and its entry leaves the
			// front at once rather than as a dead one.
			r := &s.recs[e.idx]
			a = Acked{Bytes: r.n, First: r.first, Last: r.last, AckedCount: AckedCount{Resends: r.resends, Rel: r.rel}}
			s.freeFront(r, e.idx)
			switch {
			case s.inFlight == 0:
				s.idle()
			case s.deadSeq == 0:
				// The next ack, in order, finds the next record at
				// the front, live, and takes this path again: with
				// no dead entry in bySeq, the front one is live
				// without reading its record, as oldest would.
			default:
				s.headLive = false
				s.oldest()
			}
			return a, true
		}
	}
	if s.oldest() < 0 {
		return Acked{}, false
	}
	base := s.bySeq.At(0)
	no := base.no + int64(Distance(base.seq, seq))
	if no >= s.sendNo {
		return Acked{}, false
	}
	// bySeq is sorted by no, which its entries hold once each: with no
	// dead entry before it, as when acks come in order, the packet's is
	// no-base.no places on; else a binary search finds it.
	lo := int(no - base.no)
	if lo >= s.bySeq.Len() || s.bySeq.At(lo).no != no {
		hi := s.bySeq.Len()
		lo = 0
		for lo < hi {
			mid := int(uint(lo+hi) >> 1)
			if s.bySeq.At(mid).no < no {
				lo = mid + 1
			} else {
				hi = mid
			}
		}
	}
	if lo == s.bySeq.Len() {
		return Acked{}, false
	}
	e := *s.bySeq.At(lo)
	r := &s.recs[e.idx]
	if e.no != no || !r.live || r.no != no {
		return Acked{}, false
	}
	a = Acked{Bytes: r.n, First: r.first, Last: r.last, AckedCount: AckedCount{Resends: r.resends, Rel: r.rel}}
	s.free(e.idx)
	s.deadSeq++
	s.oldest() // drop dead entries at the front
	if s.deadSeq > s.bySeq.Len()/2+32 {
		s.bySeq.Filter(func(e *seqEntry) bool { r := &s.recs[e.idx]; return r.live && r.no == e.no })
		s.deadSeq, s.headLive = 0, false
	}
	if s.inFlight == 0 {
		s.idle()
	}
	return a, true
}

// AckSum sums what acks freed, for a caller that takes the acks of one
// ack packet together (N124): HandleAcksInOrder adds to it the packets
// it frees, and Add what HandleAck returned.
type AckSum struct {
	// Packets and Bytes count the packets freed and their chunk bytes;
	// Fresh and FreshBytes, those of them never resent.
	Packets, Bytes    int
	Fresh, FreshBytes int
	// Last is the latest send of the newest packet never resent among
	// them, 0 if there is none: an ack times a round trip from it
	// (Karn). First is the latest first send among them all.
	Last, First clock.Time
}

// Add adds the packet a to s.
func (s *AckSum) Add(a Acked) {
	s.Packets++
	s.Bytes += a.Bytes
	if a.Resends == 0 {
		s.Fresh++
		s.FreshBytes += a.Bytes
		s.Last = max(s.Last, a.Last)
	}
	s.First = max(s.First, a.First)
}

// HandleAcksInOrder takes the pairs of it that come next while each
// acknowledges the oldest packet of channel ch in flight, as acks in order
// do, moving it past them: it handles each such ack as HandleAck would and
// adds what it freed to sum, as Add adds HandleAck's results. It returns
// how many it took. After the first entry of a row of in-order entries for
// one channel, the others take one call rather than one each (a shortcut
// of N116, with no change of behaviour).
func (s *Sender) HandleAcksInOrder(it *AckIter, ch int16, sum *AckSum) (n int) {
	// HandleAck's in-order path, for as long as it applies: with headLive
	// set, packets are in flight and the front entry is live. It is
	// written out rather than shared with HandleAck through a call,
	// which cost 30 instructions a reliable message in full bundles;
	// TestHandleAcksInOrder holds the two to the same results. The sums
	// are kept in locals, stored once: packets in order were sent in
	// order, so the last one's First is the newest, and so is the last
	// Last of those never resent.
	b, k := it.b, 0
	bytes, fresh, freshBytes := 0, 0, 0
	var last, first clock.Time
	for s.headLive {
		e := *s.bySeq.At(0)
		if !isAck(b, k, ch, e.seq) {
			break
		}
		k += AckLen
		r := &s.recs[e.idx]
		bytes += r.n
		first = r.first
		s.bySeq.Skip() // no reference to clear
		if r.resends == 0 {
			fresh++
			freshBytes += r.n
			last = r.last
		}
		s.drop(r, e.idx)
		switch {
		case s.inFlight == 0:
			s.idle()
		case s.deadSeq == 0:
		default:
			s.headLive = false
			s.oldest()
		}
	}
	it.b = b[k:]
	n = k / AckLen
	if n > 0 {
		sum.Packets += n
		sum.Bytes += bytes
		sum.Fresh += fresh
		sum.FreshBytes += freshBytes
		sum.Last = max(sum.Last, last)
		sum.First = max(sum.First, first)
	}
	return n
}

// free ends the life of in-flight record idx.
func (s *Sender) free(idx int32) {
	s.headLive = false
	s.drop(&s.recs[idx], idx)
}

// freeFront ends the life of in-flight record idx, r, at the front of
// bySeq, and takes its entry off bySeq: for the acks in order that free
// records there, headLive left as it is (HandleAck).
func (s *Sender) freeFront(r *record, idx int32) {
	s.bySeq.Skip() // no reference to clear
	s.drop(r, idx)
}

// drop is what free and freeFront do to record idx, r: its resend entry,
// the bytes in flight, its message, and the record's place. A packet
// never resent has no entry but its bySeq one (numBuckets).
func (s *Sender) drop(r *record, idx int32) {
	if r.resends > 0 {
		s.dropResent(r, idx)
	}
	s.inFlight--
	s.inFlightBytes -= r.n
	m := r.msg
	m.refs--
	if m.refs == 0 && m.off == len(m.buf) {
		// release's common case inline (keepFree), as in AppendRun:
		// the call cost 15 instructions a reliable message in full
		// bundles.
		if !s.keepFree(m) {
			s.releaseBare(m)
		}
	}
	// Dead (live, ticket), and nothing kept alive by it; track sets every
	// other field when the place is used again (N105).
	r.msg, r.live, r.ticket = nil, false, r.ticket+1
	s.freeRecs = append(s.freeRecs, idx)
}

// dropResent drops the resend entry of record idx, r, resent at least
// once (drop).
func (s *Sender) dropResent(r *record, idx int32) {
	b := min(int(r.resends), numBuckets-1)
	s.live[b]--
	if q := &s.buckets[b]; q.Len() > 0 && *q.At(0) == (bucketEntry{idx, r.ticket}) {
		// The packet resent longest ago of its bucket, as acks in
		// order free them: its entry leaves at once rather than
		// waiting, dead, for front or the filter.
		q.Skip() // no reference to clear
	} else if q.Len() > 2*s.live[b]+32 {
		r.live = false // so that the filter drops it
		q.Filter(func(e *bucketEntry) bool { r := &s.recs[e.idx]; return r.live && r.ticket == e.ticket })
	}
}

// oldest returns the record of the oldest in-flight packet, dropping dead
// entries at the front of bySeq, or -1 if nothing is in flight.
func (s *Sender) oldest() int32 {
	if s.headLive {
		// Asked at every packet sent and every ack: the record itself,
		// far off in recs when thousands are in flight, is not read.
		return s.bySeq.At(0).idx
	}
	for s.bySeq.Len() > 0 {
		e := *s.bySeq.At(0)
		if r := &s.recs[e.idx]; r.live && r.no == e.no {
			s.headLive = true
			return e.idx
		}
		s.bySeq.Pop()
		s.deadSeq = max(s.deadSeq-1, 0)
	}
	return -1
}

// idle runs once nothing is in flight. It empties the in-flight
// bookkeeping (records and queues) but keeps its arrays: a stream whose
// acks now and then catch up with it keeps what its next burst needs
// rather than growing it again from nothing each time (up to 66 bytes of
// garbage a message at 10,000 packets in flight). Arrays of more than
// idleKeepSlots places are kept for a short while only: Grown reports
// them, and the owner calls Shrink once the sender has stayed idle a
// while (the fastnet connection does within GrowthRetention, N95).
func (s *Sender) idle() {
	grown := s.grown || cap(s.recs) > idleKeepSlots || s.bySeq.Cap() > idleKeepSlots
	for m := s.used; m != 0 && !grown; m &= m - 1 {
		grown = s.buckets[bits.TrailingZeros64(m)].Cap() > idleKeepSlots
	}
	s.resetBookkeeping(math.MaxInt, s.used)
	s.grown = grown
	if s.pending.Len() == 0 {
		s.trimBufs(idleRetain)
		s.trimMsgs(idleKeepSlots)
	}
}

// resetBookkeeping empties the in-flight bookkeeping of a sender with
// nothing in flight: the resend buckets in mask (the others are empty) and
// the queue in send order, letting go of any of their arrays, and of the
// records', that hold more than keep places.
func (s *Sender) resetBookkeeping(keep int, mask uint64) {
	for m := mask; m != 0; m &= m - 1 {
		b := bits.TrailingZeros64(m)
		s.buckets[b].Reset(keep)
		s.live[b] = 0
	}
	s.nonEmpty, s.used = 0, 0
	s.bySeq.Reset(keep)
	s.deadSeq, s.headLive = 0, false
	if cap(s.recs) > keep {
		s.recs, s.freeRecs = nil, nil
	}
}

// GrowthRetention is how long the fastnet connection lets an idle sender
// keep bookkeeping beyond the usual (Grown) before it calls Shrink.
const GrowthRetention = time.Second

// Grown reports that the sender keeps arrays of in-flight bookkeeping
// larger than usual, grown in a burst; Shrink lets them go.
func (s *Sender) Grown() bool { return s.grown }

// Shrink lets go of the in-flight bookkeeping the sender keeps beyond the
// usual after a burst (Grown). An idle sender keeps arrays of the usual
// size; one with packets in flight moves their records into arrays sized
// for them, unless they are so many that it uses what it has, and then it
// stays Grown.
func (s *Sender) Shrink() {
	switch {
	case !s.grown:
	case s.inFlight == 0:
		s.grown = false
		s.resetBookkeeping(idleKeepSlots, allBuckets)
	case s.inFlight <= idleKeepSlots/2:
		s.compact()
		s.grown = false
	}
}

// compact moves the live records into an array of twice as many places
// and rebuilds the queues that refer to them, dropping their dead
// entries, in their order.
func (s *Sender) compact() {
	to := make([]int32, len(s.recs)) // a live record's new place, plus one
	recs := make([]record, 0, max(2*s.inFlight, 16))
	for i := range s.recs {
		if s.recs[i].live {
			to[i] = int32(len(recs)) + 1
			recs = append(recs, s.recs[i])
		}
	}
	var bySeq fifo.Queue[seqEntry]
	for i := range s.bySeq.Len() {
		e := *s.bySeq.At(i)
		if r := &s.recs[e.idx]; r.live && r.no == e.no {
			e.idx = to[e.idx] - 1
			bySeq.Push(e)
		}
	}
	s.nonEmpty = 1 // bucket 0 is read from bySeq; front0 clears it if empty
	for b := range s.buckets {
		var q fifo.Queue[bucketEntry]
		old := &s.buckets[b]
		for i := range old.Len() {
			e := *old.At(i)
			if r := &s.recs[e.idx]; r.live && r.ticket == e.ticket {
				e.idx = to[e.idx] - 1
				q.Push(e)
			}
		}
		s.buckets[b], s.live[b] = q, q.Len()
		if q.Len() > 0 {
			s.nonEmpty |= 1 << b
		}
	}
	s.recs, s.freeRecs, s.bySeq = recs, nil, bySeq
	s.deadSeq, s.headLive = 0, false
}

// allBuckets is the mask of every resend bucket.
const allBuckets = 1<<numBuckets - 1

// trimMsgs keeps at most keep free message structs, and an array no
// larger than they need.
func (s *Sender) trimMsgs(keep int) {
	if len(s.msgs) > keep {
		for _, m := range s.msgs[keep:] {
			s.bufs.Retained -= cap(m.buf)
			m.buf = nil // not to be kept, uncounted, by a reference left to m
		}
		clear(s.msgs[keep:])
		s.msgs = slices.Clone(s.msgs[:keep])
	}
}

// InFlight returns the number of reliable packets in flight and the sum of
// their chunk lengths.
func (s *Sender) InFlight() (packets, bytes int) { return s.inFlight, s.inFlightBytes }

// Outstanding returns the packets, and the sum of their chunk lengths, sent
// since the oldest unacked reliable packet, that packet included: what the
// peer's receiver may have to hold at once, since it cannot deliver past a
// missing reliable packet. A caller can bound it to keep a sender from
// running far ahead of a receiver's memory; a Receiver of this package
// refuses (and so gets resent) what it could not hold beside the packets it
// still waits for, so exceeding it costs resends, not a deadlock (D22). It
// is 0, 0 when nothing is in flight.
func (s *Sender) Outstanding() (packets, bytes int) {
	f := s.oldest()
	if f < 0 {
		return 0, 0
	}
	r := &s.recs[f]
	return int(s.sendNo - r.no), int(s.sentSum - r.sum)
}

// OldestUnacked returns when the oldest unacked reliable packet was first
// sent, or 0 if none is in flight; a packet unacked for the connection
// timeout means the peer is not acknowledging (D14).
func (s *Sender) OldestUnacked() clock.Time {
	if f := s.oldest(); f >= 0 {
		return s.recs[f].first
	}
	return 0
}

// Resends returns how many packets AppendResend has sent.
func (s *Sender) Resends() uint64 { return s.resends }

// Idle reports whether nothing is queued and nothing is in flight.
func (s *Sender) Idle() bool { return s.pending.Len() == 0 && s.inFlight == 0 }

// Position returns the sequence number of the next packet and R (D5, D7):
// what a channel must remember of its sending half while it sends nothing.
func (s *Sender) Position() (seq, rel Seq) { return s.seq, s.rel }

// Reuse makes an idle sender the sender of channel id, continuing at
// sequence number seq and R rel: the sender of a channel that gave it up,
// or of another channel of the same connection, without allocating. A
// sender that is not idle is left as it is, and Reuse reports false.
func (s *Sender) Reuse(id int16, seq, rel Seq) bool {
	if !s.Idle() {
		return false
	}
	s.id, s.seq, s.rel = id, seq, rel
	return true
}

// What Trim leaves a sender: free message buffers, and places in each of
// its queues.
const (
	spareRetain = 16 << 10
	spareSlots  = 64
)

// Trim releases what an idle sender keeps for its next messages beyond a
// small reserve (16 KiB of free buffers, 64 places in each queue): for a
// sender kept for reuse after its channel gave it up. A sender that is not
// idle is left as it is.
func (s *Sender) Trim() {
	if !s.Idle() {
		return
	}
	s.grown = false
	s.resetBookkeeping(spareSlots, allBuckets)
	s.pending.Reset(spareSlots)
	s.trimBufs(spareRetain)
	s.trimMsgs(64)
}

// Reset drops everything queued and in flight and releases the memory it
// held; sequence numbers continue where they were. It is for a connection
// that is going away.
func (s *Sender) Reset() {
	for s.pending.Len() > 0 {
		s.pending.Pop()
	}
	s.pending.Reset(0)
	s.queued = 0
	s.recs, s.freeRecs = nil, nil
	s.bySeq.Reset(0)
	s.deadSeq, s.headLive = 0, false
	for b := range s.buckets {
		s.buckets[b].Reset(0)
		s.live[b] = 0
	}
	s.nonEmpty, s.used = 0, 0
	s.inFlight, s.inFlightBytes = 0, 0
	s.grown = false
	s.bufs.Drain()
	s.msgs = nil
}
