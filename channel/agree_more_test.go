package channel

import (
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/coalesce"
	"pgregory.net/rapid"
)

// Tests of what lies next to N155's agreement of queued packets (N158):
// forged packets inside a reliable message, the cost of forged pairs, the
// receiver properties widened (parking, a forger ahead of the sender,
// small windows with long losses), and the room reckoned for the reliable
// packets owed.

// N158: a forged unreliable packet at the place of a reliable message's
// next packet, not yet arrived, carrying the R of the packet before it,
// agrees with its neighbours (follows, N155) and is queued. It ended the
// reliable group (D10), and the group, incomplete, failed the channel
// with ErrMalformedReliable: one unreliable datagram ended the connection.
// It is now dropped when the group reaches it, and the message arrives.
func TestForgedUnreliableInsideReliableMessage(t *testing.T) {
	p := newPair(t, ReceiverConfig{})
	pk := p.send(payload(1, 100), true) // several packets, R 1, 2, ...
	if len(pk) < 3 {
		t.Fatalf("%d packets", len(pk))
	}
	p.handle(Accepted, pk[0])
	p.handle(Accepted, raw(false, false, pk[1].h.Seq, pk[0].h.Rel, []byte{1, 2, 3}))
	if p.r.Err() != nil {
		t.Fatalf("one forged unreliable packet failed the channel: %v", p.r.Err())
	}
	p.handle(Accepted, pk[1:]...)
	p.wantPoll("the message", msgOf(true, payload(1, 100)))
	if d := p.r.Drops(); d.Malformed != 1 {
		t.Errorf("Drops = %+v, want the forged packet", d)
	}
}

// TestReceiverPropertiesParked is TestReceiverProperties (wrap drawn) with
// the receiver parked and revived whenever it is idle, as conn.recvChannel
// does (N25, N154).
func TestReceiverPropertiesParked(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		receiverPropertiesWith(t, rapid.Bool().Draw(t, "wrap"), false, propOpts{park: true})
	})
}

// TestReceiverPropertiesForgedAhead is TestReceiverPropertiesForged with a
// stronger forger: also at places the sender has not reached yet, and
// with any R more than the sender's there (R+1 at an unreliable place
// included), the receiver parked and revived or not.
func TestReceiverPropertiesForgedAhead(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		receiverPropertiesWith(t, rapid.Bool().Draw(t, "wrap"), true, propOpts{ahead: true, park: rapid.Bool().Draw(t, "park")})
	})
}

// BenchmarkDisagreeSparse is the cost of an unreliable packet that
// disagrees with a reliable neighbour and is dropped alone, in a queue
// spread over the window: both neighbours are looked for by scanning the
// bitmaps (N155). The queue's span, and with it the scan, is bounded by
// the memory limits (the ring is charged, N49).
func BenchmarkDisagreeSparse(b *testing.B) {
	r := NewReceiver(ReceiverConfig{})
	w := Seq(r.cfg.Window)
	msg := coalesce.AppendMessage(nil, []byte("x"), true)
	if res := r.Handle(t0, Header{Reliable: true, Start: true, Seq: 5, Rel: 2}, msg); res != Accepted {
		b.Fatal(res)
	}
	if res := r.Handle(t0, Header{Reliable: true, Start: true, Seq: w - 10, Rel: 3}, msg); res != Accepted {
		b.Fatal(res)
	}
	f := Header{Start: true, Seq: w / 2, Rel: 5}
	um := coalesce.AppendMessage(nil, []byte("f"), false)
	b.ResetTimer()
	for range b.N {
		if res := r.Handle(t0, f, um); res != Corrupt {
			b.Fatal(res)
		}
	}
}

// BenchmarkStaleSparse is, for comparison, an unreliable packet at the
// same place that agrees, handled as a duplicate of the one queued there.
func BenchmarkStaleSparse(b *testing.B) {
	r := NewReceiver(ReceiverConfig{})
	w := Seq(r.cfg.Window)
	msg := coalesce.AppendMessage(nil, []byte("x"), true)
	r.Handle(t0, Header{Reliable: true, Start: true, Seq: 5, Rel: 2}, msg)
	r.Handle(t0, Header{Reliable: true, Start: true, Seq: w - 10, Rel: 3}, msg)
	f := Header{Start: true, Seq: w / 2, Rel: 2}
	um := coalesce.AppendMessage(nil, []byte("f"), false)
	if res := r.Handle(t0, f, um); res != Accepted {
		b.Fatal(res)
	}
	b.ResetTimer()
	for range b.N {
		if res := r.Handle(t0, f, um); res != Stale {
			b.Fatal(res)
		}
	}
}

// benchmarkForgedPair is a forged pair that made the receiver rebuild its
// current message group from scratch: f1, blocked, just before a blocked
// reliable message of many packets, then f2 before it, which disagrees
// with f1 only and so removes it (N155); process walked the whole message
// again, 9.6 µs a pair at a message MTU of 1,175, 280 µs at 25. The group
// is now kept while f1 heads the queue (N158).
func benchmarkForgedPair(b *testing.B, mtu int) {
	r := NewReceiver(ReceiverConfig{})
	s := NewSender(0)
	s.Queue([]byte("a"), true)           // seq 0, R 1: lost
	s.Queue([]byte("b"), false)          // seq 1, R 1: lost
	s.Queue(payload(1, 1<<20-100), true) // seq 2..: R 2..
	pk := sendNew(b, s, t0, mtu)
	for _, p := range pk[2 : len(pk)-1] { // all of it but its last packet
		if res := r.Handle(t0, p.h, p.chunk); res != Accepted {
			b.Fatal(res)
		}
	}
	um := coalesce.AppendMessage(nil, []byte("f"), false)
	f1 := Header{Start: true, Seq: 1, Rel: 1}
	f2 := Header{Start: true, Seq: 0, Rel: 0}
	b.ReportMetric(float64(len(pk)-3), "queued")
	b.ResetTimer()
	for range b.N {
		if res := r.Handle(t0, f1, um); res != Accepted {
			b.Fatal("f1 ", res)
		}
		if res := r.Handle(t0, f2, um); res != Corrupt {
			b.Fatal("f2 ", res)
		}
	}
}

func BenchmarkForgedPair1175(b *testing.B) { benchmarkForgedPair(b, 1175) }
func BenchmarkForgedPair25(b *testing.B)   { benchmarkForgedPair(b, 25) }

// TestReceiverPropertiesSmallWindow is TestReceiverProperties with windows
// of 48-90 places, losses as long as the window or longer (D27, extend's
// slide) and many short messages, parked and revived or not. It found
// TestOwedRingReckonsBaseArrays.
func TestReceiverPropertiesSmallWindow(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		receiverPropertiesWith(t, rapid.Bool().Draw(t, "wrap"), false, propOpts{small: true, park: rapid.Bool().Draw(t, "park")})
	})
}

// TestReceiverPropertiesForgedSmallWindow is
// TestReceiverPropertiesForgedAhead with the small windows and long losses
// of TestReceiverPropertiesSmallWindow.
func TestReceiverPropertiesForgedSmallWindow(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		receiverPropertiesWith(t, rapid.Bool().Draw(t, "wrap"), true, propOpts{ahead: true, small: true, park: rapid.Bool().Draw(t, "park")})
	})
}

// D27, N41: an honest sender loses more than the window of unreliable
// packets in a row twice, with reliable messages between and after: its
// reliable packets lie beyond the window, and are resent together. With
// the sender's MaxAhead at the window, as a connection sets it, they lie
// within the window's width of the lowest, and evidence forms. (A sender
// that runs further ahead, a peer whose receive window is larger than
// this side's, resends packets far past the lowest in the same batch;
// they take the witnesses' places, and evidence never forms: N158.)
func TestD27EvidenceBesideResends(t *testing.T) {
	if !d27Resends(t) {
		t.Fatal("no evidence formed")
	}
}

// d27Resends runs TestD27EvidenceBesideResends's exchange and reports
// whether every reliable packet was acked within a minute.
func d27Resends(t *testing.T) bool {
	const w = 50
	r := NewReceiver(ReceiverConfig{Window: w})
	s := NewSender(0)
	s.SetMaxAhead(w)
	now := t0
	handle := func(p packet) Result {
		res := r.Handle(now, p.h, p.chunk)
		if p.h.Reliable && res.Ack() {
			s.HandleAck(p.h.Seq)
		}
		for {
			if _, ok := r.Poll(now); !ok {
				break
			}
		}
		return res
	}
	send := func() []packet {
		var out []packet
		for s.MayAppend() {
			b, _ := s.AppendNew(nil, now, 100)
			out = append(out, parsePacket(t, b))
		}
		return out
	}
	lose := func(n int) {
		for range n {
			s.Queue([]byte("u"), false)
		}
		send()
	}
	s.Queue([]byte("a"), true)
	for _, p := range send() {
		handle(p)
	}
	lose(60)
	s.Queue([]byte("b"), true)
	s.Queue([]byte("c"), true)
	send() // lost, resent below
	lose(60)
	s.Queue(payload(1, 500), true) // several packets
	send()
	for i := range 60 {
		now = now.Add(time.Second)
		var batch []packet
		for {
			b, _, ok := s.AppendResend(nil, now, ms, time.Second)
			if !ok {
				break
			}
			batch = append(batch, parsePacket(t, b))
		}
		batch = append(batch, send()...)
		for _, p := range batch {
			handle(p)
		}
		if _, _, _, ok := s.Oldest(); !ok {
			t.Logf("drained after %d rounds", i+1)
			return true
		}
	}
	g, l := r.Position()
	t.Logf("after a minute of resends, still nothing taken: G %d L %d", g, l)
	return false
}

// N158, D22, D23: roomForOwed reckoned the ring the owed packets need
// with the base arrays the ring had then; growing on the way to it
// replaces them with larger ones (up to baseRing), which it did not
// count, and the owed packet at the head then never fit: honest traffic,
// the channel stuck for good.
func TestOwedRingReckonsBaseArrays(t *testing.T) {
	cfg := ReceiverConfig{Window: 79, MaxMessage: 300, MaxBytes: 7683, Budget: &Budget{Limit: 7376}}
	r := NewReceiver(cfg)
	msg := coalesce.AppendMessage(nil, payload(1, 40), true) // 2 packets of 25 and 22 bytes
	first, second := msg[:25], msg[25:]
	one := coalesce.AppendMessage(nil, payload(2, 10), true)
	for _, p := range []packet{
		raw(true, false, 1, 2, second), // seq 0 (R 1, the message's start) lost
		raw(true, true, 20, 3, one),
		raw(true, true, 64, 11, one), // R 4-10 owed between; may be refused
	} {
		res := r.Handle(t0, p.h, p.chunk)
		if res != Accepted && (res != NoMemory || p.h.Seq != 64) {
			t.Fatalf("seq %d: %v", p.h.Seq, res)
		}
	}
	if res := r.Handle(t0, Header{Reliable: true, Start: true, Seq: 0, Rel: 1}, first); res != Accepted {
		t.Fatalf("the owed head packet: %v (Bytes %d, ring %d, base %d); its channel is stuck for good", res, r.Bytes(), len(r.q.slots), len(r.q.base))
	}
}

// N158: while a forged packet heads the queue, the message group it
// displaced is kept, and restored when the forged packet is removed: the
// message's packets are not walked again (benchmarkForgedPair).
func TestForgedPairKeepsGroup(t *testing.T) {
	r := NewReceiver(ReceiverConfig{})
	s := NewSender(0)
	s.Queue([]byte("a"), true)      // seq 0, R 1: lost
	s.Queue([]byte("b"), false)     // seq 1, R 1: lost
	s.Queue(payload(1, 5000), true) // seq 2..: R 2..
	pk := sendNew(t, s, t0, 100)
	for _, p := range pk[2 : len(pk)-1] {
		if res := r.Handle(t0, p.h, p.chunk); res != Accepted {
			t.Fatal(res)
		}
	}
	n := len(pk) - 3
	if !r.cmg.valid || r.cmg.head != 2 || r.cmg.n != n {
		t.Fatalf("group at %d of %d packets (valid %v), want at 2 of %d", r.cmg.head, r.cmg.n, r.cmg.valid, n)
	}
	um := coalesce.AppendMessage(nil, []byte("f"), false)
	if res := r.Handle(t0, Header{Start: true, Seq: 1, Rel: 1}, um); res != Accepted {
		t.Fatal("f1: ", res)
	}
	if !r.saved.valid || r.saved.head != 2 || r.saved.n != n {
		t.Fatalf("displaced group not kept: at %d of %d (valid %v)", r.saved.head, r.saved.n, r.saved.valid)
	}
	if res := r.Handle(t0, Header{Start: true, Seq: 0, Rel: 0}, um); res != Corrupt {
		t.Fatal("f2: ", res)
	}
	if !r.cmg.valid || r.cmg.head != 2 || r.cmg.n != n || r.saved.valid {
		t.Fatalf("group not restored: at %d of %d (valid %v, saved %v)", r.cmg.head, r.cmg.n, r.cmg.valid, r.saved.valid)
	}
	// The lost packets come: everything is delivered.
	for _, p := range append(pk[:2], pk[len(pk)-1]) {
		r.Handle(t0, p.h, p.chunk)
	}
	var got []Message
	for {
		m, ok := r.Poll(t0)
		if !ok {
			break
		}
		got = append(got, m)
	}
	if len(got) != 3 || len(got[2].Data) != 5000 || r.Err() != nil {
		t.Fatalf("delivered %d messages, Err %v", len(got), r.Err())
	}
}
