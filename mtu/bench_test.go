package mtu

import (
	"encoding/binary"
	"strconv"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
)

// round drives e through one whole round by hand, as a lossless peer would
// answer it: reset, ack, the round's probes (100 for small sizes, fewer for
// large ones, N44), each counted as it comes, written into reply (4 bytes).
// It returns the time after it.
func round(t testing.TB, e *Estimator, now clock.Time, buf []byte, reply []byte) clock.Time {
	const rtt = 50 * time.Millisecond
	var ok bool
	if buf, ok = e.AppendPayload(buf[:0], now, rtt); !ok || len(buf) != 1 {
		t.Fatalf("at %v: no reset due", now)
	}
	e.HandlePayload(now, ackPayload)
	n := e.probesFor(e.size)
	for i := range n {
		now = max(now, e.NextDeadline()) // pilots go a third of an RTT apart (N91)
		if buf, ok = e.AppendPayload(buf[:0], now, rtt); !ok {
			t.Fatalf("at %v: no probe due", now)
		}
		// The peer counts each probe as it comes.
		binary.BigEndian.PutUint32(reply, uint32(i+1))
		e.HandlePayload(now, reply)
		now = now.Add(e.cfg.ProbeInterval)
	}
	return now.Add(3 * rtt) // the next reset waits for late counts (N44)
}

var ackPayload = []byte{ackByte}

// TestEstimatorAllocs checks that a whole round, resets, probes of every
// size up to MaxPayload and replies, allocates nothing once the caller's
// buffer is large enough.
func TestEstimatorAllocs(t *testing.T) {
	e := NewEstimator(Config{MaxPayload: 65505})
	buf := make([]byte, 0, 65536)
	reply := count(ProbesPerRound)
	now := clock.Epoch
	e.Start(now)
	allocs := testing.AllocsPerRun(50, func() {
		now = round(t, e, now, buf, reply)
		if !e.Stats().Searching {
			e.Start(now)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per round, want 0", allocs)
	}
	if e.Stats().Rounds < 50 {
		t.Fatalf("only %d rounds ran", e.Stats().Rounds)
	}
}

func TestResponderAllocs(t *testing.T) {
	r := NewResponder()
	probe := make([]byte, 1400)
	buf := make([]byte, 0, 16)
	allocs := testing.AllocsPerRun(1000, func() {
		r.HandlePayload(probe)
		buf, _ = r.AppendReply(buf[:0])
		r.HandlePayload([]byte{0})
		buf, _ = r.AppendReply(buf[:0])
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per probe and reset, want 0", allocs)
	}
}

// BenchmarkEstimatorProbe measures AppendPayload of one probe: filling it
// from Rand is the whole cost.
func BenchmarkEstimatorProbe(b *testing.B) {
	for _, size := range []int{32, 1400, 8992} {
		b.Run(strconv.Itoa(size), func(b *testing.B) {
			e := NewEstimator(Config{MaxPayload: 65505, Initial: size})
			e.Start(clock.Epoch)
			buf := make([]byte, 0, size)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				// Stay in the probe phase: the state a round spends
				// its 100 probes in.
				e.phase, e.sendAt, e.sent = phaseProbe, 0, 0
				var ok bool
				if buf, ok = e.AppendPayload(buf[:0], clock.Epoch, 50*time.Millisecond); !ok || len(buf) != size {
					b.Fatalf("probe of %d bytes, want %d", len(buf), size)
				}
			}
		})
	}
}

// BenchmarkEstimatorReply measures HandlePayload of a count.
func BenchmarkEstimatorReply(b *testing.B) {
	e := NewEstimator(Config{MaxPayload: 65505})
	e.phase, e.sent = phaseProbe, 50
	reply := count(40)
	b.ReportAllocs()
	for b.Loop() {
		e.count = 0
		e.HandlePayload(clock.Epoch, reply)
	}
}

// BenchmarkResponder measures one probe in and one count out.
func BenchmarkResponder(b *testing.B) {
	r := NewResponder()
	probe := make([]byte, 1400)
	buf := make([]byte, 0, 16)
	b.ReportAllocs()
	for b.Loop() {
		r.HandlePayload(probe)
		buf, _ = r.AppendReply(buf[:0])
	}
}
