package mtu

import (
	"encoding/binary"
	"math/rand/v2"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
)

// defaultRTT stands in for an unknown round-trip time (spec: the default
// round-trip time is 200 ms; D17).
const defaultRTT = 200 * time.Millisecond

// Points a size may lose against the first round and against the last
// passing round and still pass (D19). A point is one percent of the probes
// a round sent: one probe in a round of 100, five in a round of 20 (N44).
const (
	maxLossVsFirst = 10
	maxLossVsLast  = 5
)

// confirmations is how many times a size that fails with some count is
// measured again before it counts as a failure. The package documentation
// ("Decisions D19 leaves open", table 2) has the measurement behind it.
const confirmations = 4

// phase is where an estimator is in its cycle.
type phase uint8

const (
	phaseIdle  phase = iota // not started, or waiting for the next period
	phaseReset              // sending resets until the responder acks one
	phaseProbe              // sending the round's probes
	phaseFinal              // waiting for the last replies of the round
	phasePilot              // waiting for a count of the round's first probes (N91)
)

// pilotProbes is how many probes a round above the last passing size sends
// before it waits for a count of any of them: a size the path drops costs
// these, not the round's 20 to 100 (N91).
const pilotProbes = 3

// pilotAbove is how many times the last passing size a round's size must
// be for the round to send pilots first: a size within that reach most
// often passes on a path whose size is known to the system, and its pilots
// would only delay it (N91).
const pilotAbove = 4

// pilotSets is how many sets of pilots a round sends, a final wait apart,
// before a size none of them got through with fails.
const pilotSets = 2

// An Estimator measures the payload MTU of one direction of a connection
// (spec "Determining Payload MTU", as D19 fixes it). It sends on one channel,
// -3 at the server and -4 at the client, and the peer's [Responder] answers
// on the same channel.
//
// It is a sans-IO state machine in the shape of the endpoint: the endpoint
// passes every payload that arrives on the estimator's channel to
// [Estimator.HandlePayload], calls [Estimator.HandleTimeout] when
// [Estimator.NextDeadline] passes, and after any of these (and after
// [Estimator.Start]) calls [Estimator.AppendPayload] until it returns false,
// sending each payload on the channel. [Estimator.MTU] is the payload MTU
// to send with; [Estimator.Changed] reports a change for the MTUChanged
// event. Time must not go backwards between calls; extra HandleTimeout calls
// do nothing. An Estimator is not safe for concurrent use.
type Estimator struct {
	cfg   Config
	retry int // confirmations, lowered by measurements in tests

	mtu      int // the payload MTU to send with
	reported int // the MTU last returned by Changed

	phase  phase
	sendAt clock.Time // reset and probe phases: when the next payload is due
	timer  clock.Time // reset phase after the last try: give up; final: end of the wait; idle: next estimation
	held   bool       // idle: the next estimation waits for Start (Hold)

	// The estimation.
	first     bool // the next evaluated round is the estimation's first
	firstCnt  int  // the first round's count
	firstN    int  // and its probes
	passCnt   int  // the last passing round's count
	passN     int  // and its probes
	lo        int  // the largest size passed in this estimation, 0 if none
	hi        int  // the smallest size failed in this estimation, 0 if none
	lastHi    int  // hi of the last estimation, a hint for the next one
	hintLo    int  // the MTU in use when the estimation started, to verify first; 0 if none
	hintHi    int  // the last estimation's first failure, to try next; 0 if none
	pathHint  int  // the payload MTU the system says the path carries (SetPathHint); 0 if none
	pathTry   int  // pathHint, while this estimation has not tried it
	above     bool // this estimation has probed just above pathHint
	confirmed bool // the MTU in use has been verified or refuted: passes raise it
	failures  int  // rounds of the current size that failed with a count
	doubted   int  // the size that failed with a count, to measure again after the refresh
	refresh   bool // the round measures lo again, to refresh the reference
	lossy     bool // the first round lost more than lossyPoints: rounds send ProbesPerRound (N44)
	giveUps   int  // estimations in a row that ended with nothing measured, or cut short (N157)
	// quiet is three RTTs after the round's last probe: a round that
	// ends early sends the next reset no sooner, so that late copies of
	// its counts cannot count in the next round (N44).
	quiet clock.Time

	// The round.
	size  int  // probe size
	n     int  // probes the round sends (probesFor)
	tries int  // resets sent
	sent  int  // probes sent
	count int  // largest valid count received
	bad   int  // counts refused as above sent
	pilot bool // the round waits for a count after pilotProbes (N91)
	// probeAt is when the round's last probe went out.
	probeAt clock.Time

	fill  rand.PCG // fills the probes, seeded once from Config.Rand
	stats EstimatorStats
}

// EstimatorStats are the counters and state of an [Estimator].
type EstimatorStats struct {
	Estimations uint64 // estimations finished, including those given up
	GaveUp      uint64 // estimations given up because no reset was acknowledged
	Rounds      uint64 // rounds evaluated
	Retries     uint64 // rounds run again after a failure with some count
	ResetsSent  uint64 // single-byte resets sent
	ProbesSent  uint64 // probes sent
	ProbeBytes  uint64 // payload bytes of those probes
	Ignored     uint64 // payloads that were neither a reset ack nor a count, or came when none was expected
	BadCounts   uint64 // counts of 0 or above the probes sent so far in the round (stale, duplicated or forged)
	PilotsLost  uint64 // rounds that ended after their pilot probes, none counted (N91)

	Searching  bool // an estimation is under way
	Retrying   bool // between estimations, the last measured nothing or was refused: the next comes within seconds (N44, N157)
	Size       int  // the size being probed, or last probed
	LastSize   int  // the size of the last evaluated round
	LastCount  int  // that round's count
	LastProbes int  // the probes that round sent: LastCount is out of these
	LastPass   bool // whether that round passed
	PathHint   int  // the hint of SetPathHint in use, 0 if none
}

// NewEstimator returns an estimator for cfg, idle until [Estimator.Start].
// Zero fields of cfg take their defaults; cfg must pass [Config.Validate],
// and NewEstimator panics if it does not (the endpoint validates its own
// configuration first).
func NewEstimator(cfg Config) *Estimator {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	cfg = cfg.withDefaults()
	e := &Estimator{
		cfg:      cfg,
		retry:    confirmations,
		mtu:      cfg.Initial,
		reported: cfg.Initial,
	}
	e.fill.Seed(cfg.Rand.Uint64(), cfg.Rand.Uint64())
	return e
}

// SetPathHint tells the estimator the payload MTU the system believes the
// path carries (D29, N43): on Linux the kernel's path MTU toward the peer
// less the IP, UDP and channel id headers. Each estimation then probes the
// hint right after its first round, and if the hint passes, a size just
// beyond 1 % above it, so that a path that carries the hint is at full size
// after two rounds and known within 1 % after three. A hint that fails is
// searched below like any failure (D19 stays the check); a size above the
// hint that passes is searched above. A hint of Config.Initial or less, or
// 0, removes the hint; one above Config.MaxPayload counts as MaxPayload.
// During an estimation, the hint is tried next if it is still in the
// search's range.
func (e *Estimator) SetPathHint(payloadMTU int) {
	if payloadMTU <= e.cfg.Initial {
		payloadMTU = 0
	}
	payloadMTU = min(payloadMTU, e.cfg.MaxPayload)
	if payloadMTU == e.pathHint {
		return
	}
	e.pathHint, e.pathTry, e.above = payloadMTU, payloadMTU, false
	e.stats.PathHint = payloadMTU
}

// Assume makes size the payload MTU in use before any estimation has run:
// a size the system reported for the path (D29) that the sender trusts
// enough to use at once. The first estimation then treats it as the MTU in
// use: it runs its reference round at Config.Initial, verifies size next
// and, if size fails, falls back to the largest size that passed, as a
// re-estimation does (D19 stays the check). A size of Config.Initial or
// less, or a call once an estimation has started, does nothing; a size
// above Config.MaxPayload counts as MaxPayload.
func (e *Estimator) Assume(size int) {
	size = min(size, e.cfg.MaxPayload)
	if size <= e.cfg.Initial || e.stats.Searching || e.stats.Estimations > 0 {
		return
	}
	e.mtu = size
}

// probesFor returns the number of probes of a round of size bytes (N44).
func (e *Estimator) probesFor(size int) int {
	if e.lossy {
		return ProbesPerRound
	}
	n := max(MinProbesPerRound, min(ProbesPerRound, e.cfg.RoundBytes/max(size, 1)))
	if e.first {
		// The reference round: FirstRoundProbes/ProbesPerRound times a
		// round of its size.
		n = max(1, n*e.cfg.FirstRoundProbes/ProbesPerRound)
	}
	return n
}

// retryMax bounds the wait before an estimation that measured nothing is
// tried again (finish).
const retryMax = 8 * time.Second

// lossyPoints is the loss of the first round, in points, above which the
// estimation's rounds all send ProbesPerRound probes: on a path that loses
// more, a round of 20 probes varies by 7 points or more from loss alone,
// and D19's 5-point rule would fail sizes the path carries (N44).
const lossyPoints = 10

// Start begins an estimation at now: the endpoint calls it when the
// connection is established. Later estimations start by themselves, Period
// after the end of the previous one. Calling Start during an estimation
// starts over; the endpoint may do so when it suspects the path shrank.
//
// The first estimation searches up from Config.Initial. Later ones run their
// first round at Initial (the reference the specification's thresholds
// compare against), then verify the MTU in use and the size that failed last
// time, and search on only if one of these has changed; the MTU in use stays
// until a round refutes it.
func (e *Estimator) Start(now clock.Time) {
	e.held = false
	e.hintLo, e.hintHi = 0, 0
	if e.mtu > e.cfg.Initial {
		e.hintLo = e.mtu
		if e.lastHi > e.mtu {
			e.hintHi = e.lastHi
		}
	}
	e.confirmed = e.hintLo == 0
	e.pathTry, e.above = e.pathHint, false
	e.first = true
	e.lossy = false
	e.refresh = false
	e.lo, e.hi = 0, 0
	e.failures = 0
	e.stats.Searching, e.stats.Retrying = true, false
	e.newRound(now, e.cfg.Initial)
}

// newRound starts a round probing size: resets first.
func (e *Estimator) newRound(now clock.Time, size int) {
	e.phase = phaseReset
	e.size = size
	e.n = e.probesFor(size)
	e.tries = 0
	e.sent = 0
	e.count = 0
	e.bad = 0
	e.sendAt = now
	e.timer = 0
	e.stats.Size = size
	// Pilots for a size above the last that passed, where a path that
	// drops it would take the whole round: not the reference round, a
	// refresh of a passed size, the MTU in use being verified, or a
	// lossy path's rounds (N91).
	e.pilot = !e.first && !e.refresh && !e.lossy && size > pilotAbove*e.lo && size != e.hintLo && e.n > pilotProbes
}

// HandlePayload takes a payload the peer's responder sent on the
// estimator's channel. A single 1 byte acknowledges a reset and starts the
// round's probes; a 4-byte big-endian count raises the round's count.
// Everything else is ignored and counted, as are acks and counts that come
// when none is expected. A count above the number of probes sent so far in
// the round is impossible for an honest responder and is ignored, so a
// delayed count of an earlier round, a duplicate or a forgery cannot pass a
// size. HandlePayload does not keep payload.
func (e *Estimator) HandlePayload(now clock.Time, payload []byte) {
	if isAck(payload) {
		if e.phase != phaseReset || e.tries == 0 {
			// A late ack of an earlier reset of this round, or of an
			// earlier round: the round it belongs to has begun, or
			// this round has sent no reset yet.
			e.stats.Ignored++
			return
		}
		e.phase = phaseProbe
		e.sendAt = now
		e.timer = 0
		return
	}
	c, ok := parseCount(payload)
	if !ok || (e.phase != phaseProbe && e.phase != phaseFinal && e.phase != phasePilot) {
		// Counts before the ack belong to an earlier round: on a path that
		// keeps order, the ack is sent after every count of the rounds
		// before it.
		e.stats.Ignored++
		return
	}
	if c == 0 || c > uint32(e.sent) {
		e.stats.BadCounts++
		e.bad++
		return
	}
	if int(c) > e.count {
		e.count = int(c)
	}
	if e.phase == phasePilot {
		// A pilot got through: the rest of the round goes now, a
		// ProbeInterval after the last pilot at the earliest.
		e.phase = phaseProbe
		e.sendAt = max(now, e.probeAt.Add(e.cfg.ProbeInterval))
		e.timer = 0
		return
	}
	if e.phase == phaseFinal && e.count == e.n {
		// Every probe is accounted for: waiting longer cannot change
		// the round's result, which applies now. The next round's reset
		// still waits until three RTTs after the last probe: duplicates
		// and late copies of this round's counts may be on their way,
		// and would count in the next round (N44).
		hold := e.quiet
		e.evaluate(now)
		if e.phase == phaseReset && hold > e.sendAt {
			e.sendAt = hold
		}
	}
}

// HandleTimeout moves the estimator on at now if NextDeadline has passed:
// it ends a round's final wait, gives up after the last unanswered reset, or
// starts the next estimation. Payloads that have come due are returned by
// AppendPayload, which the endpoint calls next. Calls before the deadline do
// nothing.
func (e *Estimator) HandleTimeout(now clock.Time) {
	switch e.phase {
	case phaseIdle:
		if !e.held && e.timer != 0 && now >= e.timer {
			e.Start(now)
		}
	case phaseReset:
		if e.timer != 0 && now >= e.timer {
			// No ack after the last of ResetTries resets (D19): the MTU
			// stays where it is. The peer may be busy answering other
			// estimations (N53): the estimation is tried again soon,
			// then less and less often (N157).
			e.stats.GaveUp++
			e.finish(now, false, true)
		}
	case phaseFinal:
		if now >= e.timer {
			e.evaluate(now)
		}
	case phasePilot:
		if now < e.timer {
			break
		}
		if e.sent < pilotSets*pilotProbes && e.sent < e.n {
			// Pilots lost together may be a burst of loss at a full
			// queue: a second set goes a final wait later.
			e.phase = phaseProbe
			e.sendAt = max(now, e.probeAt.Add(e.cfg.ProbeInterval))
			e.timer = 0
			break
		}
		// No pilot got through: the size fails as a round with no count
		// does, having sent only these.
		e.stats.PilotsLost++
		e.n = e.sent
		e.evaluate(now)
	}
}

// NextDeadline returns when HandleTimeout or AppendPayload next has
// something to do, or 0 if nothing is scheduled (before Start).
func (e *Estimator) NextDeadline() clock.Time {
	switch e.phase {
	case phaseReset:
		if e.timer != 0 {
			return e.timer
		}
		return e.sendAt
	case phaseProbe:
		return e.sendAt
	case phaseIdle:
		if e.held {
			return 0
		}
	}
	return e.timer // phaseFinal, phasePilot, phaseIdle
}

// Hold keeps an estimator that is between estimations from starting the
// next one by itself when it is due: it starts at the next Start. An
// endpoint that bounds the estimations it runs at once holds one whose
// turn has not come. Hold during an estimation does nothing.
func (e *Estimator) Hold() {
	if e.phase == phaseIdle {
		e.held = true
	}
}

// Due reports whether an estimator between estimations is to start the
// next one at now (it is not held, and its time has come): the endpoint
// then starts it, or holds it until its turn.
func (e *Estimator) Due(now clock.Time) bool {
	return e.phase == phaseIdle && !e.held && e.timer != 0 && now >= e.timer
}

// Quiet reports whether the estimator has nothing to do at now: between
// estimations, the next not due (Due), and its estimate already returned
// by Changed. HandleTimeout, AppendPayload and Changed then change
// nothing, and AppendPayload appends nothing; a connection sending data
// need not ask it for a payload before each packet.
func (e *Estimator) Quiet(now clock.Time) bool {
	return e.phase == phaseIdle && e.mtu == e.reported && !e.Due(now)
}

// AppendPayload appends to b the next payload to send on the estimator's
// channel, if one is due at now, and returns the extended buffer and true;
// otherwise it returns b and false. A payload is a reset (a single 0 byte)
// or a probe of the round's size filled from Config.Rand. rtt is the
// connection's smoothed round-trip time (D17), 0 if unknown: resets go three
// of them apart, and a round's final wait lasts at least three. It returns at
// most one payload per call and never two probes closer than
// Config.ProbeInterval.
func (e *Estimator) AppendPayload(b []byte, now clock.Time, rtt time.Duration) ([]byte, bool) {
	e.HandleTimeout(now)
	if rtt <= 0 {
		rtt = defaultRTT
	}
	switch e.phase {
	case phaseReset:
		if e.timer != 0 || now < e.sendAt {
			return b, false
		}
		e.tries++
		e.stats.ResetsSent++
		if e.tries >= e.cfg.ResetTries {
			e.timer = now.Add(clock.Scale(rtt, 3))
		} else {
			e.sendAt = now.Add(clock.Scale(rtt, 3))
		}
		return append(b, resetByte), true
	case phaseProbe:
		if now < e.sendAt {
			return b, false
		}
		b = e.appendProbe(b)
		e.probeAt = now
		e.sent++
		e.stats.ProbesSent++
		e.stats.ProbeBytes += uint64(e.size)
		if e.pilot && e.sent%pilotProbes == 0 && e.sent <= pilotSets*pilotProbes && e.count == 0 {
			// Wait for a count of the pilots as long as a round's
			// final wait (N91).
			e.phase = phasePilot
			e.timer = now.Add(max(e.cfg.FinalTimeout, clock.Scale(rtt, 3)))
			e.quiet = now.Add(clock.Scale(rtt, 3))
		} else if e.sent < e.n {
			gap := e.cfg.ProbeInterval
			if e.first && e.n > ProbesPerRound {
				// The larger first round takes no longer than another
				// round: its probes are the smallest (N44).
				gap = clock.Scale(gap, ProbesPerRound) / time.Duration(e.n)
			}
			if e.pilot && e.sent < pilotSets*pilotProbes && e.count == 0 {
				// Pilots spread over a round trip: a burst of loss
				// at a full queue does not take them all.
				gap = max(gap, rtt/pilotProbes)
			}
			e.sendAt = now.Add(gap)
		} else {
			e.phase = phaseFinal
			// Long enough that the round's replies, even held back on a
			// path that reorders, come before the next round's reset
			// (N44).
			e.timer = now.Add(max(e.cfg.FinalTimeout, clock.Scale(rtt, 3)))
			e.quiet = now.Add(clock.Scale(rtt, 3))
		}
		return b, true
	}
	return b, false
}

// appendProbe appends size random bytes. A probe is never mistaken for a
// reset: sizes are at least MinPayload. The bytes come from the estimator's
// own generator, seeded once from Config.Rand: the source the endpoint
// configures may be a cryptographic one, far too slow to fill hundreds of
// kilobytes of probes (N44).
func (e *Estimator) appendProbe(b []byte) []byte {
	n := e.size
	for n >= 8 {
		b = binary.LittleEndian.AppendUint64(b, e.fill.Uint64())
		n -= 8
	}
	if n > 0 {
		v := e.fill.Uint64()
		for ; n > 0; n-- {
			b = append(b, byte(v))
			v >>= 8
		}
	}
	return b
}

// lossWithin reports whether a round of cnt out of n probes lost no more
// than points percentage points against a round of ref out of refN:
// 100·ref/refN - 100·cnt/n <= points, in integers.
func lossWithin(ref, refN, cnt, n, points int) bool {
	return 100*(ref*n-cnt*refN) <= points*refN*n
}

// evaluate ends the round at now and picks what comes next (D19).
func (e *Estimator) evaluate(now clock.Time) {
	e.stats.Rounds++
	e.stats.LastSize = e.size
	e.stats.LastCount = e.count
	e.stats.LastProbes = e.n
	if e.refresh {
		e.refresh = false
		e.stats.LastPass = e.count > 0
		if e.count == 0 {
			// A size that passed now gets nothing through: the path
			// or the peer broke down. Try again next period.
			e.finish(now, false, false)
			return
		}
		e.passCnt, e.passN = e.count, e.n
		// A size already passed, measured again, shows the path's loss
		// now: a path found lossy gets rounds of ProbesPerRound from
		// here on (N44).
		if 100*e.count < (100-lossyPoints)*e.n {
			e.lossy = true
		}
		e.newRound(now, e.doubted)
		return
	}
	pass := e.count > 0 &&
		(e.first || (lossWithin(e.firstCnt, e.firstN, e.count, e.n, maxLossVsFirst) &&
			lossWithin(e.passCnt, e.passN, e.count, e.n, maxLossVsLast)))
	e.stats.LastPass = pass
	switch {
	case e.first:
		e.first = false
		if !pass {
			// Nothing came back even at the initial size: this says
			// nothing about the MTU, and no later round could be
			// judged against it.
			e.finish(now, false, false)
			return
		}
		e.firstCnt, e.passCnt = e.count, e.count
		e.firstN, e.passN = e.n, e.n
		e.lossy = 100*e.count < (100-lossyPoints)*e.n
		e.lo = e.size
	case pass:
		e.failures = 0
		e.passCnt, e.passN = e.count, e.n
		e.lo = e.size
		if e.size == e.hintLo {
			e.confirmed = true
		}
		if e.confirmed {
			e.mtu = e.size
		}
	case (e.count > 0 || e.bad > 0) && e.failures < e.retry:
		// Some probes came back: a marginal failure may be loss that
		// hit this round harder than the reference rounds. Or every
		// count was too high: the responder's counter did not start
		// from this round's reset (the reset was lost and a late ack
		// of an earlier one started the probes). Measure the last
		// passing size again, then this one.
		e.failures++
		e.stats.Retries++
		e.doubted = e.size
		e.refresh = true
		e.newRound(now, e.lo)
		return
	default:
		e.failures = 0
		e.hi = e.size
		if e.size == e.hintLo {
			// The MTU in use no longer gets through: fall back to
			// the largest size this estimation has seen pass.
			e.confirmed = true
			e.mtu = e.lo
		}
	}
	if e.size == e.hintLo {
		e.hintLo = 0
	}
	if e.size == e.hintHi {
		e.hintHi = 0
	}
	next := e.nextSize()
	if next == 0 {
		e.finish(now, true, false)
		return
	}
	e.newRound(now, next)
}

// nextSize returns the next size to probe, or 0 when the search is done:
// the MTU in use first (a re-estimation), then the system's path hint, a
// size just beyond 1 % above the hint once it has passed, the last
// estimation's first failure, then doubling while sizes pass, then a binary
// search between the last pass and the first failure down to within 1 %
// (D19), never above MaxPayload.
func (e *Estimator) nextSize() int {
	inRange := func(s int) bool { return s > e.lo && (e.hi == 0 || s < e.hi) && s <= e.cfg.MaxPayload }
	if e.hintLo != 0 {
		if inRange(e.hintLo) {
			return e.hintLo
		}
		e.hintLo = 0
		e.confirmed = true
	}
	if e.pathTry != 0 {
		s := e.pathTry
		e.pathTry = 0
		if inRange(s) {
			return s
		}
	}
	if e.pathHint != 0 && !e.above && e.hi == 0 && e.lo >= e.pathHint {
		// The path carries what the system said; probe once just
		// beyond 1 % above it. If that fails, the search is done.
		e.above = true
		if s := e.lo + e.lo/100 + 1; inRange(s) {
			return s
		}
	}
	if e.hintHi != 0 {
		if inRange(e.hintHi) {
			return e.hintHi
		}
		e.hintHi = 0
	}
	if e.hi == 0 {
		if e.lo >= e.cfg.MaxPayload {
			return 0
		}
		return min(2*e.lo, e.cfg.MaxPayload)
	}
	// The largest payload that fits is in [lo, hi-1]; stop when lo is
	// within 1 % of anything it could be.
	if (e.hi-1-e.lo)*100 <= e.lo {
		return 0
	}
	return e.lo + (e.hi-e.lo)/2
}

// finish ends the estimation at now. The next one starts Period later,
// unless the estimation measured nothing or was cut short (a reset of its
// round never answered): then it is tried again sooner (N44, N157). A
// complete estimation leaves its first failure as a hint for the next
// one; one cut short keeps the older hint unless it found a failure of
// its own.
func (e *Estimator) finish(now clock.Time, complete, cut bool) {
	e.stats.Estimations++
	e.stats.Searching = false
	if complete || e.hi != 0 {
		e.lastHi = e.hi
	}
	e.phase = phaseIdle
	e.sendAt = 0
	wait := e.cfg.Period
	e.stats.Retrying = !complete && (e.mtu <= e.cfg.Initial || cut)
	if !e.stats.Retrying {
		e.giveUps = 0
	} else {
		// Nothing measured, or a reset never answered: the peer may
		// have been too busy to answer (a server answers a bounded
		// number of estimations at once, N53). Try again after about
		// 1 s, 2 s, 4 s, then every 8 s or so (never later than
		// Period) rather than keep the initial MTU, or the size in use
		// (measured by an estimation cut short, or assumed from the
		// path MTU the system knows), for a whole Period; the waits
		// are spread by half of themselves either way, so that clients
		// refused together do not come back together (N44, N157).
		// Each try costs its resets only.
		base := min(wait, retryMax, time.Second<<min(e.giveUps, 20))
		wait = min(wait, base/2+time.Duration(e.fill.Uint64()%uint64(base)))
		e.giveUps++
	}
	e.timer = now.Add(wait)
}

// MTU returns the payload MTU to send with: Config.Initial until a size
// passes, then each size as it passes (D19). It is never above
// Config.MaxPayload and never below Config.Initial.
func (e *Estimator) MTU() int { return e.mtu }

// Changed returns MTU and true if it differs from what the last call to
// Changed returned (at first, Config.Initial), for the MTUChanged event.
func (e *Estimator) Changed() (int, bool) {
	if e.mtu == e.reported {
		return e.mtu, false
	}
	e.reported = e.mtu
	return e.mtu, true
}

// Stats returns the estimator's counters and state.
func (e *Estimator) Stats() EstimatorStats { return e.stats }
