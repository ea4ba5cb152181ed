package channel

import (
	"bytes"
	"math"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/coalesce"
	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// TestFragmentation checks D12: the encoded message is cut into message-MTU
// chunks with consecutive sequence numbers, the first with the start flag,
// all with the message's reliability.
func TestFragmentation(t *testing.T) {
	msg := payload(1, 100) // encoded: 1 + 1 + 100 + 16 = 118 bytes
	enc := coalesce.AppendMessage(nil, msg, true)
	tests := []struct {
		mtu    int
		chunks []int
	}{
		{1, slices.Repeat([]int{1}, 118)},
		{25, []int{25, 25, 25, 25, 18}}, // the default payload MTU 32 minus 7
		{59, []int{59, 59}},
		{117, []int{117, 1}},
		{118, []int{118}},
		{1193, []int{118}},
		{0, slices.Repeat([]int{1}, 118)}, // below 1 counts as 1
	}
	for _, tc := range tests {
		for _, reliable := range []bool{false, true} {
			s := NewSender(3)
			if n := s.Queue(msg, reliable); n != len(enc) {
				t.Fatalf("Queue returned %d, want %d", n, len(enc))
			}
			pkts := sendNew(t, s, t0, tc.mtu)
			var lens []int
			var got []byte
			for i, p := range pkts {
				lens = append(lens, len(p.chunk))
				got = append(got, p.chunk...)
				if p.h.Seq != Seq(i) {
					t.Errorf("mtu %d: packet %d has seq %d", tc.mtu, i, p.h.Seq)
				}
				if p.h.Start != (i == 0) {
					t.Errorf("mtu %d: packet %d start flag %v", tc.mtu, i, p.h.Start)
				}
				if p.h.Reliable != reliable {
					t.Errorf("mtu %d: packet %d reliable %v, want %v", tc.mtu, i, p.h.Reliable, reliable)
				}
			}
			if diff := cmp.Diff(tc.chunks, lens); diff != "" {
				t.Errorf("mtu %d: chunk lengths (-want +got):\n%s", tc.mtu, diff)
			}
			if !bytes.Equal(got, coalesce.AppendMessage(nil, msg, reliable)) {
				t.Errorf("mtu %d: chunks do not add up to the encoded message", tc.mtu)
			}
			if s.QueuedBytes() != 0 || s.HasNew() {
				t.Errorf("mtu %d: %d bytes still queued", tc.mtu, s.QueuedBytes())
			}
		}
	}
}

// TestMTUChangeAppliesToLaterPackets checks that chunks are cut lazily: a
// new message MTU applies to the packets sent after the change, even within
// a message.
func TestMTUChangeAppliesToLaterPackets(t *testing.T) {
	s := NewSender(0)
	s.Queue(payload(2, 100), false) // 118 bytes
	var lens []int
	for i, mtu := range []int{25, 25, 50, 1000} {
		b, sent := s.AppendNew(nil, t0, mtu)
		if len(b) != HeaderLen+sent.Bytes {
			t.Fatalf("packet %d: %d bytes for a %d-byte chunk", i, len(b), sent.Bytes)
		}
		lens = append(lens, sent.Bytes)
	}
	if diff := cmp.Diff([]int{25, 25, 50, 18}, lens); diff != "" {
		t.Errorf("chunk lengths (-want +got):\n%s", diff)
	}
	if s.HasNew() {
		t.Error("HasNew after the whole message was sent")
	}
	if b, sent := s.AppendNew([]byte{9}, t0, 10); !bytes.Equal(b, []byte{9}) || sent != (Sent{}) {
		t.Errorf("AppendNew with nothing queued = %x, %+v", b, sent)
	}
}

// TestReliableSequenceNumber checks D7: R starts at 0, advances before each
// reliable packet, which carries the new value; unreliable packets carry
// the current value.
func TestReliableSequenceNumber(t *testing.T) {
	s := NewSender(0)
	s.Queue(payload(1, 5), false) // 1 packet at MTU 20 (12 bytes)
	s.Queue(payload(2, 20), true) // 38 bytes: 2 packets
	s.Queue(payload(3, 5), false)
	s.Queue(payload(4, 20), false) // 2 packets
	s.Queue(payload(5, 0), true)   // 2 bytes: 1 packet
	var got []Header
	for _, p := range sendNew(t, s, t0, 20) {
		got = append(got, p.h)
	}
	want := []Header{
		{Start: true, Seq: 0, Rel: 0},
		{Reliable: true, Start: true, Seq: 1, Rel: 1},
		{Reliable: true, Seq: 2, Rel: 2},
		{Start: true, Seq: 3, Rel: 2},
		{Start: true, Seq: 4, Rel: 2},
		{Seq: 5, Rel: 2},
		{Reliable: true, Start: true, Seq: 6, Rel: 3},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("headers (-want +got):\n%s", diff)
	}
}

// TestResendSchedule checks D14: an unacked reliable packet is resent
// RTT*fib(n+2) after its previous send, n the resends so far, so 2, 3, 5,
// 8, 13 ... RTTs, capped at the maximum interval; each resend repeats the
// first send byte for byte.
func TestResendSchedule(t *testing.T) {
	const rtt = 100 * ms
	const maxI = 4 * time.Second
	s := NewSender(1)
	s.Queue(payload(7, 10), true)
	first, _ := s.AppendNew(nil, t0, 100)
	wantRTTs := []int{2, 3, 5, 8, 13, 21, 34, 40, 40, 40} // 55 RTTs = 5.5 s > 4 s cap
	now := t0
	for i, n := range wantRTTs {
		due := s.NextResend(rtt, maxI)
		if want := now.Add(time.Duration(n) * rtt); due != want {
			t.Fatalf("resend %d: due at +%v, want +%v", i, due.Sub(now), want.Sub(now))
		}
		if b, _, ok := s.AppendResend(nil, due-1, rtt, maxI); ok || len(b) != 0 {
			t.Fatalf("resend %d: sent 1 ns early", i)
		}
		b, _, ok := s.AppendResend(nil, due, rtt, maxI)
		if !ok {
			t.Fatalf("resend %d: not sent when due", i)
		}
		if !bytes.Equal(b, first) {
			t.Fatalf("resend %d: %x, want the first send %x", i, b, first)
		}
		now = due
	}
	if got := s.Resends(); got != uint64(len(wantRTTs)) {
		t.Errorf("Resends() = %d, want %d", got, len(wantRTTs))
	}
	if got := s.OldestUnacked(); got != t0 {
		t.Errorf("OldestUnacked() = %v, want the first send %v", got, t0)
	}
}

func TestResendInterval(t *testing.T) {
	tests := []struct {
		n    int
		rtt  time.Duration
		maxI time.Duration
		want time.Duration
	}{
		{0, ms, 0, 2 * ms},
		{1, ms, 0, 3 * ms},
		{2, ms, 0, 5 * ms},
		{3, ms, 0, 8 * ms},
		{4, ms, 0, 13 * ms},
		{4, ms, 10 * ms, 10 * ms},
		{0, 0, 0, 2},     // rtt below 1 ns counts as 1 ns
		{1000, ms, 0, 0}, // saturates (checked below)
		{90, time.Hour, 5 * time.Second, 5 * time.Second},
	}
	for _, tc := range tests {
		got := ResendInterval(tc.n, tc.rtt, tc.maxI)
		if tc.want == 0 {
			if got <= time.Duration(1<<62) {
				t.Errorf("ResendInterval(%d, %v, 0) = %v, want saturation", tc.n, tc.rtt, got)
			}
			continue
		}
		if got != tc.want {
			t.Errorf("ResendInterval(%d, %v, %v) = %v, want %v", tc.n, tc.rtt, tc.maxI, got, tc.want)
		}
	}
}

// TestResendOrderAndRTTChange checks that the earliest due packet goes
// first, with each packet's own count, and that a new RTT applies at once.
func TestResendOrderAndRTTChange(t *testing.T) {
	s := NewSender(0)
	for i := range 3 {
		s.Queue(payload(i, 3), true)
	}
	b0, _ := s.AppendNew(nil, t0, 100)
	b1, _ := s.AppendNew(nil, t0.Add(10*ms), 100)
	// Packet 0 resent once at +200ms: next due +500ms. Packet 1 due +210ms.
	if _, _, ok := s.AppendResend(nil, t0.Add(200*ms), 100*ms, 0); !ok {
		t.Fatal("packet 0 not resent at +200ms")
	}
	b2, _ := s.AppendNew(nil, t0.Add(200*ms), 100)
	if due := s.NextResend(100*ms, 0); due != t0.Add(210*ms) {
		t.Errorf("next due %v, want +210ms", due.Sub(t0))
	}
	got, _, _ := s.AppendResend(nil, t0.Add(300*ms), 100*ms, 0)
	if !bytes.Equal(got, b1) {
		t.Errorf("second resend is not packet 1")
	}
	// Now: packet 0 due 200+300=500, packet 1 due 300+300=600, packet 2 due
	// 200+200=400. With RTT 10 ms: 0 at 230, 1 at 330, 2 at 220.
	if due := s.NextResend(10*ms, 0); due != t0.Add(220*ms) {
		t.Errorf("with RTT 10ms, next due %v, want +220ms", due.Sub(t0))
	}
	var order [][]byte
	for {
		b, _, ok := s.AppendResend(nil, t0.Add(400*ms), 100*ms, 0)
		if !ok {
			break
		}
		order = append(order, b)
	}
	if len(order) != 1 || !bytes.Equal(order[0], b2) {
		t.Errorf("at +400ms with RTT 100ms only packet 2 is due, got %d packets", len(order))
	}
	_ = b0
}

// TestHandleAck checks ack handling (D13): an ack frees its packet once;
// acks of unknown, unreliable or already acked packets are ignored.
func TestHandleAck(t *testing.T) {
	s := NewSender(0)
	s.Queue(payload(1, 40), true) // 58 bytes: packets 0,1,2 at MTU 25 (25,25,8)
	s.Queue(payload(2, 3), false) // packet 3
	s.Queue(payload(3, 10), true) // 22 bytes: packet 4
	sendNew(t, s, t0, 25)
	if p, b := s.InFlight(); p != 4 || b != 25+25+8+22 {
		t.Fatalf("InFlight() = %d, %d; want 4, 80", p, b)
	}
	steps := []struct {
		seq   Seq
		bytes int
		ok    bool
	}{
		{1, 25, true},
		{1, 0, false},  // duplicate
		{3, 0, false},  // unreliable
		{5, 0, false},  // never sent
		{-1, 0, false}, // before everything
		{MaxSeq, 0, false},
		{0, 25, true},
		{4, 22, true},
		{2, 8, true},
	}
	for i, st := range steps {
		a, ok := s.HandleAck(st.seq)
		n := a.Bytes
		if n != st.bytes || ok != st.ok {
			t.Errorf("step %d: HandleAck(%d) = %d, %v; want %d, %v", i, st.seq, n, ok, st.bytes, st.ok)
		}
		if err := checkSeqEntries(s); err != "" {
			t.Errorf("step %d: HandleAck(%d): %s", i, st.seq, err)
		}
	}
	if p, b := s.InFlight(); p != 0 || b != 0 || !s.Idle() || s.OldestUnacked() != 0 {
		t.Errorf("after all acks: InFlight %d, %d, Idle %v, OldestUnacked %v", p, b, s.Idle(), s.OldestUnacked())
	}
	if due := s.NextResend(ms, 0); due != 0 {
		t.Errorf("NextResend with nothing in flight = %v", due)
	}
}

// TestOldestUnacked checks the input of "peer is not acknowledging" (D14).
func TestOldestUnacked(t *testing.T) {
	s := NewSender(0)
	for i := range 3 {
		s.Queue(payload(i, 1), true)
	}
	for i := range 3 {
		s.AppendNew(nil, t0.Add(time.Duration(i)*time.Second), 100)
	}
	for i, want := range []clock.Time{t0.Add(time.Second), t0.Add(time.Second), 0} {
		s.HandleAck([]Seq{0, 2, 1}[i])
		if got := s.OldestUnacked(); got != want {
			t.Errorf("after ack %d: OldestUnacked = %v, want %v", i, got, want)
		}
	}
}

// TestBufferRecycling checks that a message's buffer returns to the free
// list once its last chunk is acked (reliable) or sent (unreliable), and
// not before.
func TestBufferRecycling(t *testing.T) {
	s := NewSender(0)
	s.Queue(payload(1, 100), true) // 118 bytes: class 128
	pkts := sendNew(t, s, t0, 50)  // 3 packets
	if s.bufs.Retained != 0 {
		t.Fatal("buffer recycled while its chunks are in flight")
	}
	s.HandleAck(pkts[0].h.Seq)
	s.HandleAck(pkts[2].h.Seq)
	if s.bufs.Retained != 0 {
		t.Fatal("buffer recycled with one chunk still in flight")
	}
	// The resend of the last in-flight chunk still reads the right bytes.
	b, _, ok := s.AppendResend(nil, t0.Add(time.Hour), ms, 0)
	if !ok || !bytes.Equal(b[HeaderLen:], pkts[1].chunk) {
		t.Fatal("resend of packet 1 wrong")
	}
	s.HandleAck(pkts[1].h.Seq)
	if s.bufs.Retained != 128 {
		t.Fatalf("retained %d bytes after the last ack, want 128", s.bufs.Retained)
	}
	s.Queue(payload(2, 80), false) // 98 bytes: class 128
	if s.bufs.Retained != 0 {
		t.Fatal("the next message did not reuse the buffer")
	}
	s.AppendNew(nil, t0, 5)
	if s.bufs.Retained != 0 {
		t.Fatal("unreliable buffer recycled before its last chunk was sent")
	}
	sendNew(t, s, t0, 5)
	if s.bufs.Retained != 128 {
		t.Fatalf("unreliable buffer not recycled once sent: retained %d", s.bufs.Retained)
	}
}

// TestSenderSteadyStateNoAllocs checks that queueing, sending and acking
// 64-byte messages allocates nothing once the free lists are warm.
func TestSenderSteadyStateNoAllocs(t *testing.T) {
	for _, reliable := range []bool{false, true} {
		s := NewSender(0)
		msg := payload(1, 64)
		buf := make([]byte, 0, 256)
		now := t0
		round := func() {
			for range 8 {
				s.Queue(msg, reliable)
			}
			var seqs [8]Seq
			for i := range 8 {
				var sent Sent
				buf, sent = s.AppendNew(buf[:0], now, 1193)
				seqs[i] = sent.Seq
			}
			if reliable {
				for _, q := range seqs {
					if _, ok := s.HandleAck(q); !ok {
						t.Fatal("ack not taken")
					}
				}
			}
			now = now.Add(ms)
		}
		round()
		if allocs := testing.AllocsPerRun(100, round); allocs != 0 {
			t.Errorf("reliable=%v: %v allocs per round of 8 messages, want 0", reliable, allocs)
		}
	}
}

// TestResendNoAllocs checks that resending and acking at scale (a 64 KiB
// message at message MTU 25: 2,600+ packets) allocates nothing in steady
// state and never scans the packets in flight (time bounded by the test's
// speed, correctness here).
func TestResendNoAllocs(t *testing.T) {
	s := NewSender(0)
	msg := payload(3, 64<<10)
	buf := make([]byte, 0, 64)
	now := t0
	round := func() {
		s.Queue(msg, true)
		var first Seq
		n := 0
		for s.HasNew() {
			var sent Sent
			buf, sent = s.AppendNew(buf[:0], now, 25)
			if n == 0 {
				first = sent.Seq
			}
			n++
		}
		now = now.Add(time.Second)
		for range 100 {
			if buf, _, ok := s.AppendResend(buf[:0], now, 10*ms, 0); !ok || len(buf) == 0 {
				t.Fatal("no resend due")
			}
		}
		for i := n - 1; i >= 0; i-- { // acks in reverse order
			if _, ok := s.HandleAck(first.Add(i)); !ok {
				t.Fatalf("ack %d not taken", i)
			}
		}
	}
	round()
	if allocs := testing.AllocsPerRun(5, round); allocs != 0 {
		t.Errorf("%v allocs per 64 KiB round, want 0", allocs)
	}
}

func TestSenderReset(t *testing.T) {
	s := NewSender(0)
	s.Queue(payload(1, 100), true)
	s.AppendNew(nil, t0, 30)
	s.Reset()
	if !s.Idle() || s.QueuedBytes() != 0 || s.NextResend(ms, 0) != 0 {
		t.Fatal("not idle after Reset")
	}
	s.Queue(payload(2, 1), true)
	pkts := sendNew(t, s, t0, 30)
	if len(pkts) != 1 || pkts[0].h.Seq != 1 || pkts[0].h.Rel != 2 {
		t.Errorf("after Reset: %+v, want seq 1, R 2 (numbers continue)", pkts[0].h)
	}
}

// TestBufferRetention checks the sender's free buffers: a burst of
// reliable messages acked in one go keeps its buffers for the next burst
// (up to senderRetain), and what is kept shrinks to idleRetain once
// nothing is queued or in flight.
func TestBufferRetention(t *testing.T) {
	s := NewSender(1)
	const n = 2000 // 2000 messages of 1 KiB: 4 MiB of 2 KiB buffers
	for i := range n {
		s.Queue(payload(i, 1024), true)
	}
	var seqs []Seq
	for s.HasNew() {
		_, st := s.AppendNew(nil, t0, 2000)
		if st.Bytes == 0 {
			t.Fatal("AppendNew sent nothing with messages queued")
		}
		seqs = append(seqs, st.Seq)
	}
	for i, q := range seqs {
		if i == len(seqs)-1 {
			// Before the last ack: every buffer but one is free, and
			// kept up to senderRetain.
			if r, want := s.bufs.Retained, min((n-1)*2048, senderRetain); r != want {
				t.Errorf("retained %d bytes during the burst, want %d", r, want)
			}
		}
		if _, ok := s.HandleAck(q); !ok {
			t.Fatalf("ack of %d not taken", q)
		}
	}
	if r := s.bufs.Retained; r > idleRetain {
		t.Errorf("retained %d bytes once idle, want at most %d", r, idleRetain)
	}
}

// TestSenderSeqDistanceBound checks N41: a sender's sequence numbers never
// run MaxAhead (M/4) or more places past its oldest unacked reliable
// packet; new packets, unreliable ones included, wait until it is acked,
// so after M packets sequence numbers cannot alias.
func TestSenderSeqDistanceBound(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ahead int // 0: MaxAhead itself
	}{
		{"small bound", 100},
		{"M/4", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewSender(0)
			s.ahead = tc.ahead
			bound := s.maxAhead()
			s.Queue([]byte("r"), true)
			b, first := s.AppendNew(nil, t0, 100)
			if !first.Reliable || len(b) == 0 {
				t.Fatal("the reliable packet was not sent")
			}
			// One unreliable message of bound packets at message MTU 1.
			s.Queue(make([]byte, bound), false)
			sent := 1
			for s.MayAppend() {
				_, p := s.AppendNew(nil, t0, 1)
				if d := Distance(first.Seq, p.Seq); d >= bound {
					t.Fatalf("packet %d sent %d places after the oldest unacked one, bound %d", p.Seq, d, bound)
				}
				sent++
			}
			if sent != bound || !s.HasNew() {
				t.Fatalf("%d packets sent before the bound held (want %d), HasNew %v", sent, bound, s.HasNew())
			}
			if b, p := s.AppendNew(nil, t0, 1); len(b) != 0 || p != (Sent{}) {
				t.Fatalf("AppendNew sent %+v past the bound", p)
			}
			if _, ok := s.HandleAck(first.Seq); !ok {
				t.Fatal("ack refused")
			}
			if !s.MayAppend() {
				t.Fatal("still held after the ack")
			}
			if _, p := s.AppendNew(nil, t0, 1); p.Seq != first.Seq.Add(bound) {
				t.Fatalf("next packet %d, want %d", p.Seq, first.Seq.Add(bound))
			}
		})
	}
}

// TestDropExpired checks what D30 asks of a sender: unreliable messages
// queued before the cut and not yet started are dropped from the front,
// whole; a reliable message, a started one or a younger one stops it, and
// messages queued without a time never expire.
func TestDropExpired(t *testing.T) {
	t0 := clock.Epoch
	ms := time.Millisecond
	msg := []byte("twenty bytes, near x")
	enc := coalesce.EncodedLen(len(msg))
	tests := []struct {
		name      string
		queue     []bool // reliable or not, queued 1 ms apart from t0
		untimed   bool   // queued with Queue, not QueueAt
		startOne  bool   // the first message's first chunk was sent
		cut       time.Duration
		wantMsgs  int
		wantBytes int
	}{
		{"all old unreliable", []bool{false, false, false}, false, false, 10 * ms, 3, 3 * enc},
		{"younger ones stay", []bool{false, false, false}, false, false, 2 * ms, 2, 2 * enc},
		{"a reliable one stops it", []bool{false, true, false}, false, false, 10 * ms, 1, enc},
		{"a started one stays", []bool{false, false}, false, true, 10 * ms, 0, 0},
		{"untimed never expire", []bool{false, false}, true, false, time.Hour, 0, 0},
	}
	for _, tt := range tests {
		s := NewSender(1)
		for i, r := range tt.queue {
			if tt.untimed {
				s.Queue(msg, r)
			} else {
				s.QueueAt(msg, r, t0.Add(time.Duration(i)*ms))
			}
		}
		if tt.startOne {
			s.AppendNew(nil, t0, 5) // the first 5 bytes of the first message
		}
		before := s.QueuedBytes()
		n, b := s.DropExpired(t0.Add(tt.cut))
		if n != tt.wantMsgs || b != tt.wantBytes || s.QueuedBytes() != before-b {
			t.Errorf("%s: dropped %d messages, %d bytes, queued %d -> %d; want %d, %d", tt.name, n, b, before, s.QueuedBytes(), tt.wantMsgs, tt.wantBytes)
		}
	}
}

// TestAckedAndResent checks what a sender tells of the packets it frees and
// resends (D30): their send times, resends and R, and the oldest in flight.
func TestAckedAndResent(t *testing.T) {
	t0 := clock.Epoch
	ms := time.Millisecond
	s := NewSender(1)
	for range 3 {
		s.QueueAt(payload(1, 10), true, t0)
	}
	var seqs []Seq
	for range 3 {
		_, sent := s.AppendNew(nil, t0, 1000)
		seqs = append(seqs, sent.Seq)
	}
	if rel, last, n, ok := s.Oldest(); !ok || rel != 1 || last != t0 || n != 0 {
		t.Errorf("Oldest = %d, %v, %d, %v; want R 1 sent at t0, never resent", rel, last, n, ok)
	}
	_, rs, ok := s.AppendResend(nil, t0.Add(time.Second), 100*ms, 0)
	if !ok || rs.Prev != t0 || rs.N != 1 || rs.Bytes == 0 {
		t.Errorf("resend %+v, %v; want the first packet's first resend, previous send at t0", rs, ok)
	}
	a, ok := s.HandleAck(seqs[2])
	if !ok || a.First != t0 || a.Last != t0 || a.Resends != 0 || a.Rel != 3 {
		t.Errorf("ack of the third packet %+v; want sent once at t0, R 3", a)
	}
	a, ok = s.HandleAck(seqs[0])
	if !ok || a.Last != t0.Add(time.Second) || a.Resends != 1 || a.Rel != 1 {
		t.Errorf("ack of the resent first packet %+v; want its resend's time and count", a)
	}
	if rel, _, _, ok := s.Oldest(); !ok || rel != 2 {
		t.Errorf("oldest in flight R %d, %v; want 2", rel, ok)
	}
}

// TestBookkeepingAcrossBursts: the in-flight bookkeeping of a burst is
// kept when the sender goes idle, whatever its size, until Shrink, so that
// the next burst like it allocates none of it again (at 10,000 packets in
// flight, 66 bytes of garbage a message when each idle let it go); Shrink
// lets it go, or moves the packets in flight into arrays their size, and
// Trim lets every queue go (N95).
func TestBookkeepingAcrossBursts(t *testing.T) {
	s := NewSender(1)
	msg := payload(0, 16)
	burst := func(n int) {
		t.Helper()
		var seqs []Seq
		for range n {
			s.Queue(msg, true)
		}
		for s.HasNew() {
			_, st := s.AppendNew(nil, t0, 100)
			seqs = append(seqs, st.Seq)
		}
		for _, q := range seqs {
			if _, ok := s.HandleAck(q); !ok {
				t.Fatalf("ack of %d not taken", q)
			}
		}
	}
	// largest is the largest array among the bookkeeping's.
	largest := func() int {
		n := max(cap(s.recs), s.bySeq.Cap())
		for b := range s.buckets {
			n = max(n, s.buckets[b].Cap())
		}
		return n
	}
	const big = 3 * idleKeepSlots
	burst(big) // grows the arrays
	if c := cap(s.recs); c < big {
		t.Fatalf("after an idle burst of %d: %d records kept, want them all", big, c)
	}
	if !s.Grown() {
		t.Errorf("after a burst of %d: Grown false", big)
	}
	recs, seqs := &s.recs[0], s.bySeq.Cap()
	burst(10) // a small burst between two large ones keeps them too
	burst(big)
	if &s.recs[0] != recs || s.bySeq.Cap() != seqs {
		t.Errorf("a burst like the one before last grew its records or queue again")
	}

	// Shrink with packets in flight moves them into arrays their size.
	burst(big)
	var inFlight []Seq
	for range 3 {
		s.Queue(msg, true)
		_, st := s.AppendNew(nil, t0, 100)
		inFlight = append(inFlight, st.Seq)
	}
	s.Shrink()
	if n := largest(); n > 16 || s.Grown() {
		t.Errorf("Shrink with 3 packets in flight: an array of %d kept, Grown %v; want at most 16, false", n, s.Grown())
	}
	if p, _ := s.InFlight(); p != 3 {
		t.Errorf("after Shrink: %d packets in flight, want 3", p)
	}
	for _, q := range inFlight {
		if _, ok := s.HandleAck(q); !ok {
			t.Fatalf("after Shrink: ack of %d not taken", q)
		}
	}
	// An idle one lets go at once.
	burst(big)
	if !s.Grown() {
		t.Fatal("Grown false after a burst")
	}
	s.Shrink()
	if n := largest(); n > idleKeepSlots || s.Grown() {
		t.Errorf("after Shrink: an array of %d kept, Grown %v; want at most %d, false", n, s.Grown(), idleKeepSlots)
	}
	burst(10)
	if n := largest(); n > idleKeepSlots || s.Grown() {
		t.Errorf("a burst of 10 after Shrink: an array of %d kept, Grown %v; want at most %d, false", n, s.Grown(), idleKeepSlots)
	}

	// Trim lets every queue go, whatever the records kept.
	burst(big)
	s.Trim()
	if n := largest(); n > spareSlots {
		t.Errorf("after Trim: an array of %d kept, want at most %d", n, spareSlots)
	}
}

// TestTrackSetsEveryField guards track, which sets every field of a
// record in place rather than through a composite literal (N101), but the
// ticket, which drop changes when it frees the record: a field added to
// record must be set there too, and where AppendRun writes track out, and
// then counted here.
func TestTrackSetsEveryField(t *testing.T) {
	if n := reflect.TypeFor[record]().NumField(); n != 13 {
		t.Fatalf("record has %d fields; track sets 12 and drop the ticket: set the new ones there, then update this count", n)
	}
}

// TestResendIntervalSaturates checks ResendInterval's overflow test, a full
// product rather than a division, against the division at the edge: the
// largest RTT whose product with the packet's Fibonacci number fits, and
// the next, for every number of resends, and at random.
func TestResendIntervalSaturates(t *testing.T) {
	ref := func(n int, rtt, maxI time.Duration) time.Duration {
		rtt = max(rtt, 1)
		f := fib[min(max(n, 0)+2, len(fib)-1)]
		d := time.Duration(math.MaxInt64)
		if f <= int64(math.MaxInt64/rtt) {
			d = rtt * time.Duration(f)
		}
		if maxI > 0 && d > maxI {
			d = maxI
		}
		return d
	}
	for n := range len(fib) + 2 {
		f := fib[min(n+2, len(fib)-1)]
		edge := time.Duration(math.MaxInt64 / f)
		for _, rtt := range []time.Duration{edge - 1, edge, edge + 1, math.MaxInt64, 1} {
			if got, want := ResendInterval(n, rtt, 0), ref(n, rtt, 0); got != want {
				t.Fatalf("ResendInterval(%d, %d, 0) = %d, want %d", n, rtt, got, want)
			}
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(-2, 200).Draw(t, "n")
		rtt := time.Duration(rapid.Int64().Draw(t, "rtt"))
		maxI := time.Duration(rapid.Int64().Draw(t, "maxI"))
		if got, want := ResendInterval(n, rtt, maxI), ref(n, rtt, maxI); got != want {
			t.Fatalf("ResendInterval(%d, %d, %d) = %d, want %d", n, rtt, maxI, got, want)
		}
	})
}

// N111: the buffers free message structs keep are counted as the pool's
// own free buffers are: over any sequence of sends, acks, drops and
// trims, what the pool counts as retained stays within its limit and
// covers the kept buffers, and letting go of everything free leaves
// nothing counted.
func TestKeptBuffersCounted(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := NewSender(1)
		s.bufs.Limit = rapid.IntRange(0, 4096).Draw(t, "limit")
		now := t0
		var inFlight []Seq
		check := func(after string) {
			kept := 0
			for _, m := range s.msgs {
				kept += cap(m.buf)
			}
			if r := s.bufs.Retained; r > s.bufs.Limit || r < kept {
				t.Fatalf("after %s: %d bytes retained, limit %d, %d kept by free messages", after, r, s.bufs.Limit, kept)
			}
		}
		for range rapid.IntRange(1, 60).Draw(t, "steps") {
			now = now.Add(ms)
			switch rapid.IntRange(0, 4).Draw(t, "op") {
			case 0:
				s.QueueAt(payload(0, rapid.IntRange(0, 600).Draw(t, "size")), rapid.Bool().Draw(t, "reliable"), now)
			case 1:
				for _, p := range sendNew(t, s, now, rapid.IntRange(1, 700).Draw(t, "mtu")) {
					if p.h.Reliable {
						inFlight = append(inFlight, p.h.Seq)
					}
				}
			case 2:
				if len(inFlight) > 0 {
					i := rapid.IntRange(0, len(inFlight)-1).Draw(t, "ack")
					s.HandleAck(inFlight[i])
					inFlight = append(inFlight[:i], inFlight[i+1:]...)
				}
			case 3:
				s.DropExpired(now)
			case 4:
				s.Trim()
			}
			check("a step")
		}
		s.trimBufs(0)
		if s.bufs.Retained != 0 {
			t.Fatalf("%d bytes counted as retained with no free buffer left", s.bufs.Retained)
		}
	})
}
