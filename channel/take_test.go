package channel

import (
	"fmt"
	"slices"
	"testing"

	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/coalesce"
)

// twinDiff compares the whole state of two receivers, and of their
// budgets, that should be the same: one that took packets through Handle and
// Poll, and its twin that took them through HandleTake, once the messages
// taken are accounted for. It returns "" if they are the same.
func twinDiff(a, b *Receiver) string {
	type st struct {
		G, L, LAt                                 Seq
		LAtKnown                                  bool
		Queued, Bufs, UnrelN, UnrelBufs, MaxChunk int
		ReadyLen, ReadyBytes, Charge              int
		Deadline                                  int64
		Err                                       error
		Drops, Reported                           Drops
		Holding                                   bool
		Grant, GrantBufs, GrantCap, GrantLen      int
		GrantSeq, GrantRel                        Seq
		Evidence                                  [MaxSkipEvidence - 1]witness
		EvidenceN                                 int
		Debt, Slots, Off, Span, Head              int
		Cmg                                       cmgState
		Used, Committed, Holders, Retained        int
		Bytes                                     int
	}
	get := func(r *Receiver) st {
		s := st{G: r.g, L: r.l, LAt: r.lAt, LAtKnown: r.lAtKnown, Queued: r.queued, Bufs: r.bufs, UnrelN: r.unrelN, UnrelBufs: r.unrelBufs, MaxChunk: r.maxChunk,
			ReadyLen: r.ready.Len(), ReadyBytes: r.readyBytes, Charge: r.charge, Deadline: int64(r.deadline), Err: r.err,
			Drops: r.drops, Reported: r.reported, Holding: r.holding, Grant: r.grant, GrantBufs: r.grantBufs, GrantCap: r.grantCap,
			GrantLen: r.grantLen, GrantSeq: r.grantSeq, GrantRel: r.grantRel, Evidence: r.evidence, EvidenceN: r.evidenceN,
			Debt: r.q.debt, Slots: len(r.q.slots), Off: r.q.off, Span: r.q.span, Head: r.q.head, Cmg: r.cmg, Bytes: r.Bytes()}
		if r.budget != nil {
			s.Used, s.Committed, s.Holders, s.Retained = r.budget.Used, r.budget.committed, r.budget.holders, r.budget.pool.Retained
		}
		return s
	}
	x, y := get(a), get(b)
	if x != y {
		return fmt.Sprintf("\n%+v\n%+v", x, y)
	}
	return ""
}

// sameNext takes the twin's next message, the first of took (what
// HandleTake returned) or else what Poll gives, and returns what differs
// from msg and ok, the next message of the receiver fed through Handle, or
// "" if nothing does.
func sameNext(twin *Receiver, took *[]Message, now clock.Time, msg Message, ok bool) string {
	var tm Message
	tok := len(*took) > 0
	if tok {
		tm, *took = (*took)[0], (*took)[1:]
	} else {
		tm, tok = twin.Poll(now)
	}
	if tok != ok || !slices.Equal(tm.Data, msg.Data) || tm.Reliable != msg.Reliable {
		return fmt.Sprintf("HandleTake and Poll gave %v %q, Handle and Poll %v %q", tok, tm.Data, ok, msg.Data)
	}
	return ""
}

// A kept ring (N39) pays its debt with a packet delivered whole and taken
// at once, as with one delivered and polled.
func TestTakeKeptRing(t *testing.T) {
	cfg := ReceiverConfig{Window: 1000, MaxMessage: 1000, MaxBytes: 1 << 20, MCI: 25 * ms}
	a, b := NewReceiver(cfg), NewReceiver(cfg)
	// An unreliable packet continuing a message, far ahead: it grows the
	// ring past its base arrays, then expires with its group.
	for _, sq := range []Seq{10, 299} {
		h := Header{Seq: sq, Rel: 0}
		for _, r := range []*Receiver{a, b} {
			if res := r.Handle(t0, h, []byte("xxxx")); res != Accepted {
				t.Fatal(res)
			}
		}
	}
	now := t0.Add(100 * ms)
	for _, r := range []*Receiver{a, b} {
		for {
			if _, ok := r.Poll(now); !ok {
				break
			}
		}
	}
	if a.q.debt == 0 || len(a.q.slots) <= baseRing {
		t.Fatalf("the ring was not kept: %d places, debt %d", len(a.q.slots), a.q.debt)
	}
	seq := a.g.Add(1)
	for i := 0; i < 5; i++ {
		enc := coalesce.AppendMessage(nil, []byte("hello world"), false)
		hh := Header{Seq: seq, Rel: 0, Start: true}
		seq = seq.Add(1)
		ra := a.Handle(now, hh, enc)
		ma, oka := a.Poll(now)
		rb, mb, okb := b.HandleTake(now, hh, enc)
		if ra != rb || oka != okb || string(ma.Data) != string(mb.Data) {
			t.Fatalf("results %v %v %q / %v %v %q", ra, oka, ma.Data, rb, okb, mb.Data)
		}
		if _, ok := b.Poll(now); ok {
			t.Fatal("twin had more")
		}
		if d := twinDiff(a, b); d != "" {
			t.Fatalf("step %d:%s", i, d)
		}
	}
}

// HandleTake does not take a message while another waits for Poll: order
// is kept, and the receiver ends as Handle would leave it.
func TestTakeBehindReady(t *testing.T) {
	cfg := ReceiverConfig{Window: 100, MaxMessage: 1000, MaxBytes: 1 << 20, MCI: 25 * ms}
	a, b := NewReceiver(cfg), NewReceiver(cfg)
	var seq, rel Seq
	for i := 0; i < 12; i++ {
		seq = seq.Add(1)
		reliable := i%3 != 0
		if reliable {
			rel = rel.Add(1)
		}
		enc := coalesce.AppendMessage(nil, []byte{byte(i), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17}, reliable)
		h := Header{Seq: seq, Rel: rel, Reliable: reliable, Start: true}
		ra := a.Handle(t0, h, enc)
		var rb Result
		var ok bool
		if i == 0 {
			rb = b.Handle(t0, h, enc) // left for Poll
		} else {
			rb, _, ok = b.HandleTake(t0, h, enc)
		}
		if ra != rb {
			t.Fatalf("%d: Handle %v, HandleTake %v", i, ra, rb)
		}
		if ok {
			t.Fatalf("%d: taken while message 0 waits for Poll", i)
		}
	}
	for i := 0; ; i++ {
		ma, oka := a.Poll(t0)
		mb, okb := b.Poll(t0)
		if oka != okb || string(ma.Data) != string(mb.Data) || ma.Reliable != mb.Reliable {
			t.Fatalf("poll %d: %v %x / %v %x", i, oka, ma.Data, okb, mb.Data)
		}
		if !oka {
			break
		}
		if ma.Data[0] != byte(i) {
			t.Fatalf("order: %d at %d", ma.Data[0], i)
		}
	}
	if d := twinDiff(a, b); d != "" {
		t.Fatal(d)
	}
}
