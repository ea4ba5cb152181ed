package channel

import "testing"

// An ack that frees the last packet of a message sent whole returns the
// message to the free lists as release does (drop writes release's common
// case out): the same as when cut releases an unreliable message sent
// whole, with the list of free structs empty, one short of full, or full,
// and the pool's bytes below, at or above its limit once the buffer is
// counted.
func TestDropReleasesAsRelease(t *testing.T) {
	msg := payload(1, 40)
	for _, free := range []int{0, 1, maxFreeMsgs - 1, maxFreeMsgs} {
		for _, over := range []int{-1, 0, 1} {
			var ss [2]*Sender // the message reliable and acked, and unreliable
			for i := range ss {
				s := NewSender(1)
				s.Queue(msg, i == 0)
				s.Queue(msg, false) // still queued: neither goes idle
				for range free {
					s.msgs = append(s.msgs, new(message))
				}
				s.bufs.Retained = s.bufs.Limit - cap((*s.pending.At(0)).buf) + over
				ss[i] = s
			}
			a, b := ss[0], ss[1]
			a.AppendNew(nil, t0, 1000)
			if _, ok := a.HandleAck(0); !ok {
				t.Fatalf("free %d, over %d: the ack freed nothing", free, over)
			}
			b.AppendNew(nil, t0, 1000)

			if len(a.msgs) != len(b.msgs) || a.bufs.Retained != b.bufs.Retained {
				t.Fatalf("free %d, over %d: %d free structs, %d bytes retained; release: %d, %d",
					free, over, len(a.msgs), a.bufs.Retained, len(b.msgs), b.bufs.Retained)
			}
			if n := len(a.msgs); n > 0 {
				if ab, bb := a.msgs[n-1].buf, b.msgs[n-1].buf; (ab == nil) != (bb == nil) || cap(ab) != cap(bb) {
					t.Fatalf("free %d, over %d: the last free struct keeps a buffer of %d bytes (nil %v); release: %d (nil %v)",
						free, over, cap(ab), ab == nil, cap(bb), bb == nil)
				}
			}
		}
	}
}
