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
	"pgregory.net/rapid"
)

// naiveReceiver is the model a Receiver is checked against: D7-D11 written
// as directly as possible, on a map, recomputing the current message group
// from scratch every time. It has no memory limits; the comparison runs
// where the real receiver's limits are never reached.
type naiveReceiver struct {
	g, l     Seq
	lAt      Seq  // the sequence number of the packet with R = L (D26, N154)
	fresh    bool // nothing taken yet: the next packet is the channel's first (N154)
	q        map[Seq]naivePacket
	window   int
	maxMsg   int
	maxBytes int // only for the "can never fit" rule
	mci      time.Duration
	err      error
	out      []Message
	drops    Drops
	deadline clock.Time
	// witnesses are the unblocked packets seen beyond the window, at most
	// DefaultSkipEvidence-1 (D27).
	witnesses []naiveWitness
}

// naiveWitness is an unblocked packet seen beyond the window (D27).
type naiveWitness struct {
	seq, l Seq
	owed   int // reliable packets it waits for after L
	at     clock.Time
}

type naivePacket struct {
	h    Header
	data []byte
	at   clock.Time
}

func newNaive(cfg ReceiverConfig) *naiveReceiver {
	return &naiveReceiver{g: -1, lAt: -1, fresh: true, q: map[Seq]naivePacket{}, window: cfg.Window, maxMsg: cfg.MaxMessage, maxBytes: cfg.MaxBytes, mci: cfg.MCI}
}

func (m *naiveReceiver) handle(now clock.Time, h Header, chunk []byte) Result {
	if m.err != nil {
		return Rejected
	}
	if !h.Seq.Valid() || !h.Rel.Valid() {
		return OutOfWindow
	}
	d := Distance(m.g, h.Seq)
	if d == 0 || d > SeqSpace/2 {
		switch {
		case !h.Reliable:
			return Stale
		case !m.l.Before(h.Rel): // R at or before L (D26)
			return Duplicate
		case !m.lAt.Before(h.Seq) || Distance(m.l, h.Rel) > Distance(m.lAt, h.Seq):
			// Not after L's packet by as many places as its R is
			// after L: no sender makes it (N154).
			m.drops.Malformed++
			return Corrupt
		}
		m.err = ErrPassedReliable
		clear(m.q)
		return Rejected
	}
	if h.Start && h.Reliable {
		if hdr, err := coalesce.ParseHeader(chunk, m.maxMsg); err == nil && hdr.EncodedLen() <= len(chunk) {
			if msg, err := coalesce.ParseMessage(chunk, m.maxMsg); err != nil || !msg.Reliable {
				m.drops.Malformed++
				return Corrupt
			}
		}
	}
	if d > m.window {
		nd := h.Rel
		if h.Reliable {
			nd = nd.Prev()
		}
		for _, p := range m.q {
			if p.h.Reliable {
				return OutOfWindow
			}
		}
		owed := Distance(m.l, nd)
		if owed >= m.window || d > SeqSpace/4 {
			return OutOfWindow
		}
		// D27: the packet and two valid witnesses within the window's
		// width of one another move G to just before the lowest.
		var valid []naiveWitness
		for _, w := range m.witnesses {
			o := Distance(m.g, w.seq)
			if w.l == m.l && o > m.window && o <= SeqSpace/4 && now.Sub(w.at) <= DefaultSkipEvidenceTime &&
				(w.seq != h.Seq || h.Reliable && now.Sub(w.at) >= MinCopyGap) {
				valid = append(valid, w)
			}
		}
		m.witnesses = valid
		// A set of three is evidence if its lowest packet is unblocked and
		// each other one waits for no more reliable packets than lie
		// between the lowest and it.
		lo := -1
		for i, a := range valid {
			for _, b := range valid[i+1:] {
				set := []naiveWitness{a, b, {h.Seq, m.l, owed, now}}
				slices.SortFunc(set, func(x, y naiveWitness) int { return Distance(m.g, x.seq) - Distance(m.g, y.seq) })
				low := Distance(m.g, set[0].seq)
				ok := Distance(m.g, set[2].seq)-low < m.window && set[0].owed == 0
				for _, x := range set[1:] {
					ok = ok && x.owed <= Distance(m.g, x.seq)-low
				}
				if ok && (lo < 0 || low < lo) {
					lo = low
				}
			}
		}
		if lo < 0 {
			if len(m.witnesses) == DefaultSkipEvidence-1 {
				// The oldest gives way, the first to come of those
				// that came at one instant.
				oldest := 0
				for i, w := range m.witnesses {
					if w.at < m.witnesses[oldest].at {
						oldest = i
					}
				}
				m.witnesses = slices.Delete(m.witnesses, oldest, oldest+1)
			}
			m.witnesses = append(m.witnesses, naiveWitness{h.Seq, m.l, owed, now})
			return OutOfWindow
		}
		m.witnesses = nil
		for q := range m.q {
			if Distance(m.g, q) < lo {
				delete(m.q, q)
				m.drops.Skipped++
			}
		}
		m.g = m.g.Add(lo - 1)
		m.fresh = false
	}
	if !h.Start && m.fresh && h.Seq == 0 {
		// A channel's first packet starts its first message (N154).
		m.drops.Malformed++
		return Corrupt
	}
	nd := h.Rel
	if h.Reliable {
		nd = nd.Prev()
	}
	if Distance(m.l, nd) > Distance(m.g, h.Seq)-1 {
		// It could never be unblocked (D7, D10, N154).
		m.drops.Malformed++
		return Corrupt
	}
	if p, ok := m.q[h.Seq]; ok {
		if !h.Reliable {
			return Stale
		}
		if p.h.Reliable {
			return Duplicate
		}
		delete(m.q, h.Seq) // a reliable packet takes its place
	}
	if !m.agrees(now, h) {
		if m.err != nil {
			return Rejected
		}
		m.drops.Malformed++
		return Corrupt
	}
	m.q[h.Seq] = naivePacket{h: h, data: slices.Clone(chunk), at: now}
	m.process(now)
	return Accepted
}

// naiveFollows reports whether packet b can follow packet a from one
// sender (N155): b waits for at least a's R, and for at most one more for
// each place between them.
func naiveFollows(a, b Header) bool {
	nb := b.Rel
	if b.Reliable {
		nb = nb.Prev()
	}
	return Distance(a.Rel, nb) <= Distance(a.Seq, b.Seq)-1
}

// agrees is the check of N155 on the packets queued before and after h,
// nearest first: a reliable packet removes the unreliable ones it does not
// follow or precede, and fails the channel at a reliable one; an unreliable one
// disagreeing with its neighbour on one side only, unreliable, is dropped
// with it, and otherwise alone.
func (m *naiveReceiver) agrees(now clock.Time, h Header) bool {
	d := Distance(m.g, h.Seq)
	var before, after []Header
	for s, p := range m.q {
		if Distance(m.g, s) < d {
			before = append(before, p.h)
		} else {
			after = append(after, p.h)
		}
	}
	slices.SortFunc(before, func(x, y Header) int { return Distance(m.g, y.Seq) - Distance(m.g, x.Seq) })
	slices.SortFunc(after, func(x, y Header) int { return Distance(m.g, x.Seq) - Distance(m.g, y.Seq) })
	if !h.Reliable {
		pBad := len(before) > 0 && !naiveFollows(before[0], h)
		nBad := len(after) > 0 && !naiveFollows(h, after[0])
		var other Header
		switch {
		case !pBad && !nBad:
			return true
		case pBad && !nBad:
			other = before[0]
		case nBad && !pBad:
			other = after[0]
		default:
			return false
		}
		if !other.Reliable {
			delete(m.q, other.Seq)
			m.drops.Malformed++
			m.process(now)
		}
		return false
	}
	for _, side := range []struct {
		pkts   []Header
		agrees func(p Header) bool
	}{
		{before, func(p Header) bool { return naiveFollows(p, h) }},
		{after, func(p Header) bool { return naiveFollows(h, p) }},
	} {
		for _, p := range side.pkts {
			if side.agrees(p) {
				break
			}
			if p.Reliable {
				m.err = ErrReliableSeq
				clear(m.q)
				return false
			}
			delete(m.q, p.Seq)
			m.drops.Malformed++
		}
	}
	return true
}

// agreeing reports whether every two queued packets could come from one
// sender (naiveFollows), and each after the ignore number at L: what
// checking an arriving packet against its nearest neighbours alone keeps
// (N155).
func (m *naiveReceiver) agreeing() bool {
	anchor := Header{Seq: m.g, Rel: m.l}
	for _, a := range m.q {
		if !naiveFollows(anchor, a.h) {
			return false
		}
		for _, b := range m.q {
			if Distance(m.g, a.h.Seq) < Distance(m.g, b.h.Seq) && !naiveFollows(a.h, b.h) {
				return false
			}
		}
	}
	return true
}

func (m *naiveReceiver) process(now clock.Time) {
	m.deadline = 0
	for m.err == nil && len(m.q) > 0 {
		var head Seq
		dist := -1
		for s := range m.q {
			if d := Distance(m.g, s); dist < 0 || d < dist {
				dist, head = d, s
			}
		}
		h := m.q[head]
		rel := h.h.Reliable
		grp := []naivePacket{h}
		var all []byte
		all = append(all, h.data...)
		ended := false
		for k := 1; ; k++ {
			hdr, err := coalesce.ParseHeader(all, m.maxMsg)
			if h.h.Start && (err == coalesce.ErrTooLarge || err == nil && len(all) >= hdr.EncodedLen()) {
				break
			}
			s := head.Add(k)
			if Distance(m.g, s) > m.window {
				nd := h.h.Rel
				if rel {
					nd = nd.Prev()
				}
				if dist > 1 && nd == m.l {
					// Slide the window up to the unblocked head.
					m.g = head.Prev()
					m.fresh = false
					dist = 1
					k--
					continue
				}
				ended = true
				break
			}
			p, ok := m.q[s]
			if !ok {
				break
			}
			if rel && h.h.Start && !p.h.Reliable {
				// An unreliable packet inside a reliable message
				// not yet complete: dropped (N158).
				delete(m.q, s)
				m.drops.Malformed++
				break
			}
			if p.h.Start || p.h.Reliable != rel || !rel && p.h.Rel != h.h.Rel || rel && Distance(h.h.Rel, p.h.Rel) != k {
				ended = true
				break
			}
			grp = append(grp, p)
			all = append(all, p.data...)
		}
		hdr, err := coalesce.ParseHeader(all, m.maxMsg)
		need := hdr.EncodedLen()
		g := coalesce.Group{Start: h.h.Start, Reliable: rel, Gap: dist > 1}
		nd := h.h.Rel
		if rel {
			nd = nd.Prev()
		}
		g.Blocked = nd != m.l
		g.Unblockable = g.Blocked && Distance(m.l, nd) > dist-1
		g.Complete = err == nil && len(all) >= need
		g.Malformed = err == coalesce.ErrTooLarge || err == nil && len(all) > need || ended && !g.Complete ||
			err == nil && !g.Complete && need+slotSize*(len(grp)+1) > m.maxBytes
		for _, p := range grp {
			g.Newest = max(g.Newest, p.at)
		}
		act := coalesce.Decide(g, now, m.mci)
		if act == coalesce.Deliver {
			msg, err := coalesce.ParseMessage(all, m.maxMsg)
			if err == nil && msg.Reliable == rel {
				m.out = append(m.out, Message{Reliable: rel, Data: slices.Clone(msg.Payload)})
				m.consume(grp, true)
				continue
			}
			g.Malformed = true
			act = coalesce.Decide(g, now, m.mci)
		}
		switch act {
		case coalesce.Wait:
			if !g.Blocked && !rel {
				m.deadline = g.Newest.Add(m.mci)
			}
			return
		case coalesce.Expire:
			m.drops.Expired++
		case coalesce.Discard:
			if g.Blocked {
				// Dropped without moving G (N154).
				m.drops.Malformed++
				for _, p := range grp {
					delete(m.q, p.h.Seq)
				}
				continue
			}
			if g.Start {
				m.drops.Malformed++
			} else {
				m.drops.Orphaned++
			}
		case coalesce.Fail:
			switch {
			case g.Blocked:
				m.err = ErrReliableSeq
			case !g.Start:
				m.err = ErrNoStart
			default:
				m.err = ErrMalformedReliable
			}
			return
		}
		m.consume(grp, false)
	}
}

func (m *naiveReceiver) consume(grp []naivePacket, delivered bool) {
	for _, p := range grp {
		delete(m.q, p.h.Seq)
	}
	last := grp[len(grp)-1].h
	m.g = last.Seq
	m.fresh = false
	if delivered && last.Reliable {
		m.l, m.lAt = last.Rel, last.Seq
	}
}

// net is the packets in transit in a rapid test.
type net struct{ pkts []packet }

func (n *net) take(t *rapid.T, keep bool) packet {
	i := rapid.IntRange(0, len(n.pkts)-1).Draw(t, "packet")
	p := n.pkts[i]
	if !keep {
		n.pkts = slices.Delete(n.pkts, i, i+1)
	}
	return p
}

// TestReceiverMatchesModel drives a Receiver and the naive model with the
// same packets: the traffic of a real Sender (any order, duplicates, loss,
// resends, acks) mixed with hostile packets (arbitrary headers and chunks
// near the window). Results, deliveries, drop counters, errors, deadlines,
// G and L must agree at every step (D7-D11). Memory limits are set so
// that they are never reached. A twin receiver takes the same packets
// through HandleTake, and must agree with the receiver in every field
// (twinDiff).
func TestReceiverMatchesModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := ReceiverConfig{Window: 200, MaxMessage: 10000, MaxBytes: 1 << 20, MCI: 25 * ms}
		r := NewReceiver(cfg)
		twin := NewReceiver(cfg)
		var took []Message
		m := newNaive(cfg)
		s := NewSender(0)
		var nw net
		var got []Message
		now := t0
		hostile := rapid.Bool().Draw(t, "hostile")
		check := func(t *rapid.T) {
			for {
				msg, ok := r.Poll(now)
				if err := sameNext(twin, &took, now, msg, ok); err != "" {
					t.Fatalf("model twin: %s", err)
				}
				if !ok {
					break
				}
				got = append(got, msg)
			}
			if d := twinDiff(r, twin); d != "" {
				t.Fatalf("model twin state differs:%s", d)
			}
			m.process(now)
			if !m.agreeing() {
				t.Fatalf("queued packets disagree (N155): G %d L %d", m.g, m.l)
			}
			if diff := cmp.Diff(m.out, got); diff != "" {
				t.Fatalf("delivered (-model +receiver):\n%s", diff)
			}
			if r.Drops() != m.drops || r.Err() != m.err || r.g != m.g || r.l != m.l || r.lAt != m.lAt || !r.lAtKnown {
				t.Fatalf("receiver: drops %+v err %v G %d L %d at %d (known %v); model: drops %+v err %v G %d L %d at %d",
					r.Drops(), r.Err(), r.g, r.l, r.lAt, r.lAtKnown, m.drops, m.err, m.g, m.l, m.lAt)
			}
			if r.NextDeadline() != m.deadline {
				t.Fatalf("NextDeadline %v, model %v", r.NextDeadline(), m.deadline)
			}
			if r.Bytes() > cfg.MaxBytes || r.Bytes() < 0 {
				t.Fatalf("Bytes = %d", r.Bytes())
			}
			if len(m.q) == 0 && len(got) == len(m.out) && r.Bytes() != r.keptBytes() {
				t.Fatalf("empty queue holds %d bytes", r.Bytes())
			}
		}
		handle := func(t *rapid.T, p packet) {
			res := r.Handle(now, p.h, p.chunk)
			tres, tm, tok := twin.HandleTake(now, p.h, p.chunk)
			if tres != res {
				t.Fatalf("model twin: HandleTake %v, Handle %v", tres, res)
			}
			if tok {
				took = append(took, tm)
			}
			if want := m.handle(now, p.h, p.chunk); res != want {
				t.Fatalf("Handle(%+v, %d bytes) = %v, model %v", p.h, len(p.chunk), res, want)
			}
			if !m.agreeing() {
				t.Fatalf("queued packets disagree (N155): G %d L %d", m.g, m.l)
			}
			if p.h.Reliable && res.Ack() {
				s.HandleAck(p.h.Seq)
			}
			check(t)
		}
		actions := map[string]func(*rapid.T){
			"queue": func(t *rapid.T) {
				s.Queue(payload(rapid.IntRange(0, 1<<20).Draw(t, "seed"), rapid.IntRange(0, 300).Draw(t, "len")),
					rapid.Bool().Draw(t, "reliable"))
			},
			"send": func(t *rapid.T) {
				if !s.HasNew() {
					t.Skip()
				}
				b, _ := s.AppendNew(nil, now, rapid.IntRange(5, 60).Draw(t, "mtu"))
				nw.pkts = append(nw.pkts, parsePacket(t, b))
			},
			"resend": func(t *rapid.T) {
				b, _, ok := s.AppendResend(nil, now, ms, 0)
				if !ok {
					t.Skip()
				}
				nw.pkts = append(nw.pkts, parsePacket(t, b))
			},
			"deliver": func(t *rapid.T) {
				if len(nw.pkts) == 0 {
					t.Skip()
				}
				handle(t, nw.take(t, rapid.IntRange(0, 9).Draw(t, "dup") == 0))
			},
			"lose": func(t *rapid.T) {
				if len(nw.pkts) == 0 {
					t.Skip()
				}
				nw.take(t, false)
			},
			"tick": func(t *rapid.T) {
				now = now.Add(time.Duration(rapid.IntRange(0, 40).Draw(t, "ms")) * ms)
				check(t)
			},
		}
		if hostile {
			actions["hostile"] = func(t *rapid.T) {
				h := Header{
					Reliable: rapid.Bool().Draw(t, "rel"),
					Start:    rapid.Bool().Draw(t, "start"),
					Seq:      m.g.Add(rapid.IntRange(-3, cfg.Window+3).Draw(t, "dseq")),
					Rel:      m.l.Add(rapid.IntRange(-2, 4).Draw(t, "drel")),
				}
				if rapid.IntRange(0, 3).Draw(t, "far") == 0 {
					// Beyond the window, where evidence may move it (D27).
					h.Seq = m.g.Add(rapid.IntRange(cfg.Window+1, 3*cfg.Window).Draw(t, "dfar"))
				}
				var chunk []byte
				switch rapid.IntRange(0, 2).Draw(t, "kind") {
				case 0:
					chunk = rapid.SliceOfN(rapid.Byte(), 0, 60).Draw(t, "bytes")
				case 1:
					enc := coalesce.AppendMessage(nil, rapid.SliceOfN(rapid.Byte(), 0, 40).Draw(t, "payload"), rapid.Bool().Draw(t, "mrel"))
					chunk = enc[:rapid.IntRange(0, len(enc)).Draw(t, "cut")]
				case 2:
					// A header announcing a large message.
					chunk = []byte{0xc0 | byte(rapid.IntRange(0, 1).Draw(t, "f")), 0, 0, byte(rapid.IntRange(0, 255).Draw(t, "hi")), 0}
				}
				handle(t, packet{h: h, chunk: chunk})
			}
		}
		t.Repeat(actions)
	})
}

// TestReceiverProperties runs an honest Sender into a Receiver with tight
// memory limits over a network that loses, duplicates and reorders, and
// checks what the protocol promises (D8-D11, D22): reliable messages are
// delivered exactly once, in order and intact; unreliable ones at most
// once and intact; delivery follows send order; memory stays within the
// limits. At the end, once every reliable packet has been delivered and
// time has passed the MCI, every reliable message is delivered and nothing
// is left queued (nothing stalls). A twin receiver takes every packet
// through HandleTake, as the engine does, and must return the same results,
// deliver the same messages and end in the same state (twinDiff).
func TestReceiverProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) { receiverProperties(t, false, false) })
}

// TestReceiverPropertiesAcrossWrap is TestReceiverProperties for a channel
// that has carried packets already: its sequence numbers and R start just
// before the wrap (D5) or just before 0, where a channel that has taken
// nothing would be (G -1, L 0), and its receiver continues there as a
// parked channel's does (Reuse, or ReuseAt with the packet with R = L at
// the ignore number).
func TestReceiverPropertiesAcrossWrap(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) { receiverProperties(t, true, false) })
}

// TestReceiverPropertiesForged is TestReceiverProperties with a forger
// beside the sender: unreliable packets at the places of packets the
// sender sent, each waiting for more reliable packets than the sender's
// there (a wrong guess of its R that the window and L alone cannot tell,
// N154). Every reliable message still arrives, in order, no forged one is
// delivered, no reliable packet of the sender's is dropped, and nothing
// waits behind a forged packet: what stays queued at the end waits for
// reliable packets that never come (N155, D23, D26).
func TestReceiverPropertiesForged(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) { receiverProperties(t, rapid.Bool().Draw(t, "wrap"), true) })
}

// receiverProperties is the body of TestReceiverProperties; with wrap set,
// the channel starts at sequence numbers and an R drawn near the wrap.
func receiverProperties(t *rapid.T, wrap, forge bool) {
	receiverPropertiesWith(t, wrap, forge, propOpts{})
}

// propOpts widens receiverProperties: park parks and revives the receiver,
// as a connection does, whenever it is idle; ahead forges also at places
// the sender has not reached, and with any R more than the sender's
// there; small draws windows of 48-90 places, bursts of loss as long as
// the window or longer (D27, extend's slide) and many short messages.
// With any of them, the sender's MaxAhead is the window, as a connection
// sets it (N41): without it, long runs (-rapid.steps=1000) find D27
// evidence crowded out by packets resent far past the window (N158).
type propOpts struct{ park, ahead, small bool }

// receiverPropertiesWith is receiverProperties widened by o.
func receiverPropertiesWith(t *rapid.T, wrap, forge bool, o propOpts) {
	{
		budget := &Budget{Limit: rapid.IntRange(4000, 10000).Draw(t, "budget")}
		cfg := ReceiverConfig{
			Window:     rapid.IntRange(64, 400).Draw(t, "window"),
			MaxMessage: 300,
			MaxBytes:   rapid.IntRange(4000, 12000).Draw(t, "maxBytes"),
			Budget:     budget,
			MCI:        25 * ms,
		}
		if o.small {
			cfg.Window = rapid.IntRange(48, 90).Draw(t, "smallWindow")
		}
		r := NewReceiver(cfg)
		// twin takes the same packets through HandleTake, and must
		// deliver the same messages and hold the same memory.
		twinBudget := &Budget{Limit: budget.Limit}
		twinCfg := cfg
		twinCfg.Budget = twinBudget
		twin := NewReceiver(twinCfg)
		var took []Message // what twin's HandleTake returned, not yet compared
		s := NewSender(0)
		if wrap {
			near := func(label string) Seq {
				base := rapid.SampledFrom([]Seq{0, MinSeq}).Draw(t, label+"Base")
				return base.Add(-rapid.IntRange(0, 40).Draw(t, label))
			}
			seq0, rel0 := near("seq"), near("rel")
			g0 := seq0.Prev()
			s.Reuse(0, seq0, rel0)
			if rapid.Bool().Draw(t, "lAtKnown") {
				r.ReuseAt(g0, rel0, g0, true)
				twin.ReuseAt(g0, rel0, g0, true)
			} else {
				r.Reuse(g0, rel0)
				twin.Reuse(g0, rel0)
			}
		}
		if o != (propOpts{}) {
			s.SetMaxAhead(cfg.Window) // as a connection does (N41)
		}
		mtu := rapid.IntRange(8, 60).Draw(t, "mtu")
		// With unlimited set, the sender does not hold back: the receiver
		// alone must keep the channel from deadlocking (roomForFront).
		unlimited := rapid.Bool().Draw(t, "unlimited")
		var nw net
		var sentHdrs []Header // the headers of the packets sent, for the forger
		var sent [][]byte     // message i's payload
		var reliable []bool
		next := 0    // index of the next delivered message must be >= next
		nextRel := 0 // every reliable message before this one was delivered
		now := t0

		deliverAll := func(t *rapid.T) {
			for {
				msg, ok := r.Poll(now)
				if err := sameNext(twin, &took, now, msg, ok); err != "" {
					t.Fatal(err)
				}
				if !ok {
					return
				}
				if len(msg.Data) < 4 {
					t.Fatalf("delivered a %d-byte message never sent", len(msg.Data))
				}
				id := int(msg.Data[0])<<24 | int(msg.Data[1])<<16 | int(msg.Data[2])<<8 | int(msg.Data[3])
				if id >= len(sent) || !slices.Equal(msg.Data, sent[id]) || msg.Reliable != reliable[id] {
					t.Fatalf("delivered message %d corrupted or mislabelled", id)
				}
				if id < next {
					t.Fatalf("message %d delivered after message %d (twice or out of order)", id, next-1)
				}
				for j := nextRel; j < id; j++ {
					if reliable[j] {
						t.Fatalf("reliable message %d skipped: %d delivered first", j, id)
					}
				}
				next = id + 1
				nextRel = id + 1
			}
		}
		room := func() bool {
			if unlimited {
				return true
			}
			// The sender keeps what the receiver may have to hold within
			// its memory, less a message's worth (see Sender.Outstanding).
			// Those packets, one more, and a whole message beside them,
			// each in its buffer, with the ring covering them (N49).
			p, _ := s.Outstanding()
			enc := cfg.MaxMessage + coalesce.MaxOverhead
			q := p + 1 + (enc+mtu-1)/mtu
			n := capFor(q)
			cost := q*bufpool.ClassCap(mtu) + ringBytes(n)
			if n > baseRing {
				cost += ringBytes(baseRing)
			}
			return cost <= min(cfg.MaxBytes, budget.Limit)
		}
		send := func(t *rapid.T) bool {
			if !s.MayAppend() || !room() {
				return false
			}
			b, _ := s.AppendNew(nil, now, mtu)
			p := parsePacket(t, b)
			nw.pkts = append(nw.pkts, p)
			sentHdrs = append(sentHdrs, p.h)
			return true
		}
		handle := func(t *rapid.T, p packet, forged bool) {
			res := r.Handle(now, p.h, p.chunk)
			tres, tm, ok := twin.HandleTake(now, p.h, p.chunk)
			if tres != res {
				t.Fatalf("HandleTake returned %v, Handle %v", tres, res)
			}
			if ok {
				took = append(took, tm)
			}
			if p.h.Reliable && res.Ack() {
				s.HandleAck(p.h.Seq)
			}
			if res == Rejected || r.Err() != nil {
				t.Fatalf("honest traffic broke the receiver: %v", r.Err())
			}
			// Beside a forger, an honest unreliable packet may meet a
			// forged one and be dropped with it (N155).
			if res == Corrupt && !forged && (!forge || p.h.Reliable) {
				t.Fatalf("honest packet %+v dropped as one no sender makes (G %d L %d)", p.h, r.g, r.l)
			}
			deliverAll(t)
		}
		invariants := func(t *rapid.T) {
			if !forge && r.Drops().Malformed != 0 {
				// Nothing an honest sender makes is dropped as
				// malformed, nor removed as disagreeing with a
				// queued packet (N155).
				t.Fatalf("honest traffic: %+v dropped as malformed (G %d L %d)", r.Drops(), r.g, r.l)
			}
			if r.Bytes() > cfg.MaxBytes || budget.Used > budget.Limit || budget.Used != r.Bytes() || r.Bytes() < 0 {
				t.Fatalf("memory: Bytes %d (max %d), budget %d/%d", r.Bytes(), cfg.MaxBytes, budget.Used, budget.Limit)
			}
			// Once the messages are taken, HandleTake leaves the
			// receiver as Handle does.
			if len(took) == 0 && (twin.Bytes() != r.Bytes() || twinBudget.Used != budget.Used || twinBudget.committed != budget.committed || twinBudget.holders != budget.holders || twin.Drops() != r.Drops() || twin.NextDeadline() != r.NextDeadline()) {
				t.Fatalf("twin: Bytes %d, budget %d %d %d, drops %+v, deadline %v; receiver %d, %d %d %d, %+v, %v", twin.Bytes(), twinBudget.Used, twinBudget.committed, twinBudget.holders, twin.Drops(), twin.NextDeadline(), r.Bytes(), budget.Used, budget.committed, budget.holders, r.Drops(), r.NextDeadline())
			}
			if len(took) == 0 {
				if d := twinDiff(r, twin); d != "" {
					t.Fatalf("twin state differs:%s", d)
				}
			}
			tg, tl := twin.Position()
			if g, l := r.Position(); g != tg || l != tl {
				t.Fatalf("twin at %d %d, receiver at %d %d", tg, tl, g, l)
			}
		}
		actions := map[string]func(*rapid.T){
			"queue": func(t *rapid.T) {
				id := len(sent)
				n := rapid.IntRange(4, cfg.MaxMessage).Draw(t, "len")
				msg := payload(id, n)
				msg[0], msg[1], msg[2], msg[3] = byte(id>>24), byte(id>>16), byte(id>>8), byte(id)
				rel := rapid.IntRange(0, 2).Draw(t, "rel") > 0
				sent = append(sent, msg)
				reliable = append(reliable, rel)
				s.Queue(msg, rel)
			},
			"send": func(t *rapid.T) {
				if !send(t) {
					t.Skip()
				}
			},
			"resend": func(t *rapid.T) {
				b, _, ok := s.AppendResend(nil, now, ms, 0)
				if !ok {
					t.Skip()
				}
				nw.pkts = append(nw.pkts, parsePacket(t, b))
			},
			"deliver": func(t *rapid.T) {
				if len(nw.pkts) == 0 {
					t.Skip()
				}
				handle(t, nw.take(t, rapid.IntRange(0, 7).Draw(t, "dup") == 0), false)
			},
			"lose": func(t *rapid.T) {
				if len(nw.pkts) == 0 {
					t.Skip()
				}
				nw.take(t, false)
			},
			"tick": func(t *rapid.T) {
				now = now.Add(time.Duration(rapid.IntRange(0, 30).Draw(t, "ms")) * ms)
				deliverAll(t)
			},
			"": invariants,
		}
		if o.small {
			actions["burst"] = func(t *rapid.T) {
				// Packets sent and lost in a row, as many as the
				// window or more (D27).
				for range rapid.IntRange(1, 2*cfg.Window).Draw(t, "burst") {
					if !send(t) {
						break
					}
					nw.pkts = nw.pkts[:len(nw.pkts)-1]
				}
			}
			actions["queueMany"] = func(t *rapid.T) {
				for range rapid.IntRange(1, 40).Draw(t, "many") {
					id := len(sent)
					msg := payload(id, rapid.IntRange(4, 12).Draw(t, "len"))
					msg[0], msg[1], msg[2], msg[3] = byte(id>>24), byte(id>>16), byte(id>>8), byte(id)
					sent = append(sent, msg)
					rel := rapid.IntRange(0, 5).Draw(t, "rel") == 0
					reliable = append(reliable, rel)
					s.Queue(msg, rel)
				}
			}
		}
		if o.park {
			actions["park"] = func(t *rapid.T) {
				deliverAll(t)
				if !r.Idle() || !twin.Idle() || len(took) != 0 {
					t.Skip()
				}
				// As conn.recvChannel revives a parked channel.
				for _, x := range []*Receiver{r, twin} {
					g, l := x.Position()
					at, ok := x.LAt()
					switch {
					case g == -1 && l == 0:
						x.Reuse(g, l)
					case ok && at == g:
						x.ReuseAt(g, l, g, true)
					case ok && at == -1 && l == 0:
						x.ReuseAt(g, l, -1, true)
					default:
						x.ReuseAt(g, l, 0, false)
					}
				}
			}
		}
		if forge && o.ahead {
			actions["forge2"] = func(t *rapid.T) {
				seq, cur := s.Position()
				var at, most Seq // a place, and the most its packet may wait for
				if len(sentHdrs) > 0 && rapid.Bool().Draw(t, "past") {
					h := sentHdrs[rapid.IntRange(0, len(sentHdrs)-1).Draw(t, "at")]
					at, most = h.Seq, need(h.Reliable, h.Rel)
				} else {
					k := rapid.IntRange(0, 12).Draw(t, "ahead")
					at, most = seq.Add(k), cur.Add(k)
				}
				rel := most.Add(rapid.IntRange(1, 4).Draw(t, "more"))
				msg := coalesce.AppendMessage(nil, []byte{0xff, 0xff, 0xff, 0xff, 'f'}, false)
				handle(t, packet{h: Header{Seq: at, Rel: rel, Start: rapid.Bool().Draw(t, "start")}, chunk: msg}, true)
			}
		}
		if forge {
			actions["forge"] = func(t *rapid.T) {
				if len(sentHdrs) == 0 {
					t.Skip()
				}
				at := sentHdrs[rapid.IntRange(0, len(sentHdrs)-1).Draw(t, "at")]
				rel := at.Rel.Add(rapid.IntRange(1, 3).Draw(t, "more"))
				if !at.Reliable {
					rel = rel.Add(1)
				}
				// A message no sender sent: its id is out of range.
				msg := coalesce.AppendMessage(nil, []byte{0xff, 0xff, 0xff, 0xff, 'f'}, false)
				handle(t, packet{h: Header{Seq: at.Seq, Rel: rel, Start: rapid.Bool().Draw(t, "start")}, chunk: msg}, true)
			}
		}
		t.Repeat(actions)
		// Drain: a perfect network from now on, in order.
		for step := 0; ; step++ {
			if step > 100000 {
				t.Fatal("no progress while draining")
			}
			for _, p := range nw.pkts {
				handle(t, p, false)
			}
			nw.pkts = nw.pkts[:0]
			invariants(t)
			if send(t) {
				continue
			}
			if s.Idle() {
				break
			}
			if d := s.NextResend(ms, time.Second); d > now {
				now = d
			}
			if now > t0.Add(time.Hour) {
				p, b := s.InFlight()
				for _, pk := range nw.pkts {
					t.Logf("in flight: %+v %d bytes", pk.h, len(pk.chunk))
				}
				for j := r.q.first(0); j >= 0; j = r.q.first(j + 1) {
					sl := r.q.at(j)
					t.Logf("queued at %d: rel %v start %v R %d %d bytes", j, sl.reliable(), sl.start(), sl.rel, len(sl.data))
				}
				t.Fatalf("still not drained after an hour: %d packets (%d bytes) in flight, receiver holds %d (queued %d, data %d, ring %d, ready %d), budget %d/%d, max %d, G %d L %d grant %d unrel %d maxChunk %d",
					p, b, r.Bytes(), r.queued, r.bufs, len(r.q.slots), r.readyBytes, budget.Used, budget.Limit, cfg.MaxBytes, r.g, r.l, r.grant, r.unrelN, r.maxChunk)
			}
			for {
				b, _, ok := s.AppendResend(nil, now, ms, time.Second)
				if !ok {
					break
				}
				nw.pkts = append(nw.pkts, parsePacket(t, b))
			}
			if len(nw.pkts) == 0 && !s.HasNew() {
				// Nothing to send: only the room check can hold the sender,
				// and it waits on acks that are all in.
				if !room() && s.HasNew() {
					t.Fatal("sender stuck")
				}
			}
		}
		now = now.Add(cfg.MCI)
		deliverAll(t)
		for j := nextRel; j < len(sent); j++ {
			if reliable[j] {
				t.Fatalf("reliable message %d of %d never delivered", j, len(sent))
			}
		}
		if forge {
			// Forged packets after the sender's last may stay, each
			// waiting for a reliable packet that never comes.
			for j := r.q.first(0); j >= 0; j = r.q.first(j + 1) {
				if sl := r.q.at(j); sl.reliable() || need(false, sl.rel) == r.l {
					t.Fatalf("after draining, queued at %d: reliable %v, R %d, L %d", j, sl.reliable(), sl.rel, r.l)
				}
			}
			r.release()
		}
		// A ring that grew is kept, and charged, until as many packets
		// have passed as it grew by (N39); Reset releases it.
		if kept := r.chargeFor(0, len(r.q.slots)); r.Bytes() != kept || r.NextDeadline() != 0 || budget.Used != kept {
			t.Fatalf("after draining: Bytes %d (ring kept: %d), deadline %v, budget %d", r.Bytes(), kept, r.NextDeadline(), budget.Used)
		}
		r.Reset()
		if r.Bytes() != 0 || budget.Used != 0 {
			t.Fatalf("after Reset: Bytes %d, budget %d", r.Bytes(), budget.Used)
		}
		if errors.Is(r.Err(), ErrProtocol) {
			t.Fatal(r.Err())
		}
	}
}

// TestModelWitnessTies replays what a rapid seed found (D27): unreliable
// packets beyond the window arriving at one instant, each a witness, one of
// them waiting for reliable packets. When a new witness takes the place of
// the oldest, several are as old; the model let the first to come give way,
// the receiver the one in its first slot, which after a replacement was
// another, so they later kept different witnesses and one moved the window
// where the other did not. The receiver now keeps its witnesses in the
// order they came, as the model does (see the batch case of
// TestD27WindowMovesOnlyOnEvidence).
func TestModelWitnessTies(t *testing.T) {
	cfg := ReceiverConfig{Window: 200, MaxMessage: 10000, MaxBytes: 1 << 20, MCI: 25 * ms}
	r := NewReceiver(cfg)
	m := newNaive(cfg)
	for i, p := range []struct{ dseq, drel int }{{201, 0}, {203, 0}, {202, 2}, {201, 0}, {202, 0}} {
		h := Header{Seq: m.g.Add(p.dseq), Rel: m.l.Add(p.drel)}
		got, want := r.Handle(t0, h, nil), m.handle(t0, h, nil)
		if got != want {
			t.Fatalf("packet %d (%+v): receiver %v, model %v", i, h, got, want)
		}
	}
}
