package fastnet

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/coalesce"
)

// The engine benchmarks: a client and a server endpoint joined in memory,
// payload MTU 1200 (estimation off), each iteration one message sent,
// transmitted, received, delivered and (if reliable) acknowledged. Compare
// with BenchmarkMD5Only, the checksum work the protocol itself requires for
// the same messages (run both with -bench . -benchmem; see README).
func benchPair(b *testing.B, size int, reliable bool) { benchPairBurst(b, size, reliable, 1) }

// benchStep is the time a benchmark's clock moves on at each flush: a
// microsecond, about what a round of I/O takes on a machine, so that the
// pacer (D30) sees time pass.
const benchStep = time.Microsecond

// benchPairBurst sends burst messages between flushes, as an application
// that sends several messages per tick does; acks then batch (D13).
func benchPairBurst(b *testing.B, size int, reliable bool, burst int) {
	benchPairBurstMTU(b, size, reliable, burst, 1200)
}

// benchPairBurstMTU is benchPairBurst at payload MTU mtu.
func benchPairBurstMTU(b *testing.B, size int, reliable bool, burst, mtu int) {
	benchPairConfig(b, size, reliable, burst, mtu, false)
}

// benchPairConfig is benchPairBurstMTU, with the receiving side lending
// the buffers of the messages it delivers if reuse is set (N103).
func benchPairConfig(b *testing.B, size int, reliable bool, burst, mtu int, reuse bool) {
	cfg := Config{InitialPayloadMTU: mtu, MTU: MTUConfig{Disabled: true}, MaxMessageSize: 1 << 20,
		ReuseMessageBuffers: reuse}
	p := newPair(b, cfg, cfg)
	p.keep, p.step = false, benchStep
	benchPairRun(b, p, size, reliable, burst, 1)
}

// benchPairRun is the timed part of the engine benchmarks, on pair p:
// messages sent on channels 1 to chans in turn.
func benchPairRun(b *testing.B, p *pair, size int, reliable bool, burst, chans int) {
	msg := make([]byte, size)
	for i := range msg {
		msg[i] = byte(i)
	}
	// Warm up buffers and free lists.
	for i := 0; i < 64; i++ {
		p.cli.Send(p.now, p.ch, 1+i%chans, msg, reliable)
		p.flush()
	}
	start := p.srvMsgs
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	// The channel and the place in the burst are counted, not taken
	// modulo chans and burst: a division each, about 5 ns a message of
	// the loop's own, was counted as the engine's.
	ch, left := 1, burst
	for i := 0; i < b.N; i++ {
		if err := p.cli.Send(p.now, p.ch, ch, msg, reliable); err != nil {
			b.Fatal(err)
		}
		if ch++; ch > chans {
			ch = 1
		}
		if left--; left == 0 {
			p.flush()
			left = burst
		}
	}
	p.settle(start + b.N)
	b.StopTimer()
	if got := p.srvMsgs - start; got != b.N {
		b.Fatalf("delivered %d of %d messages", got, b.N)
	}
}

// settle flushes until the server has had n messages, or the pacer could
// have let a second of traffic go.
func (p *pair) settle(n int) {
	for i := 0; p.srvMsgs < n && i < int(time.Second/benchStep); i++ {
		p.flush()
	}
}

func BenchmarkEngine64Unreliable(b *testing.B) { benchPair(b, 64, false) }
func BenchmarkEngine64Reliable(b *testing.B)   { benchPair(b, 64, true) }
func BenchmarkEngine64KReliable(b *testing.B)  { benchPair(b, 64<<10, true) }

func BenchmarkEngine64UnreliableBurst32(b *testing.B) { benchPairBurst(b, 64, false, 32) }
func BenchmarkEngine64ReliableBurst32(b *testing.B)   { benchPairBurst(b, 64, true, 32) }

// fullBundleMTU is the payload MTU of the full-bundle benchmarks: about
// what MTU estimation reaches on loopback (9,214) and on jumbo-frame
// links, where a bundle holds 96 messages of 64 bytes; fullBundleBurst
// fills two of them between flushes.
const (
	fullBundleMTU   = 9000
	fullBundleBurst = 192
)

// BenchmarkEngine64UnreliableFullBundle and
// BenchmarkEngine64ReliableFullBundle are the Burst32 benchmarks with
// bundles of 96 messages (fullBundleMTU), not 12: the cost of a message
// in a full bundle, which issue 19's target is set against.
func BenchmarkEngine64UnreliableFullBundle(b *testing.B) {
	benchPairBurstMTU(b, 64, false, fullBundleBurst, fullBundleMTU)
}
func BenchmarkEngine64ReliableFullBundle(b *testing.B) {
	benchPairBurstMTU(b, 64, true, fullBundleBurst, fullBundleMTU)
}

// BenchmarkEngine64UnreliableFullBundleEstimated and
// BenchmarkEngine64ReliableFullBundleEstimated are the full-bundle
// benchmarks with MTU estimation on, as the UDP driver runs by default,
// timed once the estimation is over: its payload MTU, 9,214 (the largest
// datagram, MaxPacketSize), holds 98 messages of 64 bytes. A connection
// between estimations writes its bundles in runs as one that does not
// estimate (N119); runs/msg reports the share of messages that went in
// runs.
func BenchmarkEngine64UnreliableFullBundleEstimated(b *testing.B) {
	benchPairEstimated(b, 64, false, fullBundleBurst)
}
func BenchmarkEngine64ReliableFullBundleEstimated(b *testing.B) {
	benchPairEstimated(b, 64, true, fullBundleBurst)
}

// benchPairEstimated runs the engine benchmark on a pair that estimates
// its MTU, once the client's estimation is over.
func benchPairEstimated(b *testing.B, size int, reliable bool, burst int) {
	cfg := Config{MaxMessageSize: 1 << 20}
	p := newPair(b, cfg, cfg)
	p.keep = false
	c := p.cli.conns[p.ch]
	p.awaitEstimation(c)
	p.step = benchStep
	runs := p.cli.runSent
	benchPairRun(b, p, size, reliable, burst, 1)
	b.ReportMetric(float64(p.cli.runSent-runs)/float64(b.N), "runs/msg")
}

// BenchmarkEngine64UnreliableFullBundle4Channels and
// BenchmarkEngine64ReliableFullBundle4Channels are the full-bundle
// benchmarks with the messages sent on four channels in turn, as an
// application that keeps its kinds of traffic apart sends them. A
// connection's channels take turns of their share of a bundle, each
// turn's packets written in a run and taken in one (N122); runs/msg
// reports the share of messages written in runs.
func BenchmarkEngine64UnreliableFullBundle4Channels(b *testing.B) {
	benchPairChannels(b, 64, false, fullBundleBurst, 4)
}
func BenchmarkEngine64ReliableFullBundle4Channels(b *testing.B) {
	benchPairChannels(b, 64, true, fullBundleBurst, 4)
}

// benchPairChannels is benchPairBurstMTU at fullBundleMTU, the messages
// sent on chans channels in turn.
func benchPairChannels(b *testing.B, size int, reliable bool, burst, chans int) {
	cfg := Config{InitialPayloadMTU: fullBundleMTU, MTU: MTUConfig{Disabled: true}, MaxMessageSize: 1 << 20}
	p := newPair(b, cfg, cfg)
	p.keep, p.step = false, benchStep
	runs := p.cli.runSent
	benchPairRun(b, p, size, reliable, burst, chans)
	b.ReportMetric(float64(p.cli.runSent-runs)/float64(b.N), "runs/msg")
}

// BenchmarkEngine1KReliableFullBundle is W3's engine part: 1 KiB
// reliable messages, eight to a datagram of fullBundleMTU, in bursts of
// two dozen.
func BenchmarkEngine1KReliableFullBundle(b *testing.B) {
	benchPairBurstMTU(b, 1024, true, 24, fullBundleMTU)
}

// The Reuse benchmarks are those above with Config.ReuseMessageBuffers
// set: the application handles each message as it polls it, and the
// endpoint carves the next ones out of the same memory (N103).
func BenchmarkEngine64UnreliableBurst32Reuse(b *testing.B) {
	benchPairConfig(b, 64, false, 32, 1200, true)
}
func BenchmarkEngine64ReliableBurst32Reuse(b *testing.B) {
	benchPairConfig(b, 64, true, 32, 1200, true)
}
func BenchmarkEngine64UnreliableFullBundleReuse(b *testing.B) {
	benchPairConfig(b, 64, false, fullBundleBurst, fullBundleMTU, true)
}
func BenchmarkEngine64ReliableFullBundleReuse(b *testing.B) {
	benchPairConfig(b, 64, true, fullBundleBurst, fullBundleMTU, true)
}

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

func BenchmarkMD5Only64(b *testing.B) { benchMD5(b, 64) }

// BenchmarkMD5Only64Batched is benchMD5 done as the engine does it for
// messages that come many at a time (N86): 32 messages encoded with
// their checksums deferred and filled together, then their digests
// computed together and each message decoded and verified with its own;
// an op is one message.
func BenchmarkMD5Only64Batched(b *testing.B) {
	const n = 32
	msg := make([]byte, 64)
	for i := range msg {
		msg[i] = byte(i)
	}
	encs := make([][]byte, n)
	payloads := make([][]byte, n)
	digests := make([][coalesce.MD5Len]byte, n)
	for i := range encs {
		encs[i] = make([]byte, 0, coalesce.EncodedLen(len(msg)))
	}
	var ps coalesce.Presums
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for i := 0; i < b.N; i += n {
		for j := range encs {
			encs[j], _ = coalesce.AppendMessageDeferred(encs[j][:0], msg, true)
		}
		coalesce.FillChecksums(encs)
		for j, enc := range encs {
			payloads[j] = enc[2 : 2+len(msg)]
		}
		coalesce.Digests(digests, payloads)
		for j, enc := range encs {
			ps.Set(payloads[j], digests[j])
			if _, err := coalesce.ParseMessageWith(&ps, enc, len(msg)); err != nil {
				b.Fatal(err)
			}
		}
	}
}
func BenchmarkMD5Only64K(b *testing.B) { benchMD5(b, 64<<10) }

// BenchmarkServerBroadcast is a game server's tick: one 64-byte unreliable
// update sent to each of n connected clients, then every datagram
// transmitted and delivered; an op is one message. The cost per message
// must not grow with n.
func BenchmarkServerBroadcast(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("clients=%d", n), func(b *testing.B) {
			cfg := Config{InitialPayloadMTU: 1200, MTU: MTUConfig{Disabled: true}, MaxConnections: n}
			cfg.Role = Server
			srv, err := NewEndpoint(cfg)
			if err != nil {
				b.Fatal(err)
			}
			cfg.Role = Client
			now := clock.Epoch
			buf := make([]byte, 65536)
			clients := make(map[netip.AddrPort]*Endpoint, n)
			for i := range n {
				cli, err := NewEndpoint(cfg)
				if err != nil {
					b.Fatal(err)
				}
				clients[netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), 5000)] = cli
			}
			for _, cli := range clients {
				cli.Connect(now, serverAddr)
			}
			var conns []Handle
			delivered := 0
			flush := func() {
				for moved := true; moved; {
					moved = false
					now = now.Add(benchStep)
					for addr, cli := range clients {
						for t, ok := cli.PollTransmit(now, buf); ok; t, ok = cli.PollTransmit(now, buf) {
							srv.HandleDatagram(now, addr, buf[:t.N])
							moved = true
						}
						for ev, ok := cli.PollEvent(); ok; ev, ok = cli.PollEvent() {
							if ev.Kind == EventMessage {
								delivered++
							}
						}
					}
					for t, ok := srv.PollTransmit(now, buf); ok; t, ok = srv.PollTransmit(now, buf) {
						clients[t.To].HandleDatagram(now, serverAddr, buf[:t.N])
						moved = true
					}
					for ev, ok := srv.PollEvent(); ok; ev, ok = srv.PollEvent() {
						if ev.Kind == EventConnected {
							conns = append(conns, ev.Conn)
						}
					}
				}
			}
			// Channel -1 replies are bounded per flush (N4): clients that
			// got none retry every 200 ms.
			for try := 0; try < 50 && len(conns) < n; try++ {
				flush()
				now = now.Add(200 * time.Millisecond)
				srv.HandleTimeout(now)
				for _, cli := range clients {
					cli.HandleTimeout(now)
				}
			}
			flush()
			if len(conns) != n {
				b.Fatalf("%d of %d clients connected", len(conns), n)
			}
			msg := make([]byte, 64)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i += n {
				for _, h := range conns {
					if err := srv.Send(now, h, 1, msg, false); err != nil {
						b.Fatal(err)
					}
				}
				flush()
			}
			b.StopTimer()
			if delivered < b.N {
				b.Fatalf("delivered %d of %d", delivered, b.N)
			}
		})
	}
}

// BenchmarkEngine64ReliableChannels sends each 64-byte reliable message on
// the next of n channels, round robin, one in flight at a time: past
// liveReceivers channels the receivers and senders park and revive at
// every message until the connection keeps more (N25).
func BenchmarkEngine64ReliableChannels(b *testing.B) { benchChannels(b, false) }

// BenchmarkEngine64ReliableChannelsTick sends a 64-byte reliable message on
// each of n channels, then flushes, as a server updating n entities a tick
// does: n channels have packets in flight at once (N25).
func BenchmarkEngine64ReliableChannelsTick(b *testing.B) { benchChannels(b, true) }

// benchChannels sends 64-byte reliable messages on 8, 100 and 1,000
// channels round robin, flushing after each message, or once per round
// when tick is set.
func benchChannels(b *testing.B, tick bool) {
	for _, n := range []int{8, 100, 1000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			cfg := Config{InitialPayloadMTU: 1200, MTU: MTUConfig{Disabled: true}}
			p := newPair(b, cfg, cfg)
			p.keep, p.step = false, benchStep
			msg := make([]byte, 64)
			send := func(i int) {
				if err := p.cli.Send(p.now, p.ch, i%n, msg, true); err != nil {
					b.Fatal(err)
				}
				if !tick || i%n == n-1 {
					p.flush()
				}
			}
			for i := range 2 * n { // every channel's sender and receiver made
				send(i)
			}
			p.settle(2 * n)
			start := p.srvMsgs
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				send(i)
			}
			p.settle(start + b.N)
			b.StopTimer()
			if got := p.srvMsgs - start; got != b.N {
				b.Fatalf("delivered %d of %d messages", got, b.N)
			}
		})
	}
}

// benchPairTracked is benchPair with every message sent by SendTracked:
// the cost of following each message to its outcome (N55).
func benchPairTracked(b *testing.B, size int, reliable bool) {
	cfg := Config{InitialPayloadMTU: 1200, MTU: MTUConfig{Disabled: true}, MaxMessageSize: 1 << 20}
	p := newPair(b, cfg, cfg)
	p.keep, p.step = false, benchStep
	msg := make([]byte, size)
	outcomes := 0
	count := func() {
		for _, ev := range p.cliEvs {
			if ev.Kind == EventOutcome {
				outcomes++
			}
		}
		p.cliEvs = p.cliEvs[:0]
	}
	for i := 0; i < 64; i++ {
		p.cli.SendTracked(p.now, p.ch, 1, msg, reliable)
		p.flush()
		count()
	}
	start, startOutcomes := p.srvMsgs, outcomes
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := p.cli.SendTracked(p.now, p.ch, 1, msg, reliable); err != nil {
			b.Fatal(err)
		}
		p.flush()
		count()
	}
	b.StopTimer()
	if got := p.srvMsgs - start; got != b.N || outcomes-startOutcomes != b.N {
		b.Fatalf("delivered %d and %d outcomes of %d messages", got, outcomes-startOutcomes, b.N)
	}
}

func BenchmarkEngine64UnreliableTracked(b *testing.B) { benchPairTracked(b, 64, false) }
func BenchmarkEngine64ReliableTracked(b *testing.B)   { benchPairTracked(b, 64, true) }
