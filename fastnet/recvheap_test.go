package fastnet

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/channel"
	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/coalesce"
)

// checkRecvHeap checks what N137's heap must hold: every channel whose
// receiver has a deadline is in it, at a deadline no later than the
// receiver's, and the heap is in order, so that its top is no later
// than any receiver's deadline.
func checkRecvHeap(t *testing.T, c *conn, step int) {
	t.Helper()
	for i, cs := range c.recvHeap {
		if int(cs.rIdx) != i || !cs.inRecv {
			t.Fatalf("step %d: heap place %d holds a channel at %d (inRecv %v)", step, i, cs.rIdx, cs.inRecv)
		}
		if i > 0 && c.recvHeap[(i-1)/2].rdl > cs.rdl {
			t.Fatalf("step %d: heap out of order at %d", step, i)
		}
	}
	for id, cs := range c.chans {
		if cs.rcv == nil {
			continue
		}
		d := cs.rcv.NextDeadline()
		if d != 0 && (!cs.inRecv || cs.rdl > d) {
			t.Fatalf("step %d: channel %d's deadline %v not in the heap (inRecv %v, at %v)", step, id, d, cs.inRecv, cs.rdl)
		}
	}
}

// TestRecvHeap drives a connection with unreliable messages left
// unfinished, finished, and expired on many channels, at random, and
// checks the heap of receiver deadlines after each input and timer
// (N137): the connection's next deadline is then never later than a
// receiver's, and every message whose time ran out is dropped.
func TestRecvHeap(t *testing.T) {
	for seed := range uint64(5) {
		tc := newTestEndpoint(t, Config{Role: Server})
		h, _ := tc.connectServer()
		c := tc.ep.conns[h]
		rng := rand.New(rand.NewPCG(seed, 137))
		enc := coalesce.AppendMessage(nil, make([]byte, 300), false)
		seqs := map[int16]channel.Seq{}
		started := 0
		for step := range 3000 {
			ch := int16(rng.IntN(200))
			s := seqs[ch]
			switch rng.IntN(4) {
			case 0, 1: // a message's first part, never finished
				tc.recv(ch, dataPacket(false, true, s, 0, enc[:100]))
				seqs[ch] = s.Next()
				started++
			case 2: // a message whole
				tc.recv(ch, dataPacket(false, true, s, 0, enc))
				seqs[ch] = s.Next()
			case 3: // time passes, deadlines fire
				tc.advance(time.Duration(rng.IntN(30)) * time.Millisecond)
			}
			tc.evs, tc.sent = tc.evs[:0], tc.sent[:0]
			checkRecvHeap(t, c, step)
		}
		tc.advance(time.Second)
		checkRecvHeap(t, c, -1)
		if len(c.recvHeap) != 0 {
			t.Errorf("seed %d: %d receivers still timed after a second", seed, len(c.recvHeap))
		}
		st, _ := tc.ep.Stats(h)
		if st.Dropped[DropExpired] == 0 || started == 0 {
			t.Errorf("seed %d: %d messages expired of %d left unfinished", seed, st.Dropped[DropExpired], started)
		}
	}
}

// A receiver's deadline moves earlier when the head message completes
// and the next one's parts arrived before it: the heap must move the
// channel up (recvTimed via deliver), else the connection's next
// deadline is late and the expired message dropped late (D11, N137).
func TestRecvHeapEarlier(t *testing.T) {
	tc := newTestEndpoint(t, Config{Role: Server})
	h, _ := tc.connectServer()
	c := tc.ep.conns[h]
	enc := coalesce.AppendMessage(nil, make([]byte, 300), false)
	part1, part2 := enc[:150], enc[150:]
	ms := time.Millisecond
	t0 := tc.now
	at := func(d time.Duration) { tc.now = t0.Add(d) }
	dl := func(ch int16) clock.Time { return c.chans[ch].rcv.NextDeadline() }
	// ch 1: B's first part (seq 2) at t0, then A's first part (seq 0) at
	// t0+10ms: the head is A, due at t0+35ms.
	tc.recv(1, dataPacket(false, true, 2, 0, part1))
	at(2 * ms)
	for ch := int16(2); ch < 8; ch++ { // others, due from t0+27ms on
		tc.recv(ch, dataPacket(false, true, 0, 0, part1))
		tc.now = tc.now.Add(ms)
	}
	at(10 * ms)
	tc.recv(1, dataPacket(false, true, 0, 0, part1))
	t.Logf("ch1 deadline after A1: %v (t0+%v)", dl(1), dl(1).Sub(t0))
	at(12 * ms)
	// A completes: the head is now B, due at t0+25ms.
	tc.recv(1, dataPacket(false, false, 1, 0, part2))
	t.Logf("ch1 deadline after A2: t0+%v; heap top t0+%v", dl(1).Sub(t0), c.recvHeap[0].rdl.Sub(t0))
	checkRecvHeap(t, c, 0)
	next, _ := tc.ep.NextDeadline()
	if want := t0.Add(25 * ms); next > want {
		t.Errorf("next deadline t0+%v, want t0+%v at the latest", next.Sub(t0), want.Sub(t0))
	}
	before, _ := tc.ep.Stats(h)
	tc.evs, tc.sent = tc.evs[:0], tc.sent[:0]
	tc.advance(t0.Add(26 * ms).Sub(tc.now))
	st, _ := tc.ep.Stats(h)
	if st.Dropped[DropExpired] == before.Dropped[DropExpired] {
		t.Errorf("B not expired by t0+26ms (D11)")
	}
}

// As above, with the channel already in the heap when its deadline moves
// later and then earlier: deliver must time it again although it is in
// the heap.
func TestRecvHeapEarlierInHeap(t *testing.T) {
	tc := newTestEndpoint(t, Config{Role: Server})
	h, _ := tc.connectServer()
	c := tc.ep.conns[h]
	enc := coalesce.AppendMessage(nil, make([]byte, 300), false)
	part1, part2 := enc[:150], enc[150:]
	ms := time.Millisecond
	t0 := tc.now
	at := func(d time.Duration) { tc.now = t0.Add(d) }
	tc.recv(1, dataPacket(false, true, 0, 0, part1)) // C, never finished: due t0+25ms
	at(3 * ms)
	tc.recv(1, dataPacket(false, true, 3, 0, part1)) // B's first part
	at(10 * ms)
	tc.recv(1, dataPacket(false, true, 1, 0, part1)) // A's first part
	tc.advance(t0.Add(25 * ms).Sub(tc.now))          // C expires; A due at t0+35ms
	at(26 * ms)
	tc.recv(1, dataPacket(false, false, 2, 0, part2)) // A whole: B due at t0+28ms
	t.Logf("ch1 deadline t0+%v, kept at t0+%v", c.chans[1].rcv.NextDeadline().Sub(t0), c.chans[1].rdl.Sub(t0))
	checkRecvHeap(t, c, 0)
	if next, _ := tc.ep.NextDeadline(); next > t0.Add(28*ms) {
		t.Errorf("next deadline t0+%v, want t0+28ms at the latest (D11)", next.Sub(t0))
	}
}

// BenchmarkUnfinishedMessages is a datagram's cost to a connection whose
// peer keeps k unreliable messages unfinished, each on a channel of its
// own (N137): with the heap, the same with 500 and with 8,000.
func BenchmarkUnfinishedMessages(b *testing.B) {
	for _, k := range []int{500, 8000} {
		b.Run(itoa(k), func(b *testing.B) {
			tc := newTestEndpoint(b, Config{Role: Server})
			tc.connectServer()
			enc := coalesce.AppendMessage(nil, make([]byte, 200), false)[:20]
			pkts := make([][]byte, k)
			for i := range pkts {
				pkts[i] = dataPacket(false, true, 0, 0, enc)
			}
			seqs := make([]channel.Seq, k)
			i := 0
			b.ResetTimer()
			for range b.N {
				ch := i % k
				p := pkts[ch]
				channel.Header{Start: true, Seq: seqs[ch]}.Append(p[:0])
				seqs[ch] = seqs[ch].Next()
				tc.recv(int16(ch), p)
				tc.ep.NextDeadline()
				tc.evs, tc.sent = tc.evs[:0], tc.sent[:0]
				// Each message lives 25 ms (the coalescing interval):
				// k of them alive at once at k datagrams per 25 ms.
				tc.now = tc.now.Add(25 * time.Millisecond / time.Duration(k))
				if d, ok := tc.ep.NextDeadline(); ok && d <= tc.now {
					tc.ep.HandleTimeout(tc.now)
				}
				i++
			}
		})
	}
}

func itoa(n int) string {
	if n >= 1000 {
		return itoa(n/1000) + "k"
	}
	b := []byte{}
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}
