package fastnet

import (
	"net/netip"
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
	ep     *Endpoint
	handle Handle
	addr   netip.AddrPort
	id     uint32
	state  connState

	// heap bookkeeping of the endpoint's timer heap.
	heapIdx  int
	deadline clock.Time
	// sendable is set while the connection is in the endpoint's ring of
	// connections with something to transmit.
	sendable bool

	// Handshake (client).
	started    clock.Time // when Connect was called
	retryAt    clock.Time // next queries or "connect?"
	gotFastnet bool
	gotVersion bool

	// Heartbeats and RTT (D16, D17).
	hb heartbeat

	// Channels.
	chans     map[int16]*chanState
	last      *chanState   // one-entry lookup cache
	ring      []*chanState // channels with first-time data to send, served round robin
	ringPos   int
	sendChans []*chanState // channels with reliable packets in flight
	recvChans []*chanState // channels whose receiver has a deadline (MCI)
	acks      []channel.Ack
	// sentAcks holds the latest ack entries sent, oldest first, with the
	// repeats each has left (N29).
	sentAcks []sentAck
	stream   streamQueue // Stream transport: whole messages, in order

	queued       int // encoded bytes waiting to be sent the first time
	inFlight     int // reliable bytes unacknowledged (sum over senders)
	wantWritable int // > 0: a Send was refused for this many bytes; report EventWritable once they fit

	recvBudget channel.Budget
	recvPaused bool // SetReceivePaused
	// How many channels hold a receiver and a sender, and idle ones kept
	// for reuse (N25).
	receivers, senders int
	spare              []*channel.Receiver
	spareSenders       []*channel.Sender

	payloadMTU int
	estimator  *mtu.Estimator // nil on Stream transports and when disabled
	responder  *mtu.Responder // nil on Stream transports
	// maxMTUInFlight is the largest payload MTU reliable packets now in
	// flight were cut with; blackHoleSeen the oldest-unacked instant a
	// black hole was last checked for (N16).
	maxMTUInFlight int
	blackHoleSeen  clock.Time

	// Closing (D18).
	closeReason string
	lingerUntil clock.Time

	stats Stats
}

const (
	// liveReceivers is how many receivers, and how many senders, a
	// connection keeps for its channels before it parks those that fall
	// idle (N25): a connection using a few channels never parks, and one
	// using thousands keeps a few dozen bytes for each.
	liveReceivers = 32
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
	id       int16
	inRing   bool
	inSend   bool
	inRecv   bool
	g, l     channel.Seq
	seq, rel channel.Seq
	snd      *channel.Sender
	rcv      *channel.Receiver
}

func newConn(ep *Endpoint, h Handle, addr netip.AddrPort) *conn {
	c := &conn{
		ep:         ep,
		handle:     h,
		addr:       addr,
		heapIdx:    -1,
		chans:      make(map[int16]*chanState),
		payloadMTU: ep.cfg.InitialPayloadMTU,
	}
	if ep.cfg.Transport == Stream {
		c.payloadMTU = ep.cfg.MaxPacketSize - 2
	}
	c.recvBudget.Limit = ep.cfg.ConnReceiveMemory
	c.recvBudget.MaxHolders = ep.cfg.MaxHoldingChannels
	c.hb.init(ep.cfg.Role)
	c.stats.PayloadMTU = c.payloadMTU
	return c
}

// channel returns the state of message channel id, creating it if asked.
func (c *conn) channel(id int16, create bool) *chanState {
	if c.last != nil && c.last.id == id {
		return c.last
	}
	cs := c.chans[id]
	if cs == nil {
		if !create {
			return nil
		}
		cs = &chanState{id: id, g: -1}
		c.chans[id] = cs
	}
	c.last = cs
	return cs
}

// sendChannel returns channel id's state with its sending half: a spare
// sender or a new one, at the channel's position (D5, D7). Each half is
// made on first use, so that a channel the peer only sends on costs no
// sender here, and one this side only sends on no receiver.
func (c *conn) sendChannel(id int16) *chanState {
	cs := c.channel(id, true)
	if cs.snd != nil {
		return cs
	}
	if n := len(c.spareSenders); n > 0 {
		cs.snd = c.spareSenders[n-1]
		c.spareSenders[n-1] = nil
		c.spareSenders = c.spareSenders[:n-1]
	} else {
		cs.snd = channel.NewSender(id)
	}
	cs.snd.Reuse(id, cs.seq, cs.rel)
	c.senders++
	return cs
}

// parkSenderIfIdle gives up cs's sender once more than liveReceivers
// channels hold one and this one has nothing queued or in flight (N25):
// the channel keeps only its position. The sender, trimmed, is kept for
// reuse while there are few spares.
func (c *conn) parkSenderIfIdle(cs *chanState) {
	if c.senders <= c.ep.liveReceivers || cs.inRing || cs.inSend || !cs.snd.Idle() {
		return
	}
	cs.seq, cs.rel = cs.snd.Position()
	if len(c.spareSenders) < spareReceivers {
		cs.snd.Trim()
		c.spareSenders = append(c.spareSenders, cs.snd)
	}
	cs.snd = nil
	c.senders--
}

// recvChannel returns channel id's state with its receiving half: a spare
// receiver or a new one, at the channel's position (D7, D8).
func (c *conn) recvChannel(id int16) *chanState {
	cs := c.channel(id, true)
	if cs.rcv != nil {
		return cs
	}
	if n := len(c.spare); n > 0 {
		cs.rcv = c.spare[n-1]
		c.spare[n-1] = nil
		c.spare = c.spare[:n-1]
	} else {
		cfg := &c.ep.cfg
		cs.rcv = channel.NewReceiver(channel.ReceiverConfig{
			Window:     cfg.ReceiveWindow,
			MaxMessage: cfg.MaxMessageSize,
			MaxBytes:   cfg.ChannelReceiveMemory,
			Budget:     &c.recvBudget,
			MCI:        cfg.CoalesceInterval,
		})
	}
	cs.rcv.Reuse(cs.g, cs.l)
	c.receivers++
	return cs
}

// parkIfIdle gives up cs's receiver once more than liveReceivers channels
// hold one and this one holds nothing and waits for nothing (N25): the
// channel keeps only its position. The receiver is kept for reuse while
// there are few spares.
func (c *conn) parkIfIdle(cs *chanState) {
	if c.receivers <= c.ep.liveReceivers || cs.inRecv || !cs.rcv.Idle() {
		return
	}
	cs.g, cs.l = cs.rcv.Position()
	if len(c.spare) < spareReceivers {
		c.spare = append(c.spare, cs.rcv)
	}
	cs.rcv = nil
	c.receivers--
}

// established reports whether messages may flow.
func (c *conn) established() bool {
	return c.state == stateConnected || c.state == stateClosing
}

// resendRTT is the RTT resends are timed with: the smoothed RTT, never below
// the configured floor (D14).
func (c *conn) resendRTT() time.Duration {
	return max(c.hb.srtt, c.ep.cfg.MinResendRTT)
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
	rtt := c.resendRTT()
	for _, cs := range c.sendChans {
		d = clock.Earliest(d, cs.snd.NextResend(rtt, cfg.MaxResendInterval))
		if t := cs.snd.OldestUnacked(); t != 0 {
			d = clock.Earliest(d, t.Add(cfg.Timeout))
		}
	}
	for _, cs := range c.recvChans {
		d = clock.Earliest(d, cs.rcv.NextDeadline())
	}
	if c.state == stateClosing {
		d = clock.Earliest(d, c.lingerUntil)
	}
	d = clock.Earliest(d, c.mtuDeadline())
	return d
}

// handleTimeout runs every timer of the connection that is due at now.
func (c *conn) handleTimeout(now clock.Time) {
	cfg := &c.ep.cfg
	switch c.state {
	case stateQuerying, stateConnecting:
		c.handshakeTimeout(now)
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
	c.mtuTimeout(now)
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
	c.ep.disconnect(now, c, &LocalCloseError{Reason: c.closeReason}, true)
}

// snapshot returns the connection's statistics.
func (c *conn) snapshot() Stats {
	s := c.stats
	s.RTT, s.RTTVar, s.MinRTT = c.hb.srtt, c.hb.rttvar, c.hb.minRTT
	s.PayloadMTU = c.payloadMTU
	s.SendQueueBytes = c.queued + c.stream.bytes
	s.InFlightBytes = c.inFlight
	for _, cs := range c.sendChans {
		p, _ := cs.snd.InFlight()
		s.InFlightPackets += p
	}
	s.ReceiveBytes = c.recvBudget.Used
	s.OpenChannels = len(c.chans)
	return s
}
