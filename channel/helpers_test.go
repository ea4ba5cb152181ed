package channel

import (
	"fmt"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
)

// tester is what the helpers need of *testing.T and *rapid.T.
type tester interface {
	Helper()
	Fatalf(format string, args ...any)
}

// packet is a data packet as it travels: header and chunk.
type packet struct {
	h     Header
	chunk []byte
}

// parsePacket parses b, a packet appended by a Sender, failing the test if
// it is malformed.
func parsePacket(t tester, b []byte) packet {
	t.Helper()
	h, err := ParseHeader(b)
	if err != nil {
		t.Fatalf("sender produced a bad header: %v", err)
	}
	return packet{h: h, chunk: append([]byte(nil), b[HeaderLen:]...)}
}

// sendNew sends every queued chunk at messageMTU and returns the packets.
func sendNew(t tester, s *Sender, now clock.Time, messageMTU int) []packet {
	t.Helper()
	var out []packet
	for s.HasNew() {
		b, sent := s.AppendNew(nil, now, messageMTU)
		p := parsePacket(t, b)
		if sent.Seq != p.h.Seq || sent.Rel != p.h.Rel || sent.Reliable != p.h.Reliable ||
			sent.Start != p.h.Start || sent.Bytes != len(p.chunk) {
			t.Fatalf("Sent %+v does not describe the packet %+v (%d bytes)", sent, p.h, len(p.chunk))
		}
		out = append(out, p)
	}
	return out
}

// payload returns n bytes that depend on seed.
func payload(seed, n int) []byte {
	b := make([]byte, n)
	x := uint32(seed)*2654435761 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

const ms = time.Millisecond

var t0 = clock.Epoch

// keptBytes returns what an idle receiver is charged for the arrays it
// keeps for reuse: its ring and its queue of delivered messages (N49).
func (r *Receiver) keptBytes() int { return r.chargeFor(0, len(r.q.slots)) }

// checkSeqEntries checks what HandleAck's in-order path relies on to take
// the front entry of bySeq as live without reading its record: deadSeq
// counts the dead entries exactly, and headLive holds only of a live
// front entry; and that a sender with nothing in flight holds no entry,
// so that HandleAck there changes nothing. It also checks what bucket 0,
// read from bySeq, relies on: no queue of its own, every live record below
// zeroNo resent, its bit in nonEmpty set while it has packets, and every
// live record in bySeq once. It returns what is wrong, or "".
func checkSeqEntries(s *Sender) string {
	dead, live := 0, 0
	for i := range s.bySeq.Len() {
		e := s.bySeq.At(i)
		r := &s.recs[e.idx]
		if !r.live || r.no != e.no {
			dead++
			continue
		}
		live++
		if r.resends == 0 && e.no < s.zeroNo {
			return fmt.Sprintf("record %d never resent, below zeroNo %d", e.no, s.zeroNo)
		}
		if r.resends == 0 && s.nonEmpty&1 == 0 {
			return fmt.Sprintf("record %d never resent, with bucket 0's bit clear", e.no)
		}
	}
	if live != s.inFlight {
		return fmt.Sprintf("%d live entries in bySeq, %d packets in flight", live, s.inFlight)
	}
	if s.buckets[0].Len() > 0 {
		return fmt.Sprintf("%d entries in bucket 0's queue", s.buckets[0].Len())
	}
	if s.inFlight == 0 && (s.bySeq.Len() > 0 || s.headLive) {
		// A connection skips HandleAck for a sender with nothing in
		// flight: it must find nothing to free and nothing to drop.
		return fmt.Sprintf("nothing in flight, but %d entries in bySeq, headLive %v", s.bySeq.Len(), s.headLive)
	}
	if dead != s.deadSeq {
		return fmt.Sprintf("deadSeq = %d, %d dead entries in bySeq", s.deadSeq, dead)
	}
	if s.headLive {
		if s.bySeq.Len() == 0 {
			return "headLive with nothing in bySeq"
		}
		e := s.bySeq.At(0)
		if r := &s.recs[e.idx]; !r.live || r.no != e.no {
			return "headLive with a dead entry at the front"
		}
	}
	return ""
}
