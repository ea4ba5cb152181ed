package fastnet

import (
	"net/netip"
	"testing"
	"time"
)

// BenchmarkEngine64StreamEcho is the engine's part of a W1 round trip
// over the TCP driver: on the Stream transport, a 64-byte reliable
// message from the client and its echo from the server, each handed over
// as the driver does, one packet at a time as it is read, its event
// polled, then the reply sent and transmitted. An op is a round trip,
// both sides' work.
func BenchmarkEngine64StreamEcho(b *testing.B) {
	cfg := Config{Transport: Stream}
	p := newPair(b, cfg, cfg)
	p.keep = false
	msg := make([]byte, 64)
	buf := make([]byte, 2048)
	// hop sends one message from one endpoint to the other and polls
	// what it brings.
	hop := func(from, to *Endpoint, h Handle, fromAddr netip.AddrPort) Handle {
		if err := from.Send(p.now, h, 1, msg, true); err != nil {
			b.Fatal(err)
		}
		var got Handle
		for {
			t, ok := from.PollTransmit(p.now, buf)
			if !ok {
				break
			}
			to.HandleDatagram(p.now, fromAddr, buf[:t.N])
		}
		for {
			ev, ok := to.PollEvent()
			if !ok {
				break
			}
			if ev.Kind == EventMessage {
				got = ev.Conn
			}
		}
		if got == 0 {
			b.Fatal("no message")
		}
		return got
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		p.now = p.now.Add(10 * time.Microsecond)
		sh := hop(p.cli, p.srv, p.ch, clientAddr)
		hop(p.srv, p.cli, sh, serverAddr)
	}
}

// BenchmarkEngine64StreamBurst is a Stream endpoint driven in bursts:
// 64-byte reliable messages sent 64 at a time, then transmitted and
// delivered, the receiver taking the packets in one batch as the TCP
// driver hands over what its read buffer holds (N121), the sender
// computing their checksums together (N125). (The TCP driver itself
// writes each Send's packet as it is sent, so its queue holds one message
// at a time.) An op is one message.
func BenchmarkEngine64StreamBurst(b *testing.B) {
	cfg := Config{Transport: Stream}
	p := newPair(b, cfg, cfg)
	p.keep = false
	benchPairRun(b, p, 64, true, 64, 1)
}
