package fastnet

import (
	"time"

	"github.com/fastnet-engine/fastnet/clock"
)

// Heartbeats (channel -2, D16) and round-trip estimation (D17).
//
//	+-------+-------+
//	| value (i16)   |
//	+-------+-------+
//
// The server originates 1..32767 and the client -1..-32768, each cycling.
// The client echoes positive values and the server negative ones. The time
// from sending an originated value to receiving its echo is an RTT sample.

// initialRTT is the specification's default round-trip time.
const initialRTT = 200 * time.Millisecond

// outstanding is how many originated heartbeats are remembered for matching
// their echoes; older ones are forgotten (their echoes then give no sample).
const outstanding = 16

type heartbeat struct {
	server   bool
	next     int16      // the next value to originate
	nextSend clock.Time // when to originate it
	lastSent clock.Time // when the last was originated
	// lastHeard is when the peer's last heartbeat (originated or echo)
	// arrived; the connection times out Config.Timeout after it.
	lastHeard clock.Time

	sent   [outstanding]sentBeat
	sentN  int
	echoes [outstanding]int16 // values owed back to the peer
	echoN  int

	srtt, rttvar, minRTT time.Duration
	sampled              bool

	// firstHeard is when the peer's first heartbeat arrived, 0 before
	// (D28).
	firstHeard clock.Time
	// A server's challenge (D25): while challenge is non-zero the
	// connection is unvalidated, its heartbeats go out at most challenge
	// apart, first is the first value originated, and the peer's echo of
	// a value originated since sets echoed, of any other positive value
	// forged.
	challenge      time.Duration
	first          int16
	echoed, forged bool
	// A client's heartbeats go out every early instead of every interval
	// until earlyUntil, while the server may still be validating it
	// (D25, N33).
	early      time.Duration
	earlyUntil clock.Time
	// proofAt, while not 0, is when the next heartbeat goes at the
	// latest: a heartbeat that went in a bundle to prove the peer reads
	// bundles was not echoed (N156).
	proofAt clock.Time
	// floodIv is the interval of the heartbeats of a connection the echo
	// limiter governs (N90): an eighth of the latest RTT sample, so that
	// the outstanding ones span two round trips, doubled by an echo of
	// one already forgotten. 0 before the first sample.
	floodIv time.Duration
	// The server's latest heartbeat value and when it came, at a client
	// in its early heartbeats (serverCadence).
	peerLast int16
	peerAt   clock.Time
}

// sentBeat is an originated heartbeat awaiting its echo.
type sentBeat struct {
	v       int16
	bundled bool       // it went in a bundle of its own (N156)
	at      clock.Time // 0 once its echo was counted
	// bytes is what the connection had sent when it went out (N90).
	bytes uint64
}

func (h *heartbeat) init(r Role) {
	h.server = r == Server
	if h.server {
		h.next = 1
	} else {
		h.next = -1
	}
	h.first = h.next
	h.srtt, h.rttvar = initialRTT, initialRTT/2
}

// interval is min(1 s, timeout/20) (D16): at least 20 heartbeats reach the
// peer before it would time out.
func heartbeatInterval(timeout time.Duration) time.Duration {
	return min(time.Second, timeout/20)
}

// start arms the first heartbeat to go out at once (D16).
func (h *heartbeat) start(now clock.Time) {
	h.nextSend = now
	h.lastHeard = now
}

// startAt makes v the first value originated (a client's, drawn at
// random, N156).
func (h *heartbeat) startAt(v int16) { h.next, h.first = v, v }

// startChallenge makes a server's heartbeats the challenge of D25: the
// first value originated is drawn from r (1..32767), so that a sender who
// cannot see the server's packets cannot echo it, and they go out every
// interval until the peer echoes one.
func (h *heartbeat) startChallenge(r interface{ IntN(int) int }, interval time.Duration) {
	h.next = int16(r.IntN(32767) + 1)
	h.first = h.next
	h.challenge = interval
}

// originated reports whether this side originated v: a server's values
// go up from first, one per heartbeat, wrapping from 32767 to 1; a
// client's go down from first, wrapping from -32768 to -1.
func (h *heartbeat) originated(v int16) bool {
	if !h.ours(v) {
		return false
	}
	if h.server {
		return h.sentN >= 32767 || (int(v)-int(h.first)+32767)%32767 < h.sentN
	}
	return h.sentN >= 32768 || (int(h.first)-int(v)+32768)%32768 < h.sentN
}

// ours reports whether v is a value of this side's (D16): positive for a
// server, negative for a client.
func (h *heartbeat) ours(v int16) bool { return h.server && v > 0 || !h.server && v < 0 }

// originate returns the value to send now and schedules the next one;
// bytes is what the connection has sent before it (N90).
func (h *heartbeat) originate(now clock.Time, interval time.Duration, bytes uint64) int16 {
	if h.challenge > 0 {
		interval = min(interval, h.challenge)
	}
	if now < h.earlyUntil {
		interval = min(interval, h.early)
	}
	v := h.next
	if h.server {
		if h.next == 32767 {
			h.next = 1
		} else {
			h.next++
		}
	} else {
		if h.next == -32768 {
			h.next = -1
		} else {
			h.next--
		}
	}
	h.sent[h.sentN%outstanding] = sentBeat{v: v, at: now, bytes: bytes}
	h.sentN++
	h.lastSent = now
	h.nextSend = beatAfter(now, interval)
	return v
}

// sentBundled notes that the heartbeat just originated went in a bundle
// of its own (N156).
func (h *heartbeat) sentBundled() { h.sent[(h.sentN-1)%outstanding].bundled = true }

// lastBytes returns the bytes the connection had sent when it originated
// its last heartbeat (N90).
func (h *heartbeat) lastBytes() uint64 {
	if h.sentN == 0 {
		return 0
	}
	return h.sent[(h.sentN-1)%outstanding].bytes
}

// beatGrid is how many instants per interval heartbeats are aligned to.
const beatGrid = 8

// beatAfter returns when the heartbeat after one sent at now is due:
// now+interval rounded down to a multiple of interval/beatGrid, so the
// interval stays at most the one D16 allows (and at least 7/8 of it),
// and the heartbeats of all of an endpoint's connections fall on a few
// instants a second, where the driver sends them in batches and wakes once
// for them all rather than once per connection (N52).
func beatAfter(now clock.Time, interval time.Duration) clock.Time {
	t := now.Add(interval)
	g := clock.Time(interval / beatGrid)
	if g <= 0 || t == clock.Never {
		return t
	}
	return t - t%g
}

// endChallenge returns the heartbeats to their interval once the
// connection is validated (D25).
func (h *heartbeat) endChallenge(interval time.Duration) {
	h.challenge = 0
	if h.sentN > 0 {
		h.nextSend = beatAfter(h.lastSent, interval)
	}
}

// receive handles a heartbeat value from the peer at now. It returns the
// heartbeat of this side that v echoes, if v gave an RTT sample.
func (h *heartbeat) receive(now clock.Time, v int16) (sentBeat, bool) {
	h.lastHeard = now
	if h.firstHeard == 0 {
		h.firstHeard = now
	}
	ours := h.ours(v)
	if ours && h.challenge > 0 {
		if h.originated(v) {
			h.echoed = true
		} else {
			h.forged = true
		}
	}
	if !ours {
		if v != 0 && h.echoN < outstanding {
			h.echoes[h.echoN] = v
			h.echoN++
		}
		if h.earlyUntil != 0 && v > 0 {
			h.serverCadence(now, v)
		}
		return sentBeat{}, false
	}
	// An echo of ours: match it to a remembered send (newest first).
	n := min(h.sentN, outstanding)
	for i := 1; i <= n; i++ {
		s := &h.sent[(h.sentN-i)%outstanding]
		if s.v == v && s.at != 0 {
			b := *s
			h.sample(now.Sub(s.at))
			h.floodIv = max(now.Sub(s.at)/(outstanding/2), echoBeatMin)
			s.at = 0 // one sample per send
			return b, true
		}
	}
	// Forgotten (or echoed twice): the heartbeats go out faster than
	// their round trip, which has grown.
	if h.floodIv > 0 {
		h.floodIv = min(2*h.floodIv, time.Second)
	}
	return sentBeat{}, false
}

// sample folds one RTT sample into the estimate as RFC 6298 does (D17).
func (h *heartbeat) sample(r time.Duration) {
	if r < 0 {
		return
	}
	if !h.sampled {
		h.sampled = true
		h.srtt, h.rttvar, h.minRTT = r, r/2, r
		return
	}
	d := h.srtt - r
	if d < 0 {
		d = -d
	}
	h.rttvar = (3*h.rttvar + d) / 4
	h.srtt = (7*h.srtt + r) / 8
	h.minRTT = min(h.minRTT, r)
}

// serverCadence ends a client's early heartbeats once the server's own
// come at their normal interval: a server validating a client challenges
// it every 50-100 ms (D25, N33), so two consecutive values more than
// validatedGap apart show it no longer does, and the client's heartbeats
// need not give it bytes any more.
func (h *heartbeat) serverCadence(now clock.Time, v int16) {
	next := h.peerLast%32767 + 1
	if h.peerAt != 0 && v == next && now.Sub(h.peerAt) > validatedGap {
		h.earlyUntil = 0
	}
	h.peerLast, h.peerAt = v, now
}

// validatedGap is the gap between two consecutive server heartbeats that
// shows the server's challenge is over (serverCadence).
const validatedGap = 400 * time.Millisecond

// sampleEvery is how many intervals apart a client that echoes the
// server's heartbeats originates its own, for its RTT samples (N54).
const sampleEvery = 5

// echoSent notes that a client sent an echo at now: D16 asks for a
// heartbeat to the peer at least every interval, and the echo is one, so
// the client's own next heartbeat waits until an interval after it, but
// no longer than sampleEvery intervals after its last own one, whose echo
// gives an RTT sample (D17, N54).
func (h *heartbeat) echoSent(now clock.Time, interval time.Duration) {
	if h.sentN == 0 {
		return
	}
	d := min(now.Add(interval), h.lastSent.Add(sampleEvery*interval))
	if h.proofAt != 0 {
		d = min(d, h.proofAt)
	}
	if d > h.nextSend {
		h.nextSend = d
	}
}

// popEcho returns a value owed back to the peer.
func (h *heartbeat) popEcho() (int16, bool) {
	if h.echoN == 0 {
		return 0, false
	}
	v := h.echoes[0]
	copy(h.echoes[:], h.echoes[1:h.echoN])
	h.echoN--
	return v, true
}
