package fastnet

import (
	"fmt"
	"testing"

	"github.com/fastnet-engine/fastnet/channel"
)

// inFlightPair returns a pair whose client has reliable packets in flight
// on n channels: the server's acks are dropped.
func inFlightPair(tb testing.TB, n int) (*pair, *conn) {
	// Without the pacer (D30): every packet goes at one instant.
	p := newPair(tb, Config{MaxInFlight: 64 << 20, Congestion: CongestionConfig{Disabled: true}}, Config{})
	p.drop = func(from Role, b []byte) bool {
		ch, _, err := parsePacket(b)
		return err == nil && from == Server && ch == chAck
	}
	for ch := range n {
		if err := p.cli.Send(p.now, p.ch, ch, []byte("x"), true); err != nil {
			tb.Fatal(err)
		}
	}
	p.flush()
	c := p.cli.conns[p.ch]
	if len(c.sendChans) != n {
		tb.Fatalf("%d channels in flight, want %d", len(c.sendChans), n)
	}
	return p, c
}

// BenchmarkHandleAcks measures one ack packet of one entry for a packet
// nobody sent (D13: ignored) while n channels have packets in flight.
// Its cost must not grow with n: only the channels an entry touched are
// looked at.
func BenchmarkHandleAcks(b *testing.B) {
	for _, n := range []int{10, 10000} {
		b.Run(fmt.Sprintf("channels=%d", n), func(b *testing.B) {
			p, c := inFlightPair(b, n)
			pkt := channel.AppendAck(appendPacketHeader(nil, chAck), channel.Ack{Channel: 0, Seq: 5000})
			b.ReportAllocs()
			for b.Loop() {
				c.handleAcks(p.now, pkt[2:])
			}
		})
	}
}

// TestHandleAcksFreesChannels checks that acks take the channels whose
// packets they free out of those in flight, and only those (D13).
func TestHandleAcksFreesChannels(t *testing.T) {
	p, c := inFlightPair(t, 100)
	var pkt []byte
	for ch := range 50 {
		pkt = channel.AppendAck(pkt, channel.Ack{Channel: int16(ch * 2), Seq: 0})
	}
	c.handleAcks(p.now, pkt)
	if len(c.sendChans) != 50 {
		t.Fatalf("%d channels in flight after acking 50 of 100", len(c.sendChans))
	}
	for i, cs := range c.sendChans {
		if cs.id%2 != 1 || int(cs.sendIdx) != i || !cs.inSend {
			t.Fatalf("sendChans[%d] is channel %d with index %d", i, cs.id, cs.sendIdx)
		}
	}
}

// BenchmarkAckQueue measures the acks of one input, n of them, queued
// and sent in ack packets at the starting payload MTU (6 entries a
// packet), per entry: constant in n, where shifting the queue per packet
// made it grow with n.
func BenchmarkAckQueue(b *testing.B) {
	for _, n := range []int{100, 60000} {
		b.Run(fmt.Sprintf("pending=%d", n), func(b *testing.B) {
			p, _ := inFlightPair(b, 1)
			c := p.cli.conns[p.ch]
			buf := make([]byte, 0, 64)
			b.ReportAllocs()
			for b.Loop() {
				for i := range n {
					c.ack(int16(i%100), channel.Seq(i))
				}
				for c.pendingAcks() > 0 {
					buf = c.appendAcks(p.now, buf[:0])
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/entry")
		})
	}
}

// TestHandleAcksAfterIdleChannel checks that the entries of a channel with
// nothing in flight, which handleAcks passes over together (SkipChannel),
// take none of the entries of other channels that follow them with them:
// repeats of an ack (N29) after the ack that freed a channel's last packet,
// between the acks of other channels and around a pair of no channel.
func TestHandleAcksAfterIdleChannel(t *testing.T) {
	p, c := inFlightPair(t, 3)
	var pkt []byte
	for _, a := range [][2]int{{0, 0}, {0, 0}, {0, 5}, {1, 0}, {0, 0}, {-3, 0}, {0, 0}, {2, 0}} {
		pkt = channel.AppendAck(pkt, channel.Ack{Channel: int16(a[0]), Seq: channel.Seq(a[1])})
	}
	before := c.stats.AcksReceived
	c.handleAcks(p.now, pkt)
	if len(c.sendChans) != 0 || c.inFlight != 0 {
		t.Fatalf("%d channels, %d bytes in flight after the acks of all", len(c.sendChans), c.inFlight)
	}
	if n := c.stats.AcksReceived - before; n != 3 {
		t.Fatalf("%d acks received, want 3", n)
	}
}
