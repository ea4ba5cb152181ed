package channel

import (
	"testing"
)

// BenchmarkRoundTrip sends one message per iteration through a Sender and a
// Receiver: queue, cut, header encode and parse, receive, reassemble,
// verify, deliver and, for reliable messages, ack. Compare with
// coalesce.BenchmarkEncodeVerify, the message format alone.
func BenchmarkRoundTrip(b *testing.B) {
	for _, bc := range []struct {
		name     string
		n, mtu   int
		reliable bool
	}{
		{"unreliable-64B", 64, 1193, false},
		{"reliable-64B", 64, 1193, true},
		{"reliable-64KiB-mtu1193", 64 << 10, 1193, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s, r := NewSender(0), NewReceiver(ReceiverConfig{})
			msg := payload(1, bc.n)
			buf := make([]byte, 0, 2048)
			now := t0
			b.SetBytes(int64(bc.n))
			b.ReportAllocs()
			for b.Loop() {
				s.Queue(msg, bc.reliable)
				for s.HasNew() {
					var sent Sent
					buf, sent = s.AppendNew(buf[:0], now, bc.mtu)
					h, err := ParseHeader(buf)
					if err != nil {
						b.Fatal(err)
					}
					if res := r.Handle(now, h, buf[HeaderLen:]); res != Accepted {
						b.Fatal(res)
					}
					if sent.Reliable {
						if _, ok := s.HandleAck(sent.Seq); !ok {
							b.Fatal("ack")
						}
					}
				}
				m, ok := r.Poll(now)
				if !ok || len(m.Data) != bc.n {
					b.Fatal("not delivered")
				}
				now++
			}
		})
	}
}

// BenchmarkResend measures finding and sending the next due resend with
// 2,700 packets in flight (a 64 KiB message at message MTU 25).
func BenchmarkResend(b *testing.B) {
	s := NewSender(0)
	s.Queue(payload(1, 64<<10), true)
	now := t0
	for s.HasNew() {
		s.AppendNew(nil, now, 25)
	}
	buf := make([]byte, 0, 64)
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(ms)
		s.NextResend(ms, 0)
		buf, _ = s.AppendResend(buf[:0], now, ms, 0)
	}
}
