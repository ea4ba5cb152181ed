package fastnet

import (
	"math"
	"math/bits"
	"time"

	"github.com/fastnet-engine/fastnet/channel"
	"github.com/fastnet-engine/fastnet/clock"
)

// Congestion control (D30, N76-N83): a sender-side controller per
// connection on a Datagram transport, with no wire change.
//
// The window is NewReno's (RFC 5681, RFC 6582 in spirit): it bounds the
// reliable bytes in flight, grows by the bytes acknowledged in slow start
// and by one packet per window in congestion avoidance, and halves once
// per round trip when a reliable packet sent since the last reduction is
// resent (a resend is the engine's only loss signal: acks are per packet,
// and the Fibonacci timer of D14 stays the timer). Slow start ends early
// when the round trips measured from acks rise (the delay test of
// HyStart++, RFC 9406), so that a transfer does not fill a bottleneck's
// queue before its first loss is even seen (N78).
//
// Every packet the connection sends, reliable or not, resends, acks and
// heartbeats included, leaves through a pacer (N79): a token bucket
// filled at gain x window / RTT, holding at most what a millisecond of
// that rate or a few datagrams send. Data and resends wait for tokens;
// acks, heartbeats and MTU probes never wait but use tokens up, so that
// everything the connection sends stays within one rate.
type congestion struct {
	on bool // Datagram transport, Congestion.Disabled unset

	fixed   float64 // Congestion.FixedRate: pace at this, no window
	maxRate float64 // Congestion.MaxRate, 0: none
	minWnd  int

	cwnd, ssthresh int
	// unanswered is set from a reduction of the window (onResend) to the
	// next ack of any packet.
	unanswered bool
	// recovery is when the window was last reduced, or when the first
	// ack after that came: the resend of a packet last sent before then
	// is of a loss already answered.
	recovery clock.Time
	// acked counts the bytes acknowledged in congestion avoidance not yet
	// turned into window growth.
	acked int

	// Round trips measured from acks of packets never resent (Karn),
	// smoothed; sampled once there is one (N77).
	srtt    time.Duration
	sampled bool

	// HyStart++'s delay test (N78): the smallest RTT of the current round
	// and of the last, the samples of this round, and when it began (a
	// round ends with the ack of a packet first sent after it began).
	roundStart          clock.Time
	roundMin, lastRound time.Duration
	roundSamples        int

	// The pacer (N79): tokens in bytes, as of filled; rateVal the rate
	// for the window, threshold and RTTs it was computed with.
	tokens           float64
	filled           clock.Time
	rateVal          float64
	rateCwnd, rateSS int
	rateSRTT, rateHB time.Duration
	rateQ            float64

	// The echo limiter (N90), for a connection no ack times: qRate caps
	// the rate (0: no cap), set from the heartbeats' echoes when one comes
	// back more than qDelay (Congestion.QueueDelay, negative: off) later
	// than the path's smallest round trip; qCut is when it was last cut.
	// sent counts the bytes the connection has put out; marks holds the
	// arrival of the latest echoes, each with the count as of its beat.
	qDelay time.Duration
	qRate  float64
	qCut   clock.Time
	qGrown clock.Time
	sent   uint64
	marks  [echoMarks]echoMark
	markN  int
	// qs holds the queues the latest echoes showed.
	qs  [echoQueueSamples]time.Duration
	qsN int
	// reliable is set once the connection has sent reliable data.
	reliable bool
	// base holds the smallest round trips of the last spans (baseRTT).
	base  [echoBaseBuckets]baseBucket
	baseN int
}

// baseBucket is the smallest round trip the echoes showed in a span
// that began at start.
type baseBucket struct {
	start clock.Time
	min   time.Duration
}

// echoMark is an echo's arrival, with the bytes the connection had sent
// when its heartbeat went out: everything the peer took in before it.
type echoMark struct {
	at, sent clock.Time // the echo's arrival, its beat's departure
	bytes    uint64
}

const (
	// ccInitialWindow is the window a connection starts with: RFC 6928's
	// ten segments of 1460 bytes.
	ccInitialWindow = 14600
	// ccSegment is the size of a datagram of a common path, 1200 bytes;
	// ccMinWindow, the smallest window, is two of them.
	ccSegment   = 1200
	ccMinWindow = 2 * ccSegment
	// wireOverhead is what a reliable packet costs the path beyond its
	// chunk: the channel id and data header (D12), and the IPv4 and UDP
	// headers. The window counts packets with it (N76), so that small
	// packets, before MTU estimation has grown the payload MTU, do not
	// fill a bottleneck's queue behind the window's back.
	wireOverhead = packetOverhead + ipUDPOverhead
	// ipUDPOverhead is what the IPv4 and UDP headers add to a datagram
	// on the path.
	ipUDPOverhead = 28
	// ccSSGain and ccCAGain are the pacing gains in slow start and in
	// congestion avoidance: the pacer runs ahead of window/RTT so that
	// it never is what limits the window's growth (Linux's 200 % and
	// 120 %, quic-go's 125 %).
	ccSSGain = 2.0
	ccCAGain = 1.25
	// ccBurst is the time of the pacing rate the bucket holds, and
	// ccBurstDatagrams the datagrams it holds at least.
	ccBurst          = time.Millisecond
	ccBurstSeconds   = float64(ccBurst) / float64(time.Second)
	ccBurstDatagrams = 4
	// lossReorder is how many packets sent after the oldest in flight on
	// a channel must be acked for it to count as lost (N81), as TCP's
	// three duplicate acks and QUIC's packet threshold.
	lossReorder = 3
	// HyStart++'s delay test: the samples a round needs, and the bounds of
	// the rise in RTT that ends slow start (RFC 9406).
	hsMinSamples = 8
	hsMinEta     = 4 * time.Millisecond
	hsMaxEta     = 16 * time.Millisecond
	// The echo limiter (N90): the echoes its rate of intake is measured
	// over, the share of that rate a cut sets, the growth of the cap at
	// each echo that shows no queue, and the shortest interval of the
	// heartbeats it has sent while it limits.
	echoMarks          = 8
	echoCut            = 0.85
	echoGrow           = 1.05
	echoBeatMin        = time.Millisecond
	echoQueueDatagrams = 1.5
	echoQueueSamples   = 4
	// The path's round trip with no queue is the smallest of the last
	// echoBaseBuckets spans of echoBaseSpan, five minutes (LEDBAT keeps
	// ten, RFC 6817): long enough that a queue the limiter keeps full
	// does not become the base, short enough that a longer route does,
	// and no longer cuts the rate as if it were a queue.
	echoBaseBuckets = 5
	echoBaseSpan    = time.Minute
)

// init sets the controller up from the endpoint's configuration.
func (cc *congestion) init(cfg *Config, now clock.Time) {
	g := &cfg.Congestion
	cc.on = cfg.Transport == Datagram && !g.Disabled
	cc.fixed = float64(g.FixedRate)
	cc.maxRate = float64(g.MaxRate)
	cc.minWnd = g.MinWindow
	cc.qDelay = g.QueueDelay
	cc.cwnd = g.InitialWindow
	cc.ssthresh = math.MaxInt
	cc.filled = now
	// A full bucket: four datagrams of the smallest payload MTU, until
	// the first fill sets the capacity of the rate.
	cc.tokens = float64(ccBurstDatagrams * (DefaultPayloadMTU + 2))
	if cc.fixed > 0 {
		cc.tokens = capacity(cc.fixed, DefaultPayloadMTU+2)
	}
}

// window returns the reliable bytes the controller lets be in flight.
func (cc *congestion) window() int {
	if !cc.on || cc.fixed > 0 {
		return math.MaxInt
	}
	return cc.cwnd
}

// rate returns the pacing rate in bytes per second, given the RTT the
// heartbeats measure (D17) for before the first ack is sampled (N85);
// +Inf when nothing is paced.
func (cc *congestion) rate(hbRTT time.Duration) float64 {
	if !cc.on {
		return math.Inf(1)
	}
	if cc.fixed > 0 {
		return cc.fixed
	}
	// Kept from one change of the window or the RTTs to the next: the
	// pacer asks for it at every packet.
	if cc.rateCwnd != cc.cwnd || cc.rateSS != cc.ssthresh || cc.rateSRTT != cc.srtt || cc.rateHB != hbRTT || cc.rateQ != cc.qRate {
		cc.rateVal = cc.computeRate(hbRTT)
		cc.rateCwnd, cc.rateSS, cc.rateSRTT, cc.rateHB, cc.rateQ = cc.cwnd, cc.ssthresh, cc.srtt, hbRTT, cc.qRate
	}
	return cc.rateVal
}

func (cc *congestion) computeRate(hbRTT time.Duration) float64 {
	rtt := hbRTT
	if cc.sampled {
		rtt = cc.srtt
	}
	rtt = max(rtt, time.Microsecond)
	gain := ccCAGain
	if cc.cwnd < cc.ssthresh {
		gain = ccSSGain
	}
	r := gain * float64(cc.cwnd) / rtt.Seconds()
	if cc.qRate > 0 && cc.echoLimited() {
		if cc.qRate < r {
			r = cc.qRate
		} else {
			cc.qRate = 0 // grown past what the window allows: no cap
		}
	}
	if cc.maxRate > 0 && r > cc.maxRate {
		r = cc.maxRate
	}
	return r
}

// capacity returns the most tokens the bucket holds, and the most it may
// owe: a millisecond of the rate, or a few datagrams.
func capacity(rate float64, datagram int) float64 {
	// Compared, not max: Go's float max, which must order NaNs and
	// zeros' signs, costs a dozen instructions on every packet, and
	// neither value can be a NaN (N105).
	c, d := rate*ccBurstSeconds, float64(ccBurstDatagrams*datagram)
	if d > c {
		return d
	}
	return c
}

// fill adds the tokens earned since the bucket was last filled, within
// its capacity.
func (cc *congestion) fill(now clock.Time, rate float64, datagram int) {
	if now <= cc.filled {
		return
	}
	// Nanoseconds times 1e-9: Duration.Seconds divides, at every fill.
	cc.tokens = min(capacity(rate, datagram), cc.tokens+rate*float64(now.Sub(cc.filled))*1e-9)
	cc.filled = now
}

// ready reports whether the pacer lets data or a resend go at now.
func (cc *congestion) ready(now clock.Time, rate float64, datagram int) bool {
	if !cc.on {
		return true
	}
	cc.fill(now, rate, datagram)
	return cc.tokens > 0
}

// spend takes the tokens of a packet of n bytes. What never waits for
// the pacer may leave the bucket owing, but never more than its capacity
// (MTU probes, owe), or takes only what the bucket holds (acks and
// heartbeats): those packets slow data down, and cannot stop it for longer
// than a burst takes (N79).
func (cc *congestion) spend(n int, datagram int, owe bool) {
	if !cc.on {
		return
	}
	cc.sent += uint64(n)
	// The bucket's new level, max(tokens-n, floor), with floor the
	// capacity owed or min(tokens, 0), by comparisons (see capacity).
	t := cc.tokens - float64(n)
	switch {
	case owe:
		// The rate the bucket was last filled at: every packet that
		// owes first passed ready, or is a probe polled just after.
		// A level above the burst's datagrams is above the floor.
		if t < -float64(ccBurstDatagrams*datagram) {
			t = max(t, -capacity(cc.rateVal, datagram))
		}
	case t < 0:
		t = min(cc.tokens, 0)
	}
	cc.tokens = t
}

// spendRun is spend(n, datagram, true) for each packet of the run of
// bundled packets p, the length of each before it (appendRun), in their
// order: the same sums, with the bucket's level kept in a variable
// between the packets rather than written back after each.
func (cc *congestion) spendRun(p []byte, datagram int) {
	if !cc.on {
		return
	}
	t, sent := cc.tokens, uint64(0)
	floor := -float64(ccBurstDatagrams * datagram)
	// Walked by offset: re-slicing p after each packet cost twice what
	// the rest of the step does.
	for off := 0; off+bundleLenSize <= len(p); {
		n := int(p[off])<<8 | int(p[off+1])
		off += bundleLenSize + n
		sent += uint64(n)
		if t -= float64(n); t < floor {
			t = max(t, -capacity(cc.rateVal, datagram))
		}
	}
	cc.tokens = t
	cc.sent += sent
}

// next returns when the pacer next lets a packet go, as of the bucket's
// last fill: its time if it has tokens.
func (cc *congestion) next(rate float64) clock.Time {
	if !cc.on || cc.tokens > 0 {
		return cc.filled
	}
	// The nanosecond after the deficit is made up, so that the bucket
	// then holds a positive amount.
	d := time.Duration(math.Ceil(-cc.tokens/rate*1e9)) + 1
	return cc.filled.Add(d)
}

// onAcks folds in the acks of one ack packet, whose freed packets sum
// sums (N77, N78, N124), with inFlight the bytes of the packets never
// resent in flight before them, each counting its chunk bytes plus
// wireOverhead; it returns inFlight after them. The packet is one event
// for the controller: one round-trip sample, from the newest packet never
// resent it acks (Karn), as QUIC takes one an ACK frame (RFC 9002), but
// weighed in the smoothed RTT as its acks of packets never resent would
// each have weighed (smooth) and counted for HyStart++ once; a round ends
// if any packet it acks was first sent at or after the round began; and
// the window grows once, by everything it acked, if the window limited
// the sender before it.
func (cc *congestion) onAcks(now clock.Time, sum *channel.AckSum, inFlight, mtu int) int {
	f := inFlight
	inFlight -= sum.FreshBytes + sum.Fresh*wireOverhead
	if !cc.on || cc.fixed > 0 || sum.Packets == 0 {
		return inFlight
	}
	if cc.unanswered {
		// The first ack since the window was reduced: what was sent
		// before it, while the path gave no answer, was lost to the
		// loss that reduction answers.
		cc.unanswered = false
		cc.recovery = max(cc.recovery, now)
	}
	if sum.Fresh > 0 && now >= sum.Last {
		// The sample: smoothed as RFC 6298, and HyStart++'s delay
		// test in slow start.
		r := now.Sub(sum.Last)
		if !cc.sampled {
			cc.sampled = true
			cc.srtt = r
			cc.roundStart = now
		} else {
			cc.srtt = smooth(cc.srtt, r, sum.Fresh)
		}
		if cc.roundSamples == 0 || r < cc.roundMin {
			cc.roundMin = r
		}
		cc.roundSamples++
		if cc.cwnd < cc.ssthresh && cc.lastRound > 0 && cc.roundSamples >= hsMinSamples {
			eta := min(max(cc.lastRound/8, hsMinEta), hsMaxEta)
			if cc.roundMin >= cc.lastRound+eta {
				cc.ssthresh = cc.cwnd // the queue has begun to grow
			}
		}
	}
	if sum.First >= cc.roundStart && cc.roundSamples > 0 {
		// An ack of a packet sent in the round: a round trip has
		// passed since it began.
		cc.lastRound, cc.roundMin, cc.roundSamples = cc.roundMin, 0, 0
		cc.roundStart = now
	}
	n := sum.Bytes + sum.Packets*wireOverhead
	if cc.cwnd < cc.ssthresh {
		// Slow start: grow while the window is what limits the sender.
		if 2*f >= cc.cwnd {
			cc.cwnd += n
		}
		return inFlight
	}
	if f+3*mtu < cc.cwnd {
		return inFlight // the application, not the window, limits the sender
	}
	// One datagram a window, of the path's common size at least: the
	// payload MTU is small until estimation has grown it (D19).
	cc.acked += n
	for cc.acked >= cc.cwnd {
		cc.acked -= cc.cwnd
		cc.cwnd += max(mtu, ccSegment)
	}
	return inFlight
}

// smooth returns srtt smoothed with the round-trip sample r as RFC 6298
// smooths it (alpha 1/8), k times (N124): an ack packet's one sample
// weighs as much as its k acks of packets never resent, each a sample of
// its own, would, so that a packet acking many packets moves the smoothed
// RTT as far as as many packets acked one by one.
func smooth(srtt, r time.Duration, k int) time.Duration {
	d := srtt - r
	keep := srttKeep[min(k, len(srttKeep)-1)]
	neg := d < 0
	if neg {
		d = -d
	}
	// d x keep / 2^32, without overflow for any d.
	hi, lo := bits.Mul64(uint64(d), keep)
	d = time.Duration(hi<<32 | lo>>32)
	if neg {
		d = -d
	}
	return r + d
}

// srttKeep[k] is what k updates of RFC 6298's (alpha 1/8) leave of the
// smoothed RTT's distance from a sample, (7/8)^k, in units of 2^-32,
// down to the first k that leaves none.
var srttKeep = func() []uint64 {
	t := []uint64{1 << 32}
	for t[len(t)-1] > 0 {
		t = append(t, t[len(t)-1]*7/8)
	}
	return t
}()

// onResend folds in the resend at now of a reliable packet whose previous
// send was at last: a loss (or an ack later than D14's interval). The
// window halves, once for the losses of one round trip: a packet last sent
// before the latest reduction was lost before that reduction could act.
// A reduction with no ack since the one before (the path carried nothing
// back for a round trip: a handover, a route converging) halves the window
// but leaves the threshold where the first put it, as RFC 5681 holds
// ssthresh while the timer retransmits: otherwise every round trip of such
// an outage halves the threshold too, down to the floor, and once the path
// carries again the window regrows a datagram a round trip from there
// rather than in slow start to half of what it was. It reports whether
// the window was reduced.
func (cc *congestion) onResend(now, last clock.Time, mtu int, sampled bool) bool {
	if !cc.on || cc.fixed > 0 || last < cc.recovery || !sampled {
		// Before any RTT sample the resend timer ran on D17's guess
		// of 200 ms, which a longer path outlasts: no loss is
		// known (N82).
		return false
	}
	cc.recovery = now
	cc.cwnd = max(cc.cwnd/2, cc.minWnd, 2*mtu)
	if !cc.unanswered || cc.ssthresh < cc.cwnd {
		cc.ssthresh = cc.cwnd
	}
	cc.unanswered = true
	cc.acked = 0
	return true
}

// echoLimited reports whether the echo limiter governs the connection: it
// is paced by the window (on, no fixed rate) and has sent no reliable data
// whose acks would time it, so the echoes of its heartbeats are all it
// learns of the queue its data builds (N90).
func (cc *congestion) echoLimited() bool {
	return cc.on && cc.fixed == 0 && !cc.sampled && !cc.reliable && cc.qDelay >= 0
}

// sentReliable notes that the connection sent reliable data: its acks,
// not the echoes, time it from now on (N77), and the echo limiter's cap is
// lifted.
func (cc *congestion) sentReliable() {
	cc.reliable = true
	cc.qRate = 0
}

// onEcho folds in the echo, received at now, of a heartbeat sent at at
// when the connection had sent bytes (N90). Its round trip r, less the
// smallest of the last five minutes (baseRTT), is the queue ahead of it. The bytes sent between an
// echo of the last two round trips and it, over the time between the
// echoes' arrivals, are the rate at which the peer took them in; over the
// time between their heartbeats' departures, the rate they were sent at.
// A queue longer than QueueDelay, and than one and a half datagrams of
// the given size at that intake, cuts the cap to echoCut times the
// intake, but never raises it, never more than halves the rate sent at,
// and never goes below two datagrams a smoothed round trip: once per
// round, since the echo of a heartbeat sent before the last cut shows a
// queue that cut already answers. Without an intake, no heartbeats of
// the last two round trips to measure it by, nothing is cut: a
// connection that does not flood is not the one building the queue. A
// queue of less than half that grows the cap by echoGrow, once per round
// likewise. rate is the current pacing rate.
func (cc *congestion) onEcho(now, at clock.Time, bytes uint64, r, minRTT, srtt time.Duration, rate float64, datagram int) {
	if !cc.echoLimited() {
		return
	}
	base := cc.baseRTT(now, r, minRTT)
	// From the oldest echo remembered of the last two round trips, of a
	// heartbeat sent since the last cut: one from before the flood
	// began, or sent faster than the cut allows now, would misstate
	// what the peer takes in.
	intake, out := 0.0, 0.0
	span := 2 * max(r, echoMarks*echoBeatMin)
	for i := max(0, cc.markN-echoMarks); i < cc.markN; i++ {
		o := cc.marks[i%echoMarks]
		if now.Sub(o.at) <= span && o.sent >= cc.qCut {
			if bytes > o.bytes && now > o.at && at > o.sent {
				b := float64(bytes - o.bytes)
				intake = b / now.Sub(o.at).Seconds()
				out = b / at.Sub(o.sent).Seconds()
			}
			break
		}
	}
	cc.marks[cc.markN%echoMarks] = echoMark{now, at, bytes}
	cc.markN++
	if at < cc.qCut {
		return
	}
	// A queue of a few datagrams is no queue: on a slow link one
	// datagram ahead of a heartbeat delays it longer than QueueDelay.
	target := cc.qDelay
	if intake > 0 {
		target = max(target, time.Duration(echoQueueDatagrams*float64(datagram)/intake*1e9))
	}
	// The smallest queue of the last few echoes: jitter delays one echo,
	// a queue all of them.
	cc.qs[cc.qsN%echoQueueSamples] = r - base
	cc.qsN++
	q := cc.qs[0]
	for _, x := range cc.qs[1:min(cc.qsN, echoQueueSamples)] {
		q = min(q, x)
	}
	switch {
	case q > target && intake > 0:
		// At most halved at once, as a window is: an intake measured
		// over a span the sender was partly idle in is low. The rate it
		// sent at over the same span is what is halved: the pacer's
		// may be far above it. Never below two datagrams a round trip,
		// the window's floor (N76).
		floor := 2 * float64(datagram) / max(srtt, time.Microsecond).Seconds()
		cc.qRate = min(rate, max(echoCut*intake, min(rate, out)/2, floor, minSendRate))
		cc.qCut = now
	case q <= target/2 && cc.qRate > 0 && at >= cc.qGrown:
		cc.qRate *= echoGrow
		cc.qGrown = now
	}
}

// baseRTT folds r, measured at now, into the smallest round trips of the
// last echoBaseBuckets spans of echoBaseSpan, and returns the smallest of
// them: the path's round trip with no queue, which a new route may raise
// (N90). Before the first sample, minRTT seeds it.
func (cc *congestion) baseRTT(now clock.Time, r, minRTT time.Duration) time.Duration {
	b := &cc.base[(cc.baseN+echoBaseBuckets-1)%echoBaseBuckets] // the current span
	switch {
	case cc.baseN == 0:
		m := r
		if minRTT > 0 {
			m = min(m, minRTT)
		}
		cc.base[0] = baseBucket{now, m}
		cc.baseN = 1
	case now.Sub(b.start) >= echoBaseSpan:
		cc.base[cc.baseN%echoBaseBuckets] = baseBucket{now, r}
		cc.baseN++
	default:
		b.min = min(b.min, r)
	}
	m := cc.base[0].min
	for _, x := range cc.base[1:min(cc.baseN, echoBaseBuckets)] {
		m = min(m, x.min)
	}
	return m
}
