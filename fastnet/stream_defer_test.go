package fastnet

import (
	"bytes"
	"testing"

	"github.com/fastnet-engine/fastnet/coalesce"
)

// Which messages a Stream connection's queue defers, and which a packet's
// batch fills (N125), case by case: a message queued alone is not
// deferred; one of up to streamMaxDeferred bytes queued behind others is,
// one longer or of at most ShortChecksumMax bytes is not; a batch takes
// at most streamSumBatch messages, and stops at the first message not
// deferred, leaving those behind it deferred. Every packet is still what
// coalesce.AppendMessage encodes.
func TestStreamQueueDeferral(t *testing.T) {
	if !coalesce.Batched() {
		t.Skip("no checksum is deferred where digests are not computed together")
	}
	var s streamQueue
	var want [][]byte
	push := func(n int) {
		t.Helper()
		msg := bytes.Repeat([]byte{byte(len(want))}, n)
		s.push(int16(len(want)%3), msg, true, 0)
		want = append(want, coalesce.AppendMessage(appendPacketHeader(nil, int16(len(want)%3)), msg, true))
	}
	next := 0
	pop := func() {
		t.Helper()
		b, _, ok := s.pop(nil)
		if !ok || !bytes.Equal(b, want[next]) {
			t.Fatalf("packet %d: %x, want %x", next, b, want[next])
		}
		next++
	}
	deferred := func(what string, want ...bool) {
		t.Helper()
		if s.q.Len() != len(want) {
			t.Fatalf("%s: %d queued, want %d", what, s.q.Len(), len(want))
		}
		for i, w := range want {
			if got := s.q.At(i).deferred; got != w {
				t.Fatalf("%s: message %d of the queue deferred %v, want %v", what, i, got, w)
			}
		}
	}
	rep := func(v bool, n int) []bool {
		d := make([]bool, n)
		for i := range d {
			d[i] = v
		}
		return d
	}

	push(64)
	deferred("alone", false)
	push(streamMaxDeferred)
	push(streamMaxDeferred + 1)
	push(coalesce.ShortChecksumMax)
	push(coalesce.ShortChecksumMax + 1)
	deferred("behind others", false, true, false, false, true)
	pop()
	deferred("a front not deferred", true, false, false, true)
	pop()
	deferred("a batch stops at a message not deferred", false, false, true)
	pop()
	pop()
	pop()

	// A batch takes streamSumBatch messages at most.
	push(64)
	for range streamSumBatch + 8 {
		push(64)
	}
	pop()
	deferred("before the batch", rep(true, streamSumBatch+8)...)
	pop()
	deferred("after the batch", append(rep(false, streamSumBatch-1), rep(true, 8)...)...)
	for !s.empty() {
		pop()
	}
}
