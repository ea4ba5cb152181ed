package channel

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/coalesce"
	"github.com/fastnet-engine/fastnet/internal/bufpool"
	"github.com/google/go-cmp/cmp"
)

// pair is a Sender and a Receiver with a hand-driven network between them.
type pair struct {
	t   *testing.T
	s   *Sender
	r   *Receiver
	now clock.Time
	mtu int
}

func newPair(t *testing.T, cfg ReceiverConfig) *pair {
	return &pair{t: t, s: NewSender(0), r: NewReceiver(cfg), now: t0, mtu: 25}
}

// send queues a message and returns its packets.
func (p *pair) send(msg []byte, reliable bool) []packet {
	p.t.Helper()
	p.s.Queue(msg, reliable)
	return sendNew(p.t, p.s, p.now, p.mtu)
}

// handle hands packets to the receiver and checks each result.
func (p *pair) handle(want Result, pkts ...packet) {
	p.t.Helper()
	for _, k := range pkts {
		if got := p.r.Handle(p.now, k.h, k.chunk); got != want {
			p.t.Fatalf("Handle(seq %d, R %d, rel %v, start %v) = %v, want %v", k.h.Seq, k.h.Rel, k.h.Reliable, k.h.Start, got, want)
		}
	}
}

// poll returns every message the receiver delivers at p.now.
func (p *pair) poll() []Message {
	var out []Message
	for {
		m, ok := p.r.Poll(p.now)
		if !ok {
			return out
		}
		out = append(out, m)
	}
}

// wantPoll checks what the receiver delivers now.
func (p *pair) wantPoll(what string, want ...Message) {
	p.t.Helper()
	got := p.poll()
	if diff := cmp.Diff(want, got); diff != "" {
		p.t.Errorf("%s: delivered (-want +got):\n%s", what, diff)
	}
}

func msgOf(reliable bool, data []byte) Message { return Message{Reliable: reliable, Data: data} }

func cat(ps ...[]packet) []packet {
	var out []packet
	for _, p := range ps {
		out = append(out, p...)
	}
	return out
}

// TestInOrderDelivery is the plain case: messages of several sizes, both
// reliabilities, delivered in order as they complete.
func TestInOrderDelivery(t *testing.T) {
	p := newPair(t, ReceiverConfig{})
	for i, n := range []int{0, 1, 15, 16, 64, 300, 5000} {
		rel := i%2 == 0
		msg := payload(i, n)
		p.handle(Accepted, p.send(msg, rel)...)
		p.wantPoll("in order", msgOf(rel, msg))
	}
	if p.r.Bytes() != p.r.keptBytes() || p.r.NextDeadline() != 0 {
		t.Errorf("idle receiver holds %d bytes, deadline %v", p.r.Bytes(), p.r.NextDeadline())
	}
}

// TestOutOfOrderArrival checks D10: packets of a message arriving in any
// order are queued by sequence number and the message is delivered once
// the group has no hole.
func TestOutOfOrderArrival(t *testing.T) {
	for _, rel := range []bool{false, true} {
		p := newPair(t, ReceiverConfig{})
		msg := payload(1, 100) // 5 packets at MTU 25
		pk := p.send(msg, rel)
		p.handle(Accepted, pk[4], pk[2], pk[0], pk[3])
		p.wantPoll("with a hole")
		p.handle(Accepted, pk[1])
		p.wantPoll("complete", msgOf(rel, msg))
	}
}

// TestEveryArrivalOrder delivers a 3-packet message in every order, for
// many payloads: a head that does not start a message waits for its start
// whatever its bytes look like (D10, D11).
func TestEveryArrivalOrder(t *testing.T) {
	orders := [][]int{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}}
	for seed := range 50 {
		for _, rel := range []bool{false, true} {
			for _, o := range orders {
				p := newPair(t, ReceiverConfig{MaxMessage: 100})
				msg := payload(seed, 40) // 58 bytes: 3 packets at MTU 25
				pk := p.send(msg, rel)
				for _, i := range o {
					p.handle(Accepted, pk[i])
				}
				if got := p.poll(); len(got) != 1 {
					t.Fatalf("seed %d, reliable %v, order %v: %d messages delivered, drops %+v, err %v",
						seed, rel, o, len(got), p.r.Drops(), p.r.Err())
				}
			}
		}
	}
}

// TestIgnoreNumberStartsAtMinusOne checks D8: G starts at -1, so the first
// packet, seq 0, is accepted, and a packet at -1 or before is not.
func TestIgnoreNumberStartsAtMinusOne(t *testing.T) {
	p := newPair(t, ReceiverConfig{})
	chunk := coalesce.AppendMessage(nil, []byte("x"), false)
	tests := []struct {
		h    Header
		want Result
	}{
		{Header{Start: true, Seq: -1}, Stale},
		// R 0 is at or before L = 0: consumed, so a duplicate (D8, D26).
		{Header{Start: true, Seq: -1, Rel: 0, Reliable: true}, Duplicate},
		{Header{Start: true, Seq: -500}, Stale},
		{Header{Start: true, Seq: 0}, Accepted},
	}
	for _, tc := range tests {
		c := chunk
		if tc.h.Reliable {
			c = coalesce.AppendMessage(nil, []byte("x"), true)
		}
		if got := p.r.Handle(p.now, tc.h, c); got != tc.want {
			t.Errorf("Handle(%+v) = %v, want %v", tc.h, got, tc.want)
		}
	}
	p.wantPoll("seq 0", msgOf(false, []byte("x")))
}

// TestDuplicateReliableAckedAgain checks D8: a reliable packet at or before
// the ignore number, or already queued, is a duplicate, acked again and
// dropped, so a resent message is not delivered twice; an unreliable
// duplicate is stale.
func TestDuplicateReliableAckedAgain(t *testing.T) {
	p := newPair(t, ReceiverConfig{})
	a := p.send(payload(1, 60), true) // 4 packets
	p.handle(Accepted, a[0], a[1])
	p.handle(Duplicate, a[0], a[1]) // already queued
	p.handle(Accepted, a[2], a[3])
	p.wantPoll("first time", msgOf(true, payload(1, 60)))
	p.handle(Duplicate, a...) // at or before G
	p.wantPoll("after duplicates")
	if !Duplicate.Ack() || !Accepted.Ack() || Stale.Ack() || NoMemory.Ack() || OutOfWindow.Ack() || Rejected.Ack() || Corrupt.Ack() {
		t.Error("Result.Ack does not follow D13")
	}
	u := p.send(payload(2, 60), false)
	p.handle(Accepted, u[0])
	p.handle(Stale, u[0])
	p.handle(Accepted, u[1:]...)
	p.wantPoll("unreliable", msgOf(false, payload(2, 60)))
	p.handle(Stale, u...)
}

// TestReceiveWindow checks D9: a packet more than W after G is dropped and
// not acked; one exactly W after is queued.
func TestReceiveWindow(t *testing.T) {
	p := newPair(t, ReceiverConfig{Window: 100})
	c := coalesce.AppendMessage(nil, nil, true)
	// R 2: blocked (the reliable packet with R 1 is owed), so the window
	// stays where it is.
	if got := p.r.Handle(p.now, Header{Reliable: true, Start: true, Seq: 100, Rel: 2}, c); got != OutOfWindow {
		t.Errorf("seq 100 with G=-1, W=100: %v, want OutOfWindow", got)
	}
	if got := p.r.Handle(p.now, Header{Reliable: true, Start: true, Seq: 99, Rel: 2}, c); got != Accepted {
		t.Errorf("seq 99 with G=-1, W=100: %v, want Accepted", got)
	}
	if got := p.r.Handle(p.now, Header{Start: true, Seq: 4000000, Rel: 1}, c); got != OutOfWindow {
		t.Errorf("seq 4000000: %v, want OutOfWindow", got)
	}
	if got := p.r.Handle(p.now, Header{Seq: MinSeq - 1}, c); got != OutOfWindow {
		t.Errorf("invalid seq: %v, want OutOfWindow", got)
	}
}

// TestWindowMovesPastLongLoss checks that a channel survives a loss longer
// than the window (D9, D23, D27): unblocked packets beyond the window prove
// that only unreliable packets were missed once SkipEvidence of them,
// close together, have arrived; the first ones are dropped unacked, and
// the window then moves to just before the lowest of them.
func TestWindowMovesPastLongLoss(t *testing.T) {
	p := newPair(t, ReceiverConfig{Window: 50, MCI: time.Hour})
	u := p.send(payload(1, 40), false) // 3 packets, R 0
	p.handle(Accepted, u[0])           // incomplete: stays queued
	for i := range 100 {
		p.send(payload(i, 3), false) // lost
	}
	// The stream goes on: seq 103 and 104 are evidence, dropped (D9).
	ev := cat(p.send(payload(4, 3), false), p.send(payload(5, 3), false))
	p.handle(OutOfWindow, ev...)
	r := p.send(payload(2, 3), true) // seq 105, R 1: unblocked, the third
	p.handle(Accepted, r...)
	p.wantPoll("after the loss", msgOf(true, payload(2, 3)))
	if g, _ := p.r.Position(); g != 105 {
		t.Errorf("G = %d, want 105", g)
	}
	if d := p.r.Drops(); d.Skipped != 1 {
		t.Errorf("Drops = %+v, want the queued packet skipped", d)
	}
	late := p.send(payload(3, 3), false) // seq 106, R 1
	p.handle(Accepted, late...)
	p.wantPoll("after", msgOf(false, payload(3, 3)))
	p.handle(Stale, u[1])
	p.handle(Stale, ev...)
}

// TestD27WindowMovesOnlyOnEvidence checks what is and is not evidence that
// moves the window past a loss longer than it (D27, N37): SkipEvidence
// distinct unblocked packets beyond the window, within the window's width
// of one another, arrived within SkipEvidenceTime, at most M/4 after G.
// The packets are unreliable one-packet messages with R = L = 0 (so
// unblocked), sent to a fresh receiver with window 100.
func TestD27WindowMovesOnlyOnEvidence(t *testing.T) {
	msg := coalesce.AppendMessage(nil, []byte("m"), false)
	relMsg := coalesce.AppendMessage(nil, []byte("m"), true)
	type arrival struct {
		seq  Seq
		rel  Seq // R: 0 is an unreliable packet, 1 an unblocked reliable one
		at   time.Duration
		want Result
	}
	for _, tc := range []struct {
		name     string
		arrivals []arrival
		g        Seq // G afterwards
	}{
		{"one forged far-ahead packet", []arrival{{5000, 0, 0, OutOfWindow}}, -1},
		{"the same packet three times", []arrival{{5000, 0, 0, OutOfWindow}, {5000, 0, ms, OutOfWindow}, {5000, 0, 2 * ms, OutOfWindow}}, -1},
		{"three close together", []arrival{{5000, 0, 0, OutOfWindow}, {5001, 0, ms, OutOfWindow}, {5003, 0, 2 * ms, Accepted}}, 5003},
		{"three out of order", []arrival{{5040, 0, 0, OutOfWindow}, {5000, 0, ms, OutOfWindow}, {5020, 0, 2 * ms, Accepted}}, 5020},
		{"spread wider than the window", []arrival{{5000, 0, 0, OutOfWindow}, {5050, 0, ms, OutOfWindow}, {5100, 0, 2 * ms, OutOfWindow}}, -1},
		{"too slow", []arrival{{5000, 0, 0, OutOfWindow}, {5001, 0, 3000 * ms, OutOfWindow}, {5002, 0, 6000 * ms, OutOfWindow}}, -1},
		{"slow but then a fourth", []arrival{{5000, 0, 0, OutOfWindow}, {5001, 0, 3000 * ms, OutOfWindow}, {5002, 0, 6000 * ms, OutOfWindow}, {5003, 0, 6500 * ms, Accepted}}, 5003},
		// R 1 marks a reliable packet here: unblocked, as L is 0.
		{"a lone reliable packet resent", []arrival{{5000, 1, 0, OutOfWindow}, {5000, 1, 20 * ms, OutOfWindow}, {5000, 1, 50 * ms, Accepted}}, 5000},
		{"a reliable packet duplicated by the network", []arrival{{5000, 1, 0, OutOfWindow}, {5000, 1, ms, OutOfWindow}, {5000, 1, 2 * ms, OutOfWindow}}, -1},
		{"a reliable message after an unblocked first packet", []arrival{{5000, 1, 0, OutOfWindow}, {5001, 2, ms, OutOfWindow}, {5002, 3, 2 * ms, Accepted}}, 4999},
		{"blocked packets are no evidence", []arrival{{5000, 2, 0, OutOfWindow}, {5001, 2, ms, OutOfWindow}, {5002, 2, 2 * ms, OutOfWindow}}, -1},
		// A batch of datagrams reaches the receiver at one instant: a
		// forged witness among honest ones gives way in its turn, the
		// first to come going first. When a new witness took the first
		// slot's place, the forged one in the second stayed for the
		// whole batch and the window never moved within it.
		{"one forged among a batch at one instant", []arrival{{1000, 0, 0, OutOfWindow}, {5000, 0, 0, OutOfWindow}, {1001, 0, 0, OutOfWindow}, {1002, 0, 0, OutOfWindow}, {1003, 0, 0, Accepted}}, 1003},
		{"more than M/4 ahead", []arrival{{Seq(MaxSkip + 1), 0, 0, OutOfWindow}, {Seq(MaxSkip + 2), 0, ms, OutOfWindow}, {Seq(MaxSkip + 3), 0, 2 * ms, OutOfWindow}}, -1},
		{"at M/4", []arrival{{Seq(MaxSkip - 3), 0, 0, OutOfWindow}, {Seq(MaxSkip - 2), 0, ms, OutOfWindow}, {Seq(MaxSkip - 1), 0, 2 * ms, Accepted}}, Seq(MaxSkip - 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewReceiver(ReceiverConfig{Window: 100})
			for _, a := range tc.arrivals {
				h, chunk := Header{Start: true, Seq: a.seq, Rel: a.rel}, msg
				if a.rel == 1 {
					h.Reliable, chunk = true, relMsg
				} else if a.rel > 1 { // a later packet of a reliable message
					h.Reliable, h.Start, chunk = true, false, []byte("z")
				}
				if got := r.Handle(t0.Add(a.at), h, chunk); got != a.want {
					t.Fatalf("seq %d at %v: %v, want %v", a.seq, a.at, got, a.want)
				}
			}
			if g, _ := r.Position(); g != tc.g {
				t.Errorf("G = %d, want %d", g, tc.g)
			}
		})
	}
}

// TestD27ForgedPacketCannotCauseLoss is the attack D27 closes, end to end
// at channel level: a reliable message is in flight (its packets delayed)
// and a forged unblocked packet arrives beyond the window. It is dropped
// unacked and the window does not move, so the reliable message is then
// delivered, not lost.
func TestD27ForgedPacketCannotCauseLoss(t *testing.T) {
	p := newPair(t, ReceiverConfig{Window: 100})
	rel := p.send(payload(1, 60), true) // delayed
	forged := raw(false, true, 3000, 0, coalesce.AppendMessage(nil, []byte("x"), false))
	p.handle(OutOfWindow, forged)
	p.handle(Accepted, rel...)
	p.wantPoll("the reliable message", msgOf(true, payload(1, 60)))
	if p.r.Err() != nil {
		t.Fatal(p.r.Err())
	}
}

// TestBlockedUntilReliable checks D7: an unreliable packet sent after a
// reliable one waits for it (need(p) = p.R differs from L), whatever the
// time, and follows it once it is consumed.
func TestBlockedUntilReliable(t *testing.T) {
	p := newPair(t, ReceiverConfig{})
	r1 := p.send(payload(1, 40), true) // 3 packets, R 1..3
	u := p.send(payload(2, 5), false)  // R 3
	r2 := p.send(payload(3, 5), true)  // R 4
	p.handle(Accepted, u...)
	p.handle(Accepted, r2...)
	p.now = p.now.Add(time.Hour)
	p.wantPoll("blocked")
	if d := p.r.NextDeadline(); d != 0 {
		t.Errorf("a blocked head has deadline %v; it never expires (D11 rule 1)", d)
	}
	p.handle(Accepted, r1[1], r1[2])
	p.wantPoll("still blocked")
	p.handle(Accepted, r1[0])
	p.wantPoll("unblocked", msgOf(true, payload(1, 40)), msgOf(false, payload(2, 5)), msgOf(true, payload(3, 5)))
}

// TestLostUnreliableDoesNotBlock checks that a lost unreliable message does
// not hold back what follows (D7, D11): the reliable message after it is
// unblocked (need = its R - 1 = L) and delivered past the hole.
func TestLostUnreliableDoesNotBlock(t *testing.T) {
	p := newPair(t, ReceiverConfig{})
	u1 := p.send(payload(1, 5), false)
	r1 := p.send(payload(2, 5), true)
	u2 := p.send(payload(3, 5), false)
	_ = u1
	p.handle(Accepted, u2...)
	p.handle(Accepted, r1...)
	p.wantPoll("past the lost message", msgOf(true, payload(2, 5)), msgOf(false, payload(3, 5)))
	p.handle(Stale, u1...)
}

// TestUnreliableExpiry checks D11 rule 3: an incomplete unreliable group is
// dropped once its newest packet is the MCI old, the ignore number moves
// past it, and what follows is delivered.
func TestUnreliableExpiry(t *testing.T) {
	const mci = 25 * ms
	p := newPair(t, ReceiverConfig{MCI: mci})
	a := p.send(payload(1, 100), false) // 5 packets
	b := p.send(payload(2, 5), false)   // 1 packet
	p.handle(Accepted, a[0], a[1])
	p.now = p.now.Add(10 * ms)
	p.handle(Accepted, a[3])
	p.handle(Accepted, b...)
	if got, want := p.r.NextDeadline(), t0.Add(mci); got != want {
		t.Errorf("NextDeadline = %v, want newest arrival of the head group + MCI = %v", got, want)
	}
	p.now = t0.Add(mci - 1)
	p.wantPoll("before the MCI")
	p.now = t0.Add(mci)
	// The head group {0,1} expires. The next head, packet 3, does not start
	// a message, but its start (packet 2) may still arrive: it waits for
	// the MCI after its own arrival.
	p.wantPoll("after the MCI")
	if got, want := p.r.NextDeadline(), t0.Add(10*ms+mci); got != want {
		t.Errorf("NextDeadline = %v, want %v", got, want)
	}
	p.handle(Stale, a[0], a[1])
	// Packet 2 arrives: the head now directly follows G and does not start
	// a message, so its start was lost for good: the group {2, 3} is
	// dropped at once, and b is delivered past the missing packet 4.
	p.handle(Accepted, a[2])
	p.wantPoll("orphans dropped", msgOf(false, payload(2, 5)))
	if d := p.r.Drops(); d.Expired != 1 || d.Orphaned != 1 {
		t.Errorf("Drops = %+v, want 1 expired, 1 orphaned", d)
	}
	p.handle(Stale, a[4])
	if p.r.Bytes() != p.r.keptBytes() || p.r.NextDeadline() != 0 {
		t.Errorf("receiver holds %d bytes, deadline %v", p.r.Bytes(), p.r.NextDeadline())
	}
}

// TestReliableNeverExpires checks that only unreliable groups expire (D11
// rule 3): an incomplete reliable message waits for its resend.
func TestReliableNeverExpires(t *testing.T) {
	p := newPair(t, ReceiverConfig{})
	a := p.send(payload(1, 100), true)
	p.handle(Accepted, a[0], a[1], a[3], a[4])
	p.now = p.now.Add(time.Hour)
	p.wantPoll("an hour later")
	if p.r.NextDeadline() != 0 {
		t.Error("a reliable group has a deadline")
	}
	p.handle(Accepted, a[2])
	p.wantPoll("resent", msgOf(true, payload(1, 100)))
}

// raw builds a packet by hand.
func raw(rel, start bool, seq, r Seq, chunk []byte) packet {
	return packet{h: Header{Reliable: rel, Start: start, Seq: seq, Rel: r}, chunk: chunk}
}

// TestMalformed checks the last paragraph of D11: a malformed unreliable
// message is dropped and counted, and what follows is delivered; a
// malformed reliable one means the peer broke the protocol.
func TestMalformed(t *testing.T) {
	good := coalesce.AppendMessage(nil, []byte("hello"), false)
	badSum := append([]byte(nil), good...)
	badSum[len(badSum)-1] ^= 1
	tooLarge := coalesce.AppendMessage(nil, make([]byte, 200), false)
	trailing := append(append([]byte(nil), good...), 0)
	relFlag := coalesce.AppendMessage(nil, []byte("hello"), true) // flag says reliable
	tests := []struct {
		name  string
		chunk []byte
	}{
		{"bad checksum", badSum},
		{"header above MaxMessage", tooLarge},
		{"more bytes than announced", trailing},
		{"message reliability differs from the packets'", relFlag},
	}
	for _, tc := range tests {
		t.Run("unreliable "+tc.name, func(t *testing.T) {
			p := newPair(t, ReceiverConfig{MaxMessage: 100})
			p.handle(Accepted, raw(false, true, 0, 0, tc.chunk))
			p.handle(Accepted, raw(false, true, 1, 0, good))
			p.wantPoll("after the malformed one", msgOf(false, []byte("hello")))
			if d := p.r.Drops(); d.Malformed != 1 {
				t.Errorf("Drops = %+v, want 1 malformed", d)
			}
			if p.r.Err() != nil {
				t.Errorf("Err = %v for unreliable data", p.r.Err())
			}
		})
		t.Run("reliable "+tc.name, func(t *testing.T) {
			p := newPair(t, ReceiverConfig{MaxMessage: 100})
			c := append([]byte(nil), tc.chunk...)
			c[0] ^= 1 // flip the message's reliability flag to match the packet
			if tc.name == "header above MaxMessage" {
				// Not a whole message in one packet: found malformed only
				// once queued and acked, which breaks the protocol (D11).
				p.handle(Accepted, raw(true, true, 0, 1, c))
				p.wantPoll("malformed")
				if err := p.r.Err(); !errors.Is(err, ErrMalformedReliable) || !errors.Is(err, ErrProtocol) {
					t.Errorf("Err = %v, want ErrMalformedReliable", err)
				}
				p.handle(Rejected, raw(true, true, 1, 2, coalesce.AppendMessage(nil, nil, true)))
				return
			}
			// A whole message in one packet is verified before it is
			// acked: refused, and the intact resend is delivered (N15).
			p.handle(Corrupt, raw(true, true, 0, 1, c))
			if p.r.Err() != nil || p.r.Drops().Malformed != 1 || p.r.Bytes() != 0 {
				t.Errorf("after a corrupt packet: Err %v, drops %+v, bytes %d", p.r.Err(), p.r.Drops(), p.r.Bytes())
			}
			good := coalesce.AppendMessage(nil, []byte("hello"), true)
			p.handle(Accepted, raw(true, true, 0, 1, good))
			p.wantPoll("intact resend", msgOf(true, []byte("hello")))
		})
	}
}

// TestMalformedAcrossPackets checks malformed groups of several packets:
// the group ends (another start of message) before it is complete, or its
// last packet carries more than announced.
func TestMalformedAcrossPackets(t *testing.T) {
	enc := coalesce.AppendMessage(nil, payload(1, 40), false) // 58 bytes
	p := newPair(t, ReceiverConfig{})
	p.handle(Accepted,
		raw(false, true, 0, 0, enc[:30]),
		raw(false, true, 1, 0, enc), // a new start: group 0 can never complete
	)
	p.wantPoll("ended early", msgOf(false, payload(1, 40)))
	over := append(append([]byte(nil), enc[30:]...), 1, 2)
	p.handle(Accepted, raw(false, true, 2, 0, enc[:30]), raw(false, false, 3, 0, over))
	p.wantPoll("overlong")
	if d := p.r.Drops(); d.Malformed != 2 {
		t.Errorf("Drops = %+v, want 2 malformed", d)
	}
	// A header cut between packets is read across them.
	big := coalesce.AppendMessage(nil, payload(2, 300), false) // 2-byte length
	p.handle(Accepted, raw(false, true, 4, 0, big[:1]), raw(false, false, 5, 0, big[1:2]), raw(false, false, 6, 0, big[2:]))
	p.wantPoll("header split over three packets", msgOf(false, payload(2, 300)))
}

// TestReliableWithoutStart checks D11: an unblocked reliable head that is
// not a start of message breaks the protocol.
func TestReliableWithoutStart(t *testing.T) {
	p := newPair(t, ReceiverConfig{})
	// Past a channel's first packet, which one without a start is not
	// even taken for (N154).
	p.handle(Accepted, raw(true, true, 0, 1, coalesce.AppendMessage(nil, []byte("x"), true)))
	p.wantPoll("the first message", msgOf(true, []byte("x")))
	p.handle(Accepted, raw(true, false, 1, 2, []byte{1, 2, 3}))
	if err := p.r.Err(); !errors.Is(err, ErrNoStart) {
		t.Errorf("Err = %v, want ErrNoStart", err)
	}
	var pe *ProtocolError
	if !errors.As(p.r.Err(), &pe) || pe.Reason == "" {
		t.Errorf("Err is not a *ProtocolError with a reason")
	}
}

// TestUnblockableHead checks D23 (nothing stalls forever): a head whose R
// needs more reliable packets than fit between G and it can never be
// unblocked; unreliable, it is dropped, reliable, it breaks the protocol.
func TestUnblockableHead(t *testing.T) {
	msg := coalesce.AppendMessage(nil, []byte("x"), false)
	p := newPair(t, ReceiverConfig{})
	// Seq 3 leaves room for 3 reliable packets (0, 1, 2): R up to 3 is
	// plausible, R 4 is not.
	p.handle(Accepted, raw(false, true, 3, 3, msg))
	p.wantPoll("plausible: waits")
	// R 9 at seq 4 never unblocks: dropped on arrival (N154).
	p.handle(Corrupt, raw(false, true, 4, 9, msg))
	p.wantPoll("still waiting on seq 3")
	if p.r.Bytes() == 0 {
		t.Fatal("nothing queued")
	}
	p2 := newPair(t, ReceiverConfig{})
	p2.handle(Corrupt, raw(false, true, 3, 4, msg))
	p2.handle(Accepted, raw(false, true, 4, 0, msg))
	p2.wantPoll("unblockable dropped, the next delivered", msgOf(false, []byte("x")))
	if d := p2.r.Drops(); d.Malformed != 1 {
		t.Errorf("Drops = %+v", d)
	}
	p3 := newPair(t, ReceiverConfig{})
	p3.handle(Corrupt, raw(true, true, 2, 5, coalesce.AppendMessage(nil, []byte("x"), true)))
	if err := p3.r.Err(); err != nil {
		t.Errorf("Err = %v after a reliable packet that never unblocks, want none: dropped (N154)", err)
	}
	// Plausible on arrival (R 3 at seq 2): it says seq 0 and 1 hold R 1
	// and 2. An unreliable packet at seq 0 with R 0 disagrees (N155):
	// consumed, it would have made the reliable one unblockable and
	// failed the channel. It is dropped, and the channel goes on.
	p3.handle(Accepted, raw(true, true, 2, 3, coalesce.AppendMessage(nil, []byte("x"), true)))
	p3.handle(Corrupt, raw(false, true, 0, 0, msg))
	if err := p3.r.Err(); err != nil {
		t.Errorf("Err = %v, want none: the unreliable packet that disagrees is dropped (N155)", err)
	}
	p3.handle(Accepted, raw(true, true, 0, 1, coalesce.AppendMessage(nil, []byte("y"), true)))
	p3.handle(Accepted, raw(true, true, 1, 2, coalesce.AppendMessage(nil, []byte("z"), true)))
	p3.wantPoll("in order", msgOf(true, []byte("y")), msgOf(true, []byte("z")), msgOf(true, []byte("x")))
}

// TestMemoryEviction checks D22: unreliable packets that do not fit are
// dropped; a reliable packet first evicts queued unreliable packets of the
// channel, and is refused (not acked, so resent later) if that is not
// enough.
func TestMemoryEviction(t *testing.T) {
	// 10 unreliable first packets of 25 bytes, 3 places apart, in 32-byte
	// buffers and a ring of 32 places (N49).
	held := 10*bufpool.ClassCap(25) + ringBytes(32)
	p := newPair(t, ReceiverConfig{MaxBytes: held + 16})
	first := p.send(payload(0, 40), true) // 3 packets, held back
	var us [][]packet
	for i := range 11 {
		us = append(us, p.send(payload(i+1, 40), false))
	}
	// Queue the unreliable ones' first packets only (so they stay incomplete).
	for i := range 10 {
		p.handle(Accepted, us[i][0])
	}
	if got := p.r.Bytes(); got != held {
		t.Fatalf("Bytes = %d, want %d", got, held)
	}
	p.handle(NoMemory, us[10][0])
	// Each reliable packet needs a buffer more: evicts one unreliable.
	p.handle(Accepted, first[2], first[1])
	if got, want := p.r.Drops().Evicted, uint64(2); got != want {
		t.Errorf("evicted %d, want %d", got, want)
	}
	p.handle(Accepted, first[0])
	if p.r.Bytes() > held+16 {
		t.Errorf("Bytes = %d above the limit", p.r.Bytes())
	}
	p.wantPoll("reliable", msgOf(true, payload(0, 40)))

}

// TestRoomForMissingPackets checks that reliable packets are refused (not
// acked, so resent later) while taking them would leave no room for a
// reliable packet still missing before them: acked packets cannot be given
// back, and without the room the channel would deadlock (D22, D23).
func TestRoomForMissingPackets(t *testing.T) {
	// A and B: 3 packets each, 25+25+8 chunk bytes in 32-byte buffers.
	// Three packets in a ring of 4 places: 288 bytes; a fifth place makes
	// the ring 8 places (N49).
	three, five := 3*bufpool.ClassCap(25)+ringBytes(4), 5*bufpool.ClassCap(25)+ringBytes(8)
	p := newPair(t, ReceiverConfig{MaxBytes: five - 1})
	a := p.send(payload(1, 40), true)
	b := p.send(payload(2, 40), true)
	p.handle(Accepted, a[1], a[2], b[0]) // 288 bytes; a[0] still fits
	// b[1] alone would fit (320), but then a[0] would not (512).
	p.handle(NoMemory, b[1])
	if got := p.r.Bytes(); got != three {
		t.Errorf("Bytes = %d, want %d", got, three)
	}
	p.handle(Accepted, a[0])
	p.wantPoll("A", msgOf(true, payload(1, 40)))
	p.handle(Accepted, b[1], b[2]) // resent
	p.wantPoll("B", msgOf(true, payload(2, 40)))
	if p.r.Bytes() != p.r.keptBytes() {
		t.Errorf("Bytes = %d after draining", p.r.Bytes())
	}
}

// TestMessageLargerThanMemory checks that a message the receive memory can
// never hold does not stall the channel: it is malformed (D11, D23).
func TestMessageLargerThanMemory(t *testing.T) {
	p := newPair(t, ReceiverConfig{MaxBytes: 300, MaxMessage: 1000})
	big := p.send(payload(1, 500), false)
	p.handle(Accepted, big[0])
	small := p.send(payload(2, 3), false)
	p.handle(Accepted, small...)
	p.wantPoll("after the impossible message", msgOf(false, payload(2, 3)))
	if d := p.r.Drops(); d.Malformed != 1 {
		t.Errorf("Drops = %+v", d)
	}
}

// TestSharedBudget checks D22's per-connection limit: receivers sharing a
// Budget never hold more than its Limit together.
func TestSharedBudget(t *testing.T) {
	// Each receiver's first two packets: 100-byte chunks in 128-byte
	// buffers, and a ring of 4 places (N49). A third does not fit.
	b := &Budget{Limit: 2*(2*bufpool.ClassCap(100)+ringBytes(4)) + 100}
	r1 := NewReceiver(ReceiverConfig{Budget: b})
	r2 := NewReceiver(ReceiverConfig{Budget: b})
	s1, s2 := NewSender(1), NewSender(2)
	s1.Queue(payload(1, 300), true)
	s2.Queue(payload(2, 300), true)
	p1, p2 := sendNew(t, s1, t0, 100), sendNew(t, s2, t0, 100)
	r1.Handle(t0, p1[1].h, p1[1].chunk)
	r1.Handle(t0, p1[2].h, p1[2].chunk)
	if got := r2.Handle(t0, p2[1].h, p2[1].chunk); got != Accepted {
		t.Fatalf("r2 first packet: %v", got)
	}
	if got := r2.Handle(t0, p2[2].h, p2[2].chunk); got != NoMemory {
		t.Errorf("r2 second packet: %v, want NoMemory (budget %d/%d)", got, b.Used, b.Limit)
	}
	if b.Used != r1.Bytes()+r2.Bytes() || b.Used > b.Limit {
		t.Errorf("Used = %d, receivers hold %d + %d, limit %d", b.Used, r1.Bytes(), r2.Bytes(), b.Limit)
	}
}

// TestSparseRingCharged checks that packets spread thin, which make the
// receive queue's ring large, are charged for the ring (D22, D23), while a
// single packet after a long run of lost ones is not.
func TestSparseRingCharged(t *testing.T) {
	c := coalesce.AppendMessage(nil, make([]byte, 10), false)[:5] // incomplete
	r := NewReceiver(ReceiverConfig{MaxBytes: 4 << 20})
	if got := r.Handle(t0, Header{Start: true, Seq: 60000}, c); got != Accepted {
		t.Fatal(got)
	}
	if got, want := r.Bytes(), bufpool.ClassCap(len(c))+ringBytes(minRing); got != want {
		t.Errorf("one packet after 60000 lost ones: Bytes = %d, want %d", got, want)
	}
	if got := r.Handle(t0, Header{Start: true, Seq: 0}, c); got != Accepted {
		t.Fatal(got)
	}
	if got, want := r.Bytes(), 2*bufpool.ClassCap(len(c))+ringBytes(65536)+ringBytes(minRing); got != want {
		t.Errorf("Bytes = %d, want %d for a 65536-place ring and its base", got, want)
	}
	r2 := NewReceiver(ReceiverConfig{MaxBytes: 100000})
	r2.Handle(t0, Header{Start: true, Seq: 60000}, c)
	if got := r2.Handle(t0, Header{Start: true, Seq: 0}, c); got != NoMemory {
		t.Errorf("sparse packet with a small limit: %v, want NoMemory", got)
	}
}

// TestSequenceWrap drives a Sender and a Receiver across the wrap of both
// sequence numbers (8388607 -> -10000, D5) with loss and reordering.
func TestSequenceWrap(t *testing.T) {
	p := newPair(t, ReceiverConfig{})
	// Start both sides just before the wrap, as if 8,388,600 packets had
	// passed: the sender's next seq and R, the receiver's G and L.
	p.s.seq, p.s.rel = MaxSeq-5, MaxSeq-3
	p.r.g, p.r.l = MaxSeq-6, MaxSeq-3
	var want []Message
	var held []packet
	sawWrap := false
	for i := range 12 {
		rel := i%3 != 1
		msg := payload(i, 30) // 2 packets at MTU 25
		pk := p.send(msg, rel)
		for _, k := range pk {
			if k.h.Seq == MinSeq || k.h.Rel == MinSeq {
				sawWrap = true
			}
		}
		want = append(want, msgOf(rel, msg))
		// Deliver each message's packets in reverse order, and hold back
		// message 2 until the end.
		if i == 2 {
			held = pk
			continue
		}
		p.handle(Accepted, pk[1], pk[0])
	}
	p.handle(Accepted, held...)
	if !sawWrap {
		t.Fatal("the test never crossed the wrap")
	}
	if diff := cmp.Diff(want, p.poll()); diff != "" {
		t.Errorf("delivered across the wrap (-want +got):\n%s", diff)
	}
	if Distance(MaxSeq, p.r.g) > 100 || p.r.g != p.s.seq.Prev() {
		t.Errorf("G = %d, want the last sent seq %d", p.r.g, p.s.seq.Prev())
	}
	for _, k := range held {
		if got := p.r.Handle(p.now, k.h, k.chunk); got != Duplicate {
			t.Errorf("old packet %d after the wrap: %v, want Duplicate", k.h.Seq, got)
		}
	}
}

// TestFastPathAllocs checks that a message arriving whole in one packet
// costs one allocation (its Data) and nothing per packet; a message in many
// packets costs no more once the buffers are warm.
func TestFastPathAllocs(t *testing.T) {
	for _, tc := range []struct {
		name     string
		n, mtu   int
		reliable bool
	}{
		{"one packet unreliable", 64, 1193, false},
		{"one packet reliable", 64, 1193, true},
		{"multi-packet reliable", 2000, 100, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, r := NewSender(0), NewReceiver(ReceiverConfig{})
			msg := payload(1, tc.n)
			buf := make([]byte, 0, 2048)
			var pkts [][]byte
			now := t0
			round := func() {
				s.Queue(msg, tc.reliable)
				pkts = pkts[:0]
				for s.HasNew() {
					var sent Sent
					buf, sent = s.AppendNew(buf[:0], now, tc.mtu)
					h, _ := ParseHeader(buf)
					if res := r.Handle(now, h, buf[HeaderLen:]); res != Accepted {
						t.Fatal(res)
					}
					if sent.Reliable {
						s.HandleAck(sent.Seq)
					}
				}
				m, ok := r.Poll(now)
				if !ok || len(m.Data) != tc.n {
					t.Fatal("not delivered")
				}
			}
			round()
			if allocs := testing.AllocsPerRun(100, round); allocs != 1 {
				t.Errorf("%v allocs per message, want 1 (the delivered Data)", allocs)
			}
		})
	}
}

// TestPollPause checks that delivery pauses when many messages wait for
// Poll, and resumes on Poll without loss (the bound on undelivered
// messages).
func TestPollPause(t *testing.T) {
	p := newPair(t, ReceiverConfig{})
	first := p.send([]byte("first"), true)
	var want []Message
	want = append(want, msgOf(true, []byte("first")))
	for i := range 3 * maxReady {
		msg := payload(i, 3)
		p.handle(Accepted, p.send(msg, true)...)
		want = append(want, msgOf(true, msg))
	}
	p.handle(Accepted, first...)
	if diff := cmp.Diff(want, p.poll()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestReliableReplacesUnreliable checks that a reliable packet takes the
// place of an unreliable one with the same sequence number rather than
// being taken for a duplicate (which would ack a packet never stored).
func TestReliableReplacesUnreliable(t *testing.T) {
	p := newPair(t, ReceiverConfig{})
	rel := coalesce.AppendMessage(nil, []byte("r"), true)
	incomplete := coalesce.AppendMessage(nil, []byte("u"), false)[:2]
	p.handle(Accepted, raw(false, true, 1, 0, incomplete))
	p.wantPoll("incomplete")
	p.handle(Stale, raw(false, true, 1, 0, incomplete))
	p.handle(Accepted, raw(true, true, 1, 1, rel))
	p.wantPoll("replaced", msgOf(true, []byte("r")))
}

// TestGroupRules checks where the current message group ends (D10): at a
// start of message, at a packet of other reliability, at an unreliable
// packet with another R; a reliable packet whose R does not advance with
// its sequence number fails the channel as it arrives (N155).
func TestGroupRules(t *testing.T) {
	rel := coalesce.AppendMessage(nil, payload(1, 20), true)    // 38 bytes
	unrel := coalesce.AppendMessage(nil, payload(1, 20), false) // 38 bytes
	tests := []struct {
		name    string
		pkts    []packet
		want    []Message
		err     error
		dropped uint64
	}{
		{"reliable R advancing with seq joins", []packet{
			raw(true, true, 0, 1, rel[:20]), raw(true, false, 1, 2, rel[20:]),
		}, []Message{msgOf(true, payload(1, 20))}, nil, 0},
		{"reliable R jumping is dropped", []packet{
			raw(true, true, 0, 1, rel[:20]), raw(true, false, 1, 3, rel[20:]),
		}, nil, nil, 1},
		// A reliable packet whose R does not advance by one from the
		// one before it disagrees with it: the channel fails as it
		// arrives (N155), not once the pair reaches the head.
		{"reliable R not advancing by one fails", []packet{
			raw(true, true, 1, 1, rel[:20]), raw(true, false, 2, 3, rel[20:]),
		}, nil, ErrReliableSeq, 0},
		{"reliable R standing still fails", []packet{
			raw(true, true, 0, 1, rel[:20]), raw(true, false, 1, 1, rel[20:]),
		}, nil, ErrReliableSeq, 0},
		{"unreliable same R joins", []packet{
			raw(false, true, 0, 0, unrel[:20]), raw(false, false, 1, 0, unrel[20:]),
		}, []Message{msgOf(false, payload(1, 20))}, nil, 0},
		{"unreliable other R ends the group (and then cannot unblock)", []packet{
			raw(false, true, 0, 0, unrel[:20]), raw(false, false, 1, 1, unrel[20:]),
		}, nil, nil, 2},
		{"other reliability ends the group (and then continues no message)", []packet{
			raw(false, true, 0, 0, unrel[:20]), raw(true, false, 1, 1, unrel[20:]),
		}, nil, ErrNoStart, 1},
		{"a start ends the group", []packet{
			raw(true, true, 0, 1, rel[:20]), raw(true, true, 1, 2, rel[20:]),
		}, nil, ErrMalformedReliable, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t, ReceiverConfig{})
			for _, k := range tc.pkts {
				p.r.Handle(p.now, k.h, k.chunk)
			}
			p.wantPoll(tc.name, tc.want...)
			if !errors.Is(p.r.Err(), tc.err) || (tc.err == nil) != (p.r.Err() == nil) {
				t.Errorf("Err = %v, want %v", p.r.Err(), tc.err)
			}
			if d := p.r.Drops(); d.Malformed != tc.dropped {
				t.Errorf("Drops = %+v, want %d malformed", d, tc.dropped)
			}
		})
	}
}

// TestResetReleasesMemory checks that a failed or reset receiver gives its
// memory back to the shared budget.
func TestResetReleasesMemory(t *testing.T) {
	b := &Budget{Limit: 1 << 20}
	p := newPair(t, ReceiverConfig{Budget: b})
	a := p.send(payload(1, 100), true)
	p.handle(Accepted, a[1:]...)
	// Held packets of the message beyond the first, and the channel
	// fails (as it does for a reliable packet that continues no
	// message, TestReliableWithoutStart).
	p.r.fail(ErrNoStart)
	if p.r.Err() == nil || b.Used != 0 || p.r.Bytes() != 0 {
		t.Errorf("after a violation: Err %v, budget used %d", p.r.Err(), b.Used)
	}
	q := NewReceiver(ReceiverConfig{Budget: b})
	q.Handle(t0, a[1].h, a[1].chunk)
	if b.Used == 0 {
		t.Fatal("nothing charged")
	}
	q.Reset()
	if b.Used != 0 || q.Bytes() != 0 {
		t.Errorf("after Reset: budget used %d", b.Used)
	}
	if got := q.Handle(t0, a[0].h, a[0].chunk); got != Rejected || errors.Is(q.Err(), ErrProtocol) {
		t.Errorf("after Reset: Handle %v, Err %v", got, q.Err())
	}
}

// TestRingFollowsOccupiedRange checks that the receive queue's ring covers
// only the range from its first queued packet to its last: it grows for a
// far packet and shrinks back (and its charge with it) once that packet
// is gone and the growth is paid for by packets set and taken (N39).
func TestRingFollowsOccupiedRange(t *testing.T) {
	var q seqRing
	q.ensure(3)
	q.set(3, slot{data: []byte{1}, flags: FlagReliable})
	q.ensure(5000)
	q.set(5000, slot{data: []byte{2}})
	if got := len(q.slots); got != 8192 {
		t.Fatalf("capacity %d for places 3..5000, want 8192", got)
	}
	if q.first(0) != 3 || q.last(bmUnrel) != 5000 || q.last(bmRel) != 3 || q.count(bmPresent, 0, 6000) != 2 {
		t.Fatalf("first %d, last unreliable %d, count %d", q.first(0), q.last(bmUnrel), q.count(bmPresent, 0, 6000))
	}
	q.take(5000)
	if len(q.slots) != 8192 || q.span != 1 || !q.has(3) || q.at(3).data[0] != 1 {
		t.Fatalf("after taking the far packet: capacity %d, span %d; want the ring kept until its growth is paid for", len(q.slots), q.span)
	}
	for q.debt > 0 { // the packets set and taken in the meantime
		q.pay()
	}
	q.ensure(1)
	q.set(1, slot{data: []byte{3}, flags: FlagStart})
	if q.off != 1 || q.span != 3 || q.next(bmStart, 0, true) != 1 {
		t.Fatalf("extending backwards: off %d span %d", q.off, q.span)
	}
	q.take(1)
	if q.off != 3 || q.span != 1 || len(q.slots) != baseRing || !q.has(3) || q.at(3).data[0] != 1 {
		t.Fatalf("after taking the first packet: off %d span %d capacity %d", q.off, q.span, len(q.slots))
	}
}

// TestSharedBudgetNoDeadlock checks that channels sharing a budget that
// holds fewer messages than they are receiving at once all complete (D22,
// D23): a message whose header is known gets its memory promised (a
// grant) while it fits, and the others wait, their packets refused and
// resent, instead of each taking part of the budget and none completing.
func TestSharedBudgetNoDeadlock(t *testing.T) {
	const n, size = 8, 2000 // 2021 bytes encoded: 81 packets
	one := MessageMemory(2021, minMessageMTU)
	b := &Budget{Limit: 3 * one}
	var rs [n]*Receiver
	var pkts [n][]packet
	for c := range n {
		rs[c] = NewReceiver(ReceiverConfig{Budget: b, MaxMessage: size, MaxBytes: one})
		s := NewSender(int16(c))
		s.Queue(payload(c, size), true)
		pkts[c] = sendNew(t, s, t0, 25)
	}
	delivered := 0
	now := t0
	for round := 0; delivered < n; round++ {
		if round > 1000 {
			t.Fatalf("only %d of %d messages delivered: deadlock (budget %d/%d)", delivered, n, b.Used, b.Limit)
		}
		// Every channel sends its next unacked packets, round robin; what
		// is refused is resent in the next round.
		for i := range 81 {
			for c := range n {
				if i >= len(pkts[c]) {
					continue
				}
				p := pkts[c][i]
				if p.chunk == nil {
					continue
				}
				if res := rs[c].Handle(now, p.h, p.chunk); res.Ack() {
					pkts[c][i].chunk = nil
				}
				if b.Used > b.Limit {
					t.Fatalf("budget %d above its limit %d", b.Used, b.Limit)
				}
			}
		}
		for c := range n {
			for {
				m, ok := rs[c].Poll(now)
				if !ok {
					break
				}
				if !slices.Equal(m.Data, payload(c, size)) {
					t.Fatalf("channel %d delivered a wrong message", c)
				}
				delivered++
			}
		}
		now = now.Add(ms)
	}
	kept := 0
	for _, r := range rs {
		kept += r.keptBytes()
	}
	if b.Used != kept || b.committed != 0 {
		t.Errorf("after all deliveries: budget used %d, committed %d; want the arrays kept, %d", b.Used, b.committed, kept)
	}
}

// TestD26AckMeansDelivery checks D26: a reliable packet is acked
// (Duplicate or Accepted) only when it is queued, duplicates a queued one,
// or duplicates a consumed one (R at or before L). One the window passed
// without consuming it (R after L) is refused unacked and fails the
// receiver with ErrPassedReliable. The attack: while a reliable message is
// in flight, one unreliable packet carrying R = L far ahead within the
// window (forged, or a flipped bit in a sequence number) is delivered at
// once and moves G past the reliable packets; before D26 they were then
// acked as duplicates and dropped, a silent loss.
func TestD26AckMeansDelivery(t *testing.T) {
	for _, tc := range []struct {
		name string
		// run drives the receiver and returns the packet under test.
		run  func(p *pair) packet
		want Result
		err  error
	}{
		{"forged unreliable moves G past reliable packets in flight", func(p *pair) packet {
			rel := p.send(payload(1, 60), true) // 3 packets, seq 0..2, R 1..3: delayed
			forged := raw(false, true, 1000, 0, coalesce.AppendMessage(nil, []byte("x"), false))
			p.handle(Accepted, forged) // R 0 = L: unblocked, whole, delivered
			p.wantPoll("forged", msgOf(false, []byte("x")))
			return rel[0]
		}, Rejected, ErrPassedReliable},
		{"flipped bit in an unreliable packet's sequence number", func(p *pair) packet {
			u := p.send(payload(2, 5), false) // seq 0, R 0
			rel := p.send(payload(1, 5), true)
			u[0].h.Seq ^= 1 << 12 // seq 4096, still within the window
			p.handle(Accepted, u[0])
			p.wantPoll("damaged", msgOf(false, payload(2, 5)))
			return rel[0]
		}, Rejected, ErrPassedReliable},
		{"duplicate of a consumed reliable packet", func(p *pair) packet {
			rel := p.send(payload(1, 5), true)
			p.handle(Accepted, rel...)
			p.wantPoll("first copy", msgOf(true, payload(1, 5)))
			return rel[0]
		}, Duplicate, nil},
		{"duplicate of a consumed reliable packet after unreliable ones", func(p *pair) packet {
			rel := p.send(payload(1, 5), true)
			p.handle(Accepted, rel...)
			u := p.send(payload(2, 5), false)
			p.handle(Accepted, u...)
			p.wantPoll("both", msgOf(true, payload(1, 5)), msgOf(false, payload(2, 5)))
			return rel[0]
		}, Duplicate, nil},
		{"duplicate of a queued reliable packet", func(p *pair) packet {
			rel := p.send(payload(1, 60), true)
			p.handle(Accepted, rel[1])
			return rel[1]
		}, Duplicate, nil},
		{"stale unreliable packet", func(p *pair) packet {
			u := p.send(payload(1, 5), false)
			p.handle(Accepted, u...)
			p.wantPoll("first copy", msgOf(false, payload(1, 5)))
			return u[0]
		}, Stale, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t, ReceiverConfig{})
			k := tc.run(p)
			got := p.r.Handle(p.now, k.h, k.chunk)
			if got != tc.want || got.Ack() != (tc.want == Duplicate) {
				t.Fatalf("Handle = %v (ack %v), want %v", got, got.Ack(), tc.want)
			}
			if err := p.r.Err(); err != tc.err || tc.err != nil && !errors.Is(err, ErrProtocol) {
				t.Fatalf("Err = %v, want %v", err, tc.err)
			}
			if tc.err != nil && (p.r.Bytes() != 0 || p.r.queued != 0) {
				t.Errorf("a failed receiver holds %d bytes, %d packets", p.r.Bytes(), p.r.queued)
			}
		})
	}
}
