package fuzz

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/mtu"
)

// FuzzMTU drives an MTU estimator and a responder (D19) with arbitrary
// payloads and time steps, mixed with the answers of an honest responder so
// that the estimator's later states are reached too. Whatever comes in
// (D23): nothing panics; the MTU stays within [Initial, MaxPayload]; the
// estimator sends only resets and probes of a size in that range, at most
// one payload per drain, and its deadline is in the future once drained (no
// busy loop); the responder never has more than two replies pending, each a
// reset ack or a 4-byte count.
//
// The input is a sequence of records, one op byte each: op&3 == 0 delivers
// the next (op>>2)&7 bytes to the estimator; op&3 == 1 advances time by
// (op>>2)*3 ms; op&3 == 2 delivers the next (op>>2)&7 bytes to the
// responder; op&3 == 3 selects by (op>>2)&3: Start, loop everything the
// estimator sent through an honest responder and back, set the RTT to
// (op>>4)*20 ms, or jump to the estimator's deadline.
func FuzzMTU(f *testing.F) {
	// Start, loop back the reset and its ack, then alternate probes and
	// loop-backs.
	f.Add([]byte{0x03, 0x07, 0x01, 0x07, 0x05, 0x07, 0x0f, 0x07, 0x0f, 0x07})
	f.Add([]byte{0x03, 0x04, 0x01, 0x0f, 0x0f, 0x0f, 0x0f})
	f.Add([]byte{0x03, 0x07, 0x10, 0x00, 0x00, 0x00, 0x05, 0x01, 0x11, 0x00, 0x00, 0x00, 0xff, 0x0f})
	f.Add([]byte{0x0a, 0x00, 0x06, 0x00, 0x12, 0x00, 0x00, 0x00, 0x00, 0x1e, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07})
	f.Fuzz(func(t *testing.T, data []byte) {
		const maxPayload = 2000
		cfg := mtu.Config{
			MaxPayload:    maxPayload,
			ProbeInterval: time.Millisecond,
			FinalTimeout:  50 * time.Millisecond,
			Period:        time.Second,
			ResetTries:    3,
			Rand:          rand.New(rand.NewPCG(1, 2)),
		}
		est := mtu.NewEstimator(cfg)
		var resp, honest mtu.Responder
		now := clock.Epoch
		rtt := 50 * time.Millisecond
		var sent [][]byte // estimator payloads not yet looped back, bounded
		buf := make([]byte, 0, maxPayload)

		next := func(n int) []byte {
			n = min(n, len(data))
			p := data[:n]
			data = data[n:]
			return p
		}
		drain := func() {
			t.Helper()
			var ok bool
			buf, ok = est.AppendPayload(buf[:0], now, rtt)
			if ok {
				switch n := len(buf); {
				case n == 1 && buf[0] == 0:
				case n >= mtu.MinPayload && n <= maxPayload:
				default:
					t.Fatalf("estimator sent %d bytes %x", n, buf)
				}
				if len(sent) < 512 {
					sent = append(sent, append([]byte(nil), buf...))
				}
				if _, again := est.AppendPayload(buf[:0], now, rtt); again {
					t.Fatalf("at %v: two estimator payloads in one instant", now)
				}
			}
			for i := 0; ; i++ {
				b, ok := resp.AppendReply(buf[:0])
				if !ok {
					break
				}
				if i >= 2 || !(len(b) == 1 && b[0] == 1 || len(b) == 4) {
					t.Fatalf("responder reply %d: %x", i, b)
				}
			}
			if m := est.MTU(); m < mtu.DefaultInitial || m > maxPayload {
				t.Fatalf("MTU %d out of [%d, %d]", m, mtu.DefaultInitial, maxPayload)
			}
			if d := est.NextDeadline(); d != 0 && d <= now {
				t.Fatalf("at %v: deadline %v not in the future after draining", now, d)
			}
		}

		for len(data) > 0 {
			op := next(1)[0]
			switch op & 3 {
			case 0:
				est.HandlePayload(now, next(int(op>>2)&7))
			case 1:
				now = now.Add(time.Duration(op>>2) * 3 * time.Millisecond)
				est.HandleTimeout(now)
			case 2:
				resp.HandlePayload(next(int(op>>2) & 7))
			case 3:
				switch (op >> 2) & 3 {
				case 0:
					est.Start(now)
				case 1:
					for _, p := range sent {
						honest.HandlePayload(p)
						for {
							r, ok := honest.AppendReply(nil)
							if !ok {
								break
							}
							est.HandlePayload(now, r)
							drain()
						}
					}
					sent = sent[:0]
				case 2:
					rtt = time.Duration(op>>4) * 20 * time.Millisecond
				case 3:
					if d := est.NextDeadline(); d > now {
						now = d
					}
					est.HandleTimeout(now)
				}
			}
			drain()
		}
	})
}
