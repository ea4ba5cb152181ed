package fastnet

import (
	"container/heap"

	"github.com/fastnet-engine/fastnet/channel"
	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/coalesce"
)

// maxPendingAcks bounds the acks waiting to be sent; beyond it a reliable
// packet goes unacked and its sender resends it (D13, D22).
const maxPendingAcks = 1 << 16

// handlePacket handles a packet of an established connection on any channel
// but -1.
func (c *conn) handlePacket(now clock.Time, ch int16, p []byte) {
	switch {
	case ch >= 0:
		if c.ep.cfg.Transport == Stream {
			c.handleStreamMessage(ch, p)
		} else {
			c.handleData(now, ch, p)
		}
	case ch == chHeartbeat:
		v, err := parseHeartbeat(p)
		if err != nil {
			c.stats.Dropped[DropBadControl]++
			return
		}
		if b, ok := c.hb.receive(now, v); ok {
			c.proved(b)
			if !c.peerProbing(b.at) {
				c.cc.onEcho(now, b.at, b.bytes, now.Sub(b.at), c.hb.minRTT, c.hb.srtt, c.paceRate(), c.payloadMTU+2)
			}
		} else if c.hb.ours(v) && !c.hb.originated(v) {
			c.forgedEcho()
		}
	case ch == chAck:
		c.handleAcks(now, p)
	case ch == chMTUServer || ch == chMTUClient:
		c.handleMTU(now, ch, p)
	default:
		c.stats.Dropped[DropUnknownChannel]++
	}
}

// handleData handles a message channel packet on a Datagram transport
// (D4, D7-D11).
func (c *conn) handleData(now clock.Time, ch int16, p []byte) {
	h, err := channel.ParseHeader(p)
	if err != nil {
		c.stats.Dropped[DropBadHeader]++
		return
	}
	c.handleParsed(now, ch, p, h)
}

// handleParsed is handleData for a packet p whose header, h, is parsed
// already (N101).
func (c *conn) handleParsed(now clock.Time, ch int16, p []byte, h channel.Header) {
	if c.recvPaused {
		c.stats.Dropped[DropPaused]++
		return
	}
	chunk := p[channel.HeaderLen:]
	if len(p) > c.stats.PeerPayloadMTU {
		c.stats.PeerPayloadMTU = len(p)
	}
	cs := c.recvChannel(ch)
	if cs == nil {
		// No room for the channel's state or a receiver: resent later
		// (D22, N50).
		c.stats.Dropped[DropMemory]++
		return
	}
	res, m, took := cs.rcv.HandleTake(now, h, chunk)
	switch res {
	case channel.Accepted:
		if h.Reliable {
			c.ack(ch, h.Seq)
		}
	case channel.Duplicate:
		c.stats.Dropped[DropDuplicate]++
		c.ack(ch, h.Seq) // the first ack may have been lost (D8)
		c.repeatAcksLater(now)
	case channel.Stale:
		c.stats.Dropped[DropStale]++
	case channel.OutOfWindow:
		c.stats.Dropped[DropWindow]++
	case channel.NoMemory:
		c.stats.Dropped[DropMemory]++
	}
	if took {
		// A message whole in its packet, with nothing before it: what
		// Poll would have given first (deliver gives the rest).
		c.emit(cs, m)
		if cs.rcv.Settled() {
			// deliver would find nothing to give, count or time
			// (N101).
			if cs.inRecv {
				c.recvTimed(cs)
			}
			c.receiverIdle(cs)
			return
		}
	}
	c.deliver(now, cs)
}

// takeWhole hands the receiver of channel ch the data packets j to j+n-1
// of s, consecutive packets of bundle payload b that carry whole messages, for
// it to take at once (channel.Receiver.TakeWhole), and returns how many
// it took: each as handleParsed would have handled it, acked if reliable
// and its message delivered (N101). The rest are left to handleParsed.
func (c *conn) takeWhole(ch int16, b []byte, s *bundleSums, j, n int) int {
	if c.recvPaused || c.ep.noRuns {
		return 0
	}
	cs := c.channel(ch, false)
	if cs == nil || !cs.charged || cs.rcv == nil {
		return 0 // recvChannel has work to do
	}
	if c.receivers > c.liveReceivers || c.unvalidated {
		// receiverIdle may park the receiver after each packet, and
		// recvChannel revive it for the next; or, the connection still
		// proving its address (D25), each message is held, charged to
		// the budget the next one's memory test reads.
		n = 1
	}
	ws := s.ws[j : j+n]
	taken := cs.rcv.TakeWhole(b, ws, s.digests[j:j+n])
	if taken == 0 {
		return 0
	}
	ws = ws[:taken]
	mtu := c.stats.PeerPayloadMTU
	for i := range ws {
		mtu = max(mtu, channel.HeaderLen+ws[i].End-ws[i].Off)
	}
	c.stats.PeerPayloadMTU = mtu
	c.ackWhole(ch, ws)
	c.stats.MessagesDelivered += uint64(taken)
	c.ep.estats.MessagesDelivered += uint64(taken)
	c.ep.emitWhole(c, ch, b, ws, s.payloads[j:j+taken])
	c.ep.runTaken += uint64(taken)
	if cs.inRecv {
		c.recvTimed(cs)
	}
	c.receiverIdle(cs)
	return taken
}

// ack queues an acknowledgement of a reliable packet (D13).
// ackWhole queues the acks of the reliable packets of ws, which a run
// took on channel ch, as ack would one after the other: in place when
// the acks waiting and one for each stay within maxPendingAcks and the
// queue's array has room, where ack would neither drop an entry nor move
// the queue (N116).
func (c *conn) ackWhole(ch int16, ws []channel.Whole) {
	k := len(c.acks)
	if c.pendingAcks()+len(ws) > maxPendingAcks || cap(c.acks)-k < len(ws) {
		for i := range ws {
			if h := &ws[i].H; h.Reliable {
				c.ack(ch, h.Seq)
			}
		}
		return
	}
	acks := c.acks[:k+len(ws)]
	for i := range ws {
		if h := &ws[i].H; h.Reliable {
			acks[k] = channel.Ack{Channel: ch, Seq: h.Seq}
			k++
		}
	}
	c.acks = acks[:k]
}

func (c *conn) ack(ch int16, s channel.Seq) {
	if c.pendingAcks() >= maxPendingAcks {
		return
	}
	if len(c.acks) == cap(c.acks) && c.acksHead >= len(c.acks)/2 {
		// Reuse the room consumed at the front: each entry moves at most
		// once per time the queue doubles, O(1) amortized.
		n := copy(c.acks, c.acks[c.acksHead:])
		c.acks, c.acksHead = c.acks[:n], 0
	}
	c.acks = append(c.acks, channel.Ack{Channel: ch, Seq: s})
}

// deliver hands every message cs can complete to the application, and
// closes the connection if the peer broke the protocol on it.
func (c *conn) deliver(now clock.Time, cs *chanState) {
	for {
		m, ok := cs.rcv.Poll(now)
		if !ok {
			break
		}
		c.emit(cs, m)
	}
	if cs.rcv.Dropped() {
		d := cs.rcv.NewDrops()
		c.stats.Dropped[DropMalformedMessage] += d.Malformed
		c.stats.Dropped[DropExpired] += d.Expired
		c.stats.Dropped[DropMemory] += d.Evicted
		c.stats.Dropped[DropOrphaned] += d.Orphaned
		c.stats.Dropped[DropSkipped] += d.Skipped
	}
	if err := cs.rcv.Err(); err != nil {
		c.ep.disconnect(now, c, &ProtocolError{Reason: err.Error()}, true)
		return
	}
	c.recvTimed(cs)
	c.receiverIdle(cs)
}

// emit hands message m of channel cs to the application.
func (c *conn) emit(cs *chanState, m channel.Message) {
	c.stats.MessagesDelivered++
	c.ep.estats.MessagesDelivered++
	c.ep.emitMessage(c, cs.id, m)
}

// expireReceivers applies the MCI rule (D11) to receivers whose deadline
// passed: those at the top of recvHeap, taken off it first, so that each
// is handled once however deliver puts it back.
func (c *conn) expireReceivers(now clock.Time) {
	due := c.recvDue[:0]
	for len(c.recvHeap) > 0 && c.recvHeap[0].rdl <= now {
		due = append(due, heap.Pop(&c.recvHeap).(*chanState))
	}
	for i, cs := range due {
		due[i] = nil
		// Its receiver may be gone since (another's delivery parked
		// it), or the connection (a protocol error).
		if c.state != 0 && cs.rcv != nil {
			c.deliver(now, cs) // puts it back if it has a deadline still
		}
	}
	if c.state != 0 {
		c.recvDue = due[:0]
	}
}

// recvTimed puts cs in recvHeap at its receiver's deadline, or takes it
// off if the receiver has none (N137).
func (c *conn) recvTimed(cs *chanState) {
	d := clock.Time(0)
	if cs.rcv != nil {
		d = cs.rcv.NextDeadline()
	}
	switch {
	case d == 0:
		if cs.inRecv {
			heap.Remove(&c.recvHeap, int(cs.rIdx))
		}
	case cs.inRecv:
		cs.rdl = d
		heap.Fix(&c.recvHeap, int(cs.rIdx))
	default:
		cs.rdl = d
		heap.Push(&c.recvHeap, cs)
	}
}

// recvHeap orders the channels whose receiver has a deadline by that
// deadline (container/heap); each knows its place (rIdx) and that it is
// in the heap (inRecv).
type recvHeap []*chanState

func (h recvHeap) Len() int           { return len(h) }
func (h recvHeap) Less(i, j int) bool { return h[i].rdl < h[j].rdl }
func (h recvHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].rIdx, h[j].rIdx = int32(i), int32(j)
}
func (h *recvHeap) Push(x any) {
	cs := x.(*chanState)
	cs.inRecv, cs.rIdx = true, int32(len(*h))
	*h = append(*h, cs)
}
func (h *recvHeap) Pop() any {
	old := *h
	cs := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	cs.inRecv = false
	return cs
}

// handleAcks frees the acknowledged reliable packets (D13).
func (c *conn) handleAcks(now clock.Time, p []byte) {
	it, err := channel.ParseAcks(p)
	if err != nil {
		c.stats.Dropped[DropBadControl]++
		return
	}
	c.timesStale = true
	// Only the channels an entry acknowledged a packet of can change: the
	// work is proportional to the entries, not to the channels in flight.
	// Entries come channel by channel: what follows from a channel's
	// acks (its place in the ring, its going idle) is settled once its
	// last entry in a row is taken, before the next channel's (N112).
	var (
		last  *chanState
		entry = -1 // last's in c.ackedChans, once found
		// What the packet's acks freed, which the controller takes
		// as one (N124).
		sum channel.AckSum
	)
	for it.Next() {
		a := it.Ack()
		cs := last
		if cs == nil || cs.id != a.Channel {
			if last != nil {
				c.ackedRow(now, last)
				last, entry = nil, -1
			}
			if cs = c.channel(a.Channel, false); cs == nil || cs.snd == nil {
				continue // acks for unknown packets are ignored (D13)
			}
		}
		if p, _ := cs.snd.InFlight(); p == 0 {
			// What HandleAck would find: nothing to free, for this
			// entry and those of cs that follow it, passed over at
			// once. They are mostly the repeats (N29) after the
			// entries that freed cs's last packets; one turn of
			// this loop each cost 10 instructions a reliable
			// message in full bundles.
			it.SkipChannel(cs.id)
			continue
		}
		ak, ok := cs.snd.HandleAck(a.Seq)
		if !ok {
			continue
		}
		last = cs
		sum.Add(ak)
		// The newest reliable packet of cs this ack packet acks, for
		// the loss check below, kept in cs's entry of c.ackedChans with
		// congestion control on.
		var e *ackedChan
		if c.cc.on {
			switch {
			case !cs.acked:
				cs.acked = true
				entry = len(c.ackedChans)
				cs.ackIdx = int32(entry)
				c.ackedChans = append(c.ackedChans, ackedChan{cs, ak.Rel})
			case entry < 0:
				// A channel acked in an earlier row of the packet: its
				// entry is where it was put, not looked for, which
				// took a pass a row for rows of channels in turn
				// (N138).
				entry = int(cs.ackIdx)
			}
			e = &c.ackedChans[entry]
			e.newer(ak.Rel)
		}
		if cs.tracked {
			c.trackAcked(cs, a.Seq)
		} else if p, _ := cs.snd.InFlight(); p > 0 {
			// The entries that follow while they ack cs's packets in
			// order, in one call (a shortcut of N116, with no change
			// of behaviour): what is done for each packet freed
			// depends on nothing the sender changes, and the
			// sequence numbers of the entries are needed only to
			// follow tracked messages, which are taken one entry at
			// a time. The newest R they ack needs no keeping for the
			// loss check: they free the oldest packets in flight, so
			// every packet left in flight is newer, and only an entry
			// after them that acks one of those could show a loss
			// (it moves e's R on itself).
			cs.snd.HandleAcksInOrder(&it, cs.id, &sum)
		}
	}
	if last != nil {
		c.ackedRow(now, last)
	}
	c.ccInFlight = c.cc.onAcks(now, &sum, c.ccInFlight, c.payloadMTU+wireOverhead)
	c.inFlight -= sum.Bytes
	c.stats.AcksReceived += uint64(sum.Packets)
	// Once the whole ack packet is taken (a lost ack's repeat follows the
	// new entries, N29): reliable packets sent after a channel's oldest
	// in flight were acked, so it was probably lost, a round trip before
	// its resend is due (D14); the window need not wait for it (N81).
	for i, e := range c.ackedChans {
		c.ackedChans[i] = ackedChan{}
		cs := e.cs
		cs.acked = false
		if cs.snd == nil {
			continue
		}
		if rel, last, n, ok := cs.snd.Oldest(); ok && n == 0 && channel.Distance(rel, e.rel) >= lossReorder && channel.Distance(rel, e.rel) < channel.SeqSpace/2 {
			if c.cc.onResend(now, last, c.payloadMTU+wireOverhead, c.hb.sampled || c.cc.sampled) {
				c.stats.CongestionEvents++
			}
		}
	}
	c.ackedChans = c.ackedChans[:0]
	if c.inFlight == 0 {
		c.maxMTUInFlight = 0
	}
	c.closeIfDrained(now)
}

// ackedRow settles what follows from acks of cs's packets, once the last
// of a row of entries for it is taken (handleAcks).
func (c *conn) ackedRow(now clock.Time, cs *chanState) {
	if !cs.inRing && cs.snd.MayAppend() {
		// Its sequence numbers waited for this ack (N41).
		c.joinRing(cs)
	}
	if p, _ := cs.snd.InFlight(); p == 0 && cs.inSend {
		c.removeSendChan(cs)
		c.senderIdle(cs)
		c.noteGrown(now, cs)
	}
}

// removeSendChan takes cs out of c.sendChans, moving the last channel
// into its place.
func (c *conn) removeSendChan(cs *chanState) {
	i, last := int(cs.sendIdx), len(c.sendChans)-1
	if i > last || c.sendChans[i] != cs {
		return
	}
	c.sendChans[i] = c.sendChans[last]
	c.sendChans[i].sendIdx = int32(i)
	c.sendChans[last] = nil
	c.sendChans = c.sendChans[:last]
	cs.inSend = false
}

// handleStreamMessage handles a message channel packet on a Stream
// transport: the packet is exactly one encoded message (D4).
func (c *conn) handleStreamMessage(ch int16, p []byte) {
	m, err := coalesce.ParseMessageWith(c.ep.streamPre, p, c.ep.cfg.MaxMessageSize)
	if err != nil {
		// The transport is reliable: a bad message is the peer's doing.
		c.ep.disconnect(0, c, &ProtocolError{Reason: err.Error()}, true)
		return
	}
	if len(p) > c.stats.PeerPayloadMTU {
		c.stats.PeerPayloadMTU = len(p)
	}
	data := make([]byte, len(m.Payload))
	copy(data, m.Payload)
	c.stats.MessagesDelivered++
	c.ep.estats.MessagesDelivered++
	c.ep.emitMessage(c, ch, channel.Message{Reliable: m.Reliable, Data: data})
}

// peerProbing reports whether the peer's MTU probes were arriving around
// sent, when a heartbeat now echoed went out: the peer's round of probes
// queues on the path back to this side, behind which the echo comes late,
// and the echo limiter would cut this side's rate for a queue it did not
// build (N93). Its probes go a round trip back and forth: an echo of a
// heartbeat sent within two smoothed round trips of the last probe is
// left out.
func (c *conn) peerProbing(sent clock.Time) bool {
	return c.peerProbeAt != 0 && sent.Sub(c.peerProbeAt) < 2*c.hb.srtt
}
