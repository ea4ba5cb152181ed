package fastnet

import "testing"

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
