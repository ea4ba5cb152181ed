package fastnet

import (
	"encoding/binary"
	"math"
	"slices"
	"time"

	"github.com/fastnet-engine/fastnet/channel"
	"github.com/fastnet-engine/fastnet/clock"
)

// wantsTransmit reports whether poll has a datagram to produce at now.
func (c *conn) wantsTransmit(now clock.Time) bool {
	if !c.established() {
		return false
	}
	c.expireProbes(now)
	if c.pendingAcks() > 0 || c.hb.echoN > 0 || now >= c.hb.nextSend {
		return true
	}
	if c.ackRepeatAt != 0 && now >= c.ackRepeatAt {
		return true
	}
	if c.ep.cfg.Transport == Stream {
		return !c.stream.empty()
	}
	if c.mtuWantsTransmit(now) {
		return true
	}
	if !c.paceReady(now) {
		return false // data and resends wait for the pacer (D30)
	}
	if c.newDataAllowed() {
		return true
	}
	return c.resendDue(now)
}

// newDataAllowed reports whether some channel has a first-time packet that
// may go out now: unreliable ones always, reliable ones while the in-flight
// bytes are under Config.MaxInFlight (D22).
func (c *conn) newDataAllowed() bool {
	if len(c.ring) == 0 {
		return false
	}
	mtu := c.payloadMTU - channel.HeaderLen
	if c.roomReliable(mtu) {
		return true
	}
	// Behind a held reliable packet that still does not fit, only
	// unreliable packets go; otherwise any that fits (pollNew).
	h := c.holding()
	if h != nil && c.roomReliable(h.snd.NextLen(mtu)) {
		return true
	}
	for _, cs := range c.ring {
		if !cs.snd.NextReliable() || h == nil && c.roomReliable(cs.snd.NextLen(mtu)) {
			return true
		}
	}
	return false
}

// holding returns the channel whose reliable packet holds the others back
// (pollNew), if it still waits with one.
func (c *conn) holding() *chanState {
	if h := c.holdCh; h != nil && (!h.inRing || !h.snd.NextReliable()) {
		c.holdCh = nil
	}
	return c.holdCh
}

// roomReliable reports whether a reliable packet of a chunk of n bytes
// may be sent for the first time: the reliable bytes in flight stay within
// Config.MaxInFlight (D22), and those the congestion controller counts
// within its window, which always lets one packet go, and never keeps out
// two of the payload MTU (D30, N76). Within the window a packet is
// weighed as a full one; within that floor of two, at its size: weighed
// as full ones there, 78 messages of 64 bytes kept a 17 KB window shut to
// a queue of small messages on a 9,214-byte payload MTU (N87).
func (c *conn) roomReliable(n int) bool {
	if c.inFlight+c.payloadMTU > c.ep.cfg.MaxInFlight {
		return false
	}
	full := c.payloadMTU + wireOverhead
	return c.ccInFlight == 0 || c.ccInFlight+c.probeBytes+full <= c.cc.window() || c.ccInFlight+n+wireOverhead <= 2*full
}

// paceRate returns the connection's pacing rate in bytes per second (D30).
// Before any ack has timed a round trip, the heartbeats' smallest one
// stands for it, or D17's smoothed RTT before they have one (N85).
func (c *conn) paceRate() float64 {
	rtt := c.hb.srtt
	if c.hb.sampled {
		rtt = c.hb.minRTT
	}
	return c.cc.rate(rtt)
}

// paceReady reports whether the pacer lets data or a resend go at now
// (D30, N79).
func (c *conn) paceReady(now clock.Time) bool {
	// A bundle whose first packet the pacer let go fills its datagram:
	// the pacer paces datagrams (N79).
	if c.bundling || !c.cc.on {
		return true
	}
	if now <= c.cc.filled {
		return c.cc.tokens > 0 // no time to fill the bucket for
	}
	return c.cc.ready(now, c.paceRate(), c.payloadMTU+2)
}

// poll writes the connection's next packet into buf (see pollPacket) and
// takes its size from the pacer's tokens (D30, N79).
func (c *conn) poll(now clock.Time, buf []byte) ([]byte, bool) {
	b, ok := c.pollPacket(now, buf)
	if ok {
		c.spent(b[len(buf):])
	}
	return b, ok
}

// spent takes packet p, just polled, from the pacer's tokens (D30, N79).
func (c *conn) spent(p []byte) {
	// Acks and heartbeats slow data down but never hold the bucket
	// below empty: a connection receiving more than its own rate
	// carries would otherwise owe its tokens for good, its data and
	// resends never let go (N79).
	ch := int16(binary.BigEndian.Uint16(p))
	c.cc.spend(len(p), c.payloadMTU+2, ch != chAck && ch != chHeartbeat)
	if c.flooding() {
		c.floodBeat()
	}
}

// flooding reports whether the pacer, not the application, holds data
// back, or the connection sends more than the application paces: then
// its heartbeat is brought forward (floodBeat, N90).
func (c *conn) flooding() bool {
	return c.queued > 0 && (c.cc.tokens <= 0 || c.cc.sent-c.hb.lastBytes() >= floodDatagrams*uint64(c.payloadMTU))
}

// roomNext reports whether the window lets cs's next first-time packet,
// reliable and cut at mtu, go now: a full packet or this one fits what
// may be in flight (D22, N87).
func (c *conn) roomNext(cs *chanState, mtu int) bool {
	return c.roomReliable(mtu) || c.roomReliable(cs.snd.NextLen(mtu))
}

// pollPacket writes the connection's next packet into buf, in order of
// priority: heartbeat echoes and due heartbeats, acks, MTU estimation,
// then, when the pacer lets them go, due resends and first-time data
// round robin across channels.
func (c *conn) pollPacket(now clock.Time, buf []byte) ([]byte, bool) {
	if !c.established() {
		return buf, false
	}
	c.expireProbes(now)
	cfg := &c.ep.cfg
	if v, ok := c.hb.popEcho(); ok {
		if c.role == Client && c.inFlight == 0 && now >= c.hb.earlyUntil {
			// The echo is this side's heartbeat for the interval (N54).
			c.hb.echoSent(now, heartbeatInterval(cfg.Timeout))
		}
		return appendHeartbeat(appendPacketHeader(buf, chHeartbeat), v), true
	}
	if now >= c.hb.nextSend {
		v := c.hb.originate(now, heartbeatInterval(cfg.Timeout), c.cc.sent)
		c.askBundles() // with each of the first few heartbeats (D24, N69)
		c.askPunch()   // and the punch extension's likewise (X2)
		if c.proving(now) {
			c.sentProof(now)
			return appendProof(buf, v), true
		}
		return appendHeartbeat(appendPacketHeader(buf, chHeartbeat), v), true
	}
	if c.pendingAcks() > 0 {
		return c.appendAcks(now, buf), true
	}
	if c.ackRepeatAt != 0 && now >= c.ackRepeatAt {
		c.ackRepeatAt = 0
		if c.hasRepeats(now) {
			return c.appendAcks(now, buf), true
		}
	}
	if cfg.Transport == Stream {
		b, id, ok := c.stream.pop(buf)
		if id != 0 {
			// No acks on a Stream transport (D4): written is all
			// that is known (N56).
			c.tracked--
			c.ep.emit(Event{Kind: EventOutcome, Conn: c.handle, Addr: c.addr, Message: id, Outcome: OutcomeSent})
		}
		c.maybeWritable()
		return b, ok
	}
	if b, ok := c.mtuPoll(now, buf); ok {
		return b, true
	}
	if !c.paceReady(now) {
		return buf, false
	}
	b, ok := c.pollData(now, buf)
	if !ok && c.dataTurn && !c.bundling {
		// Data's turn beside the probes, and nothing of it could go
		// after all (its messages expired): the probe's turn (N153).
		c.dataTurn, c.probeShare = false, 0
		return c.mtuPoll(now, buf)
	}
	return b, ok
}

// pollData writes the connection's next resend or first-time packet into
// buf, once the pacer has let it go (pollPacket).
func (c *conn) pollData(now clock.Time, buf []byte) ([]byte, bool) {
	cfg := &c.ep.cfg
	if c.newTurn {
		// Resends and first sends take turns for the pacer's tokens
		// while both wait: a channel whose packets keep being lost
		// cannot hold up the new messages of another (N80).
		c.newTurn = false
		if b, ok := c.pollNew(now, buf); ok {
			return b, true
		}
	}
	if c.resendDue(now) {
		rtt := c.resendRTT()
		c.timesStale = true // a resend moves its packet later; nothing due means the times were early
		// The channel whose resend is due first: the pacer may let only
		// some go, and none may wait behind another channel's (D30).
		var first *chanState
		var due clock.Time
		for _, cs := range c.sendChans {
			if t := cs.snd.NextResend(rtt, cfg.MaxResendInterval); t != 0 && t <= now && (first == nil || t < due) {
				first, due = cs, t
			}
		}
		if cs := first; cs != nil {
			b, rs, ok := cs.snd.AppendResend(appendPacketHeader(buf, cs.id), now, rtt, cfg.MaxResendInterval)
			if ok {
				if rs.N == 1 {
					// Deemed lost: out of the window's count; its
					// resends are paced, not windowed (N76).
					c.ccInFlight -= rs.Bytes + wireOverhead
				}
				if c.cc.onResend(now, rs.Prev, c.payloadMTU+wireOverhead, c.hb.sampled || c.cc.sampled) {
					c.stats.CongestionEvents++
				}
				c.stats.PacketsResent++
				c.stats.BytesResent += uint64(len(b))
				c.newTurn = c.cc.on
				return b, true
			}
		}
	}
	return c.pollNew(now, buf)
}

// pollNew sends the next first-time packet, serving channels round robin,
// each for a turn of its share of a bundle (takeTurn, N122). A reliable
// packet is weighed against the window as a full one, and
// against its floor at its size (roomReliable). One that does not fit
// is held: until it goes, no other channel's reliable packet goes before
// it, so that small packets cannot keep a large one out, while
// unreliable ones go round as before (N87).
func (c *conn) pollNew(now clock.Time, buf []byte) ([]byte, bool) {
	cfg := &c.ep.cfg
	mtu := c.payloadMTU - channel.HeaderLen
	roomFull := c.roomReliable(mtu)
	expired := now.Add(-cfg.UnreliableMaxDelay)
	if h := c.holding(); h != nil && (roomFull || c.roomReliable(h.snd.NextLen(mtu))) {
		// It fits now: it goes first.
		c.holdCh = nil
		if i := slices.Index(c.ring, h); i >= 0 {
			c.ringPos, c.turnLeft = i, 0
		}
	}
	for tries := len(c.ring); tries > 0; tries-- {
		if c.ringPos >= len(c.ring) {
			c.ringPos = 0
		}
		cs := c.ring[c.ringPos]
		if c.cc.on {
			if n, bytes := cs.snd.DropExpired(expired); n > 0 {
				// Too late to be of use (D30, N80).
				c.queued -= bytes
				c.stats.UnreliableExpired += uint64(n)
				if cs.tracked {
					c.trackDropped(cs, bytes)
				}
				c.maybeWritable()
			}
		}
		if !cs.snd.MayAppend() {
			// Its sequence numbers wait for an ack (N41), which puts it
			// back; or all it had expired, and it may be idle.
			cs.inRing = false
			c.ring = append(c.ring[:c.ringPos], c.ring[c.ringPos+1:]...)
			c.turnLeft = 0
			c.senderIdle(cs)
			continue
		}
		if cs.snd.NextReliable() && (c.holdCh != nil || !roomFull && !c.roomReliable(cs.snd.NextLen(mtu))) {
			if c.holdCh == nil {
				c.holdCh = cs
			}
			c.ringPos, c.turnLeft = c.ringPos+1, 0
			continue
		}
		return c.sendNew(now, buf, cs, mtu), true
	}
	return buf, false
}

// sendNew appends to buf the next first-time packet of cs, at the ring's
// position ringPos, cut at mtu (pollNew).
func (c *conn) sendNew(now clock.Time, buf []byte, cs *chanState, mtu int) []byte {
	b, sent := cs.snd.AppendNew(appendPacketHeader(buf, cs.id), now, mtu)
	if cs.tracked {
		c.trackSent(cs, sent)
	}
	r := channel.Run{Packets: 1, Bytes: sent.Bytes}
	if sent.Reliable {
		r.Reliable, r.ReliableBytes = 1, sent.Bytes
	}
	c.sentRun(now, cs, r)
	return b
}

// sentRun accounts for the packets of channel cs sent for the first time
// at now (sendNew, appendRun): what they took off the queue, the reliable
// ones in flight, the channel's place in the ring.
func (c *conn) sentRun(now clock.Time, cs *chanState, r channel.Run) {
	c.queued -= r.Bytes
	if r.Reliable > 0 {
		if !c.cc.reliable {
			c.cc.sentReliable()
		}
		c.stats.ReliablePacketsSent += uint64(r.Reliable)
		c.inFlight += r.ReliableBytes
		c.ccInFlight += r.ReliableBytes + r.Reliable*wireOverhead
		c.maxMTUInFlight = max(c.maxMTUInFlight, c.payloadMTU)
		if !cs.inSend {
			cs.inSend = true
			cs.sendIdx = int32(len(c.sendChans))
			c.sendChans = append(c.sendChans, cs)
		}
		c.sentReliable(now)
	}
	if cs.snd.MayAppend() {
		c.takeTurn(cs, r)
	} else {
		cs.inRing = false
		c.ring = append(c.ring[:c.ringPos], c.ring[c.ringPos+1:]...)
		c.turnLeft = 0
		c.senderIdle(cs) // it sent only unreliable packets
	}
	c.maybeWritable()
}

// turnOverhead is what a packet takes in a bundle beside its chunk: its
// length field, its channel id and its channel header (D24).
const turnOverhead = bundleLenSize + 2 + channel.HeaderLen

// turnQuantum returns what a channel's turn in the ring starts with: its
// share of a bundle among the channels in the ring, and 1, a packet a
// turn, for a peer that takes no bundles (N122).
func (c *conn) turnQuantum() int {
	if !c.bundleTo {
		return 1
	}
	return (c.payloadMTU + 2) / max(len(c.ring), 1)
}

// turnRoom returns what the channel at ringPos may send in its turn:
// what is left of the turn under way, or a new turn's share.
func (c *conn) turnRoom() int {
	if c.turnLeft > 0 {
		return c.turnLeft
	}
	return c.turnQuantum()
}

// takeTurn counts r, the packets channel cs, at ringPos, just sent, in its
// turn, which it began if none was under way. The turn goes on while cs's
// next packet fits what is left of it; otherwise the ring moves on. A
// turn takes at least one packet, so a channel whose packets are larger
// than its share sends one a turn, as every channel did before N122.
func (c *conn) takeTurn(cs *chanState, r channel.Run) {
	left := c.turnRoom() - (r.Bytes + r.Packets*turnOverhead)
	if left > 0 && turnOverhead+cs.snd.NextLen(c.payloadMTU-channel.HeaderLen) <= left {
		c.turnLeft = left
		return
	}
	c.ringPos, c.turnLeft = c.ringPos+1, 0
}

// joinRing puts cs, which has first-time data to send, at the back of the
// ring. The turn under way is cut to the share it would start with now
// (N122), so that cs waits behind a share of each other channel's packets,
// about a bundle's worth in all, rather than a whole bundle of the first
// one's: a turn still ends only after its next packet, which goes even if
// the cut left less than it, and a turn whose packets are larger than the
// share is a packet, as before N122.
func (c *conn) joinRing(cs *chanState) {
	cs.inRing = true
	c.ring = append(c.ring, cs)
	c.turnLeft = min(c.turnLeft, c.turnQuantum())
}

// reliableRoom returns how many bytes of reliable packets, each counted
// with wireOverhead, the connection can send in a run with roomNext
// holding before each (N111): at most MaxInFlight and the window, as
// roomReliable asks, but without its allowances for an empty window and
// a small packet, which the checks between runs take.
func (c *conn) reliableRoom() int {
	return min(c.ep.cfg.MaxInFlight-c.payloadMTU-c.inFlight,
		c.cc.window()-c.probeBytes-(c.payloadMTU+wireOverhead)-c.ccInFlight)
}

// floodRoom returns how many bytes of packets (their spend) the
// connection can send in a run with flooding false after each but the
// last (N111): 0 if it may already hold. Without congestion control
// nothing a run sends changes it; with it, the bytes the pacer's tokens
// cover, less two for the rounding of their sum, and those before
// floodDatagrams datagrams since the last heartbeat.
func (c *conn) floodRoom() int {
	if c.queued <= 0 {
		return math.MaxInt // sending only takes from the queue
	}
	if c.flooding() {
		return 0
	}
	if !c.cc.on {
		return math.MaxInt
	}
	room := floodDatagrams*uint64(c.payloadMTU) - (c.cc.sent - c.hb.lastBytes())
	if t := c.cc.tokens - 2; t < float64(room) {
		if t <= 0 {
			return 0
		}
		room = uint64(t)
	}
	return int(min(room, math.MaxInt))
}

// floodDatagrams is how many datagrams of the payload MTU a connection
// sends between two heartbeats, with more data queued, for it to flood
// (N90): its peer's echoes then cost at most one datagram in that many.
const floodDatagrams = 64

// floodPaced is how many datagrams' time at the pacing rate a flooding
// connection's heartbeats are apart at least (N90).
const floodPaced = 4

// floodBeat brings the next heartbeat forward, to hb.floodIv after the
// last, while a connection that no ack times floods: the echoes are all
// the echo limiter measures the queue by (N90). It floods when the pacer
// holds its queued data back, or when it has sent floodDatagrams since the
// last heartbeat with more queued; a stream the application paces itself,
// a game's updates say, keeps D16's interval, and its peer sends no more
// echoes than before. hb.floodIv is an eighth of the latest RTT sample, so
// that the heartbeats remembered span two round trips, and doubles with an
// echo of one already forgotten; before the first sample it is 0 and the
// heartbeats keep their interval, or a long path's echoes would come back
// to heartbeats already forgotten.
func (c *conn) floodBeat() {
	if c.hb.floodIv == 0 || !c.cc.echoLimited() {
		return
	}
	// Asked even when nothing changes: asking may lift the echo
	// limiter's cap, once the window's rate passes it (computeRate).
	rate := c.paceRate()
	if !c.hb.lastSent.Add(c.hb.floodIv).Before(c.hb.nextSend) {
		// The interval is at least floodIv: if that is not sooner,
		// nothing is, and the division below is saved.
		return
	}
	// No closer than floodPaced datagrams at the pacing rate: a slow
	// pacer would otherwise send more heartbeats, and draw more echoes,
	// than data.
	iv := max(c.hb.floodIv, time.Duration(floodPaced*float64(c.payloadMTU+2)/rate*1e9))
	if t := c.hb.lastSent.Add(iv); t < c.hb.nextSend {
		c.hb.nextSend = t
	}
}

// maybeWritable reports EventWritable once a refused Send would fit.
func (c *conn) maybeWritable() {
	if c.wantWritable > 0 && c.queued+c.stream.bytes+c.wantWritable <= c.ep.cfg.SendQueueSize {
		c.wantWritable = 0
		c.ep.emit(Event{Kind: EventWritable, Conn: c.handle, Addr: c.addr})
	}
}

// sentAck is an ack entry already sent, when, and the number of times it
// may still be repeated (N29).
type sentAck struct {
	a    channel.Ack
	at   clock.Time
	left int
}

const (
	// maxSentAcks bounds the ack entries a connection keeps for repeating:
	// the newest are the ones worth repeating, and it keeps appendAcks'
	// work per packet constant.
	maxSentAcks = 64
	// maxAckRepeatAge is how long an entry may be repeated after it was
	// first sent. Packet sequence numbers count unreliable packets too
	// (D5), so a channel that sends only unreliable ones for long enough
	// wraps without a single ack; an entry kept across a wrap could then
	// acknowledge a new packet that never arrived. Wrapping takes
	// 8,398,608 packets (D5), more than 8 s even at a million packets a
	// second on one channel; and a repeat is worth something only until
	// the peer's first resend, two round trips after the packet was sent
	// (D14).
	maxAckRepeatAge = time.Second
)

// appendAcks writes one ack packet (D13) with as many pending acks as the
// payload MTU allows, then fills the room left with repeats of the entries
// sent before, newest first, each at most Config.AckRepeats times (N29).
func (c *conn) appendAcks(now clock.Time, buf []byte) []byte {
	b := appendPacketHeader(buf, chAck)
	room := max(1, c.payloadMTU/channel.AckLen)
	pending := c.acks[c.acksHead:]
	n := min(len(pending), room)
	b = channel.AppendAcks(b, pending[:n])
	c.stats.AcksSent += uint64(n)
	if repeats := c.ep.cfg.AckRepeats; repeats > 0 {
		room -= n
		oldest := now.Add(-maxAckRepeatAge)
		for i := len(c.sentAcks) - 1; i >= 0 && room > 0; i-- {
			if e := &c.sentAcks[i]; e.left > 0 && e.at >= oldest {
				b = channel.AppendAck(b, e.a)
				e.left--
				room--
				c.stats.AcksRepeated++
			}
		}
		kept := c.sentAcks[:0]
		if n < maxSentAcks {
			// Those that may still be repeated; beside maxSentAcks new
			// entries, none would stay.
			for _, e := range c.sentAcks {
				if e.left > 0 && e.at >= oldest {
					kept = append(kept, e)
				}
			}
		}
		for _, a := range pending[max(0, n-maxSentAcks):n] {
			kept = append(kept, sentAck{a: a, at: now, left: repeats})
		}
		if drop := len(kept) - maxSentAcks; drop > 0 {
			kept = kept[:copy(kept, kept[drop:])]
		}
		c.sentAcks = kept
	}
	// Consumed from the front: O(1) per entry, however many wait (D13).
	c.acksHead += n
	if c.acksHead == len(c.acks) {
		c.acks, c.acksHead = c.acks[:0], 0
	}
	return b
}

// repeatAcksLater schedules an ack packet of repeats (N29) a quarter of a
// round trip from now, after a duplicate showed that an ack was lost: the
// duplicate's ack then goes out twice even when no later ack packet would
// carry its repeat, as at the end of a transfer, where one lost ack
// otherwise costs a full resend interval (N40).
func (c *conn) repeatAcksLater(now clock.Time) {
	if c.ep.cfg.AckRepeats <= 0 || c.ackRepeatAt != 0 {
		return
	}
	c.ackRepeatAt = now.Add(max(c.ep.cfg.MinResendRTT, c.hb.srtt/4))
}

// hasRepeats reports whether some ack entry may still be repeated at now.
func (c *conn) hasRepeats(now clock.Time) bool {
	oldest := now.Add(-maxAckRepeatAge)
	for i := range c.sentAcks {
		if e := &c.sentAcks[i]; e.left > 0 && e.at >= oldest {
			return true
		}
	}
	return false
}

// pendingAcks returns the number of acks waiting to be sent.
func (c *conn) pendingAcks() int { return len(c.acks) - c.acksHead }

// countSent counts a datagram sent to the peer, for the connection and
// the endpoint's totals.
func (c *conn) countSent(n int) {
	c.stats.PacketsSent++
	c.stats.BytesSent += uint64(n)
	c.ep.estats.PacketsSent++
	c.ep.estats.BytesSent += uint64(n)
}

// countReceived counts a datagram received from the peer, for the
// connection and the endpoint's totals.
func (c *conn) countReceived(n int) {
	c.stats.PacketsReceived++
	c.stats.BytesReceived += uint64(n)
	c.ep.estats.PacketsReceived++
	c.ep.estats.BytesReceived += uint64(n)
}

// releaseBuffers drops the connection's queues when it is removed.
func (c *conn) releaseBuffers() {
	c.chans, c.last, c.low, c.ring, c.sendChans, c.recvHeap, c.recvDue, c.acks, c.sentAcks = nil, nil, nil, nil, nil, nil, nil, nil, nil
	c.acksHead = 0
	c.spare, c.spareSenders, c.receivers, c.senders = nil, nil, 0, 0
	c.idleRecv, c.idleSend = idleQueue{}, idleQueue{}
	c.grown, c.shrinkAt = nil, 0
	c.timesStale = true
	c.stream = streamQueue{}
	c.queued, c.inFlight, c.ccInFlight = 0, 0, 0
}
