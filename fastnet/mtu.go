package fastnet

import (
	"time"

	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/mtu"
)

// MTU estimation (channels -3 and -4, D19). The server estimates on -3 and
// answers the client's probes on -4; the client estimates on -4 and answers
// on -3. Both run at once on every Datagram connection.

// mtuChannels returns the channel this side estimates on and the one it
// answers on.
func (c *conn) mtuChannels() (own, peer int16) {
	if c.role == Server {
		return chMTUServer, chMTUClient
	}
	return chMTUClient, chMTUServer
}

// PathInfo is what a transport knows about the path to one peer (D29),
// returned by MTUConfig.Path.
type PathInfo struct {
	// PayloadMTU is the payload MTU the system believes the path
	// carries: its path MTU less the IP and UDP headers and the 2-byte
	// channel id; 0 if unknown. Each estimation probes it right after its
	// first round, and D19's rounds check it (N43).
	PayloadMTU int
	// NoDontFragment, if not empty, says why the transport cannot set the
	// don't-fragment bit toward the peer. Probes larger than the path
	// would then arrive in fragments and prove nothing, so this side does
	// not estimate: its payload MTU stays at InitialPayloadMTU, and
	// Stats.MTULimited gives the reason (N45). The responder still
	// answers the peer's probes.
	NoDontFragment string
}

// mtuDisabled is Stats.MTULimited with MTUConfig.Disabled.
const mtuDisabled = "estimation disabled"

// startMTU begins estimation when the connection is established (a
// server's: validated, D25), with what the transport knows of the path.
func (c *conn) startMTU(now clock.Time) {
	cfg := &c.ep.cfg
	if cfg.Transport != Datagram {
		return
	}
	if c.responder == nil {
		// One made while unvalidated keeps its count: the peer's round
		// may be under way (D25).
		c.responder = mtu.NewResponder()
	}
	if cfg.MTU.Disabled {
		c.mtuLimited = mtuDisabled
		return
	}
	var path PathInfo
	if cfg.MTU.Path != nil {
		path = cfg.MTU.Path(c.addr)
	}
	if path.NoDontFragment != "" {
		c.mtuLimited = "no don't-fragment bit: " + path.NoDontFragment
		return
	}
	c.estimator = mtu.NewEstimator(cfg.mtuConfig())
	c.estimator.SetPathHint(path.PayloadMTU)
	if path.PayloadMTU > 0 {
		// Full size at once, or nearly: what the system says the path
		// carries, up to a size practically every path carries, is
		// used from the start, and the estimation checks it first
		// (D29, N84).
		c.estimator.Assume(min(path.PayloadMTU, assumedPayloadMTU))
		c.applyMTU()
	}
	c.ep.admitEstimation(now, c) // at most MTUConfig.MaxConcurrent at once (N53)
}

// assumedPayloadMTU is the most of a path MTU the system reports (D29)
// that a connection uses before its estimation has checked it (N84): the
// payload of a 576-byte IPv4 datagram, which every IPv4 host must accept
// and practically every path carries whole.
const assumedPayloadMTU = 576 - ipUDPOverhead - 2

// SetPathMTUHint tells the estimation of connection h the payload MTU the
// system believes its path carries (PathInfo.PayloadMTU; D29, N43), for a
// transport that learns it after the connection started or learns a new
// one. The next round probes it if the estimation is under way and the
// hint is still in its range; later estimations start from it. A hint of
// InitialPayloadMTU or less removes it. It reports whether h estimates.
func (e *Endpoint) SetPathMTUHint(h Handle, payloadMTU int) bool {
	c := e.conns[h]
	if c == nil || c.estimator == nil {
		return false
	}
	c.estimator.SetPathHint(payloadMTU)
	return true
}

// mtuStats fills the estimation's part of s.
func (c *conn) mtuStats(s *Stats) {
	s.MTULimited = c.mtuLimited
	if c.estimator == nil {
		return
	}
	es := c.estimator.Stats()
	s.MTUSearching, s.MTURetrying, s.MTUEstimations = es.Searching, es.Retrying, es.Estimations
	s.MTUProbes, s.MTUProbeBytes = es.ProbesSent, es.ProbeBytes
	s.MTUHint = es.PathHint
}

// mtuConfig is the estimator's configuration.
func (c *Config) mtuConfig() mtu.Config {
	return mtu.Config{
		MaxPayload:    c.MaxPacketSize - 2,
		Initial:       c.InitialPayloadMTU,
		ProbeInterval: c.MTU.ProbeInterval,
		FinalTimeout:  c.MTU.FinalTimeout,
		Period:        c.MTU.Period,
		Rand:          c.Rand,
	}
}

// handleMTU routes a channel -3 or -4 payload to the estimator (answers to
// our probes) or the responder (the peer's probes).
func (c *conn) handleMTU(now clock.Time, ch int16, p []byte) {
	if c.responder == nil {
		c.stats.Dropped[DropUnknownChannel]++
		return
	}
	own, _ := c.mtuChannels()
	if ch != own {
		if !c.ep.admitResponder(now, c, p) {
			return // too many peers estimating at once (N53)
		}
		if len(p) >= peerProbeLoad {
			// A large probe of the peer's: its round crowds the path
			// back to it, which the echo limiter must not read as its
			// own queue (N93).
			c.peerProbeAt = now
		}
		c.responder.HandlePayload(p)
		return
	}
	if c.estimator != nil {
		c.estimator.HandlePayload(now, p)
		c.applyMTU()
		c.estimationDone(now)
	}
}

// peerProbeLoad is the size from which the peer's probes are taken to
// crowd the path back to it (N93): its first round's, 32 bytes, do not.
const peerProbeLoad = 512

// applyMTU makes a new estimate the payload MTU of packets sent from now on.
func (c *conn) applyMTU() {
	if c.estimator == nil {
		return
	}
	if m, changed := c.estimator.Changed(); changed && m != c.payloadMTU {
		c.payloadMTU = m
		c.ep.emit(Event{Kind: EventMTUChanged, Conn: c.handle, Addr: c.addr, MTU: m})
	}
}

func (c *conn) mtuDeadline() clock.Time {
	if c.estimator == nil {
		return 0
	}
	return clock.Earliest(c.estimator.NextDeadline(), c.blackHoleDeadline())
}

func (c *conn) mtuTimeout(now clock.Time) {
	if c.estimator == nil {
		return
	}
	c.checkBlackHole(now)
	c.admitNext(now)
	if t := c.estimator.NextDeadline(); t != 0 && t <= now {
		c.estimator.HandleTimeout(now)
		c.applyMTU()
		c.estimationDone(now)
	}
}

func (c *conn) mtuWantsTransmit(now clock.Time) bool {
	return (c.responder != nil && c.responder.Pending() && c.replyReady(now)) ||
		(c.estimator != nil && c.estimator.NextDeadline() != 0 && c.estimator.NextDeadline() <= now && c.probeReady(now))
}

// probeReady reports whether the estimator's next packet may go at now: at
// once while the connection has no data waiting, and through the pacer
// while it has (D30, N79). A round of probes goes out at up to 6 Mbit/s
// (D19's 2 ms interval); beside data that fills a slower bottleneck, the
// probes would overflow its queue and be lost, and the estimation would
// end low; on an idle connection, whose window never grows, pacing them
// would only make the estimation slow. Beside unreliable data, the probes
// and the data take turns for the pacer's tokens, byte for byte (N153).
func (c *conn) probeReady(now clock.Time) bool {
	if c.queued == 0 {
		return true
	}
	if c.cc.on && now < c.probeAt.Add(c.ep.cfg.MTU.ProbeInterval) {
		// Beside data, D19's interval between probes, even in the
		// first round, whose smaller probes otherwise go four times
		// as often (N94).
		return false
	}
	if c.dataTurn {
		return false // the datagram is data's (N153)
	}
	c.expireProbes(now)
	return c.paceReady(now) && c.probeFits(now)
}

// beginDatagram decides, as PollTransmit begins a datagram that the
// pacer lets go (paced), whether it is data's turn beside the probes: the
// estimator's last packet went beside queued data less than its own bytes
// of paced datagrams ago, and a channel's next first-time packet is
// unreliable, a message that expires if it waits too long (D30). The
// datagram then holds no estimator packet, whatever it holds (N153).
// Reliable data alone waits for the probes, as it waits for room in the
// window. Decided once a datagram, so that a bundle's packets, polled
// one at a time or in runs, see the same (N101). PollTransmit calls it
// only while there is a share.
func (c *conn) beginDatagram(paced bool) {
	if !paced {
		return
	}
	for _, cs := range c.ring {
		if !cs.snd.NextReliable() {
			c.dataTurn = true
			return
		}
	}
}

// endDatagram ends data's turn, and counts datagram b, if PollTransmit
// sends it (ok) and the pacer let it go (paced), against the data's share
// beside the probes, unless it is the estimator's own (N153). PollTransmit
// calls it only while there is a share or a turn.
func (c *conn) endDatagram(ok bool, b []byte, paced bool) {
	c.dataTurn = false
	if ok && paced && c.probeShare > 0 && !c.alone(b) {
		c.probeShare -= len(b) + ipUDPOverhead
	}
}

// mtuQuiet reports whether mtuPoll's estimator part would do nothing at
// now, whatever probeReady says: no estimation running or due, the last
// estimate applied (mtu.Estimator.Quiet), and the estimation's place
// given back (estimationDone). A connection whose estimation is over is
// then no reason to write its data a packet at a time (runChannel,
// N119). probeReady's one other effect, forgetting the probes sent more
// than a round trip ago (expireProbes), has been had at the same instant
// by the poll of the bundle's first packet, which runChannel follows.
func (c *conn) mtuQuiet(now clock.Time) bool {
	return !c.mtuRunning && c.estimator.Quiet(now)
}

// replyReady reports whether a pending reply may go at now on its own.
// A reset ack goes at once. Beside data, counts go replySpacing apart:
// the estimator keeps only a round's largest count, and a connection
// sending data would otherwise answer the peer's first round, 400 probes
// 0.5 ms apart, with a datagram each on a path its data fills (N94). A
// count held back rides in a bundle that goes before then.
func (c *conn) replyReady(now clock.Time) bool {
	return c.queued == 0 || !c.cc.on || c.responder.AckPending() || now >= c.replyAt.Add(replySpacing)
}

// replySpacing is how far apart a connection sending data sends the
// counts it answers the peer's probes with (N94): D19's default interval,
// whatever this side's own MTUConfig.ProbeInterval, which times this
// side's estimator, not the peer's. The round's last count is then at
// most 2 ms late for the peer's final wait, of 250 ms and more.
const replySpacing = mtu.DefaultProbeInterval

// probeFits reports whether the window has room at t for a probe beside
// the data and the probes in flight (N92), or has had none for long
// enough: a window that no ack empties, as when the path shrank under
// packets in flight (N16), lets probes go two resend RTTs after its oldest
// packet. It changes nothing: nextDeadline asks it of a time to come.
func (c *conn) probeFits(t clock.Time) bool {
	if !c.cc.on || c.ccInFlight == 0 || c.ccInFlight+c.probeBytesAt(t)+c.payloadMTU+wireOverhead <= c.cc.window() {
		return true
	}
	return t >= c.probeStuckAt()
}

// probeRing is how many of a round trip's probes the window counts; more
// (a round of 2 ms apart on a path of over 64 ms) count as the newest.
const probeRing = 32

// probeSent is a probe or reset the estimator sent, of bytes on the wire.
type probeSent struct {
	at    clock.Time
	bytes int
}

// probeRTT is how long the window counts a probe: the acks' smoothed
// round trip, or the heartbeats' before there is one.
func (c *conn) probeRTT() time.Duration {
	if c.cc.sampled {
		return c.cc.srtt
	}
	return c.hb.srtt
}

// sentProbe notes a packet of the estimator's of n bytes, sent at now: for
// a round trip, the window counts it beside the data in flight, so that
// the probes of a round, which no ack takes out of flight, do not add a
// round's bytes to a full window (N92). The ring is allocated for an
// estimation's rounds and dropped once they have left the window, so that
// idle connections do not keep it.
func (c *conn) sentProbe(now clock.Time, n int) {
	if c.probes == nil {
		c.probes = new([probeRing]probeSent)
	}
	if c.probeN == probeRing {
		c.probeBytes -= c.probes[c.probeHead].bytes
		c.probeHead = (c.probeHead + 1) % probeRing
		c.probeN--
	}
	c.probeAt = now
	c.probes[(c.probeHead+c.probeN)%probeRing] = probeSent{now, n}
	c.probeN++
	c.probeBytes += n
}

// expireProbes forgets the probes sent a round trip or more before now.
func (c *conn) expireProbes(now clock.Time) {
	if c.probeN == 0 {
		return
	}
	rtt := c.probeRTT()
	for c.probeN > 0 && now.Sub(c.probes[c.probeHead].at) >= rtt {
		c.probeBytes -= c.probes[c.probeHead].bytes
		c.probeHead = (c.probeHead + 1) % probeRing
		c.probeN--
	}
	if c.probeN == 0 {
		c.probes, c.probeHead = nil, 0
	}
}

// probeBytesAt returns the bytes of the probes the window will still
// count at t, forgetting nothing.
func (c *conn) probeBytesAt(t clock.Time) int {
	n := c.probeBytes
	rtt := c.probeRTT()
	for i := range c.probeN {
		p := &c.probes[(c.probeHead+i)%probeRing]
		if t.Sub(p.at) < rtt {
			break
		}
		n -= p.bytes
	}
	return n
}

// probesLeaveAt is when the oldest probe the window counts leaves it, 0
// if none.
func (c *conn) probesLeaveAt() clock.Time {
	if c.probeN == 0 {
		return 0
	}
	return c.probes[c.probeHead].at.Add(c.probeRTT())
}

// probeStuckAt is when a full window lets probes go all the same
// (probeFits).
func (c *conn) probeStuckAt() clock.Time {
	o := c.oldestUnacked()
	if o == 0 {
		return 0
	}
	return o.Add(clock.Scale(c.resendRTT(), 2))
}

// mtuPoll writes a responder reply or an estimator packet, if one is due.
func (c *conn) mtuPoll(now clock.Time, buf []byte) ([]byte, bool) {
	own, peer := c.mtuChannels()
	if c.responder != nil && c.responder.Pending() && (c.bundling || c.replyReady(now)) {
		count := !c.responder.AckPending()
		if b, ok := c.responder.AppendReply(appendPacketHeader(buf, peer)); ok {
			if count {
				c.replyAt = now
			}
			return b, true
		}
	}
	if c.estimator != nil && c.probeReady(now) {
		c.admitNext(now)
		// Resets go three RTTs apart, and a round's final wait lasts at
		// least two: the RTT of resends, floored (D14), so that a
		// loopback RTT of microseconds does not resend the reset before
		// the peer's ack can come back.
		b, ok := c.estimator.AppendPayload(appendPacketHeader(buf, own), now, c.resendRTT())
		// AppendPayload may end a round, and with it the estimation,
		// and then have nothing to send: the new MTU applies all the
		// same.
		c.applyMTU()
		c.estimationDone(now)
		if ok {
			n := len(b) - len(buf) + ipUDPOverhead
			c.sentProbe(now, n)
			if c.cc.on && c.queued > 0 {
				// As many bytes of data go before the next, while
				// unreliable data waits (beginDatagram, N153): the
				// probe's, or the most it can have left the pacer's
				// bucket owing (spend).
				c.probeShare = min(n, int(capacity(c.cc.rateVal, c.payloadMTU+2)))
			}
			return b, true
		}
	}
	return buf, false
}

// Black holes (N16). When the path MTU shrinks, packets cut at the old size
// vanish while small ones (heartbeats) still pass. A reliable packet that
// stays unacknowledged for blackHoleRTTs round trips (about three resends,
// D14) while heartbeats keep arriving starts a new estimation at once,
// rather than at the next period, so that packets sent afterwards are cut
// at a size that passes. The packets already in flight keep their sequence
// numbers and so their size; if they never get through, the connection
// closes when they have gone unacknowledged for the timeout, with
// ErrPathMTU rather than ErrNotAcknowledging when packets cut larger than
// the current payload MTU were in flight.
const blackHoleRTTs = 10

// blackHoleDelay is how long a reliable packet may stay unacknowledged
// before a black hole is suspected.
func (c *conn) blackHoleDelay() time.Duration {
	return max(clock.Scale(c.resendRTT(), blackHoleRTTs), time.Second)
}

// oldestUnacked is the first-send time of the oldest unacknowledged
// reliable packet of any channel, 0 if none.
func (c *conn) oldestUnacked() clock.Time {
	_, o := c.sendTimes()
	return o
}

// blackHoleDeadline is when the black hole check next has something to do.
func (c *conn) blackHoleDeadline() clock.Time {
	if c.estimator == nil || c.maxMTUInFlight <= c.ep.cfg.InitialPayloadMTU {
		return 0
	}
	o := c.oldestUnacked()
	if o == 0 || o == c.blackHoleSeen {
		return 0
	}
	return max(o.Add(c.blackHoleDelay()), c.blackHoleAgain)
}

// checkBlackHole restarts estimation if a black hole is suspected. A
// suspicion it cannot act on, the peer silent or an estimation still
// searching, is looked at again a black hole delay later: marked seen, it
// was never looked at again while the same packet stayed unacked, and an
// estimation that ended on a size the path drops left the connection to
// time out (N16).
func (c *conn) checkBlackHole(now clock.Time) {
	d := c.blackHoleDeadline()
	if d == 0 || now < d {
		return
	}
	alive := now.Sub(c.hb.lastHeard) <= 2*heartbeatInterval(c.ep.cfg.Timeout)
	if !alive || c.estimator.Stats().Searching {
		c.blackHoleAgain = now.Add(c.blackHoleDelay())
		return
	}
	c.blackHoleSeen = c.oldestUnacked()
	c.stats.MTURestarts++
	// The system may have learned the smaller path meanwhile (an ICMP
	// "too big" from a router, N43): start from what it says now.
	if p := c.ep.cfg.MTU.Path; p != nil {
		c.estimator.SetPathHint(p(c.addr).PayloadMTU)
	}
	switch {
	case c.mtuRunning:
		c.estimator.Start(now) // over, in its place
	case !c.mtuWaiting:
		c.ep.admitEstimation(now, c) // at once or in turn, as any (N108)
	}
}
