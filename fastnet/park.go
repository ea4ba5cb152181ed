package fastnet

import (
	"github.com/fastnet-engine/fastnet/channel"
	"github.com/fastnet-engine/fastnet/clock"
)

// Parking (N25). A channel must remember four numbers for the life of its
// connection; its receiver and sender are needed only while it holds or
// sends something. A connection keeps receivers and senders for up to
// c.liveReceivers and c.liveSenders channels; past that, it parks the
// halves that have been idle the longest, keeping their positions in the
// channel's state, and keeps a few of them for reuse.

// idleQueue holds the channels whose receiving (or sending) half fell idle,
// oldest first, each at most once: a connection that keeps too many halves
// parks from its front, so that the halves parked are those idle the
// longest, not the one an exchange is about to use again.
type idleQueue struct {
	q    []*chanState
	head int
}

func (q *idleQueue) push(cs *chanState) {
	if len(q.q) == cap(q.q) && q.head > 0 && q.head >= len(q.q)/2 {
		n := copy(q.q, q.q[q.head:])
		clear(q.q[n:])
		q.q, q.head = q.q[:n], 0
	}
	q.q = append(q.q, cs)
}

func (q *idleQueue) pop() (*chanState, bool) {
	if q.head == len(q.q) {
		return nil, false
	}
	cs := q.q[q.head]
	q.q[q.head] = nil
	q.head++
	if q.head == len(q.q) {
		q.q, q.head = q.q[:0], 0
	}
	return cs, true
}

// popSpare takes the last of the spares kept for reuse, or returns nil.
func popSpare[T any](spares *[]*T) *T {
	n := len(*spares)
	if n == 0 {
		return nil
	}
	x := (*spares)[n-1]
	(*spares)[n-1] = nil
	*spares = (*spares)[:n-1]
	return x
}

// receiverIdle notes that cs's receiver may have fallen idle (it holds
// nothing and waits for nothing), then parks the receivers idle the
// longest while the connection holds more than it keeps.
func (c *conn) receiverIdle(cs *chanState) {
	if cs.rcv == nil || cs.inRecv || !cs.rcv.Idle() {
		return
	}
	if !cs.rcvQueued {
		cs.rcvQueued = true
		c.idleRecv.push(cs)
	}
	for c.receivers > c.liveReceivers {
		x, ok := c.idleRecv.pop()
		if !ok {
			return
		}
		x.rcvQueued = false
		if x.rcv != nil && !x.inRecv && x.rcv.Idle() {
			x.g, x.l = x.rcv.Position()
			x.lAt = parkedLAt(x.rcv)
			if len(c.spare) < spareReceivers {
				c.spare = append(c.spare, x.rcv)
			} else {
				c.dropReceiver(x.rcv)
			}
			x.rcv = nil
			c.receivers--
		}
	}
}

// dropReceiver gives up a receiver no channel uses, and gives its memory
// back to the receive budget (N49).
func (c *conn) dropReceiver(r *channel.Receiver) {
	r.Reset()
	c.recvBudget.Give(channel.ReceiverSize)
}

// takeIdleReceiver parks the channel whose receiver has been idle the
// longest and returns that receiver, for a channel that needs one when the
// receive memory has no room for another (D22, N49); nil if no receiver
// is idle. So the receivers a connection keeps never refuse the packets
// of a channel that has none.
func (c *conn) takeIdleReceiver() *channel.Receiver {
	for {
		x, ok := c.idleRecv.pop()
		if !ok {
			return nil
		}
		x.rcvQueued = false
		if x.rcv != nil && !x.inRecv && x.rcv.Idle() {
			r := x.rcv
			x.g, x.l = r.Position()
			x.lAt = parkedLAt(r)
			x.rcv = nil
			c.receivers--
			return r
		}
	}
}

// senderIdle notes that cs's sender may have fallen idle (nothing queued
// or in flight), then parks the senders idle the longest while the
// connection holds more than it keeps. Past the first liveReceivers
// senders, an idle one is trimmed (Sender.Trim), so that an application
// cycling large messages through many channels does not keep up to
// 256 KiB of free buffers for each; those kept for reuse are trimmed too.
func (c *conn) senderIdle(cs *chanState) {
	if cs.snd == nil || cs.inRing || cs.inSend || !cs.snd.Idle() {
		return
	}
	if !cs.sndQueued {
		cs.sndQueued = true
		c.idleSend.push(cs)
	}
	if c.senders > c.ep.liveReceivers {
		// Many senders kept: each keeps little for its next messages.
		cs.snd.Trim()
	}
	for c.senders > c.liveSenders {
		x, ok := c.idleSend.pop()
		if !ok {
			return
		}
		x.sndQueued = false
		if x.snd != nil && !x.inRing && !x.inSend && x.snd.Idle() {
			x.seq, x.rel = x.snd.Position()
			if len(c.spareSenders) < spareReceivers {
				x.snd.Trim()
				c.spareSenders = append(c.spareSenders, x.snd)
			}
			x.snd = nil
			c.senders--
		}
	}
}

// Bookkeeping kept after a burst (N95). A sender whose packets in flight
// are all acked keeps the arrays of its bookkeeping, so that a stream
// whose acks now and then catch up does not grow them again from nothing
// each time; when they are larger than usual (channel.Sender.Grown), the
// connection notes the channel and lets them go (channel.Sender.Shrink)
// within channel.GrowthRetention of the first noted: what a burst needed
// is kept for a second. A sender busy again by then moves its packets'
// records into arrays their size; one with thousands in flight uses what
// it has, and is looked at again a second later.

// noteGrown notes that cs's sender fell idle at now, keeping a burst's
// bookkeeping if it is Grown.
func (c *conn) noteGrown(now clock.Time, cs *chanState) {
	if cs.inGrown || cs.snd == nil || !cs.snd.Grown() {
		return
	}
	cs.inGrown = true
	c.grown = append(c.grown, cs)
	if c.shrinkAt == 0 {
		c.shrinkAt = now.Add(channel.GrowthRetention)
	}
}

// shrinkSenders, at c.shrinkAt, lets go of what the senders noted keep
// beyond the usual; those still Grown stay noted for another
// GrowthRetention.
func (c *conn) shrinkSenders(now clock.Time) {
	kept := c.grown[:0]
	for _, cs := range c.grown {
		if cs.snd != nil {
			if cs.snd.Shrink(); cs.snd.Grown() {
				kept = append(kept, cs)
				continue
			}
		}
		cs.inGrown = false
	}
	clear(c.grown[len(kept):])
	c.grown, c.shrinkAt = kept, 0
	if len(kept) > 0 {
		c.shrinkAt = now.Add(channel.GrowthRetention)
	}
}

// Where a parked channel's packet with R = L was (chanState.lAt, N154).
const (
	lAtUnknown = iota
	lAtAtG     // the packet at the ignore number
	lAtStart   // none: no reliable packet was consumed, and L is 0
)

// parkedLAt returns what a parked channel keeps of where idle receiver
// r's packet with R = L was.
func parkedLAt(r *channel.Receiver) uint8 {
	g, l := r.Position()
	at, ok := r.LAt()
	switch {
	case !ok:
		return lAtUnknown
	case at == g:
		return lAtAtG
	case at == -1 && l == 0:
		return lAtStart
	}
	return lAtUnknown
}
