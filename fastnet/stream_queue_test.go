package fastnet

import (
	"bytes"
	"math/rand"
	"testing"

	"github.com/fastnet-engine/fastnet/coalesce"
)

// A Stream connection's queue that the transport never quite drains keeps
// a place per message it holds, not per message sent.
func TestStreamQueueCompacts(t *testing.T) {
	var s streamQueue
	msg := make([]byte, 20)
	s.push(1, msg, true, 0)
	var buf []byte
	for range 100000 {
		s.push(1, msg, true, 0)
		var ok bool
		if buf, _, ok = s.pop(buf[:0]); !ok {
			t.Fatal("nothing to pop")
		}
		if s.empty() {
			t.Fatal("the queue emptied")
		}
	}
	if got := s.q.Cap(); got > 16 {
		t.Errorf("the queue grew to %d places, holding %d", got, s.q.Len())
	}
}

// A Stream connection's messages leave encoded as coalesce.AppendMessage
// encodes them, checksums included, whether their checksums were
// deferred and computed together (N125) or not: messages of every size
// around the bounds of deferral, on several channels, pushed and popped
// in random interleavings, tracked or not. (TestStreamQueueDeferral
// checks case by case which messages are deferred and what a batch
// takes.)
func TestStreamQueueChecksums(t *testing.T) {
	sizes := []int{0, 1, coalesce.ShortChecksumMax, coalesce.ShortChecksumMax + 1, 64, 1000, streamMaxDeferred, streamMaxDeferred + 1}
	rng := rand.New(rand.NewSource(1))
	var s streamQueue
	var want [][]byte // the packets, in order
	var wantIDs []MessageID
	var buf []byte
	next := 0
	pop := func() {
		t.Helper()
		b, id, ok := s.pop(buf[:0])
		if !ok {
			t.Fatal("nothing to pop")
		}
		if !bytes.Equal(b, want[next]) || id != wantIDs[next] {
			t.Fatalf("packet %d: %x (id %d), want %x (id %d)", next, b, id, want[next], wantIDs[next])
		}
		next++
		buf = b
	}
	for i := range 3000 {
		if rng.Intn(3) > 0 || s.empty() {
			msg := make([]byte, sizes[rng.Intn(len(sizes))])
			rng.Read(msg)
			ch, reliable, id := int16(rng.Intn(4)), rng.Intn(2) == 0, MessageID(0)
			if rng.Intn(5) == 0 {
				id = MessageID(i + 1)
			}
			alone := s.empty()
			s.push(ch, msg, reliable, id)
			if alone && s.q.At(0).deferred {
				t.Fatalf("message %d, queued alone, deferred", len(want))
			}
			want = append(want, coalesce.AppendMessage(appendPacketHeader(nil, ch), msg, reliable))
			wantIDs = append(wantIDs, id)
			continue
		}
		deferredFront := 0
		for j := 0; j < s.q.Len() && s.q.At(j).deferred; j++ {
			deferredFront++
		}
		pop()
		if deferredFront > 0 {
			// The batch: the first min(deferredFront, streamSumBatch)
			// were filled, the first of them popped.
			for j := 0; j < min(deferredFront, streamSumBatch)-1; j++ {
				if s.q.At(j).deferred {
					t.Fatalf("pop %d: message %d behind the front left deferred, of %d deferred at the front", next, j+1, deferredFront)
				}
			}
			if deferredFront > streamSumBatch && !s.q.At(streamSumBatch-1).deferred {
				t.Fatalf("pop %d: a batch took more than %d messages", next, streamSumBatch)
			}
		}
	}
	for !s.empty() {
		pop()
	}
	if s.bytes != 0 {
		t.Fatalf("%d bytes left counted", s.bytes)
	}
}
