package mtu

import (
	"encoding/binary"
	"math"
)

// A Responder answers the peer's estimator on one channel: -3 at the client,
// -4 at the server (spec "Determining Payload MTU"). The endpoint passes it
// every payload the peer sends on that channel and sends what
// [Responder.AppendReply] returns back on the same channel. The endpoint
// answers only connected peers (D19).
//
// Its zero value is ready to use. Whatever the peer sends, a Responder holds
// at most one pending reset ack and one pending count, so a flood of probes
// never grows its memory: the estimator keeps only the largest count of a
// round, and the latest count is the largest since the last reset.
type Responder struct {
	counter      uint32 // probes seen since the last reset
	ackPending   bool   // a reset ack is waiting to be sent
	countPending bool   // counter is waiting to be sent
	stats        ResponderStats
}

// ResponderStats are the counters of a [Responder].
type ResponderStats struct {
	Resets     uint64 // resets received
	Probes     uint64 // other payloads received, each counted as a probe
	Replies    uint64 // replies returned by AppendReply
	Superseded uint64 // counts replaced by a later count or a reset before they were sent
}

// NewResponder returns a new Responder; the zero value is just as good.
func NewResponder() *Responder { return new(Responder) }

// HandlePayload takes a payload the peer's estimator sent on the channel. A
// single 0 byte is a reset: the counter goes back to 0 and a single 1 byte
// is queued in reply. Any other payload, empty or not, is a probe: the
// counter grows by one and the new count is queued in reply, replacing a
// count not yet sent. The counter stops at math.MaxInt32, the largest count
// the specification's i32 can carry. HandlePayload does not keep payload.
func (r *Responder) HandlePayload(payload []byte) {
	if isReset(payload) {
		r.stats.Resets++
		if r.countPending {
			r.stats.Superseded++
		}
		r.counter = 0
		r.countPending = false
		r.ackPending = true
		return
	}
	r.stats.Probes++
	if r.counter < math.MaxInt32 {
		r.counter++
	}
	if r.countPending {
		r.stats.Superseded++
	}
	r.countPending = true
}

// AppendReply appends the next pending reply to b and returns the extended
// buffer and true, or b and false if nothing is pending. A pending reset ack
// goes first, then the count. The endpoint calls it until it returns false
// after each HandlePayload; calling it less often merges replies, never
// loses the latest count.
func (r *Responder) AppendReply(b []byte) ([]byte, bool) {
	switch {
	case r.ackPending:
		r.ackPending = false
		r.stats.Replies++
		return append(b, ackByte), true
	case r.countPending:
		r.countPending = false
		r.stats.Replies++
		return binary.BigEndian.AppendUint32(b, r.counter), true
	}
	return b, false
}

// Pending reports whether AppendReply has a reply to return.
func (r *Responder) Pending() bool { return r.ackPending || r.countPending }

// AckPending reports whether the reply AppendReply returns next is a reset
// ack: the estimator waits for it before its round's probes, while a count
// only raises a count it already has.
func (r *Responder) AckPending() bool { return r.ackPending }

// Stats returns the responder's counters.
func (r *Responder) Stats() ResponderStats { return r.stats }
