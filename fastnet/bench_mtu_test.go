package fastnet

import (
	"encoding/binary"
	"testing"
	"time"
)

// benchPathMTU is the largest datagram of the path the "after" benchmark
// estimates on: an Ethernet path carrying UDP payloads of 1500 bytes.
const benchPathMTU = 1500

// BenchmarkMTU64KReliable measures what MTU estimation (D19) buys a bulk
// sender: 64 KiB reliable messages from the client to the server of an
// in-memory pair, each iteration one message sent, transmitted, received,
// delivered and acknowledged.
//
//   - before: payload MTU 32, the specification's default, with estimation
//     off, as every Datagram connection starts.
//   - after: both sides first run a real estimation, in virtual time, on a
//     path that drops datagrams above 1500 bytes (the pair's drop hook), and
//     the benchmark then sends with the payload MTU they found (within 1 %
//     of 1498; the benchmark fails otherwise).
//
// Besides time, MB/s and allocations, it reports packets/msg, the data
// packets the client sends per message, datagrams/msg, every datagram
// either way per message (acks included), and payloadMTU, the client's.
func BenchmarkMTU64KReliable(b *testing.B) {
	b.Run("before", func(b *testing.B) {
		cfg := Config{InitialPayloadMTU: DefaultPayloadMTU, MTU: MTUConfig{Disabled: true}}
		benchMTU64K(b, newPair(b, cfg, cfg))
	})
	b.Run("after", func(b *testing.B) {
		p := newPair(b, Config{}, Config{})
		estimateBenchPath(b, p)
		benchMTU64K(b, p)
	})
}

// estimateBenchPath runs p in virtual time until both sides' estimations
// have converged on a benchPathMTU path and ended.
func estimateBenchPath(b *testing.B, p *pair) {
	b.Helper()
	p.drop = func(_ Role, d []byte) bool { return len(d) > benchPathMTU }
	largest := benchPathMTU - 2
	within := func(h Handle, ep *Endpoint) bool {
		st, ok := ep.Stats(h)
		return ok && st.PayloadMTU <= largest && (largest-st.PayloadMTU)*100 <= largest
	}
	for i := 0; ; i++ {
		if within(p.ch, p.cli) && within(p.sh, p.srv) {
			break
		}
		if i == 600 {
			cs, _ := p.cli.Stats(p.ch)
			ss, _ := p.srv.Stats(p.sh)
			b.Fatalf("payload MTUs %d and %d after a minute; want within 1 %% of %d", cs.PayloadMTU, ss.PayloadMTU, largest)
		}
		p.advance(100 * time.Millisecond)
	}
	// Let a search still narrowing end, so that no probe is due while the
	// benchmark runs (the clock stands still then).
	p.advance(10 * time.Second)
}

// benchMTU64K sends 64 KiB reliable messages over p, counting datagrams.
func benchMTU64K(b *testing.B, p *pair) {
	const size = 64 << 10
	p.keep = false
	path := p.drop
	var data, all int
	p.drop = func(from Role, d []byte) bool {
		all++
		if from == Client && len(d) >= 2 && int16(binary.BigEndian.Uint16(d)) >= 0 {
			data++
		}
		return path != nil && path(from, d)
	}
	msg := make([]byte, size)
	for i := range msg {
		msg[i] = byte(i)
	}
	// Warm up buffers and free lists.
	for range 8 {
		if err := p.cli.Send(p.now, p.ch, 1, msg, true); err != nil {
			b.Fatal(err)
		}
		p.flush()
	}
	start := p.srvMsgs
	data, all = 0, 0
	b.SetBytes(size)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := p.cli.Send(p.now, p.ch, 1, msg, true); err != nil {
			b.Fatal(err)
		}
		p.flush()
	}
	b.StopTimer()
	if got := p.srvMsgs - start; got != b.N {
		b.Fatalf("delivered %d of %d messages", got, b.N)
	}
	st, _ := p.cli.Stats(p.ch)
	if st.InFlightBytes != 0 {
		b.Fatalf("%d bytes still in flight", st.InFlightBytes)
	}
	b.ReportMetric(float64(data)/float64(b.N), "packets/msg")
	b.ReportMetric(float64(all)/float64(b.N), "datagrams/msg")
	b.ReportMetric(float64(st.PayloadMTU), "payloadMTU")
}
