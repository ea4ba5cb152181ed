package fastnet

import (
	"net/netip"
	"reflect"
	"time"

	"github.com/fastnet-engine/fastnet/channel"
	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/mtu"
)

// connState is where a connection is in its life.
type connState uint8

const (
	stateQuerying   connState = iota + 1 // client: waiting for both query answers (D15)
	stateConnecting                      // client: "connect?" sent, waiting for "connected"
	stateConnected                       // established
	stateClosing                         // graceful close: draining reliable data (D18)
)

// conn is one connection of an endpoint. The endpoint owns it; methods are
// split by concern across conn_*.go, handshake.go and heartbeat.go.
type conn struct {
	ep         *Endpoint
	handle     Handle
	addr       netip.AddrPort
	local      netip.Addr // the local address to send from, if known (N149)
	id         uint32
	state      connState
	peerClosed bool // its peer said "disconnect": no retry of its handshake can be answered by it (N123)
	// role is this side's role on the connection: Client or Server, never
	// Peer (X19).
	role Role

	// heap bookkeeping of the endpoint's timer heap.
	heapIdx  int
	deadline clock.Time
	// sendable is set while the connection is in the endpoint's ring of
	// connections with something to transmit.
	sendable bool
	dirty    bool // in Endpoint.dirty: its deadline is to be recomputed

	// Address validation (D25), server: unvalidated until the client
	// echoes a heartbeat of the challenge; validateBy ends it silently
	// before; held keeps the messages it completed meanwhile, charged
	// heldCharge to recvBudget.
	unvalidated bool
	validateBy  clock.Time
	held        []Event
	heldCharge  int

	// Handshake (client).
	started    clock.Time // when Connect was called
	retryAt    clock.Time // next queries or "connect?"
	gotFastnet bool
	gotVersion bool

	// Heartbeats and RTT (D16, D17).
	hb heartbeat

	// Bundles (D24): bundleYes once the peer answered
	// "query:ext:bundle=yes", bundleTo once it also echoed a heartbeat
	// that went in a bundle (this side may send it bundles, N156),
	// bundleFrom once this side answered it so (it may send us
	// bundles), bundleAsks the queries sent so far (N69),
	// bundleProofs the heartbeats sent in bundles of their own, and
	// bundleForged once an echo of a heartbeat never sent came while
	// proving: this side then never bundles to the peer (N156).
	bundleYes, bundleTo, bundleFrom, bundleForged bool
	bundleAsks, bundleProofs                      uint8
	// bundling is set while bundle fills a datagram (N79); newTurn
	// after a resend, for first sends to go next (N80).
	bundling, newTurn bool
	// The punch extension (X2, docs/nat.md): punchTo once the peer
	// answered "query:ext:punch=yes" (it speaks introductions), and
	// punchAsks the queries sent so far.
	punchTo   bool
	punchAsks uint8
	// punch is the introduction whose proved path a client-role
	// connection dials (X12); intro what its events say of the
	// introduction that made it.
	punch *intro
	intro *Introduction

	// Channels.
	chans   map[int16]*chanState
	last    *chanState   // one-entry lookup cache
	low     []*chanState // chans' states of channels 0 to len(low)-1 by id, up to lowChannels (N120)
	ring    []*chanState // channels with first-time data to send, served round robin
	ringPos int
	// turnLeft is what is left of the turn of the channel at ringPos, in
	// bytes of packets as a bundle holds them (turnOverhead each beside
	// its chunk); 0 when no turn is under way (N122).
	turnLeft  int
	holdCh    *chanState   // a channel whose reliable packet did not fit: no other reliable packet goes before it (pollNew)
	sendChans []*chanState // channels with reliable packets in flight
	// recvHeap holds the channels whose receiver has a deadline (MCI,
	// D11), a min-heap by that deadline (chanState.rdl), so that neither
	// the connection's next deadline nor the expiry of what is due
	// costs a pass over them all: a peer that kept thousands of
	// messages unfinished made each of its datagrams cost a pass
	// (N137). recvDue is expireReceivers' scratch.
	recvHeap recvHeap
	recvDue  []*chanState
	// acks holds the acks waiting to be sent from acksHead on, consumed
	// from the front without shifting (D13).
	acks     []channel.Ack
	acksHead int
	// sentAcks holds the latest ack entries sent, oldest first, with the
	// repeats each has left (N29); ackRepeatAt is when an ack packet of
	// repeats alone is due after a duplicate (N40), 0 if none.
	sentAcks    []sentAck
	ackRepeatAt clock.Time
	stream      streamQueue // Stream transport: whole messages, in order

	// The earliest resend and the earliest first send of an unacked
	// packet over sendChans (sendTimes), and the resend RTT they were
	// reckoned with; timesStale after an ack or a resend, which can make
	// them later. A first send folds in without a scan, a first resend
	// interval (timesFirst) after it.
	resendAt, oldestAt   clock.Time
	timesRTT, timesFirst time.Duration
	timesStale           bool

	queued     int // encoded bytes waiting to be sent the first time
	inFlight   int // reliable bytes unacknowledged (sum over senders)
	ccInFlight int // of them, those never resent: what the congestion window counts (N76)
	// probes holds the MTU probes of the last round trip, and
	// probeBytes their bytes, which the window counts beside the data in
	// flight (N92).
	probes     *[probeRing]probeSent // nil while it holds none
	probeHead  int
	probeN     int
	probeBytes int
	// probeAt is when the estimator's last packet went, replyAt the
	// responder's last count (N94).
	probeAt, replyAt clock.Time
	// probeShare is the bytes of paced datagrams the connection may
	// still send, since the estimator's last packet went beside queued
	// data, before the next while unreliable data waits; dataTurn is set
	// while PollTransmit fills such a datagram, in which no estimator
	// packet is polled (N153).
	probeShare int
	dataTurn   bool
	// peerProbeAt is when the last of the peer's MTU probes arrived
	// (N93).
	peerProbeAt  clock.Time
	wantWritable int // > 0: a Send was refused for this many bytes; report EventWritable once they fit

	// recvBudget is what the peer makes the connection hold (D22, N49),
	// within ConnReceiveMemory and, as its Parent, the endpoint's budget.
	recvBudget channel.Budget
	recvPaused bool // SetReceivePaused
	// How many channels hold a receiver and a sender, how many may before
	// idle ones are parked, and idle ones kept for reuse (N25).
	receivers, senders         int
	liveReceivers, liveSenders int
	spare                      []*channel.Receiver
	spareSenders               []*channel.Sender
	idleRecv, idleSend         idleQueue
	// grown holds the channels whose sender keeps the bookkeeping of a
	// large burst (channel.Sender.Grown), and shrinkAt is when they let it
	// go, 0 if none does (N95).
	grown    []*chanState
	shrinkAt clock.Time

	payloadMTU int
	// Admission of estimations (N53): mtuRunning while this side's
	// estimation holds one of the endpoint's places, mtuWaiting while it
	// waits for one; respActive while the peer's estimation is among
	// those answered, respLast its latest reset or probe, respSince when
	// it was given its place.
	mtuRunning, mtuWaiting bool
	respActive             bool
	respLast, respSince    clock.Time
	estimator              *mtu.Estimator // nil on Stream transports and when disabled
	mtuLimited             string         // why estimator is nil on a Datagram transport (Stats.MTULimited)
	responder              *mtu.Responder // nil on Stream transports
	// maxMTUInFlight is the largest payload MTU reliable packets now in
	// flight were cut with; blackHoleSeen the oldest-unacked instant a
	// black hole was last checked for (N16).
	maxMTUInFlight int
	blackHoleSeen  clock.Time
	blackHoleAgain clock.Time // when a suspicion checkBlackHole could not act on is looked at again

	// Closing (D18).
	closeReason string
	lingerUntil clock.Time

	stats Stats

	// Tracked messages (N55): how many have no outcome yet, the trackers
	// of the channels that have some, and idle trackers kept for reuse.
	tracked       int
	trackers      map[int16]*tracker
	spareTrackers []*tracker

	// win counts the traffic of the current window, and keeps the rates
	// of the last (N57, N58).
	win window

	// cc is the congestion controller and pacer (D30); ackedChans the
	// channels an ack packet being handled acked packets of (N81).
	cc         congestion
	ackedChans []ackedChan
}

// ackedChan is a channel an ack packet being handled acked packets of, and
// the newest such packet's R (N81).
type ackedChan struct {
	cs  *chanState
	rel channel.Seq
}

// newer moves e's R on to rel if rel is the newer: less than half the
// sequence space after it.
func (e *ackedChan) newer(rel channel.Seq) {
	if channel.Distance(e.rel, rel) < channel.SeqSpace/2 {
		e.rel = rel
	}
}

const (
	// liveReceivers is how many receivers, and how many senders, a
	// connection keeps for its channels at first before it parks those
	// that fall idle (N25): a connection using a few channels never parks,
	// and one that touched thousands keeps a few dozen bytes for each. A
	// channel that needs its half again after it was parked raises the
	// connection's number by one, up to maxLiveReceivers (or
	// Config.MaxHoldingChannels if lower), so that an application cycling
	// through that many channels stops parking and reviving them at every
	// message.
	liveReceivers    = 32
	maxLiveReceivers = 1024
	// spareReceivers bounds the idle receivers, and the idle senders, a
	// connection keeps for reuse, so that a channel that parks and revives
	// at each message allocates nothing.
	spareReceivers = 4
)

// chanState is one message channel of a connection, both directions. A
// half without its receiver or sender (never made, or parked, N25) keeps
// its position: the ignore number and L (D7, D8) of the receiving half,
// the next sequence number and R (D5, D7) of the sending half.
type chanState struct {
	id     int16
	inRing bool
	inSend bool
	// inRecv: in conn.recvHeap, at rIdx, with the deadline rdl: the
	// receiver's NextDeadline when last looked at, never later than it
	// (recvTimed, N137).
	inRecv bool
	// acked: an ack packet being handled acked a packet of the channel,
	// which is in conn.ackedChans at ackIdx (N81, N138).
	acked bool
	// inGrown: in conn.grown (park.go, N95). Beside the flags above, in
	// what would be padding.
	inGrown bool
	// In c.idleRecv, c.idleSend (park.go).
	rcvQueued, sndQueued bool
	// charged: the peer has used the channel, and chanStateMemory is
	// charged to c.recvBudget for the life of the connection.
	charged bool
	// tracked: the channel has tracked messages pending, followed by
	// conn.trackers (N55).
	tracked bool
	// lAt says where the parked receiver's packet with R = L was
	// (channel.Receiver.LAt, N154): at its ignore number (lAtAtG), before
	// the channel's first packet (lAtStart: no reliable packet consumed),
	// or elsewhere, not kept (lAtUnknown), which would cost the struct
	// 16 bytes of every used channel's.
	lAt uint8
	// sendIdx is the channel's place in c.sendChans while inSend, so that
	// an ack removes it without a scan.
	sendIdx  int32
	rIdx     int32
	ackIdx   int32
	g, l     channel.Seq
	seq, rel channel.Seq
	rdl      clock.Time
	snd      *channel.Sender
	rcv      *channel.Receiver
}

// chanStateMemory is what a channel the peer has used costs its connection
// for the life of the connection (ChannelStateMemory, N49): its chanState
// as the allocator rounds it, an entry of the connection's map of channels
// (a 16-byte slot and a control byte in a table at most 7/8 full, which
// doubles when it grows: at most 39 bytes), and a pointer in each queue
// of idle halves, whose arrays may be twice their length.
var chanStateMemory = (int(reflect.TypeFor[chanState]().Size())+15)&^15 + mapEntryMemory + 2*2*ptrSize

const (
	mapEntryMemory = 40
	ptrSize        = 4 << (^uintptr(0) >> 63) // 4 or 8
)

func newConn(ep *Endpoint, h Handle, addr netip.AddrPort, role Role) *conn {
	c := &conn{
		ep:         ep,
		handle:     h,
		addr:       addr,
		role:       role,
		heapIdx:    -1,
		chans:      make(map[int16]*chanState),
		payloadMTU: ep.cfg.InitialPayloadMTU,
	}
	if ep.cfg.Transport == Stream {
		c.payloadMTU = ep.cfg.MaxPacketSize - 2
	}
	c.recvBudget.Limit = ep.cfg.ConnReceiveMemory
	c.recvBudget.MaxHolders = ep.cfg.MaxHoldingChannels
	c.recvBudget.Parent = &ep.recvBudget
	c.recvBudget.Reserve = ep.recvBudget.Reserve
	c.liveReceivers, c.liveSenders = ep.liveReceivers, ep.liveReceivers
	c.hb.init(role)
	c.cc.init(&ep.cfg, ep.now)
	c.stats.PayloadMTU = c.payloadMTU
	return c
}

// channel returns the state of message channel id, creating it if asked.
func (c *conn) channel(id int16, create bool) *chanState {
	if c.last != nil && c.last.id == id {
		return c.last
	}
	var cs *chanState
	if uint(id) < uint(len(c.low)) {
		cs = c.low[id]
	} else if id < 0 || id >= lowChannels {
		cs = c.chans[id]
	}
	if cs == nil {
		if !create {
			return nil
		}
		cs = &chanState{id: id, g: -1}
		c.chans[id] = cs
		if id >= 0 && id < lowChannels {
			if int(id) >= len(c.low) {
				// Exactly as long as needed: 64 places at most.
				low := make([]*chanState, int(id)+1)
				copy(low, c.low)
				c.low = low
			}
			c.low[id] = cs
		}
	}
	c.last = cs
	return cs
}

// lowChannels is how many of the first channels a connection finds by
// their id in a slice rather than in its map (N120): an application that
// sends on several channels at once, a few low ones as a rule, looked
// one up in the map for every message sent and every packet taken
// (about 110 instructions of each side's work for a 64-byte message in a
// full bundle on four channels). The slice holds up to the highest such
// channel the connection has used: 8 bytes a channel, 512 at most, not
// charged to the receive memory (D22), as the map's own places are not.
const lowChannels = 64

// sendChannel returns channel id's state with its sending half: a spare
// sender or a new one, at the channel's position (D5, D7). Each half is
// made on first use, so that a channel the peer only sends on costs no
// sender here, and one this side only sends on no receiver.
func (c *conn) sendChannel(id int16) *chanState {
	cs := c.channel(id, true)
	if cs.snd != nil {
		return cs
	}
	if cs.snd = popSpare(&c.spareSenders); cs.snd == nil {
		cs.snd = channel.NewSender(id)
	}
	if cs.seq != 0 || cs.rel != 0 { // revived: the channels in use outnumber the senders kept
		c.liveSenders = min(c.liveSenders+1, c.ep.liveCap)
	}
	cs.snd.Reuse(id, cs.seq, cs.rel)
	cs.snd.SetMaxAhead(c.ep.cfg.ReceiveWindow)
	c.senders++
	return cs
}

// recvChannel returns channel id's state with its receiving half: a spare
// receiver or a new one, at the channel's position (D7, D8); or nil if the
// receive memory has no room for the channel's state or for a receiver
// (D22, N49), and no idle receiver can be taken from another channel.
func (c *conn) recvChannel(id int16) *chanState {
	cs := c.channel(id, false)
	if cs == nil || !cs.charged {
		if !c.recvBudget.Take(chanStateMemory) {
			return nil
		}
		cs = c.channel(id, true)
		cs.charged = true
	}
	if cs.rcv != nil {
		return cs
	}
	rcv := popSpare(&c.spare)
	if rcv == nil && c.recvBudget.Take(channel.ReceiverSize) {
		cfg := &c.ep.cfg
		rcv = channel.NewReceiver(channel.ReceiverConfig{
			Window:     cfg.ReceiveWindow,
			MaxMessage: cfg.MaxMessageSize,
			MaxBytes:   cfg.ChannelReceiveMemory,
			Budget:     &c.recvBudget,
			MCI:        cfg.CoalesceInterval,
			Presums:    &c.ep.presums,
			Arena:      &c.ep.arena,
		})
	}
	if rcv == nil {
		// No room for another: take the receiver idle the longest.
		if rcv = c.takeIdleReceiver(); rcv == nil {
			return nil
		}
	}
	cs.rcv = rcv
	if cs.g != -1 || cs.l != 0 { // revived: the channels in use outnumber the receivers kept
		c.liveReceivers = min(c.liveReceivers+1, c.ep.liveCap)
	}
	if cs.g != -1 || cs.l != 0 {
		switch cs.lAt {
		case lAtAtG:
			cs.rcv.ReuseAt(cs.g, cs.l, cs.g, true)
		case lAtStart:
			cs.rcv.ReuseAt(cs.g, cs.l, -1, true)
		default:
			cs.rcv.ReuseAt(cs.g, cs.l, 0, false)
		}
	} else {
		cs.rcv.Reuse(cs.g, cs.l)
	}
	c.receivers++
	return cs
}

// established reports whether messages may flow.
func (c *conn) established() bool {
	return c.state == stateConnected || c.state == stateClosing
}

// resendRTT is the RTT resends are timed with: the smoothed RTT, never below
// the configured floor (D14); and never below the smoothed RTT of acks
// (D30), rounded up to the millisecond, which follows a queue growing on
// the path within round trips where heartbeats sample once a second: a
// packet waiting in a queue is not resent as if lost (N77).
func (c *conn) resendRTT() time.Duration {
	rtt := max(c.hb.srtt, c.ep.cfg.MinResendRTT)
	if c.cc.sampled && c.cc.srtt > rtt {
		rtt = (c.cc.srtt + time.Millisecond - 1).Truncate(time.Millisecond)
	}
	return rtt
}

// nextDeadline computes the earliest instant at which the connection has
// something to do.
func (c *conn) nextDeadline() clock.Time {
	cfg := &c.ep.cfg
	switch c.state {
	case stateQuerying, stateConnecting:
		return clock.Earliest(c.retryAt, c.started.Add(cfg.ConnectTimeout))
	}
	d := c.hb.nextSend
	d = clock.Earliest(d, c.hb.lastHeard.Add(cfg.Timeout))
	if c.unvalidated {
		d = clock.Earliest(d, c.validateBy)
	}
	resend, oldest := c.sendTimes()
	if resend != 0 && c.ep.resendsHeld {
		resend = 0 // scheduled again once no longer held (HoldResends)
	}
	mtuAt := c.mtuDeadline()
	if c.cc.on {
		// What waits for the pacer goes when it has tokens again (D30).
		if pace := c.cc.next(c.paceRate()); pace > c.cc.filled {
			if resend != 0 {
				resend = max(resend, pace)
			}
			if mtuAt != 0 && c.queued > 0 {
				mtuAt = max(mtuAt, pace) // probeReady
			}
			if c.newDataAllowed() {
				d = clock.Earliest(d, pace)
			}
		}
		if mtuAt != 0 && c.queued > 0 {
			mtuAt = max(mtuAt, c.probeAt.Add(cfg.MTU.ProbeInterval)) // probeReady
		}
		if c.responder != nil && c.responder.Pending() {
			// A count held back beside data (replyReady).
			d = clock.Earliest(d, c.replyAt.Add(replySpacing))
		}
		if mtuAt != 0 && c.queued > 0 && !c.probeFits(mtuAt) {
			// An ack makes room, and its input looks again; or the
			// window counts as stuck (probeReady).
			mtuAt = max(mtuAt, c.probeStuckAt())
		}
		if c.queued > 0 {
			// Probes leaving the window make room for data (N92).
			d = clock.Earliest(d, c.probesLeaveAt())
		}
	}
	d = clock.Earliest(d, resend)
	d = clock.Earliest(d, c.ackRepeatAt)
	if oldest != 0 {
		d = clock.Earliest(d, oldest.Add(cfg.Timeout))
	}
	if len(c.recvHeap) > 0 {
		d = clock.Earliest(d, c.recvHeap[0].rdl)
	}
	if c.state == stateClosing {
		d = clock.Earliest(d, c.lingerUntil)
	}
	d = clock.Earliest(d, mtuAt)
	d = clock.Earliest(d, c.qualityDeadline())
	d = clock.Earliest(d, c.shrinkAt)
	return d
}

// sendTimes returns when the next resend of any channel is due and when
// the oldest unacked reliable packet was first sent, 0 if none: over every
// channel with packets in flight, scanned again only after acks or
// resends, so that an input or a transmit does not cost a pass over
// thousands of busy channels.
func (c *conn) sendTimes() (resend, oldest clock.Time) {
	rtt := c.resendRTT()
	if c.timesStale || rtt != c.timesRTT {
		maxI := c.ep.cfg.MaxResendInterval
		var r, o clock.Time
		for _, cs := range c.sendChans {
			r = clock.Earliest(r, cs.snd.NextResend(rtt, maxI))
			o = clock.Earliest(o, cs.snd.OldestUnacked())
		}
		c.resendAt, c.oldestAt, c.timesRTT, c.timesStale = r, o, rtt, false
		c.timesFirst = channel.ResendInterval(0, rtt, maxI)
	}
	return c.resendAt, c.oldestAt
}

// resendDue reports whether a resend is due at now and may go: not held
// back (Endpoint.HoldResends). Every test of a resend due goes through
// it: were wantsTransmit to find one that pollPacket does not send,
// PollTransmit would take the connection up again and again.
func (c *conn) resendDue(now clock.Time) bool {
	resend, _ := c.sendTimes()
	return resend != 0 && resend <= now && !c.ep.resendsHeld
}

// sentReliable folds a reliable packet sent for the first time at now into
// sendTimes: its first resend is due a resend interval later (D14), and
// it can only make the earliest times earlier.
func (c *conn) sentReliable(now clock.Time) {
	if c.timesStale || c.resendRTT() != c.timesRTT {
		c.timesStale = true
		return
	}
	c.resendAt = clock.Earliest(c.resendAt, now.Add(c.timesFirst))
	c.oldestAt = clock.Earliest(c.oldestAt, now)
}

// handleTimeout runs every timer of the connection that is due at now.
func (c *conn) handleTimeout(now clock.Time) {
	cfg := &c.ep.cfg
	switch c.state {
	case stateQuerying, stateConnecting:
		c.handshakeTimeout(now)
		return
	}
	if c.unvalidated && now >= c.validateBy {
		c.ep.vstats.Expired++
		c.ep.disconnect(now, c, ErrTimeout, false) // silently (D25)
		return
	}
	if now >= c.hb.lastHeard.Add(cfg.Timeout) {
		c.ep.disconnect(now, c, ErrTimeout, false)
		return
	}
	if t := c.oldestUnacked(); t != 0 && now >= t.Add(cfg.Timeout) {
		err := ErrNotAcknowledging
		if c.maxMTUInFlight > c.payloadMTU {
			err = ErrPathMTU
		}
		c.ep.disconnect(now, c, err, true)
		return
	}
	if c.state == stateClosing && now >= c.lingerUntil {
		c.finishClose(now)
		return
	}
	c.expireReceivers(now)
	if c.state == 0 {
		return // closed by a protocol violation
	}
	c.tick(now) // EventQuality, when due (N57)
	c.mtuTimeout(now)
	if c.shrinkAt != 0 && now >= c.shrinkAt {
		c.shrinkSenders(now)
	}
	// Heartbeats and resends are produced by PollTransmit when due.
}

// closeIfDrained finishes a graceful close once nothing is left to send.
func (c *conn) closeIfDrained(now clock.Time) {
	if c.state == stateClosing && c.drained() {
		c.finishClose(now)
	}
}

// drained reports whether every queued message was sent and every reliable
// packet acknowledged.
func (c *conn) drained() bool {
	return c.queued == 0 && c.inFlight == 0 && len(c.ring) == 0 && c.stream.empty()
}

// finishClose ends a graceful close: "disconnect" goes out and the
// application hears that the connection is closed.
func (c *conn) finishClose(now clock.Time) {
	c.ep.disconnect(now, c, &LocalCloseError{Reason: c.closeReason, Unacknowledged: !c.drained()}, true)
}

// snapshot returns the connection's statistics.
func (c *conn) snapshot() Stats {
	s := c.stats
	s.RTT, s.RTTVar, s.MinRTT = c.hb.srtt, c.hb.rttvar, c.hb.minRTT
	s.PayloadMTU = c.payloadMTU
	c.mtuStats(&s)
	s.SendQueueBytes = c.queued + c.stream.bytes
	s.InFlightBytes = c.inFlight
	for _, cs := range c.sendChans {
		p, _ := cs.snd.InFlight()
		s.InFlightPackets += p
	}
	if c.cc.on {
		s.CongestionWindow = min(c.cc.window(), c.ep.cfg.MaxInFlight)
		s.PacingRate = c.paceRate()
		s.SlowStart = c.cc.fixed == 0 && c.cc.cwnd < c.cc.ssthresh
	}
	if c.intro != nil {
		s.Path = c.intro.Path
	}
	s.ReceiveBytes = c.recvBudget.Used
	s.OpenChannels = len(c.chans)
	if n := s.ReliablePacketsSent + s.PacketsResent; n > 0 {
		s.Loss = float64(s.PacketsResent) / float64(n)
	}
	if now := c.ep.now; now >= c.win.end {
		_, s.SendRate, s.ReceiveRate = c.windowRates(now)
	} else {
		s.SendRate, s.ReceiveRate = c.win.sendRate, c.win.recvRate
	}
	return s
}
