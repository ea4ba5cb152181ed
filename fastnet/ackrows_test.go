package fastnet

import (
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/channel"
)

// ackRowsPair returns a pair whose client has two reliable packets in
// flight on each of k channels, their acks withheld, and the server's
// ack of all of them with the channels in turn, first each channel's
// first packet, then each one's second (N138).
func ackRowsPair(tb testing.TB, k int) (*pair, []byte) {
	cfg := Config{MaxInFlight: 8 << 20, Congestion: CongestionConfig{InitialWindow: 4 << 20}}
	p := newPair(tb, cfg, Config{})
	p.drop = func(from Role, b []byte) bool { return from == Server }
	for round := range 2 {
		for ch := range k {
			if err := p.cli.Send(p.now, p.ch, ch, []byte{byte(round)}, true); err != nil {
				tb.Fatal(err)
			}
		}
	}
	for range 20 {
		p.now = p.now.Add(time.Millisecond)
		p.flush()
	}
	p.drop = nil
	ack := appendPacketHeader(nil, chAck)
	for round := range 2 {
		for ch := range k {
			ack = channel.AppendAck(ack, channel.Ack{Channel: int16(ch), Seq: channel.Seq(round)})
		}
	}
	return p, ack
}

// TestAckRows: an ack packet that names each channel in several rows,
// the channels in turn, frees every packet it acks and shows no loss
// (N81, N138).
func TestAckRows(t *testing.T) {
	const k = 300
	p, ack := ackRowsPair(t, k)
	c := p.cli.conns[p.ch]
	inFlight := func() int { st, _ := p.cli.Stats(p.ch); return st.InFlightPackets }
	if got := inFlight(); got != 2*k {
		t.Fatalf("%d packets in flight, want %d", got, 2*k)
	}
	p.cli.HandleDatagram(p.now, serverAddr, ack)
	if got := inFlight(); got != 0 {
		t.Errorf("%d packets in flight after the ack of all", got)
	}
	if len(c.ackedChans) != 0 {
		t.Errorf("%d acked channels kept after the packet", len(c.ackedChans))
	}
}

// A channel named again after another's row has its own entry updated
// (N138): channel 1's packet 9 acked after channel 0's row shows packets
// 1-8 of channel 1 lost (N81).
func TestAckRowsLoss(t *testing.T) {
	cfg := Config{MaxInFlight: 8 << 20, Congestion: CongestionConfig{InitialWindow: 4 << 20}}
	p := newPair(t, cfg, Config{})
	p.drop = func(from Role, b []byte) bool { return from == Server }
	for i := range 10 {
		for ch := range 2 {
			if ch == 0 && i >= 2 {
				continue
			}
			if err := p.cli.Send(p.now, p.ch, ch, []byte{byte(i)}, true); err != nil {
				t.Fatal(err)
			}
		}
	}
	for range 20 {
		p.now = p.now.Add(time.Millisecond)
		p.flush()
	}
	p.drop = nil
	c := p.cli.conns[p.ch]
	c.hb.sampled = true
	ack := appendPacketHeader(nil, chAck)
	for _, a := range []channel.Ack{{Channel: 0, Seq: 0}, {Channel: 1, Seq: 0}, {Channel: 0, Seq: 1}, {Channel: 1, Seq: 9}} {
		ack = channel.AppendAck(ack, a)
	}
	before := c.stats.CongestionEvents
	p.cli.HandleDatagram(p.now, serverAddr, ack)
	if c.stats.CongestionEvents == before {
		t.Errorf("no loss seen on channel 1 (congestion events %d)", c.stats.CongestionEvents)
	}
}

// BenchmarkAckRows is the cost of such an ack packet, a channel's entry
// found where it was put rather than by a pass (N138): about in
// proportion to k, where the pass took k² steps.
func BenchmarkAckRows(b *testing.B) {
	for _, k := range []int{1000, 6000} {
		b.Run(itoa(k), func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				p, ack := ackRowsPair(b, k)
				b.StartTimer()
				p.cli.HandleDatagram(p.now, serverAddr, ack)
			}
		})
	}
}
