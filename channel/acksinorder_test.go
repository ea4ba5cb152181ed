package channel

import (
	"math/rand"
	"reflect"
	"testing"
)

// TestHandleAcksInOrder plays random ack payloads, mostly in order, with
// duplicates, gaps, pairs of other channels and malformed pairs, to two
// senders that sent the same packets: one takes each ack with HandleAck,
// the other each ack with HandleAck and then the row after it with
// HandleAcksInOrder. Some packets were resent before. What they free,
// summed (AckSum.Add), the number each run says it took, and their
// states must be the same after every payload.
func TestHandleAcksInOrder(t *testing.T) {
	const ch = 3
	resent := false
	for seed := int64(1); seed <= 200; seed++ {
		rng := rand.New(rand.NewSource(seed))
		a, b := NewSender(ch), NewSender(ch)
		now := t0
		for round := 0; round < 20; round++ {
			var sent []Seq
			for i := rng.Intn(40); i >= 0; i-- {
				data := payload(int(seed)*1000+round*50+i, 1+rng.Intn(60))
				reliable := rng.Intn(8) != 0
				a.Queue(data, reliable)
				b.Queue(data, reliable)
			}
			for _, p := range sendNew(t, a, now, 25) {
				if p.h.Reliable {
					sent = append(sent, p.h.Seq)
				}
			}
			sendNew(t, b, now, 25)
			now = now.Add(ms)
			// Some packets resent, once or more: their records have
			// resend entries for the acks to drop.
			for i := rng.Intn(12) - 8; i > 0; i-- {
				now = now.Add(2 * ms)
				_, _, ra := a.AppendResend(nil, now, ms, 0)
				_, _, rb := b.AppendResend(nil, now, ms, 0)
				if ra != rb {
					t.Fatalf("seed %d round %d: resent %v and %v", seed, round, ra, rb)
				}
				resent = resent || ra
			}

			// Acks for most packets sent, in order but for a few
			// moved, repeated or left out, and some other pairs.
			var acks []Ack
			for _, seq := range sent {
				switch r := rng.Intn(20); {
				case r == 0:
					continue
				case r == 1 && len(acks) > 0:
					j := rng.Intn(len(acks))
					acks = append(acks[:j], append([]Ack{{ch, seq}}, acks[j:]...)...)
				case r == 2:
					acks = append(acks, Ack{ch + 1, seq})
				case r == 3:
					acks = append(acks, Ack{ch, seq}, Ack{ch, seq})
				default:
					acks = append(acks, Ack{ch, seq})
				}
			}
			if len(acks) == 0 {
				continue
			}
			enc := AppendAcks(nil, acks)
			if rng.Intn(4) == 0 {
				// A pair Next skips: a negative channel.
				j := AckLen * rng.Intn(len(acks))
				enc = append(enc[:j:j], append([]byte{0x80, 0, 0, 0, 1}, enc[j:]...)...)
			}

			// What a frees, summed; b must free the same packets.
			var want, got AckSum
			it, err := ParseAcks(enc)
			if err != nil {
				t.Fatal(err)
			}
			for it.Next() {
				if ak := it.Ack(); ak.Channel == ch {
					if x, ok := a.HandleAck(ak.Seq); ok {
						want.Add(x)
					}
				}
			}
			it, _ = ParseAcks(enc)
			for it.Next() {
				if ak := it.Ack(); ak.Channel == ch {
					if x, ok := b.HandleAck(ak.Seq); ok {
						got.Add(x)
						before := got.Packets
						n := b.HandleAcksInOrder(&it, ch, &got)
						if got.Packets-before != n {
							t.Fatalf("seed %d round %d: HandleAcksInOrder took %d, added %d", seed, round, n, got.Packets-before)
						}
					}
				}
			}
			if got != want {
				t.Fatalf("seed %d round %d: freed\n%+v\nwant\n%+v", seed, round, got, want)
			}
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("seed %d round %d: senders differ", seed, round)
			}
			if err := checkSeqEntries(b); err != "" {
				t.Fatalf("seed %d round %d: %s", seed, round, err)
			}
		}
	}
	if !resent {
		t.Fatal("no packet was resent")
	}
}
