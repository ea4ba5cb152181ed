package fastnet

import (
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/channel"
)

// TestHandleAcksLossCheckNearWrap: an ack of a channel's packet one
// place out of order, with that channel's older packet still in flight
// and no entry after it, is no loss (N81), with R past half the sequence
// space (D5, D7), where a zero R, were one taken for the newest acked,
// would lie ahead of the packet in flight.
func TestHandleAcksLossCheckNearWrap(t *testing.T) {
	p := newPair(t, Config{}, Config{})
	p.step = time.Microsecond
	if err := p.cli.Send(p.now, p.ch, 1, []byte("w"), true); err != nil {
		t.Fatal(err)
	}
	p.settle(1) // an RTT sample (N82)
	c := p.cli.conns[p.ch]
	const ch = 5
	cs := c.channel(ch, true)
	cs.seq, cs.rel = 1000, channel.MaxSeq-100
	p.drop = func(from Role, b []byte) bool { return from == Client }
	for _, s := range []string{"a", "b", "c", "d", "e"} {
		if err := p.cli.Send(p.now, p.ch, ch, []byte(s), true); err != nil {
			t.Fatal(err)
		}
	}
	p.flush()
	if n, _ := cs.snd.InFlight(); n != 5 {
		t.Fatalf("%d packets in flight, want 5", n)
	}
	// The second packet acked alone: the first, one R before, is still
	// in flight.
	before := c.stats.CongestionEvents
	c.handleAcks(p.now, channel.AppendAck(nil, channel.Ack{Channel: ch, Seq: channel.Seq(1000).Add(2)}))
	if n, _ := cs.snd.InFlight(); n != 4 {
		t.Fatalf("%d packets in flight after the ack, want 4", n)
	}
	if n := c.stats.CongestionEvents - before; n != 0 {
		t.Errorf("%d window reductions for an ack one place out of order, want none", n)
	}
}
