package channel

import (
	"testing"

	"github.com/fastnet-engine/fastnet/coalesce"
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
		buf, _, _ = s.AppendResend(buf[:0], now, ms, 0)
	}
}

// BenchmarkRingHostile measures one datagram of a peer that parks a packet
// near the far edge of the receive window (the first half of an unreliable
// message) and then sends two-packet messages at the near edge, against
// the same messages without the parked packet (N39). When the near
// messages reach the parked packet, the peer completes it and parks
// another. Each datagram is 19 bytes: channel id, the 7-byte header, a
// 10-byte chunk. Compare ns/op and B/op of the two.
func BenchmarkRingHostile(b *testing.B) {
	for _, hostile := range []bool{false, true} {
		name := "normal"
		if hostile {
			name = "hostile"
		}
		b.Run(name, func(b *testing.B) {
			benchRing(b, hostile)
		})
	}
}

func benchRing(b *testing.B, hostile bool) {
	f := newRingFeeder(hostile)
	b.ReportAllocs()
	for b.Loop() {
		f.step(b)
	}
}

// ringFeeder plays the peers of BenchmarkRingHostile one datagram at a
// time.
type ringFeeder struct {
	r             *Receiver
	hostile       bool
	first, second []byte
	seq           Seq // the next near sequence number
	far           Seq
	parked        bool
	i             int
}

func newRingFeeder(hostile bool) *ringFeeder {
	msg := coalesce.AppendMessage(nil, payload(1, 9), false) // 20 bytes: 2 chunks of 10
	return &ringFeeder{r: NewReceiver(ReceiverConfig{MCI: 1 << 62}), hostile: hostile, first: msg[:10], second: msg[10:]}
}

func (f *ringFeeder) handle(tb testing.TB, h Header, chunk []byte) {
	if res := f.r.Handle(t0, h, chunk); res != Accepted {
		tb.Fatalf("seq %d: %v", h.Seq, res)
	}
}

func (f *ringFeeder) poll(tb testing.TB) {
	if _, ok := f.r.Poll(t0); !ok {
		tb.Fatal("not delivered")
	}
}

// step hands the receiver one datagram.
func (f *ringFeeder) step(tb testing.TB) {
	switch {
	case f.hostile && !f.parked:
		f.far = f.seq.Add(DefaultWindow - 2) // the last place but one: its group waits
		f.handle(tb, Header{Start: true, Seq: f.far}, f.first)
		f.parked = true
	case f.hostile && f.seq == f.far:
		f.handle(tb, Header{Seq: f.far.Next()}, f.second)
		f.seq = f.far.Add(2)
		f.parked = false
		f.poll(tb)
	case f.i%2 == 0:
		f.handle(tb, Header{Start: true, Seq: f.seq}, f.first)
		f.seq = f.seq.Next()
		f.i++
	default:
		f.handle(tb, Header{Seq: f.seq}, f.second)
		f.seq = f.seq.Next()
		f.i++
		f.poll(tb)
	}
}
