package fastnet

import (
	"slices"

	"github.com/fastnet-engine/fastnet/channel"
	"github.com/fastnet-engine/fastnet/clock"
)

// MessageID names a message sent with Endpoint.SendTracked. IDs are unique
// per endpoint, count up from 1 and are never 0.
type MessageID uint64

// Outcome says what became of a message sent with Endpoint.SendTracked
// (N55).
type Outcome uint8

// Outcomes of tracked messages. A reliable message ends OutcomeAcked or
// OutcomeLost, an unreliable one OutcomeSent or OutcomeDropped; on a Stream
// transport, which has no acks (D4), every message ends OutcomeSent or
// OutcomeDropped (N56).
const (
	_ Outcome = iota
	// OutcomeAcked: the peer acknowledged every packet of the reliable
	// message, so its application was handed it or will be (D26, N38).
	OutcomeAcked
	// OutcomeLost: the connection ended before every packet of the
	// reliable message was acknowledged. The peer may or may not have it.
	OutcomeLost
	// OutcomeSent: the last packet of the message was written in a
	// datagram by PollTransmit. Nothing says whether it arrived.
	OutcomeSent
	// OutcomeDropped: the message never left: the connection ended
	// before its last packet was written.
	OutcomeDropped
)

var outcomeNames = [...]string{
	OutcomeAcked:   "acked",
	OutcomeLost:    "lost",
	OutcomeSent:    "sent",
	OutcomeDropped: "dropped",
}

func (o Outcome) String() string {
	if int(o) < len(outcomeNames) && outcomeNames[o] != "" {
		return outcomeNames[o]
	}
	return "Outcome(?)"
}

// SendTracked queues msg like Send, with the same checks and errors, and
// returns the ID of the message: exactly one EventOutcome with that ID
// follows, before the connection's EventDisconnected if it ends first
// (N55). A failed SendTracked returns 0 and no event follows.
func (e *Endpoint) SendTracked(now clock.Time, h Handle, channel int, msg []byte, reliable bool) (MessageID, error) {
	id := e.lastMsgID + 1
	if err := e.send(now, h, channel, msg, reliable, id); err != nil {
		return 0, err
	}
	e.lastMsgID = id
	return id, nil
}

// Tracking (N55). Only the channels a tracked message was queued on pay
// for it: each has a tracker while it has tracked messages whose outcome
// is not known yet, found through the connection's map of trackers; a
// flag in the channel's state, in room its layout already had, tells the
// sender and ack paths whether to look, so that a channel with none costs
// one test per packet and a connection with none nothing more. A sender
// sends its messages in the order queued, each as consecutive packets
// (channel.Sender), so a tracker keeps them in that order:
//
//   - Byte counts place a message in the sender's stream: the sender's
//     first sends, counted from when the tracker began, reach a tracked
//     message's end exactly when its last packet was written.
//   - Packet numbers place an ack: the tracker numbers the packets the
//     sender sends, and an acked sequence number is as many packets
//     before the sender's next one as Distance says (a packet in flight is
//     less than M/4 behind it, N41). A binary search finds its message.

// tracker follows the tracked messages of one channel's sender.
type tracker struct {
	q    []trackedMsg // in the order queued, from head
	head int
	next int // the first message of q not entirely sent
	// sent counts the bytes the sender sent for the first time since the
	// tracker began, and nextNo its packets.
	sent   int64
	nextNo int64
}

// trackedMsg is one tracked message of a channel.
type trackedMsg struct {
	id         MessageID
	start, end int64 // its bytes in the sender's stream, as tracker.sent counts them
	// first and last number its packets sent so far; unacked counts
	// those of a reliable message not yet acknowledged.
	first, last int64
	unacked     int
	reliable    bool
	started     bool // a packet was sent
	sentAll     bool // its last packet was sent
	done        bool // its outcome was reported
}

// spareTrackers bounds the idle trackers a connection keeps for reuse, and
// spareTrackedMsgs the room of each.
const (
	spareTrackers    = 4
	spareTrackedMsgs = 256
)

// track starts following a message of n encoded bytes that is about to be
// queued on cs.
func (c *conn) track(cs *chanState, id MessageID, n int, reliable bool) {
	var t *tracker
	if cs.tracked {
		t = c.trackers[cs.id]
		if len(t.q) == cap(t.q) && t.head > 0 && 2*t.head >= len(t.q) {
			k := copy(t.q, t.q[t.head:])
			clear(t.q[k:])
			t.q, t.next, t.head = t.q[:k], t.next-t.head, 0
		}
	} else {
		// Nothing pending: the counts begin here.
		if t = popSpare(&c.spareTrackers); t == nil {
			t = new(tracker)
		}
		if c.trackers == nil {
			c.trackers = make(map[int16]*tracker)
		}
		c.trackers[cs.id] = t
		cs.tracked = true
	}
	start := t.sent + int64(cs.snd.QueuedBytes())
	t.q = append(t.q, trackedMsg{id: id, start: start, end: start + int64(n), reliable: reliable})
	c.tracked++
}

// trackSent follows a packet cs's sender sent for the first time.
func (c *conn) trackSent(cs *chanState, s channel.Sent) {
	t := c.trackers[cs.id]
	no, at := t.nextNo, t.sent
	t.nextNo++
	t.sent += int64(s.Bytes)
	if t.next == len(t.q) {
		return
	}
	m := &t.q[t.next]
	if at < m.start {
		return // a packet of an untracked message queued before it
	}
	if !m.started {
		m.started, m.first = true, no
	}
	m.last = no
	if s.Reliable {
		m.unacked++
	}
	if t.sent < m.end {
		return
	}
	m.sentAll = true
	t.next++
	if !m.reliable {
		c.resolve(cs, t, m, OutcomeSent)
	}
}

// trackDropped follows n bytes of whole unreliable messages at the front
// of cs's queue dropped at the sender for waiting too long (N80): the
// tracked ones among them are dropped.
func (c *conn) trackDropped(cs *chanState, n int) {
	t := c.trackers[cs.id]
	t.sent += int64(n)
	for cs.tracked && t.next < len(t.q) && t.q[t.next].end <= t.sent {
		m := &t.q[t.next]
		t.next++
		// Placed, for trackAcked's search, before the packets sent
		// after it, as if its packets were the last one sent before.
		m.started, m.sentAll = true, true
		m.first, m.last = t.nextNo-1, t.nextNo-1
		c.resolve(cs, t, m, OutcomeDropped)
	}
}

// trackAcked follows the ack of the packet numbered seq of cs's sender.
func (c *conn) trackAcked(cs *chanState, seq channel.Seq) {
	t := c.trackers[cs.id]
	next, _ := cs.snd.Position()
	no := t.nextNo - int64(channel.Distance(seq, next))
	// The messages with packets sent, q[head:end], are in the order of
	// their packets: find the first whose last packet is at or after no.
	end := min(t.next+1, len(t.q))
	i, _ := slices.BinarySearchFunc(t.q[t.head:end], no, func(m trackedMsg, no int64) int {
		if m.started && m.last < no {
			return -1
		}
		return 1
	})
	i += t.head
	if i == end {
		return
	}
	m := &t.q[i]
	if !m.started || m.first > no || !m.reliable || m.done {
		return
	}
	m.unacked--
	if m.unacked <= 0 && m.sentAll {
		c.resolve(cs, t, m, OutcomeAcked)
	}
}

// resolve reports the outcome of m, a message of cs's tracker t, and
// forgets the messages resolved at the front of t; a tracker left with
// nothing pending is put aside.
func (c *conn) resolve(cs *chanState, t *tracker, m *trackedMsg, o Outcome) {
	m.done = true
	c.tracked--
	c.ep.emit(Event{Kind: EventOutcome, Conn: c.handle, Addr: c.addr, Message: m.id, Outcome: o})
	for t.head < len(t.q) && t.q[t.head].done {
		t.head++
	}
	if t.head < len(t.q) {
		return
	}
	delete(c.trackers, cs.id)
	cs.tracked = false
	if len(c.spareTrackers) < spareTrackers && cap(t.q) <= spareTrackedMsgs {
		*t = tracker{q: t.q[:0]}
		c.spareTrackers = append(c.spareTrackers, t)
	}
}

// endTracking reports the outcome of every tracked message still pending
// on a connection that is going away, in the order they were sent:
// reliable ones lost, unreliable ones dropped (N55).
func (c *conn) endTracking() {
	if c.tracked == 0 {
		return
	}
	type pending struct {
		id MessageID
		o  Outcome
	}
	var ps []pending
	for _, t := range c.trackers {
		for i := t.head; i < len(t.q); i++ {
			if m := &t.q[i]; !m.done {
				o := OutcomeDropped
				if m.reliable {
					o = OutcomeLost
				}
				ps = append(ps, pending{m.id, o})
			}
		}
	}
	for i := range c.stream.q.Len() {
		if m := c.stream.q.At(i); m.id != 0 {
			ps = append(ps, pending{m.id, OutcomeDropped})
		}
	}
	// The map's order is random: the IDs give the order sent.
	slices.SortFunc(ps, func(a, b pending) int {
		switch {
		case a.id < b.id:
			return -1
		case a.id > b.id:
			return 1
		}
		return 0
	})
	for _, p := range ps {
		c.ep.emit(Event{Kind: EventOutcome, Conn: c.handle, Addr: c.addr, Message: p.id, Outcome: p.o})
	}
	c.tracked = 0
	for id := range c.trackers {
		if cs := c.chans[id]; cs != nil {
			cs.tracked = false
		}
	}
	c.trackers, c.spareTrackers = nil, nil
}
