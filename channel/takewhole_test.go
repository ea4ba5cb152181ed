package channel

import (
	"crypto/md5"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/coalesce"
	"pgregory.net/rapid"
)

// twPkt is a packet the TakeWhole property feeds both receivers: its header
// and chunk, whether TakeWhole is offered it with a wrong digest, and how
// it was drawn (for failure messages).
type twPkt struct {
	h     Header
	chunk []byte
	wrong bool
	kind  string
}

func (p twPkt) String() string {
	w := ""
	if p.wrong {
		w = " WRONG-DIGEST"
	}
	return fmt.Sprintf("%s{rel %v start %v seq %d R %d, %d bytes%s}", p.kind, p.h.Reliable, p.h.Start, p.h.Seq, p.h.Rel, len(p.chunk), w)
}

func twBatchString(batch []twPkt) string {
	var b strings.Builder
	for i, p := range batch {
		fmt.Fprintf(&b, "\n  [%d] %v", i, p)
	}
	return b.String()
}

// twGen is the sending side the property draws packets from: an honest
// sender's next sequence number and R (D5, D7), the packets it sent (for
// duplicates) and those the network has not delivered yet (for late
// delivery: reordering and resends).
type twGen struct {
	seq, rel Seq
	id       int // messages made, so that every payload is distinct
	sent     []twPkt
	lost     []twPkt
}

// header returns the header of the sender's next packet.
func (g *twGen) header(reliable, start bool) Header {
	h := Header{Reliable: reliable, Start: start, Seq: g.seq}
	g.seq = g.seq.Next()
	if reliable {
		g.rel = g.rel.Next()
	}
	h.Rel = g.rel
	return h
}

// unacked records that the receiver did not ack reliable packet p: the
// sender will resend it, intact.
func (g *twGen) unacked(p twPkt) {
	for _, q := range g.lost {
		if q.h == p.h {
			return
		}
	}
	for _, q := range slices.Backward(g.sent) {
		if q.h == p.h && !strings.HasPrefix(q.kind, "corrupt") && q.kind != "flag-mismatch" && q.kind != "trailing-byte" {
			p = q
			break
		}
	}
	p.wrong = false
	g.lost = append(g.lost, p)
}

func (g *twGen) payload(n int) []byte {
	g.id++
	return payload(g.id, n)
}

// draw draws one event of the network: usually a packet or a few appended
// to batch, sometimes a loss (nothing). a is the receiver fed through
// HandleTake alone: hostile packets are drawn near its ignore number and L.
func (g *twGen) draw(t *rapid.T, a *Receiver, batch []twPkt) []twPkt {
	maxMsg, window := a.cfg.MaxMessage, a.cfg.Window
	long := func() int {
		return coalesce.ShortChecksumMax + 1 + rapid.IntRange(0, maxMsg-coalesce.ShortChecksumMax-1).Draw(t, "len")
	}
	whole := func(kind string, n int, reliable bool) twPkt {
		return twPkt{h: g.header(reliable, true), chunk: coalesce.AppendMessage(nil, g.payload(n), reliable), kind: kind}
	}
	emit := func(p twPkt) {
		batch = append(batch, p)
		g.sent = append(g.sent, p)
	}
	switch k := rapid.IntRange(0, 99).Draw(t, "event"); {
	case k < 45: // a whole message in order
		emit(whole("whole", long(), rapid.Bool().Draw(t, "reliable")))
	case k < 53: // a message of several packets (not whole)
		rel := rapid.Bool().Draw(t, "reliable")
		enc := coalesce.AppendMessage(nil, g.payload(long()), rel)
		mtu := rapid.IntRange((len(enc)+5)/6, len(enc)-1).Draw(t, "mtu")
		var ps []twPkt
		for off := 0; off < len(enc); off += mtu {
			ps = append(ps, twPkt{h: g.header(rel, off == 0), chunk: enc[off:min(off+mtu, len(enc))], kind: "part"})
		}
		switch rapid.IntRange(0, 3).Draw(t, "parts") {
		case 0: // all, in order
			for _, p := range ps {
				emit(p)
			}
		case 1: // the start without the rest
			emit(ps[0])
			g.lost = append(g.lost, ps[1:]...)
		case 2: // all but one
			j := rapid.IntRange(0, len(ps)-1).Draw(t, "lostPart")
			for i, p := range ps {
				if i == j {
					g.lost = append(g.lost, p)
				} else {
					emit(p)
				}
			}
		case 3: // reversed
			for i := len(ps) - 1; i >= 0; i-- {
				emit(ps[i])
			}
		}
	case k < 58: // the sender resends the oldest reliable packet lost
		i := slices.IndexFunc(g.lost, func(p twPkt) bool { return p.h.Reliable })
		if i < 0 {
			emit(whole("whole", long(), rapid.Bool().Draw(t, "reliable")))
			break
		}
		p := g.lost[i]
		g.lost = slices.Delete(g.lost, i, i+1)
		p.kind = "resent-" + p.kind
		emit(p)
	case k < 63: // a packet lost earlier arrives (reordering)
		if len(g.lost) == 0 {
			emit(whole("whole", long(), rapid.Bool().Draw(t, "reliable")))
			break
		}
		i := rapid.IntRange(0, len(g.lost)-1).Draw(t, "late")
		p := g.lost[i]
		g.lost = slices.Delete(g.lost, i, i+1)
		p.kind = "late-" + p.kind
		emit(p)
	case k < 68: // a duplicate
		if len(g.sent) == 0 {
			emit(whole("whole", long(), rapid.Bool().Draw(t, "reliable")))
			break
		}
		p := g.sent[rapid.IntRange(0, len(g.sent)-1).Draw(t, "dup")]
		p.kind = "dup-" + p.kind
		batch = append(batch, p)
	case k < 72: // a gap: lost for now
		g.lost = append(g.lost, whole("whole", long(), rapid.Bool().Draw(t, "reliable")))
	case k < 78: // a corrupt copy; the intact one may come later
		p := whole("whole", long(), rapid.Bool().Draw(t, "reliable"))
		g.lost = append(g.lost, p)
		c := slices.Clone(p.chunk)
		hdr, _ := coalesce.ParseHeader(c, math.MaxInt)
		switch rapid.IntRange(0, 4).Draw(t, "corruption") {
		case 0:
			c[hdr.HeaderLen+rapid.IntRange(0, hdr.Len-1).Draw(t, "at")] ^= 0x01
			p.kind = "corrupt-payload"
		case 1:
			c[len(c)-coalesce.MD5Len+rapid.IntRange(0, coalesce.MD5Len-1).Draw(t, "at")] ^= 0x5a
			p.kind = "corrupt-checksum"
		case 2:
			c[0] ^= coalesce.FlagReliable
			p.kind = "flag-mismatch"
		case 3:
			c = append(c, 0)
			p.kind = "trailing-byte"
		case 4: // (a reliable one would fail the receiver once the next message comes)
			if p.h.Reliable {
				c[len(c)-1] ^= 0x5a
				p.kind = "corrupt-checksum"
				break
			}
			c = c[:len(c)-1]
			p.kind = "truncated"
		}
		p.chunk = c
		emit(p)
	case k < 81: // too large for MaxMessage
		emit(whole("too-large", maxMsg+rapid.IntRange(1, 40).Draw(t, "over"), rapid.IntRange(0, 15).Draw(t, "reliable") == 0))
	case k < 84: // short: a reversed-bits checksum, no digest
		emit(whole("short", rapid.IntRange(0, coalesce.ShortChecksumMax).Draw(t, "len"), rapid.Bool().Draw(t, "reliable")))
	case k < 90: // a loss of unreliable packets longer than the window (D27)
		g.seq = g.seq.Add(window + rapid.IntRange(1, window).Draw(t, "jump"))
		emit(whole("after-jump", long(), rapid.Bool().Draw(t, "reliable")))
	case k < 94: // the sender's next packet lands beyond the receiver's window
		// As after a jump: the packets skipped are unreliable ones lost.
		if far := a.g.Add(window + rapid.IntRange(1, 2*window).Draw(t, "far")); g.seq.Before(far) {
			g.seq = far
		}
		emit(whole("far", long(), rapid.Bool().Draw(t, "reliable")))
	default: // hostile: any header near the ignore number and L
		h := Header{
			Reliable: rapid.IntRange(0, 3).Draw(t, "rel") == 0,
			Start:    rapid.IntRange(0, 3).Draw(t, "start") > 0,
			Seq:      a.g.Next(),
			Rel:      a.l,
		}
		if rapid.Bool().Draw(t, "anySeq") {
			h.Seq = a.g.Add(rapid.IntRange(-3, window+3).Draw(t, "dseq"))
		}
		if rapid.Bool().Draw(t, "anyRel") {
			h.Rel = a.l.Add(rapid.IntRange(-2, 3).Draw(t, "drel"))
		} else if h.Reliable {
			h.Rel = h.Rel.Next() // unblocked
		}
		switch rapid.IntRange(0, 15).Draw(t, "invalid") {
		case 1:
			h.Seq = MinSeq - 1 - Seq(rapid.IntRange(0, 3).Draw(t, "below"))
		case 2:
			h.Rel = MinSeq - 1 - Seq(rapid.IntRange(0, 3).Draw(t, "below"))
		}
		if rapid.IntRange(0, 3).Draw(t, "hostileFar") == 0 {
			// Beyond the window, unblocked or not: evidence that may
			// move the window (D27), past the sender's packets.
			h.Seq = a.g.Add(window + rapid.IntRange(1, 2*window).Draw(t, "dfar"))
		}
		var chunk []byte
		switch rapid.IntRange(0, 3).Draw(t, "chunk") {
		case 0:
			chunk = coalesce.AppendMessage(nil, g.payload(long()), h.Reliable)
		case 1:
			chunk = coalesce.AppendMessage(nil, g.payload(rapid.IntRange(0, maxMsg).Draw(t, "len")), rapid.Bool().Draw(t, "mrel"))
		case 2:
			chunk = rapid.SliceOfN(rapid.Byte(), 0, 40).Draw(t, "bytes")
		case 3:
			chunk = coalesce.AppendMessage(nil, g.payload(long()), !h.Reliable)
		}
		emit(twPkt{h: h, chunk: chunk, kind: "hostile"})
	}
	return batch
}

// twView is what can be observed of a receiver and its budget.
type twView struct {
	G, L, LAt                     Seq
	LAtKnown                      bool
	Bytes                         int
	Drops                         Drops
	Err                           error
	Settled, Idle, Dropped        bool
	Deadline                      clock.Time
	Used, Granted, Holders, Freed int
}

func twViewOf(r *Receiver) twView {
	v := twView{G: r.g, L: r.l, LAt: r.lAt, LAtKnown: r.lAtKnown, Bytes: r.Bytes(), Drops: r.Drops(), Err: r.Err(),
		Settled: r.Settled(), Idle: r.Idle(), Dropped: r.Dropped(), Deadline: r.NextDeadline()}
	if b := r.budget; b != nil {
		v.Used, v.Granted, v.Holders, v.Freed = b.Used, b.Granted(), b.Holders(), b.Free()
	}
	return v
}

// twWhole reports whether chunk is exactly one encoded message, and
// returns its header.
func twWhole(chunk []byte) (coalesce.Header, bool) {
	hdr, err := coalesce.ParseHeader(chunk, math.MaxInt)
	return hdr, err == nil && hdr.EncodedLen() == len(chunk)
}

// twRefusal says why TakeWhole, given p first, does not take it from r (its
// doc comment's conditions, in the order it checks them), or "no memory"
// if none of them holds.
func twRefusal(r *Receiver, p twPkt) string {
	h := p.h
	switch {
	case !r.Settled():
		return "not settled"
	case !h.Start:
		return "not a start"
	case !h.Seq.Valid() || !h.Rel.Valid():
		return "invalid sequence number"
	case need(h.Reliable, h.Rel) != r.l:
		return "waits for a reliable packet"
	}
	d := Distance(r.g, h.Seq)
	switch {
	case d == 0 || d > SeqSpace/2:
		return "duplicate or stale"
	case d > r.cfg.Window:
		return "beyond the window"
	case r.q.has(d - 1):
		return "slot held"
	}
	hdr, err := coalesce.ParseHeader(p.chunk, r.cfg.MaxMessage)
	switch {
	case err == coalesce.ErrTooLarge:
		return "too large"
	case err != nil:
		return "bad header"
	case hdr.EncodedLen() != len(p.chunk):
		return "bad length"
	case hdr.Len <= coalesce.ShortChecksumMax:
		return "short message"
	case hdr.Reliable != h.Reliable:
		return "reliability flag mismatch"
	case !coalesce.VerifyChecksum(p.chunk[hdr.HeaderLen:hdr.HeaderLen+hdr.Len], p.chunk[hdr.HeaderLen+hdr.Len:]):
		return "corrupt checksum"
	case p.wrong:
		return "wrong digest"
	}
	return "no memory"
}

// TestPropertyTakeWholeAsHandleTake checks TakeWhole against HandleTake
// (N101 of docs/protocol.md): TakeWhole takes a prefix of the packets it
// is given, each a whole message with its digest, handling each exactly as
// HandleTake would, and leaves the rest for HandleTake. Two receivers of
// one drawn configuration (window, MaxMessage, MaxBytes down to memory
// pressure, a Budget of their own or none, an Arena or none) take the
// same drawn batches of packets: in order, lost, duplicated, reordered,
// reliable and unreliable, messages of several packets, beyond the
// window, corrupt, too large, short and hostile. A handles every packet
// with HandleTake; B offers each run of packets that carry a whole
// message of more than ShortChecksumMax bytes to TakeWhole, with their
// digests (some wrong on purpose), and handles with HandleTake the one it
// refuses, then offers it the rest again, as the engine does. Both are
// polled alike. After every step the messages delivered, in order, and
// everything observable of the receivers (Position, Bytes, Drops, Err,
// Settled, NextDeadline, their budgets) and their whole state (twinDiff)
// must be the same. A packet TakeWhole took must be one HandleTake takes
// whole; one it refused for no reason but memory must be refused by
// HandleTake for memory; one with a wrong digest must be refused. Across
// the cases TakeWhole must take packets and refuse some, so the property
// cannot hold vacuously.
func TestPropertyTakeWholeAsHandleTake(t *testing.T) {
	var taken, offers, refused, released, trimmed, failedRuns int
	reasons := map[string]int{}
	rapid.Check(t, func(t *rapid.T) {
		cfg := ReceiverConfig{
			Window:     rapid.IntRange(2, 300).Draw(t, "window"),
			MaxMessage: rapid.IntRange(coalesce.ShortChecksumMax+1, 400).Draw(t, "maxMessage"),
			MCI:        25 * ms,
		}
		switch rapid.IntRange(0, 2).Draw(t, "memory") {
		case 1: // memory pressure
			cfg.MaxBytes = rapid.IntRange(cfg.MaxMessage/2, 4*cfg.MaxMessage+200).Draw(t, "maxBytes")
		case 2:
			cfg.MaxBytes = rapid.IntRange(1500, 20000).Draw(t, "maxBytes")
		}
		var budget Budget
		useBudget := false
		switch rapid.IntRange(0, 2).Draw(t, "budget") {
		case 1:
			useBudget = true
			budget = Budget{
				Limit:      rapid.IntRange(cfg.MaxMessage/2, 8*cfg.MaxMessage+200).Draw(t, "limit"),
				Reserve:    rapid.IntRange(0, 300).Draw(t, "reserve"),
				MaxHolders: rapid.IntRange(0, 2).Draw(t, "maxHolders"),
			}
		case 2:
			useBudget = true
		}
		arena := rapid.Bool().Draw(t, "arena")
		mk := func() *Receiver {
			c := cfg
			if useBudget {
				b := budget
				c.Budget = &b
			}
			if arena {
				c.Arena = &Arena{}
			}
			return NewReceiver(c)
		}
		a, b := mk(), mk()
		// Where the channel starts: fresh, or near the ends of the
		// sequence numbers, so that they wrap.
		g0, l0 := Seq(-1), Seq(0)
		switch rapid.IntRange(0, 2).Draw(t, "start") {
		case 1:
			g0, l0 = MaxSeq.Add(-rapid.IntRange(0, 6).Draw(t, "g0")), MaxSeq.Add(-rapid.IntRange(0, 3).Draw(t, "l0"))
		case 2:
			g0, l0 = MinSeq.Add(-rapid.IntRange(0, 3).Draw(t, "g0")), MinSeq.Add(-rapid.IntRange(0, 1).Draw(t, "l0"))
		}
		if !a.Reuse(g0, l0) || !b.Reuse(g0, l0) {
			t.Fatal("a new receiver is not idle")
		}
		gen := &twGen{seq: g0.Next(), rel: l0}
		// When to poll after a packet HandleTake handled: never (after
		// each batch only), always, or as the engine does (unless the
		// message was taken and the receiver is settled).
		pollMode := rapid.IntRange(0, 2).Draw(t, "poll")
		// Offer TakeWhole what the engine does (presum: a packet that
		// starts a message of more than ShortChecksumMax bytes, whole in
		// its chunk), or any packet whose chunk is one whole message,
		// short ones and ones that start no message included.
		loose := rapid.IntRange(0, 3).Draw(t, "loose") == 0
		offerable := func(p twPkt) bool {
			hdr, ok := twWhole(p.chunk)
			return ok && (loose || p.h.Start && hdr.Len > coalesce.ShortChecksumMax)
		}

		now := t0
		var aMsgs, bMsgs []Message
		checked := 0
		var batch []twPkt
		var where string
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("%s: %s\nbatch:%s", where, fmt.Sprintf(format, args...), twBatchString(batch))
		}
		compare := func() {
			t.Helper()
			if len(aMsgs) != len(bMsgs) {
				fail("%d messages delivered through HandleTake alone, %d with TakeWhole", len(aMsgs), len(bMsgs))
			}
			for ; checked < len(aMsgs); checked++ {
				x, y := aMsgs[checked], bMsgs[checked]
				if x.Reliable != y.Reliable || !slices.Equal(x.Data, y.Data) {
					fail("message %d: HandleTake alone %v %x, with TakeWhole %v %x", checked, x.Reliable, x.Data, y.Reliable, y.Data)
				}
			}
			if va, vb := twViewOf(a), twViewOf(b); va != vb {
				fail("receivers differ:\nHandleTake alone %+v\nwith TakeWhole    %+v", va, vb)
			}
			if d := twinDiff(a, b); d != "" {
				fail("receiver states differ:%s", d)
			}
		}
		deliver := func() {
			for _, x := range []struct {
				r    *Receiver
				msgs *[]Message
			}{{a, &aMsgs}, {b, &bMsgs}} {
				for {
					m, ok := x.r.Poll(now)
					if !ok {
						break
					}
					*x.msgs = append(*x.msgs, m)
				}
			}
			if a.Dropped() != b.Dropped() {
				fail("Dropped: HandleTake alone %v, with TakeWhole %v", a.Dropped(), b.Dropped())
			}
			if a.Dropped() {
				if da, db := a.NewDrops(), b.NewDrops(); da != db {
					fail("NewDrops: HandleTake alone %+v, with TakeWhole %+v", da, db)
				}
			}
		}
		// handleBoth gives batch[i] to both receivers' HandleTake.
		handleBoth := func(i int) (Result, bool) {
			p := batch[i]
			ra, ma, oka := a.HandleTake(now, p.h, p.chunk)
			rb, mb, okb := b.HandleTake(now, p.h, p.chunk)
			if ra != rb || oka != okb {
				fail("packet %d: HandleTake gave %v %v, after TakeWhole %v %v", i, ra, oka, rb, okb)
			}
			if oka {
				aMsgs = append(aMsgs, ma)
				bMsgs = append(bMsgs, mb)
			}
			if p.h.Reliable && !ra.Ack() && p.kind != "hostile" {
				gen.unacked(p) // the sender resends it
			}
			return ra, oka
		}
		other := 0 // what the connection's other channels hold of the budget
		batches := rapid.IntRange(1, 30).Draw(t, "batches")
		for bi := 0; bi < batches; bi++ {
			now = now.Add(time.Duration(rapid.IntRange(0, 40).Draw(t, "ms")) * ms)
			if useBudget && rapid.IntRange(0, 2).Draw(t, "othersChange") == 0 {
				// The budget is shared: other channels take or give
				// back memory, alike on both sides.
				n := rapid.IntRange(0, max(budget.Limit, 4*cfg.MaxMessage)).Draw(t, "others")
				a.budget.Add(n - other)
				b.budget.Add(n - other)
				other = n
				where = fmt.Sprintf("batch %d, other channels hold %d", bi, n)
				compare()
			}
			batch = batch[:0]
			for range rapid.IntRange(1, 8).Draw(t, "events") {
				batch = gen.draw(t, a, batch)
			}
			for i := range batch {
				batch[i].wrong = false
				if offerable(batch[i]) {
					batch[i].wrong = rapid.IntRange(0, 7).Draw(t, "wrongDigest") == 0
				}
			}
			for i := 0; i < len(batch); {
				where = fmt.Sprintf("batch %d, packet %d", bi, i)
				took := false // HandleTake took the packet's message
				if offerable(batch[i]) {
					j := i + 1
					for j < len(batch) && offerable(batch[j]) {
						j++
					}
					run := batch[i:j]
					ws := make([]Whole, len(run))
					var buf []byte
					digests := make([][coalesce.MD5Len]byte, len(run))
					var payloads [][]byte
					var at []int
					for k, p := range run {
						hdr, _ := twWhole(p.chunk)
						ws[k] = twPut(&buf, p.h, hdr, p.chunk)
						if hdr.Len > coalesce.ShortChecksumMax {
							payloads = append(payloads, p.chunk[hdr.HeaderLen:hdr.HeaderLen+hdr.Len])
							at = append(at, k)
						}
					}
					sums := make([][coalesce.MD5Len]byte, len(payloads))
					coalesce.Digests(sums, payloads)
					for x, k := range at {
						digests[k] = sums[x]
						if run[k].wrong {
							digests[k][x%coalesce.MD5Len] ^= 0xa5
						}
					}
					offers++
					first := twRefusal(b, run[0]) // before TakeWhole, for its stats
					n := b.TakeWhole(buf, ws, digests)
					if n < 0 || n > len(run) {
						fail("TakeWhole of %d packets returned %d taken", len(run), n)
					}
					for k := range n {
						p := run[k]
						where = fmt.Sprintf("batch %d, packet %d (taken by TakeWhole)", bi, i+k)
						if p.wrong {
							fail("TakeWhole took a packet with a wrong digest")
						}
						ra, ma, oka := a.HandleTake(now, p.h, p.chunk)
						if ra != Accepted || !oka {
							fail("TakeWhole took the packet, HandleTake gave %v, taken %v", ra, oka)
						}
						aMsgs = append(aMsgs, ma)
					}
					bMsgs = append(bMsgs, twMessages(buf, ws[:n])...)
					taken += n
					i += n
					where = fmt.Sprintf("batch %d, after TakeWhole took %d of %d", bi, n, len(run))
					if n == len(run) {
						if pollMode == 1 {
							deliver()
						}
						compare()
						continue
					}
					// TakeWhole refused batch[i]: nothing else may have
					// changed, but for what looking for memory does, which
					// HandleTake, given the packet next, does alike: a kept
					// ring released (N39), free buffers of the budget
					// given up.
					refused++
					why := twRefusal(b, batch[i])
					if n == 0 && why != first {
						fail("refusal changed: %q before TakeWhole, %q after", first, why)
					}
					reasons[why]++
					if va, vb := twViewOf(a), twViewOf(b); va != vb {
						vr := vb
						vr.Bytes, vr.Used, vr.Freed = va.Bytes, va.Used, va.Freed
						ring := len(a.q.slots) > baseRing && len(b.q.slots) <= baseRing
						if vr != va || why != "no memory" || vb.Freed > va.Freed || vb.Bytes > va.Bytes || vb.Bytes != va.Bytes && !ring {
							fail("TakeWhole refused packet %d (%s) and changed the receiver:\nHandleTake alone %+v\nwith TakeWhole    %+v", i, why, va, vb)
						}
						if ring {
							released++
						}
						if vb.Freed < va.Freed {
							trimmed++
						}
					} else if d := twinDiff(a, b); d != "" {
						fail("TakeWhole refused packet %d (%s) and changed the receiver:%s", i, why, d)
					}
					where = fmt.Sprintf("batch %d, packet %d (refused by TakeWhole: %s)", bi, i, why)
					var res Result
					res, took = handleBoth(i)
					switch {
					case why == "no memory" && res != NoMemory:
						fail("TakeWhole refused the packet for memory alone; HandleTake gave %v, taken %v", res, took)
					case why == "wrong digest" && !(res == Accepted && took) && res != NoMemory:
						fail("a good message with a wrong digest: HandleTake gave %v, taken %v", res, took)
					}
				} else {
					_, took = handleBoth(i)
				}
				if pollMode == 1 || pollMode == 2 && !(took && a.Settled()) {
					deliver()
				}
				compare()
				i++
			}
			where = fmt.Sprintf("batch %d, polled", bi)
			deliver()
			compare()
		}
		if a.Err() != nil {
			failedRuns++
		}
	})
	if t.Failed() {
		return
	}
	t.Logf("TakeWhole: %d offers, %d packets taken, %d refused (%d with a kept ring released, %d with free buffers given up); refusals %v; %d cases ended with the receivers failed",
		offers, taken, refused, released, trimmed, reasons, failedRuns)
	if taken == 0 {
		t.Fatal("TakeWhole took no packet: the property holds vacuously")
	}
	if refused == 0 {
		t.Fatal("TakeWhole refused no packet: the property holds vacuously")
	}
}

// twDigest returns the digest TakeWhole is given with p: the MD5 of its
// message's payload, or zeros for a short message or a chunk that is not
// one, and wrong if p.wrong.
func twDigest(p twPkt) [coalesce.MD5Len]byte {
	var d [coalesce.MD5Len]byte
	if hdr, ok := twWhole(p.chunk); ok && hdr.Len > coalesce.ShortChecksumMax {
		d = md5.Sum(p.chunk[hdr.HeaderLen : hdr.HeaderLen+hdr.Len])
	}
	if p.wrong {
		d[3] ^= 0x10
	}
	return d
}

// TestTakeWholeRefuses lists the reasons TakeWhole refuses a packet (N101):
// given one, it takes nothing, returns out as it was and leaves the
// receiver as it found it; given one after packets it takes, it stops
// there. Each case also checks that twRefusal, which the property's
// statistics rely on, names the reason.
func TestTakeWholeRefuses(t *testing.T) {
	const window = 16
	enc := func(n int, reliable bool) []byte { return coalesce.AppendMessage(nil, payload(n, n), reliable) }
	unrel := func(seq Seq, n int) twPkt {
		return twPkt{h: Header{Start: true, Seq: seq, Rel: 0}, chunk: enc(n, false)}
	}
	rel := func(seq, r Seq, n int) twPkt {
		return twPkt{h: Header{Reliable: true, Start: true, Seq: seq, Rel: r}, chunk: enc(n, true)}
	}
	with := func(p twPkt, f func(*twPkt)) twPkt {
		p.chunk = slices.Clone(p.chunk)
		f(&p)
		return p
	}
	handle := func(p twPkt) func(*testing.T, *Receiver) {
		return func(t *testing.T, r *Receiver) {
			if res := r.Handle(t0, p.h, p.chunk); res != Accepted {
				t.Fatalf("setup: Handle(%v) = %v", p, res)
			}
		}
	}
	take := func(p twPkt) func(*testing.T, *Receiver) {
		return func(t *testing.T, r *Receiver) {
			if res, _, ok := r.HandleTake(t0, p.h, p.chunk); res != Accepted || !ok {
				t.Fatalf("setup: HandleTake(%v) = %v, taken %v", p, res, ok)
			}
		}
	}
	for _, c := range []struct {
		name  string
		cfg   func(*ReceiverConfig)
		setup func(*testing.T, *Receiver)
		pkts  []twPkt
		want  int    // packets taken
		why   string // twRefusal's name for the first not taken
	}{
		{name: "taken (control)", pkts: []twPkt{unrel(0, 40), rel(1, 1, 16), with(unrel(2, 200), func(p *twPkt) { p.h.Rel = 1 }), rel(3, 2, 100)}, want: 4},
		{name: "stops at the first refused", pkts: []twPkt{unrel(0, 40), with(unrel(1, 40), func(p *twPkt) { p.wrong = true }), unrel(2, 40)}, want: 1, why: "wrong digest"},
		{name: "not settled: a packet queued", setup: handle(twPkt{h: Header{Seq: 1}, chunk: []byte{1, 2, 3}}), pkts: []twPkt{unrel(0, 40)}, why: "not settled"},
		{name: "not settled: a message waiting for Poll", setup: handle(unrel(0, 40)), pkts: []twPkt{unrel(1, 40)}, why: "not settled"},
		{name: "not settled: a drop not taken by NewDrops", setup: handle(with(unrel(0, 40), func(p *twPkt) { p.chunk[len(p.chunk)-1] ^= 1 })), pkts: []twPkt{unrel(1, 40)}, why: "not settled"},
		{name: "not settled: a deadline", setup: handle(twPkt{h: Header{Start: true, Seq: 0}, chunk: enc(40, false)[:10]}), pkts: []twPkt{unrel(2, 40)}, why: "not settled"},
		{name: "not a start", pkts: []twPkt{with(unrel(0, 40), func(p *twPkt) { p.h.Start = false })}, why: "not a start"},
		{name: "invalid sequence number", pkts: []twPkt{with(unrel(0, 40), func(p *twPkt) { p.h.Seq = MinSeq - 1 })}, why: "invalid sequence number"},
		{name: "invalid R", pkts: []twPkt{with(unrel(0, 40), func(p *twPkt) { p.h.Rel = MinSeq - 1 })}, why: "invalid sequence number"},
		{name: "invalid R after L = MaxSeq", setup: func(t *testing.T, r *Receiver) { r.Reuse(-1, MaxSeq) }, pkts: []twPkt{rel(0, MinSeq-1, 40)}, why: "invalid sequence number"},
		{name: "waits for a reliable packet: reliable", pkts: []twPkt{rel(0, 2, 40)}, why: "waits for a reliable packet"},
		{name: "waits for a reliable packet: unreliable", pkts: []twPkt{with(unrel(0, 40), func(p *twPkt) { p.h.Rel = 1 })}, why: "waits for a reliable packet"},
		{name: "duplicate: at the ignore number", setup: take(unrel(0, 40)), pkts: []twPkt{unrel(0, 40)}, why: "duplicate or stale"},
		{name: "duplicate: reliable, consumed (its R is L: it waits for L-1)", setup: take(rel(0, 1, 40)), pkts: []twPkt{rel(0, 1, 40)}, why: "waits for a reliable packet"},
		{name: "passed by the window: reliable, R after L", setup: take(unrel(0, 40)), pkts: []twPkt{rel(0, 1, 40)}, why: "duplicate or stale"},
		{name: "stale: before the ignore number", setup: take(unrel(0, 40)), pkts: []twPkt{unrel(-3, 40)}, why: "duplicate or stale"},
		{name: "at the window's edge", pkts: []twPkt{unrel(window-1, 40)}, want: 1},
		{name: "beyond the window", pkts: []twPkt{unrel(window, 40)}, why: "beyond the window"},
		{name: "slot already held (so not settled)", setup: handle(twPkt{h: Header{Seq: 1}, chunk: []byte{1, 2, 3}}), pkts: []twPkt{unrel(0, 40)}, why: "not settled"},
		{name: "too large for MaxMessage", pkts: []twPkt{unrel(0, 201)}, why: "too large"},
		{name: "MaxMessage the least with an MD5 checksum", cfg: func(c *ReceiverConfig) { c.MaxMessage = coalesce.ShortChecksumMax + 1 }, pkts: []twPkt{unrel(0, coalesce.ShortChecksumMax+1), unrel(1, coalesce.ShortChecksumMax+2)}, want: 1, why: "too large"},
		{name: "MaxMessage below any with an MD5 checksum", cfg: func(c *ReceiverConfig) { c.MaxMessage = coalesce.ShortChecksumMax }, pkts: []twPkt{unrel(0, coalesce.ShortChecksumMax+1)}, why: "too large"},
		{name: "bad length: a byte after the message", pkts: []twPkt{with(unrel(0, 40), func(p *twPkt) { p.chunk = append(p.chunk, 0) })}, why: "bad length"},
		{name: "bad length: truncated", pkts: []twPkt{with(unrel(0, 40), func(p *twPkt) { p.chunk = p.chunk[:len(p.chunk)-1] })}, why: "bad length"},
		{name: "bad header: length field cut", pkts: []twPkt{{h: Header{Start: true}, chunk: []byte{0x40, 0}}}, why: "bad header"},
		{name: "short message", pkts: []twPkt{unrel(0, coalesce.ShortChecksumMax)}, why: "short message"},
		{name: "reliability flag mismatch: reliable packet", pkts: []twPkt{with(rel(0, 1, 40), func(p *twPkt) { p.chunk = enc(40, false) })}, why: "reliability flag mismatch"},
		{name: "reliability flag mismatch: unreliable packet", pkts: []twPkt{with(unrel(0, 40), func(p *twPkt) { p.chunk = enc(40, true) })}, why: "reliability flag mismatch"},
		{name: "wrong digest", pkts: []twPkt{with(rel(0, 1, 40), func(p *twPkt) { p.wrong = true })}, why: "wrong digest"},
		{name: "corrupt checksum", pkts: []twPkt{with(rel(0, 1, 40), func(p *twPkt) { p.chunk[len(p.chunk)-1] ^= 1 })}, why: "corrupt checksum"},
		{name: "corrupt payload", pkts: []twPkt{with(unrel(0, 40), func(p *twPkt) { p.chunk[5] ^= 1 })}, why: "corrupt checksum"},
		{name: "no memory: MaxBytes", cfg: func(c *ReceiverConfig) { c.MaxBytes = 64 }, pkts: []twPkt{unrel(0, 100)}, why: "no memory"},
		{name: "no memory: Budget", cfg: func(c *ReceiverConfig) { c.Budget = &Budget{Limit: 64} }, pkts: []twPkt{rel(0, 1, 100)}, why: "no memory"},
		{name: "no memory: after one taken", cfg: func(c *ReceiverConfig) { c.Budget = &Budget{Limit: 150} }, setup: func(t *testing.T, r *Receiver) { r.budget.Add(100) }, pkts: []twPkt{unrel(0, 40), unrel(1, 60)}, want: 1, why: "no memory"},
		// The room TakeWhole reckons once for a run (N101): a message
		// that fills it exactly is taken, one a byte larger is not, the
		// tightest budget of the chain counting.
		{name: "room: exactly filled", cfg: func(c *ReceiverConfig) { c.Budget = &Budget{Limit: 200} }, setup: func(t *testing.T, r *Receiver) { r.budget.Add(100 - r.charge) }, pkts: []twPkt{unrel(0, 100), unrel(1, 100)}, want: 2},
		{name: "no memory: a byte past the room", cfg: func(c *ReceiverConfig) { c.Budget = &Budget{Limit: 200} }, setup: func(t *testing.T, r *Receiver) { r.budget.Add(101 - r.charge) }, pkts: []twPkt{unrel(0, 100)}, why: "no memory"},
		{name: "room: MaxBytes exactly filled", cfg: func(c *ReceiverConfig) { c.MaxBytes = 100 }, setup: func(t *testing.T, r *Receiver) { r.cfg.MaxBytes += r.charge }, pkts: []twPkt{unrel(0, 100)}, want: 1},
		{name: "no memory: a byte past MaxBytes", cfg: func(c *ReceiverConfig) { c.MaxBytes = 100 }, setup: func(t *testing.T, r *Receiver) { r.cfg.MaxBytes += r.charge - 1 }, pkts: []twPkt{unrel(0, 100)}, why: "no memory"},
		{name: "no memory: the parent's room", cfg: func(c *ReceiverConfig) { c.Budget = &Budget{Limit: 1 << 20} }, setup: func(t *testing.T, r *Receiver) { r.budget.Parent = &Budget{Limit: 150 + r.charge, Used: 50 + r.charge} }, pkts: []twPkt{unrel(0, 100), unrel(1, 101)}, want: 1, why: "no memory"},
	} {
		t.Run(c.name, func(t *testing.T) {
			mk := func() *Receiver {
				cfg := ReceiverConfig{Window: window, MaxMessage: 200, MCI: 25 * ms}
				if c.cfg != nil {
					c.cfg(&cfg)
				}
				if cfg.Budget != nil {
					b := *cfg.Budget
					cfg.Budget = &b
				}
				r := NewReceiver(cfg)
				if c.setup != nil {
					c.setup(t, r)
				}
				return r
			}
			a, b := mk(), mk() // a takes through TakeWhole, b through HandleTake
			ws := make([]Whole, len(c.pkts))
			var buf []byte
			digests := make([][coalesce.MD5Len]byte, len(c.pkts))
			for i, p := range c.pkts {
				hdr, _ := twWhole(p.chunk)
				ws[i] = twPut(&buf, p.h, hdr, p.chunk)
				digests[i] = twDigest(p)
			}
			if c.want < len(c.pkts) {
				// Before the packets TakeWhole takes, b's state is a's.
				for _, p := range c.pkts[:c.want] {
					if res, _, ok := b.HandleTake(t0, p.h, p.chunk); res != Accepted || !ok {
						t.Fatalf("control: HandleTake(%v) = %v, taken %v", p, res, ok)
					}
				}
				if why := twRefusal(b, c.pkts[c.want]); why != c.why {
					t.Errorf("refusal names %q, want %q", why, c.why)
				}
				b = mk()
			}
			n := a.TakeWhole(buf, ws, digests)
			if n != c.want {
				t.Fatalf("TakeWhole took %d, want %d", n, c.want)
			}
			out := twMessages(buf, ws[:n])
			for i, p := range c.pkts[:n] {
				res, m, ok := b.HandleTake(t0, p.h, p.chunk)
				if res != Accepted || !ok || m.Reliable != out[i].Reliable || !slices.Equal(m.Data, out[i].Data) {
					t.Fatalf("packet %d: HandleTake gave %v %v %x, TakeWhole %x", i, res, ok, m.Data, out[i].Data)
				}
			}
			if va, vb := twViewOf(a), twViewOf(b); va != vb {
				t.Fatalf("TakeWhole changed the receiver:\n%+v\n%+v", vb, va)
			}
			if d := twinDiff(a, b); d != "" {
				t.Fatalf("TakeWhole changed the receiver:%s", d)
			}
		})
	}
}

// A receiver that keeps a ring grown past its base arrays (N39), settled,
// is given a whole message that fits only once the ring is released:
// TakeWhole releases it and takes the message, as HandleTake does; given
// one that does not fit even then, it refuses it having released the ring,
// and HandleTake, given it next, refuses it alike (the state it leaves is
// HandleTake's, not the state TakeWhole found).
func TestTakeWholeKeptRing(t *testing.T) {
	const now = 100 * ms
	setup := func(maxBytes int) (*Receiver, int) { return twKeptRing(t, maxBytes, now) }
	probe, peak := setup(0)
	kept := probe.Bytes()
	probe.releaseRing()
	base := probe.Bytes()
	for _, c := range []struct {
		name string
		n    int // payload bytes
		want int
	}{
		{"fits once the ring is released", peak - kept + 1, 1},
		{"does not fit even then", peak - base + 1, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, _ := setup(peak)
			b, _ := setup(peak)
			seq := a.g.Next()
			p := twPkt{h: Header{Start: true, Seq: seq, Rel: a.l}, chunk: coalesce.AppendMessage(nil, payload(7, c.n), false)}
			hdr, _ := twWhole(p.chunk)
			var buf []byte
			w := twPut(&buf, p.h, hdr, p.chunk)
			n := a.TakeWhole(buf, []Whole{w}, [][coalesce.MD5Len]byte{twDigest(p)})
			out := twMessages(buf, []Whole{w}[:n])
			res, m, ok := b.HandleTake(t0.Add(now), p.h, p.chunk)
			if n != c.want {
				t.Fatalf("TakeWhole took %d, want %d (HandleTake: %v)", n, c.want, res)
			}
			if ok != (n == 1) || n == 1 && !slices.Equal(m.Data, out[0].Data) || n == 0 && res != NoMemory {
				t.Fatalf("HandleTake gave %v, taken %v", res, ok)
			}
			if len(a.q.slots) > baseRing {
				t.Fatalf("the ring was not released: %d places", len(a.q.slots))
			}
			if d := twinDiff(a, b); d != "" {
				t.Fatalf("TakeWhole and HandleTake differ:%s", d)
			}
		})
	}
}

// twKeptRing returns a settled receiver with MaxBytes maxBytes (0: the
// default) that keeps a ring grown past its base arrays, with a debt
// (N39), at now, and the most it held on the way.
func twKeptRing(t *testing.T, maxBytes int, now time.Duration) (*Receiver, int) {
	t.Helper()
	r := NewReceiver(ReceiverConfig{Window: 1000, MaxMessage: 1 << 16, MaxBytes: maxBytes, MCI: 25 * ms})
	peak := 0
	// Packets continuing a message, far apart: the ring grows past
	// its base arrays, then they expire with their groups.
	for _, sq := range []Seq{10, 299} {
		if res := r.Handle(t0, Header{Seq: sq}, []byte("xxxx")); res != Accepted {
			t.Fatalf("setup: %v", res)
		}
		peak = max(peak, r.Bytes())
	}
	for {
		if _, ok := r.Poll(t0.Add(now)); !ok {
			break
		}
	}
	r.NewDrops()
	if !r.Settled() || r.q.debt == 0 || len(r.q.slots) <= baseRing {
		t.Fatalf("setup: settled %v, %d places, debt %d", r.Settled(), len(r.q.slots), r.q.debt)
	}
	return r, peak
}

// TestTakeWholeRunPaysDebt checks what TakeWhole changes once for the
// messages of a run rather than after each (N101): given a run of small
// messages on a receiver that keeps a ring with a debt (N39), about as
// many as the debt, then one larger than the room the run began with,
// which fits only once the ring is back to its base arrays or does not
// fit at all, it takes what HandleTake, given the same packets one by
// one, takes, and leaves the receiver and its memory exactly as
// HandleTake does: the debt paid by each message, the ring returned to
// its base arrays the moment it is paid, the charge as the ring left it.
func TestTakeWholeRunPaysDebt(t *testing.T) {
	const now = 100 * ms
	probe, peak := twKeptRing(t, 0, now)
	debt, kept := probe.q.debt, probe.Bytes()
	probe.releaseRing()
	base := probe.Bytes()
	if peak-kept < 64 {
		t.Fatalf("setup: room %d", peak-kept)
	}
	for _, c := range []struct {
		name  string
		small int // small messages before the large one
		large int // the large one's payload bytes, or 0 for none
	}{
		{"no large one, debt not paid", debt - 1, 0},
		{"no large one, debt paid by the last", debt, 0},
		{"no large one, debt paid before the last", debt + 3, 0},
		{"large one first", 0, peak - kept + 1},
		{"large one with the debt unpaid", debt - 1, peak - kept + 1},
		{"large one just after the debt is paid", debt, peak - kept + 1},
		{"large one long after the debt is paid", debt + 3, peak - kept + 1},
		{"large one that does not fit, debt unpaid", debt - 1, peak - base + 1},
		{"large one that does not fit, debt paid", debt + 1, peak - base + 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, _ := twKeptRing(t, peak, now) // through TakeWhole
			b, _ := twKeptRing(t, peak, now) // through HandleTake
			var (
				pkts    []twPkt
				ws      []Whole
				digests [][coalesce.MD5Len]byte
				buf     []byte
			)
			seq := a.g
			add := func(n int) {
				seq = seq.Next()
				p := twPkt{h: Header{Start: true, Seq: seq, Rel: a.l}, chunk: coalesce.AppendMessage(nil, payload(int(seq), n), false)}
				hdr, _ := twWhole(p.chunk)
				pkts = append(pkts, p)
				ws = append(ws, twPut(&buf, p.h, hdr, p.chunk))
				digests = append(digests, twDigest(p))
			}
			for range c.small {
				add(20)
			}
			if c.large > 0 {
				add(c.large)
			}
			n := a.TakeWhole(buf, ws, digests)
			out := twMessages(buf, ws[:n])
			want := 0
			for i, p := range pkts {
				res, m, ok := b.HandleTake(t0.Add(now), p.h, p.chunk)
				if res != Accepted || !ok {
					break
				}
				if i < n && (m.Reliable != out[i].Reliable || !slices.Equal(m.Data, out[i].Data)) {
					t.Fatalf("message %d: HandleTake gave %x, TakeWhole %x", i, m.Data, out[i].Data)
				}
				want++
			}
			if n != want {
				t.Fatalf("TakeWhole took %d of %d, HandleTake %d", n, len(pkts), want)
			}
			if d := twinDiff(a, b); d != "" {
				t.Fatalf("TakeWhole and HandleTake differ:%s", d)
			}
		})
	}
}

// twMessages returns the messages of the packets ws, whose chunks lie in
// b, that TakeWhole took: what its caller delivers.
func twMessages(b []byte, ws []Whole) []Message {
	var out []Message
	for i := range ws {
		out = append(out, Message{Reliable: ws[i].H.Reliable, Data: slices.Clone(ws[i].Payload(b))})
	}
	return out
}

// twPut appends chunk to *buf and returns the Whole of the packet with
// header h and message header hdr whose chunk it is.
func twPut(buf *[]byte, h Header, hdr coalesce.Header, chunk []byte) Whole {
	off := len(*buf)
	*buf = append(*buf, chunk...)
	return Whole{H: h, Msg: hdr, Off: off, End: len(*buf)}
}
