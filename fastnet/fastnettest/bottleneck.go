package fastnettest

import (
	"fmt"
	"math"
	"math/bits"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
)

// A Bottleneck is one narrow link that several paths of a [Network] share:
// a single first-in, first-out queue with a tail-drop limit in bytes,
// served at one rate, followed by a propagation delay. Every link whose
// [Link.Bottleneck] names it puts its datagrams in that one queue, so that
// flows between different pairs of addresses compete for the same rate and
// the same queue, as flows through a router's slow interface do. A
// Bottleneck carries one direction: a path that is narrow both ways has one
// for each.
//
// Four clients sending to a server over a 20 Mbit/s bottleneck with a 40 ms
// round trip and a queue of one bandwidth-delay product (100 kB), the acks
// coming back over a bottleneck of their own:
//
//	up := net.NewBottleneck(fastnettest.BottleneckConfig{
//		Rate: 2_500_000, Delay: 20 * time.Millisecond, QueueLimit: 100_000,
//	})
//	down := net.NewBottleneck(fastnettest.BottleneckConfig{
//		Rate: 2_500_000, Delay: 20 * time.Millisecond, QueueLimit: 100_000,
//	})
//	for _, c := range clients {
//		net.SetLink(c, srv, fastnettest.Link{Bottleneck: up})
//		net.SetLink(srv, c, fastnettest.Link{Bottleneck: down})
//	}
//	... run for a while ...
//	up.SetRate(1_250_000) // the link's rate halves mid-transfer
//	... run on ...
//	st := up.Stats() // offered, forwarded and dropped datagrams and bytes, the deepest queue
//
// (SetDefaultLink(fastnettest.Link{Bottleneck: up}) routes every pair
// through one bottleneck, both ways.)
//
// A datagram reaches the bottleneck after the rest of its link's Bandwidth
// queue, if the link has one. It is dropped if the bytes queued (the one
// being sent included) plus its own would pass QueueLimit, unless the
// queue is empty; otherwise it waits its turn, takes size/Rate to be sent,
// and Delay later goes on through the rest of its link (Dup, Corrupt, the
// link's own Delay and Jitter, Reorder). Times are exact to the nanosecond:
// a busy bottleneck sends k bytes in k/Rate seconds, rounded up to the
// nanosecond once, not per datagram.
//
// A Bottleneck belongs to the network that made it, and like the network
// to one goroutine.
type Bottleneck struct {
	n     *Network
	rate  int
	delay time.Duration
	over  int // Overhead
	limit int // QueueLimit, resolved

	q     []held // the queue, from head on; q[head] is being sent
	head  int
	bytes int // queued, the one being sent included

	// The queue is busy since anchor, at the current rate: the datagram
	// being sent leaves at anchor + sent/rate, sent counting its bytes and
	// those sent since anchor. A change of rate, or an empty queue, moves
	// the anchor.
	anchor clock.Time
	sent   int64
	done   clock.Time // when the datagram being sent leaves
	gen    uint32     // of the departure event in the network's queue

	stats BottleneckStats
}

// BottleneckConfig describes a Bottleneck.
type BottleneckConfig struct {
	// Rate is how fast the bottleneck sends, in bytes per second, from 1
	// to MaxBottleneckRate; Bottleneck.SetRate changes it.
	Rate int

	// Delay is the propagation delay of the bottleneck, added to each
	// datagram once it has been sent, before its link's own Delay.
	Delay time.Duration

	// QueueLimit bounds, in bytes, what waits in the queue, the datagram
	// being sent included; a datagram that would pass it is dropped
	// (tail drop), unless the queue is empty. Zero means one second of the
	// initial Rate.
	QueueLimit int

	// Overhead is added to the size of each datagram for the rate and the
	// queue: 28 counts the IPv4 and UDP headers, as a real link carries
	// them. Zero counts the datagram alone. At most 65535.
	Overhead int
}

// MaxBottleneckRate is the highest rate of a Bottleneck, a petabyte a
// second.
const MaxBottleneckRate = 1 << 50

// BottleneckStats counts what a Bottleneck did. Sizes include
// BottleneckConfig.Overhead. At any moment
//
//	Offered == Forwarded + Dropped + Queued
//
// and the same for the bytes.
type BottleneckStats struct {
	Offered        uint64 // datagrams that reached the queue
	OfferedBytes   uint64
	Forwarded      uint64 // sent on, into the bottleneck's Delay
	ForwardedBytes uint64
	Dropped        uint64 // dropped because the queue was full
	DroppedBytes   uint64

	Queued      int // datagrams in the queue now, the one being sent included
	QueuedBytes int
	MaxQueued   int // the most datagrams in the queue at once
	// MaxQueuedBytes is the deepest the queue has been, in bytes.
	MaxQueuedBytes int

	// QueueDelay is the sum, over the datagrams forwarded, of the time
	// each spent from reaching the queue to being sent, its own
	// transmission included; MaxQueueDelay is the longest.
	QueueDelay    time.Duration
	MaxQueueDelay time.Duration
}

// held is a datagram in a bottleneck's queue.
type held struct {
	l     *link
	epoch uint32 // l.epoch when sent
	b     []byte // from the pool
	size  int    // len(b) + Overhead
	at    clock.Time
	hop   *natHop // set if the datagram crosses a NAT
}

// NewBottleneck returns a bottleneck of this network, idle, for links to
// use through Link.Bottleneck. It panics if c is invalid: a Rate outside
// 1..MaxBottleneckRate, a negative Delay or QueueLimit, an Overhead
// outside 0..65535.
func (n *Network) NewBottleneck(c BottleneckConfig) *Bottleneck {
	switch {
	case c.Rate <= 0 || int64(c.Rate) > MaxBottleneckRate:
		panic(fmt.Sprintf("fastnettest: BottleneckConfig.Rate %d: want 1 to %d bytes a second", c.Rate, int64(MaxBottleneckRate)))
	case c.Delay < 0 || c.QueueLimit < 0:
		panic("fastnettest: BottleneckConfig.Delay and QueueLimit must not be negative")
	case c.Overhead < 0 || c.Overhead > 65535:
		panic(fmt.Sprintf("fastnettest: BottleneckConfig.Overhead %d: want 0 to 65535", c.Overhead))
	}
	b := &Bottleneck{n: n, rate: c.Rate, delay: c.Delay, over: c.Overhead, limit: c.QueueLimit}
	if b.limit == 0 {
		b.limit = c.Rate
	}
	n.bottlenecks = append(n.bottlenecks, b)
	return b
}

// Rate returns the rate the bottleneck sends at now, in bytes per second.
func (b *Bottleneck) Rate() int { return b.rate }

// QueueLimit returns the bound of the queue in bytes.
func (b *Bottleneck) QueueLimit() int { return b.limit }

// Stats returns the bottleneck's counters.
func (b *Bottleneck) Stats() BottleneckStats {
	s := b.stats
	s.Queued = len(b.q) - b.head
	s.QueuedBytes = b.bytes
	return s
}

// SetRate changes the rate, in bytes per second, from the network's
// present instant on: what is left of the datagram being sent goes at the
// new rate, and so does everything behind it. It panics if rate is outside
// 1..MaxBottleneckRate.
func (b *Bottleneck) SetRate(rate int) {
	if rate <= 0 || int64(rate) > MaxBottleneckRate {
		panic(fmt.Sprintf("fastnettest: Bottleneck.SetRate(%d): want 1 to %d bytes a second", rate, int64(MaxBottleneckRate)))
	}
	n := b.n
	old := b.rate
	b.rate = rate
	if b.head == len(b.q) {
		return
	}
	left := max(b.done-n.now, 0)
	b.anchor = n.now.Add(scale(time.Duration(left), old, rate))
	b.sent = 0
	b.schedule(b.anchor)
}

// scale returns d*num/den rounded up, saturating.
func scale(d time.Duration, num, den int) time.Duration {
	hi, lo := bits.Mul64(uint64(d), uint64(num))
	if hi >= uint64(den) {
		return math.MaxInt64
	}
	q, r := bits.Div64(hi, lo, uint64(den))
	if r != 0 {
		q++
	}
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(q)
}

// schedule puts the departure of the datagram being sent at done in the
// network's queue, superseding any earlier one.
func (b *Bottleneck) schedule(done clock.Time) {
	n := b.n
	b.done = done
	b.gen++
	n.departs++
	n.seq++
	n.q.push(done, n.seq, packet{kind: kindDepart, bn: b, gen: b.gen})
}

// startHead starts sending the datagram at the head of the queue.
func (b *Bottleneck) startHead() {
	b.sent += int64(b.q[b.head].size)
	// sent stays below 2^32 + 2^17 (see depart) and the rate at most
	// 2^50, so the sum fits.
	done := b.anchor.Add(time.Duration((b.sent*int64(time.Second) + int64(b.rate) - 1) / int64(b.rate)))
	b.schedule(done)
}

// enter puts the datagram p of link l in the queue, or drops it.
func (b *Bottleneck) enter(l *link, epoch uint32, p []byte, hop *natHop) {
	n := b.n
	size := len(p) + b.over
	b.stats.Offered++
	b.stats.OfferedBytes += uint64(size)
	empty := b.head == len(b.q)
	if !empty && b.bytes+size > b.limit {
		b.stats.Dropped++
		b.stats.DroppedBytes += uint64(size)
		n.drop(l, p, dropQueue)
		return
	}
	b.q = append(b.q, held{l: l, epoch: epoch, b: p, size: size, at: n.now, hop: hop})
	b.bytes += size
	b.stats.MaxQueued = max(b.stats.MaxQueued, len(b.q)-b.head)
	b.stats.MaxQueuedBytes = max(b.stats.MaxQueuedBytes, b.bytes)
	if n.Trace != nil {
		n.traceQueue(l, p, b.bytes)
	}
	if empty {
		b.anchor, b.sent = n.now, 0
		b.startHead()
	}
}

// depart ends the sending of the datagram at the head, if gen is the
// departure event still in force, sends it on, and starts the next.
func (b *Bottleneck) depart(gen uint32) {
	if gen != b.gen || b.head == len(b.q) {
		return // superseded by SetRate
	}
	n := b.n
	h := b.q[b.head]
	b.q[b.head] = held{}
	b.head++
	b.bytes -= h.size
	wait := n.now.Sub(h.at)
	b.stats.Forwarded++
	b.stats.ForwardedBytes += uint64(h.size)
	b.stats.QueueDelay += wait
	b.stats.MaxQueueDelay = max(b.stats.MaxQueueDelay, wait)
	switch {
	case b.head == len(b.q):
		b.q, b.head = b.q[:0], 0
	case b.head >= 64 && 2*b.head >= len(b.q):
		k := copy(b.q, b.q[b.head:])
		clear(b.q[k:])
		b.q, b.head = b.q[:k], 0
	}
	if b.head < len(b.q) {
		if b.sent >= 1<<32 {
			b.anchor, b.sent = n.now, 0 // a nanosecond of rounding per 4 GB
		}
		b.startHead()
	}
	if h.epoch != h.l.epoch {
		n.drop(h.l, h.b, dropCut)
		return
	}
	n.propagate(h.l, h.b, n.now.Add(b.delay), h.hop)
}
