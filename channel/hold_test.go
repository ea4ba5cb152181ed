package channel

import (
	"crypto/md5"
	"errors"
	"runtime"
	"slices"
	"testing"
	"unsafe"

	"github.com/fastnet-engine/fastnet/coalesce"
)

// TestMaxHolders checks Budget.MaxHolders (D22, D23, N25): once that many
// receivers of a connection hold queued packets, a packet that would make
// one more hold some is refused, while messages that arrive whole in one
// packet are still delivered and the receivers already holding packets
// complete their messages; when one finishes, another may begin.
func TestMaxHolders(t *testing.T) {
	b := &Budget{Limit: 1 << 20, MaxHolders: 2}
	var ps [3]*pair
	var msgs [3][]packet
	for i := range ps {
		ps[i] = newPair(t, ReceiverConfig{Budget: b})
		msgs[i] = ps[i].send(payload(i, 100), true) // several packets each
	}
	ps[0].handle(Accepted, msgs[0][0])
	ps[1].handle(Accepted, msgs[1][0])
	if got := b.Holders(); got != 2 {
		t.Fatalf("Holders = %d, want 2", got)
	}
	ps[2].handle(NoMemory, msgs[2][0])
	ps[2].handle(NoMemory, msgs[2][1]) // not the first packet either
	if got := b.Holders(); got != 2 {
		t.Fatalf("Holders = %d after refusals, want 2", got)
	}

	// A third receiver still takes a message that arrives whole.
	q := newPair(t, ReceiverConfig{Budget: b})
	q.handle(Accepted, q.send([]byte("whole"), true)...)
	q.wantPoll("a one-packet message", msgOf(true, []byte("whole")))

	// The holders finish their messages.
	ps[0].handle(Accepted, msgs[0][1:]...)
	ps[0].wantPoll("first holder", msgOf(true, payload(0, 100)))
	if got := b.Holders(); got != 1 {
		t.Fatalf("Holders = %d after a holder finished, want 1", got)
	}
	ps[2].handle(Accepted, msgs[2]...) // resent, and now taken
	ps[2].wantPoll("the refused receiver", msgOf(true, payload(2, 100)))
	ps[1].handle(Accepted, msgs[1][1:]...)
	ps[1].wantPoll("second holder", msgOf(true, payload(1, 100)))
	kept := q.r.keptBytes()
	for i, p := range ps {
		if !p.r.Idle() {
			t.Errorf("receiver %d not idle after draining", i)
		}
		kept += p.r.keptBytes()
	}
	if b.Holders() != 0 || b.Used != kept {
		t.Errorf("after draining: Holders %d, Used %d, want the arrays kept, %d", b.Holders(), b.Used, kept)
	}
}

// TestHoldersReleasedByReset checks that a receiver reset while holding
// packets (its connection is going away) no longer counts as a holder.
func TestHoldersReleasedByReset(t *testing.T) {
	b := &Budget{MaxHolders: 1}
	p := newPair(t, ReceiverConfig{Budget: b})
	p.handle(Accepted, p.send(payload(1, 100), true)[0])
	if b.Holders() != 1 {
		t.Fatalf("Holders = %d, want 1", b.Holders())
	}
	p.r.Reset()
	if b.Holders() != 0 || b.Used != 0 {
		t.Errorf("after Reset: Holders %d, Used %d", b.Holders(), b.Used)
	}
}

// TestIdleReuse checks that an idle receiver's whole state is its Position
// (D7, D8): another receiver reused at that position treats the channel's
// old reliable packets as duplicates (acked again, not delivered again,
// D8) and delivers what follows in order.
func TestIdleReuse(t *testing.T) {
	p := newPair(t, ReceiverConfig{})
	var old []packet
	for i := range 3 {
		pk := p.send(payload(i, 60), i != 1)
		old = append(old, pk...)
		p.handle(Accepted, pk...)
		p.wantPoll("before", msgOf(i != 1, payload(i, 60)))
	}
	if !p.r.Idle() {
		t.Fatal("a drained receiver is not idle")
	}
	g, l := p.r.Position()
	last := old[len(old)-1].h
	if g != last.Seq || l != last.Rel {
		t.Fatalf("Position = %d, %d; want the last packet's sequence number and R, %d and %d", g, l, last.Seq, last.Rel)
	}

	// A receiver that served another channel continues this one.
	other := newPair(t, ReceiverConfig{})
	other.handle(Accepted, other.send([]byte("elsewhere"), true)...)
	other.wantPoll("other channel", msgOf(true, []byte("elsewhere")))
	p.r = other.r
	if !p.r.Reuse(g, l) {
		t.Fatal("Reuse of an idle receiver refused")
	}
	if d := p.r.Drops(); d != (Drops{}) {
		t.Errorf("Drops after Reuse = %+v, want zero", d)
	}
	for _, k := range old {
		want := Duplicate
		if !k.h.Reliable {
			want = Stale
		}
		p.handle(want, k)
	}
	p.wantPoll("old packets after Reuse")
	next := p.send(payload(9, 60), true)
	p.handle(Accepted, next[1:]...)
	if p.r.Reuse(-1, 0) {
		t.Error("Reuse of a receiver holding packets accepted")
	}
	p.handle(Accepted, next[0])
	p.wantPoll("after Reuse", msgOf(true, payload(9, 60)))
}

// TestHoldOverhead checks that HoldOverhead is what a Receiver holding
// packets needs at least beyond their buffers, its state and its smallest
// queue, measured on the heap (N49).
func TestHoldOverhead(t *testing.T) {
	const n = 1000
	rs := make([]*Receiver, n)
	b := &Budget{}
	before := heapAlloc()
	for i := range rs {
		rs[i] = NewReceiver(ReceiverConfig{Budget: b})
		rs[i].q.ensure(0)
		rs[i].ready.Reset(keptReady)
		for range keptReady {
			rs[i].ready.Push(Message{})
		}
	}
	grew := heapAlloc() - before
	runtime.KeepAlive(rs)
	if per := int(grew / n); per < HoldOverhead*7/8 || per > HoldOverhead*9/8 {
		t.Errorf("a receiver with its smallest queue takes %d bytes of heap, HoldOverhead is %d", per, HoldOverhead)
	}
	want := int(unsafe.Sizeof(Receiver{})) + keptReady*int(unsafe.Sizeof(Message{})) +
		minRing*int(unsafe.Sizeof(slot{})) + numBitmaps*8
	if HoldOverhead != want {
		t.Errorf("HoldOverhead = %d, want %d", HoldOverhead, want)
	}
}

// heapAlloc returns the bytes of live heap objects after a collection.
func heapAlloc() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// TestSenderReuse checks that an idle sender's whole state is its Position
// (D5, D7): a trimmed sender reused at that position, as another channel's,
// cuts the next message with the sequence numbers and R that follow, and
// a sender with something queued or in flight is not reused.
func TestSenderReuse(t *testing.T) {
	s := NewSender(1)
	s.Queue(payload(1, 60), true)
	s.Queue(payload(2, 10), false)
	pkts := sendNew(t, s, t0, 25)
	if s.Reuse(2, 0, 0) {
		t.Fatal("Reuse of a sender with packets in flight accepted")
	}
	for _, p := range pkts {
		if p.h.Reliable {
			s.HandleAck(p.h.Seq)
		}
	}
	seq, rel := s.Position()
	last := pkts[len(pkts)-1].h
	if seq != last.Seq.Add(1) || rel != last.Rel {
		t.Fatalf("Position = %d, %d; want %d, %d", seq, rel, last.Seq.Add(1), last.Rel)
	}

	other := NewSender(7)
	other.Queue(payload(3, 300), true)
	for _, p := range sendNew(t, other, t0, 25) {
		other.HandleAck(p.h.Seq)
	}
	other.Trim()
	if !other.Reuse(1, seq, rel) || other.ID() != 1 {
		t.Fatal("Reuse of an idle sender refused")
	}
	other.Queue(payload(4, 60), true)
	next := sendNew(t, other, t0, 25)
	if h := next[0].h; h.Seq != seq || h.Rel != rel.Add(1) || !h.Start {
		t.Errorf("first packet after Reuse: seq %d, R %d, start %v; want %d, %d, true", h.Seq, h.Rel, h.Start, seq, rel.Add(1))
	}
	r := NewReceiver(ReceiverConfig{})
	r.Reuse(last.Seq, last.Rel)
	for _, p := range next {
		if got := r.Handle(t0, p.h, p.chunk); got != Accepted {
			t.Fatalf("receiver at the old position: %v", got)
		}
	}
	if m, ok := r.Poll(t0); !ok || !slices.Equal(m.Data, payload(4, 60)) {
		t.Errorf("the message after Reuse was not delivered: %v %v", m, ok)
	}
}

// TestRingHysteresisAllocs checks the ring's hysteresis (N39): a peer that
// parks one packet near the far edge of the window and completes
// two-packet messages at its near edge (BenchmarkRingHostile) costs no
// allocation for almost every datagram, and about as many bytes per
// datagram as the window's ring divided by the datagrams that pass
// through it; before, the ring grew to the window's width and shrank
// back at every message, 1.3 MB a datagram.
func TestRingHysteresisAllocs(t *testing.T) {
	f := newRingFeeder(true)
	if a := testing.AllocsPerRun(3*DefaultWindow, func() { f.step(t) }); a >= 1 {
		t.Errorf("%.2f allocations per hostile datagram", a)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const n = 4 * DefaultWindow
	for range n {
		f.step(t)
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / n; per > 128 {
		t.Errorf("%d bytes allocated per hostile datagram, want at most 128", per)
	}
}

// TestReuseLearnsLAt: a receiver continuing a channel whose packet with
// R = L it does not know (Reuse, or ReuseAt unknown, as a parked mixed
// channel's) learns it from the next reliable packet it consumes, however
// it consumes it: a message in several packets (process), one whole in its
// packet (fast), or a run of them (TakeWhole). After that, a reliable
// packet behind the window whose R lies further after L than its sequence
// number lies after that packet, which no sender makes, is dropped and
// not acked, as on a channel that never gave up its receiver, instead of
// ending the connection (D26, N154).
func TestReuseLearnsLAt(t *testing.T) {
	big := payload(7, coalesce.ShortChecksumMax+20) // an MD5 checksum, as TakeWhole takes
	for _, how := range []string{"several packets", "whole", "TakeWhole"} {
		t.Run(how, func(t *testing.T) {
			p := newPair(t, ReceiverConfig{MaxMessage: 1000})
			p.mtu = 1200
			const g, l = Seq(99), Seq(5)
			if !p.r.ReuseAt(g, l, 0, false) || !p.s.Reuse(0, g.Next(), l) {
				t.Fatal("Reuse refused")
			}
			var last Header
			switch how {
			case "several packets":
				p.mtu = 10
				pk := p.send([]byte("a message in several packets"), true)
				p.handle(Accepted, pk...)
				p.wantPoll(how, msgOf(true, []byte("a message in several packets")))
				last = pk[len(pk)-1].h
			case "whole":
				pk := p.send(big, true)
				p.handle(Accepted, pk...)
				p.wantPoll(how, msgOf(true, big))
				last = pk[0].h
			case "TakeWhole":
				pk := p.send(big, true)
				hdr, ok := twWhole(pk[0].chunk)
				if !ok {
					t.Fatal("not whole")
				}
				var buf []byte
				ws := []Whole{twPut(&buf, pk[0].h, hdr, pk[0].chunk)}
				digests := [][coalesce.MD5Len]byte{md5.Sum(big)}
				if n := p.r.TakeWhole(buf, ws, digests); n != 1 {
					t.Fatalf("TakeWhole took %d", n)
				}
				last = pk[0].h
			}
			if at, ok := p.r.LAt(); !ok || at != last.Seq {
				t.Errorf("LAt = %d, %v after consuming the reliable packet at %d, want it known", at, ok, last.Seq)
			}
			// R two after L at L's own packet: behind the window, no
			// sender makes it.
			p.handle(Corrupt, raw(true, true, last.Seq, last.Rel.Add(2), coalesce.AppendMessage(nil, []byte("x"), true)))
			if err := p.r.Err(); err != nil {
				t.Errorf("Err = %v, want none: the packet is dropped", err)
			}
		})
	}
}

// TestReuseDoesNotKnowLAt: a receiver continued by Reuse past a channel's
// start does not know where the packet with R = L was, so a reliable
// packet behind its window with R after L ends the channel loudly (D26),
// as before N154; at the start (G -1, L 0) it knows: before the first
// packet.
func TestReuseDoesNotKnowLAt(t *testing.T) {
	r := NewReceiver(ReceiverConfig{})
	if !r.Reuse(99, 5) {
		t.Fatal("Reuse refused")
	}
	if _, ok := r.LAt(); ok {
		t.Error("LAt known after Reuse past the start")
	}
	if res := r.Handle(t0, Header{Reliable: true, Start: true, Seq: 99, Rel: 7}, coalesce.AppendMessage(nil, []byte("x"), true)); res != Rejected || !errors.Is(r.Err(), ErrPassedReliable) {
		t.Errorf("Handle = %v, Err %v; want Rejected, ErrPassedReliable", res, r.Err())
	}
	r2 := NewReceiver(ReceiverConfig{})
	r2.Reuse(-1, 0)
	if at, ok := r2.LAt(); !ok || at != -1 {
		t.Errorf("LAt = %d, %v after Reuse at the start, want -1, true", at, ok)
	}
}
