package fastnettest

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
)

// A Link describes one direction of the path between two addresses: what
// happens to each datagram sent from one to the other. The zero Link
// delivers everything at once, intact.
//
// A datagram goes through the link in this order: the network's Filter; MTU;
// Loss; the Bandwidth queue; the Bottleneck; then each copy (the original and, with
// probability Dup, a duplicate) is independently corrupted with probability
// Corrupt (and then, with UDPChecksum, dropped if the checksum catches it),
// delayed by Delay plus a uniform draw from [0, Jitter), and with
// probability Reorder held back a further (0, ReorderDelay].
type Link struct {
	// Loss, Dup, Reorder and Corrupt are probabilities in [0, 1]: that a
	// datagram is lost, that a second copy of it is delivered (with its own
	// delay), that it is held back so later datagrams overtake it, and that
	// 1 to 3 of its bits are flipped.
	Loss, Dup, Reorder, Corrupt float64

	// Delay is the one-way propagation delay; Jitter adds a delay drawn
	// uniformly from [0, Jitter) to each datagram, which alone can reorder
	// datagrams sent closer together than Jitter.
	Delay, Jitter time.Duration

	// ReorderDelay bounds the extra delay of a reordered datagram. Zero
	// means 2*(Delay+Jitter), or 10 ms on a link with neither.
	ReorderDelay time.Duration

	// MTU is the largest datagram the link carries; larger ones are
	// dropped. Zero means no limit.
	MTU int

	// Bandwidth, in bytes per second, makes each datagram take
	// size/Bandwidth to leave, queued behind the ones sent before it on
	// this link. Zero means no limit.
	Bandwidth int

	// QueueLimit bounds, in bytes, the datagrams in the Bandwidth queue
	// that have not yet left, the one leaving included; a datagram that
	// would pass it is dropped (drop-tail). Zero means one second's worth
	// of Bandwidth. A datagram arriving at an empty queue is always
	// accepted.
	QueueLimit int

	// Bottleneck, if set, puts the link's datagrams, after its own
	// Bandwidth queue, in the shared queue of a bottleneck made by the
	// same network's NewBottleneck, which other links may share. See
	// Bottleneck. A Reliable link cannot have one.
	Bottleneck *Bottleneck

	// UDPChecksum makes the receiver check each datagram as a UDP stack
	// does (RFC 768): a copy whose bits Corrupt flipped is dropped if the
	// 16-bit ones' complement sum of its bytes differs from that of the
	// bytes sent, and delivered otherwise. Every single-bit flip changes
	// the sum; some flips of two or three bits cancel out in it (a 0 to 1
	// and a 1 to 0 flip at the same bit of two 16-bit words, say), and
	// those damaged datagrams escape, as they would over UDP.
	UDPChecksum bool

	// Reliable makes the link a lossless, ordered pipe, as a TCP connection
	// is for an endpoint on the Stream transport: datagrams arrive in the
	// order they were sent, and Loss, Dup, Reorder, Corrupt and MTU must be
	// zero. Delay, Jitter and Bandwidth still apply; the Bandwidth queue is
	// unbounded, since a stream holds back its writer rather than drop.
	Reliable bool
}

func (l Link) validate() error {
	for _, p := range [...]struct {
		name string
		v    float64
	}{{"Loss", l.Loss}, {"Dup", l.Dup}, {"Reorder", l.Reorder}, {"Corrupt", l.Corrupt}} {
		if !(p.v >= 0 && p.v <= 1) {
			return fmt.Errorf("fastnettest: Link.%s %v is outside [0, 1]", p.name, p.v)
		}
	}
	switch {
	case l.Delay < 0 || l.Jitter < 0 || l.ReorderDelay < 0:
		return fmt.Errorf("fastnettest: Link delays must not be negative")
	case l.MTU < 0 || l.Bandwidth < 0 || l.QueueLimit < 0:
		return fmt.Errorf("fastnettest: Link.MTU, Bandwidth and QueueLimit must not be negative")
	case l.Reliable && (l.Loss != 0 || l.Dup != 0 || l.Reorder != 0 || l.Corrupt != 0 || l.MTU != 0):
		return fmt.Errorf("fastnettest: a Reliable link cannot lose, duplicate, reorder or corrupt, and has no MTU")
	case l.Reliable && l.Bottleneck != nil:
		return fmt.Errorf("fastnettest: a Reliable link cannot go through a Bottleneck, whose queue drops")
	}
	return nil
}

// LinkStats counts what happened to the datagrams sent on a link. Every
// datagram sent, and every duplicate made, is at any moment either in
// flight, delivered, or dropped for exactly one cause:
//
//	Sent + Duplicated == Delivered + Dropped() + in flight
type LinkStats struct {
	Sent           uint64 // datagrams handed to the link
	SentBytes      uint64
	Delivered      uint64 // datagrams (duplicates included) handed to the receiver
	DeliveredBytes uint64
	Duplicated     uint64 // extra copies made
	Corrupted      uint64 // copies with flipped bits, caught by UDPChecksum or not
	Reordered      uint64 // copies held back by Reorder

	// Drops by cause.
	Lost      uint64 // Loss
	TooBig    uint64 // larger than MTU
	QueueFull uint64 // the Bandwidth queue, or the Bottleneck's, was full
	Filtered  uint64 // Network.Filter returned false
	NoRoute   uint64 // no node at the destination address
	Cut       uint64 // in flight when CloseTransport cut the link
	NAT       uint64 // dropped by a NAT (see NATStats for why)
	// ChecksumDrops counts corrupted copies that UDPChecksum caught;
	// Corrupted - ChecksumDrops of them were delivered damaged.
	ChecksumDrops uint64
}

// Dropped returns the number of datagrams dropped for any cause.
func (s LinkStats) Dropped() uint64 {
	return s.Lost + s.TooBig + s.QueueFull + s.Filtered + s.NoRoute + s.Cut + s.ChecksumDrops + s.NAT
}

func (s *LinkStats) add(o LinkStats) {
	s.Sent += o.Sent
	s.SentBytes += o.SentBytes
	s.Delivered += o.Delivered
	s.DeliveredBytes += o.DeliveredBytes
	s.Duplicated += o.Duplicated
	s.Corrupted += o.Corrupted
	s.Reordered += o.Reordered
	s.Lost += o.Lost
	s.TooBig += o.TooBig
	s.QueueFull += o.QueueFull
	s.Filtered += o.Filtered
	s.NoRoute += o.NoRoute
	s.Cut += o.Cut
	s.NAT += o.NAT
	s.ChecksumDrops += o.ChecksumDrops
}

// linkKey names one direction between two addresses.
type linkKey struct {
	from, to netip.AddrPort
}

// link is the state of one direction between two addresses.
type link struct {
	linkKey
	cfg      Link
	explicit bool  // set with SetLink, not following the default link
	dst      *node // the node at to, once there is one

	busyUntil   clock.Time // when the Bandwidth queue is empty
	lastArrival clock.Time // of the latest datagram, for Reliable links
	epoch       uint32     // incremented by CloseTransport
	stats       LinkStats
}

// dropCause names a reason a datagram was dropped, for the trace.
type dropCause uint8

const (
	dropLoss dropCause = iota
	dropMTU
	dropQueue
	dropFilter
	dropNoRoute
	dropCut
	dropChecksum
	dropNAT
)

var dropCauseNames = [...]string{
	dropLoss:     "loss",
	dropMTU:      "mtu",
	dropQueue:    "queue",
	dropFilter:   "filter",
	dropNoRoute:  "noroute",
	dropCut:      "cut",
	dropChecksum: "checksum",
	dropNAT:      "nat",
}

func (s *LinkStats) countDrop(c dropCause) {
	switch c {
	case dropLoss:
		s.Lost++
	case dropMTU:
		s.TooBig++
	case dropQueue:
		s.QueueFull++
	case dropFilter:
		s.Filtered++
	case dropNoRoute:
		s.NoRoute++
	case dropCut:
		s.Cut++
	case dropChecksum:
		s.ChecksumDrops++
	case dropNAT:
		s.NAT++
	}
}

// transmit puts the datagram b, already copied into a pooled buffer, on l.
func (n *Network) transmit(l *link, b []byte) { n.transmitHop(l, b, nil) }

// transmitHop is transmit of a datagram that crosses a NAT if hop is set;
// one bound for a NAT's external address finds its node when it arrives.
func (n *Network) transmitHop(l *link, b []byte, hop *natHop) {
	l.stats.Sent++
	l.stats.SentBytes += uint64(len(b))
	cfg := &l.cfg
	if n.Filter != nil && !n.Filter(l.from, l.to, b) {
		n.drop(l, b, dropFilter)
		return
	}
	if l.dst == nil && (hop == nil || hop.nat == nil) {
		l.dst = n.byAddr[l.to]
		if l.dst == nil {
			n.drop(l, b, dropNoRoute)
			return
		}
	}
	if cfg.MTU > 0 && len(b) > cfg.MTU {
		n.drop(l, b, dropMTU)
		return
	}
	if cfg.Loss > 0 && n.rng.Float64() < cfg.Loss {
		n.drop(l, b, dropLoss)
		return
	}
	departure := n.now
	if cfg.Bandwidth > 0 {
		start := max(n.now, l.busyUntil)
		if backlog := start.Sub(n.now); backlog > 0 && !cfg.Reliable {
			limit := cfg.QueueLimit
			if limit == 0 {
				limit = cfg.Bandwidth
			}
			queued := int64(backlog) * int64(cfg.Bandwidth) / int64(time.Second)
			if queued+int64(len(b)) > int64(limit) {
				n.drop(l, b, dropQueue)
				return
			}
		}
		l.busyUntil = start.Add(time.Duration(int64(len(b)) * int64(time.Second) / int64(cfg.Bandwidth)))
		departure = l.busyUntil
	}
	if bn := cfg.Bottleneck; bn != nil {
		if departure > n.now {
			n.seq++
			n.q.push(departure, n.seq, packet{l: l, epoch: l.epoch, b: b, kind: kindEnter, bn: bn, hop: hop})
			return
		}
		bn.enter(l, l.epoch, b, hop)
		return
	}
	n.propagate(l, b, departure, hop)
}

// propagate sends the datagram b on from the queues of l, duplicated as
// l says, leaving at departure.
func (n *Network) propagate(l *link, b []byte, departure clock.Time, hop *natHop) {
	cfg := &l.cfg
	if cfg.Dup > 0 && n.rng.Float64() < cfg.Dup {
		c := n.pool.get(len(b))
		copy(c, b)
		l.stats.Duplicated++
		n.schedule(l, b, departure, false, hop)
		n.schedule(l, c, departure, true, hop)
		return
	}
	n.schedule(l, b, departure, false, hop)
}

// schedule puts one copy of a datagram in flight on l, leaving the link at
// departure.
func (n *Network) schedule(l *link, b []byte, departure clock.Time, dup bool, hop *natHop) {
	cfg := &l.cfg
	corrupted := false
	if cfg.Corrupt > 0 && len(b) > 0 && n.rng.Float64() < cfg.Corrupt {
		var sum uint16
		if cfg.UDPChecksum {
			sum = onesSum(b)
		}
		n.corrupt(b)
		l.stats.Corrupted++
		corrupted = true
		if cfg.UDPChecksum && onesSum(b) != sum {
			n.drop(l, b, dropChecksum)
			return
		}
	}
	at := departure.Add(cfg.Delay)
	if cfg.Jitter > 0 {
		at += clock.Time(n.rng.Int64N(int64(cfg.Jitter)))
	}
	reordered := false
	if cfg.Reorder > 0 && n.rng.Float64() < cfg.Reorder {
		rd := cfg.ReorderDelay
		if rd == 0 {
			rd = 2 * (cfg.Delay + cfg.Jitter)
			if rd == 0 {
				rd = 10 * time.Millisecond
			}
		}
		at += 1 + clock.Time(n.rng.Int64N(int64(rd)))
		l.stats.Reordered++
		reordered = true
	}
	if cfg.Reliable {
		at = max(at, l.lastArrival)
		l.lastArrival = at
	}
	n.seq++
	n.q.push(at, n.seq, packet{l: l, epoch: l.epoch, b: b, hop: hop})
	if n.Trace != nil {
		n.traceSend(l, b, at, dup, corrupted, reordered)
	}
}

// corrupt flips 1 to 3 distinct bits of b, which is not empty.
func (n *Network) corrupt(b []byte) {
	nbits := len(b) * 8
	k := min(1+n.rng.IntN(3), nbits)
	var flipped [3]int
	for i := 0; i < k; {
		bit := n.rng.IntN(nbits)
		dup := false
		for _, f := range flipped[:i] {
			dup = dup || f == bit
		}
		if dup {
			continue
		}
		flipped[i] = bit
		b[bit/8] ^= 1 << (bit % 8)
		i++
	}
}

// onesSum returns the 16-bit ones' complement sum of b, as the UDP checksum
// (RFC 768) adds it up: big-endian 16-bit words, an odd last byte padded
// with a zero byte. Ones' complement addition is addition modulo 0xffff
// (where 0xffff and 0 are both zero), so the result is reduced modulo
// 0xffff: two byte strings pass the same UDP checksum exactly when their
// onesSum values are equal.
func onesSum(b []byte) uint16 {
	var s uint64
	for len(b) >= 2 {
		s += uint64(b[0])<<8 | uint64(b[1])
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint64(b[0]) << 8
	}
	return uint16(s % 0xffff)
}

func (n *Network) drop(l *link, b []byte, c dropCause) {
	l.stats.countDrop(c)
	if n.Trace != nil {
		n.traceDrop(l, b, c)
	}
	n.pool.put(b)
}
