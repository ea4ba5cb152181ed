package channel

import (
	"math/rand"
	"testing"
	"time"
)

// TestHandleAcksInOrderSumsNewest plays runs of in-order acks of packets
// each sent at a time of its own, some resent, to two senders that sent
// the same packets, with the sum already holding what an earlier channel
// of the same ack packet freed, sent before or after them: one sender
// takes each ack with HandleAck and AckSum.Add, the other each ack with
// HandleAck and then the run after it with HandleAcksInOrder. The sums
// must be the same: Last the latest send of the packets never resent,
// First the latest first send, however the runs and the earlier channel's
// packets fall in time.
func TestHandleAcksInOrderSumsNewest(t *testing.T) {
	const ch = 3
	us := time.Microsecond
	for seed := int64(1); seed <= 100; seed++ {
		rng := rand.New(rand.NewSource(seed))
		a, b := NewSender(ch), NewSender(ch)
		now := t0
		for round := 0; round < 10; round++ {
			for i := rng.Intn(30); i >= 0; i-- {
				data := payload(int(seed)*1000+round*50+i, 1+rng.Intn(60))
				a.Queue(data, true)
				b.Queue(data, true)
			}
			var sent []Seq
			for a.HasNew() {
				_, sa := a.AppendNew(nil, now, 25)
				_, sb := b.AppendNew(nil, now, 25)
				if sa != sb {
					t.Fatalf("seed %d round %d: sent %+v and %+v", seed, round, sa, sb)
				}
				sent = append(sent, sa.Seq)
				now = now.Add(10 * us)
			}
			for i := rng.Intn(8) - 4; i > 0; i-- {
				now = now.Add(2 * ms)
				_, _, ra := a.AppendResend(nil, now, ms, 0)
				_, _, rb := b.AppendResend(nil, now, ms, 0)
				if ra != rb {
					t.Fatalf("seed %d round %d: resent %v and %v", seed, round, ra, rb)
				}
			}
			var acks []Ack
			for _, seq := range sent {
				if rng.Intn(10) != 0 {
					acks = append(acks, Ack{ch, seq})
				}
			}
			if len(acks) == 0 {
				continue
			}
			enc := AppendAcks(nil, acks)

			// An earlier channel's packet, sent up to 2 ms before now
			// or 1 ms after.
			at := now.Add(time.Duration(rng.Intn(3000)-2000) * us)
			prior := AckSum{Packets: 1, Bytes: 7, Fresh: 1, FreshBytes: 7, Last: at, First: at}
			want, got := prior, prior
			it, err := ParseAcks(enc)
			if err != nil {
				t.Fatal(err)
			}
			for it.Next() {
				if x, ok := a.HandleAck(it.Ack().Seq); ok {
					want.Add(x)
				}
			}
			it, _ = ParseAcks(enc)
			for it.Next() {
				if x, ok := b.HandleAck(it.Ack().Seq); ok {
					got.Add(x)
					b.HandleAcksInOrder(&it, ch, &got)
				}
			}
			if got != want {
				t.Fatalf("seed %d round %d: summed\n%+v\nwant\n%+v", seed, round, got, want)
			}
		}
	}
}
