package fastnet

import (
	"testing"

	"github.com/fastnet-engine/fastnet/coalesce"
)

// The engine benchmarks: a client and a server endpoint joined in memory,
// payload MTU 1200 (estimation off), each iteration one message sent,
// transmitted, received, delivered and (if reliable) acknowledged. Compare
// with BenchmarkMD5Only, the checksum work the protocol itself requires for
// the same messages (run both with -bench . -benchmem; see README).
func benchPair(b *testing.B, size int, reliable bool) { benchPairBurst(b, size, reliable, 1) }

// benchPairBurst sends burst messages between flushes, as an application
// that sends several messages per tick does; acks then batch (D13).
func benchPairBurst(b *testing.B, size int, reliable bool, burst int) {
	cfg := Config{InitialPayloadMTU: 1200, MTU: MTUConfig{Disabled: true}, MaxMessageSize: 1 << 20}
	p := newPair(b, cfg, cfg)
	p.keep = false
	msg := make([]byte, size)
	for i := range msg {
		msg[i] = byte(i)
	}
	// Warm up buffers and free lists.
	for i := 0; i < 64; i++ {
		p.cli.Send(p.now, p.ch, 1, msg, reliable)
		p.flush()
	}
	start := p.srvMsgs
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := p.cli.Send(p.now, p.ch, 1, msg, reliable); err != nil {
			b.Fatal(err)
		}
		if i%burst == burst-1 {
			p.flush()
		}
	}
	p.flush()
	b.StopTimer()
	if got := p.srvMsgs - start; got != b.N {
		b.Fatalf("delivered %d of %d messages", got, b.N)
	}
}

func BenchmarkEngine64Unreliable(b *testing.B) { benchPair(b, 64, false) }
func BenchmarkEngine64Reliable(b *testing.B)   { benchPair(b, 64, true) }
func BenchmarkEngine64KReliable(b *testing.B)  { benchPair(b, 64<<10, true) }

func BenchmarkEngine64UnreliableBurst32(b *testing.B) { benchPairBurst(b, 64, false, 32) }
func BenchmarkEngine64ReliableBurst32(b *testing.B)   { benchPairBurst(b, 64, true, 32) }

// benchMD5 is the floor the engine is measured against: encode the message
// (flags, length, payload, MD5) and decode and verify it, nothing else.
func benchMD5(b *testing.B, size int) {
	msg := make([]byte, size)
	for i := range msg {
		msg[i] = byte(i)
	}
	buf := make([]byte, 0, coalesce.EncodedLen(size))
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		enc := coalesce.AppendMessage(buf[:0], msg, true)
		if _, err := coalesce.ParseMessage(enc, size); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMD5Only64(b *testing.B)  { benchMD5(b, 64) }
func BenchmarkMD5Only64K(b *testing.B) { benchMD5(b, 64<<10) }
