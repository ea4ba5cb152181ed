package fastnet

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"runtime"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fastnet-engine/fastnet/channel"
	"github.com/fastnet-engine/fastnet/coalesce"
)

// heapInUse returns the bytes of live heap objects after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// dataPacket returns the payload of a message channel packet (D4).
func dataPacket(reliable, start bool, seq, rel channel.Seq, chunk []byte) []byte {
	return append(channel.Header{Reliable: reliable, Start: start, Seq: seq, Rel: rel}.Append(nil), chunk...)
}

// flood hands the server one packet on each of the 32,768 channels,
// counting the messages delivered and the channels whose packet was acked
// (ack entries are repeated, N29), and keeping nothing else.
func flood(tc *testEndpoint, pkt func(ch int16) []byte) (delivered, acked int) {
	var seen [32768]bool
	for ch := range 32768 {
		tc.recv(int16(ch), pkt(int16(ch)))
		for _, ev := range tc.evs {
			if ev.Kind == EventMessage {
				delivered++
			}
		}
		for _, p := range tc.sent {
			if p.ch != chAck {
				continue
			}
			it, err := channel.ParseAcks(p.payload)
			if err != nil {
				tc.t.Fatalf("ack packet: %v", err)
			}
			for it.Next() {
				if a := it.Ack(); !seen[a.Channel] {
					seen[a.Channel] = true
					acked++
				}
			}
		}
		tc.sent, tc.evs = tc.sent[:0], tc.evs[:0]
	}
	return delivered, acked
}

// TestChannelStateParked checks N25 with D7, D8, D22 and D23: a peer that
// sends a message on each of the 32,768 channels leaves the connection a
// few bytes for each, not a receiver of kilobytes, and a channel that gave
// its receiver up continues where it stopped: an old packet resent is a
// duplicate (acked, not delivered again), the next message is delivered.
func TestChannelStateParked(t *testing.T) {
	tc := newTestEndpoint(t, Config{Role: Server})
	h, _ := tc.connectServer()
	c := tc.ep.conns[h]
	msg := coalesce.AppendMessage(nil, []byte("one of many"), true)
	before := heapInUse()
	delivered, acked := flood(tc, func(int16) []byte { return dataPacket(true, true, 0, 1, msg) })
	grew := int64(heapInUse()) - int64(before)
	if delivered != 32768 || acked != 32768 {
		t.Fatalf("delivered %d and acked %d of 32768 messages", delivered, acked)
	}
	if c.receivers != liveReceivers {
		t.Errorf("%d channels hold a receiver, want %d", c.receivers, liveReceivers)
	}
	if st, _ := tc.ep.Stats(h); st.OpenChannels != 32768 {
		t.Errorf("OpenChannels = %d, want 32768", st.OpenChannels)
	}
	// Each receiver with its channel state took about 780 bytes: 25 MB.
	if grew > 4<<20 {
		t.Errorf("32,768 channels took %d bytes of heap", grew)
	}
	t.Logf("32,768 channels, one message each: heap grew by %d bytes", grew)

	for _, ch := range []int16{0, 1000, 32767} {
		tc.recv(ch, dataPacket(true, true, 0, 1, msg)) // resent
		if len(tc.evs) != 0 {
			t.Errorf("channel %d: a duplicate was delivered again: %v", ch, tc.evs)
		}
		if len(tc.sent) != 1 || tc.sent[0].ch != chAck {
			t.Errorf("channel %d: a duplicate was not acked again: %v", ch, tc.sent)
		}
		tc.sent = tc.sent[:0]
		tc.recv(ch, dataPacket(true, true, 1, 2, coalesce.AppendMessage(nil, []byte("next"), true)))
		if len(tc.evs) != 1 || string(tc.evs[0].Data) != "next" || tc.evs[0].Channel != int(ch) {
			t.Errorf("channel %d: the next message gave %v", ch, tc.evs)
		}
		tc.sent, tc.evs = tc.sent[:0], tc.evs[:0]
	}
}

// TestMaxHoldingChannels checks N25 with D22 and D23: with
// MaxHoldingChannels set, a peer that starts a message on each of the
// 32,768 channels and never finishes it gets that many of them held, about
// 800 bytes each, and the rest dropped unacked, where each would otherwise pin
// a receiver and its queue; a message arriving whole is still delivered,
// and a held message that completes makes room for another.
func TestMaxHoldingChannels(t *testing.T) {
	cfg := Config{Role: Server, MaxHoldingChannels: 1000}
	tc := newTestEndpoint(t, cfg)
	h, _ := tc.connectServer()
	c := tc.ep.conns[h]
	limit := tc.ep.cfg.MaxHoldingChannels
	enc := coalesce.AppendMessage(nil, make([]byte, 1000), true)
	first, second := enc[:500], enc[500:] // two packets, both reliable
	before := heapInUse()
	delivered, acked := flood(tc, func(int16) []byte { return dataPacket(true, true, 0, 1, first) })
	grew := int64(heapInUse()) - int64(before)
	st, _ := tc.ep.Stats(h)
	if delivered != 0 || acked != limit || c.recvBudget.Holders() != limit {
		t.Errorf("acked %d first packets, %d channels hold packets, delivered %d; want %d held", acked, c.recvBudget.Holders(), delivered, limit)
	}
	if got := st.Dropped[DropMemory]; got != uint64(32768-limit) {
		t.Errorf("dropped %d first packets for memory, want %d", got, 32768-limit)
	}
	// 62 MB before N25; 16 bytes more a channel state since N137 (the
	// place and deadline of its receiver in the connection's heap).
	if max := int64(limit)*2<<10 + 3<<20 + 32768*16; grew > max {
		t.Errorf("32,768 partial messages took %d bytes of heap, want at most %d", grew, max)
	}
	t.Logf("32,768 partial messages: %d held, heap grew by %d bytes", limit, grew)

	// A message arriving whole needs no holding.
	refused := int16(32767)
	tc.recv(refused, dataPacket(true, true, 0, 1, coalesce.AppendMessage(nil, []byte("whole"), true)))
	if len(tc.evs) != 1 || string(tc.evs[0].Data) != "whole" {
		t.Errorf("a whole message on a refused channel gave %v", tc.evs)
	}
	tc.sent, tc.evs = tc.sent[:0], tc.evs[:0]

	// A held message completes; its place goes to a refused channel.
	tc.recv(0, dataPacket(true, false, 1, 2, second))
	if len(tc.evs) != 1 || len(tc.evs[0].Data) != 1000 {
		t.Errorf("completing a held message gave %v", tc.evs)
	}
	tc.sent, tc.evs = tc.sent[:0], tc.evs[:0]
	tc.recv(32766, dataPacket(true, true, 0, 1, first))
	tc.recv(32766, dataPacket(true, false, 1, 2, second))
	if len(tc.evs) != 1 || len(tc.evs[0].Data) != 1000 {
		t.Errorf("a refused channel's message, resent once room was made, gave %v", tc.evs)
	}
}

// TestMaxHoldingChannelsDefault checks that MaxHoldingChannels bounds
// nothing unless set (N25): an honest peer may have messages begun on
// every channel at once, and refusing its packets could fill its
// in-flight window.
func TestMaxHoldingChannelsDefault(t *testing.T) {
	ep, err := NewEndpoint(Config{Role: Server})
	if err != nil {
		t.Fatal(err)
	}
	if got := ep.Config().MaxHoldingChannels; got != MaxChannel+1 {
		t.Errorf("MaxHoldingChannels %d, want %d", got, MaxChannel+1)
	}
	if ep.liveCap != maxLiveReceivers {
		t.Errorf("live receivers and senders capped at %d, want %d", ep.liveCap, maxLiveReceivers)
	}
}

// unpacedPair is a pair with a payload MTU of 1200, MTU estimation off and
// no pacer (D30), so that a flush sends all at one instant.
func unpacedPair(t *testing.T) *pair {
	t.Helper()
	cfg := Config{InitialPayloadMTU: 1200, MTU: MTUConfig{Disabled: true}, Congestion: CongestionConfig{Disabled: true}}
	return newPair(t, cfg, cfg)
}

// TestSenderParked checks N25 for the sending half, with D5 and D7: a
// server that sends on 1,000 channels once keeps senders for only
// liveReceivers of them; one that keeps cycling through them keeps more
// rather than parking and reviving them at every message; and a channel
// whose sender was parked continues its sequence numbers and R, so the
// client delivers every message once and in order.
func TestSenderParked(t *testing.T) {
	p := unpacedPair(t)
	c := p.srv.conns[p.sh]
	const channels, rounds = 1000, 3
	var want, got []string
	collect := func() {
		for _, ev := range p.cliEvs {
			if ev.Kind == EventMessage {
				got = append(got, fmt.Sprintf("%d:%x", ev.Channel, sha256.Sum256(ev.Data)))
			}
		}
		p.cliEvs = nil
	}
	round := func(r int) {
		for ch := range channels {
			// A reliable message of three packets, then an unreliable one.
			big := bytes.Repeat([]byte{byte(r)}, 3000)
			for _, m := range []struct {
				data     []byte
				reliable bool
			}{{big, true}, {[]byte(fmt.Sprintf("u %d %d", r, ch)), false}} {
				if err := p.srv.Send(p.now, p.sh, ch, m.data, m.reliable); err != nil {
					t.Fatal(err)
				}
				want = append(want, fmt.Sprintf("%d:%x", ch, sha256.Sum256(m.data)))
			}
			p.flush()
		}
		collect()
	}

	before := heapInUse()
	round(0)
	grew := int64(heapInUse()) - int64(before) - int64(len(want)*2*(len(want[0])+16))
	t.Logf("1,000 channels used once, sending and receiving at the peer: heap grew by %d bytes", grew)
	if grew > 2<<20 { // 12 MB before senders and receivers were parked
		t.Errorf("1,000 channels took %d bytes of heap", grew)
	}
	if c.senders > liveReceivers || len(c.spareSenders) > spareReceivers {
		t.Errorf("%d senders and %d spares kept, want at most %d and %d", c.senders, len(c.spareSenders), liveReceivers, spareReceivers)
	}

	for r := 1; r < rounds; r++ {
		round(r)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("messages delivered (-sent +delivered):\n%s", diff)
	}
	if c.liveSenders < channels || c.liveSenders > maxLiveReceivers {
		t.Errorf("cycling through %d channels: %d senders kept, want at least %d and at most %d",
			channels, c.liveSenders, channels, maxLiveReceivers)
	}
	st, _ := p.srv.Stats(p.sh)
	if st.PacketsResent != 0 || st.InFlightBytes != 0 {
		t.Errorf("resent %d packets, %d bytes in flight", st.PacketsResent, st.InFlightBytes)
	}
}

// TestSenderTrimmed checks N25's trimming: a server cycling 60 KB messages
// through 200 channels keeps a sender for each of them (they come back
// every round), but past the first liveReceivers an idle sender keeps
// little of the buffers its last message took.
func TestSenderTrimmed(t *testing.T) {
	p := unpacedPair(t)
	p.keep = false
	c := p.srv.conns[p.sh]
	msg := make([]byte, 60000)
	before := heapInUse()
	for range 3 {
		for ch := range 200 {
			if err := p.srv.Send(p.now, p.sh, ch, msg, true); err != nil {
				t.Fatal(err)
			}
			p.flush()
		}
	}
	grew := int64(heapInUse()) - int64(before)
	t.Logf("200 channels cycling 60 KB messages: %d senders kept, heap grew by %d bytes", c.senders, grew)
	if p.cliMsgs != 600 {
		t.Fatalf("delivered %d of 600 messages", p.cliMsgs)
	}
	if c.senders < 200 {
		t.Errorf("%d senders kept, want all 200: they come back every round", c.senders)
	}
	if grew > 4<<20 { // 16 MB with every idle sender keeping its buffers
		t.Errorf("200 channels took %d bytes of heap", grew)
	}
}

// TestPartialFloodDefault checks N25 without MaxHoldingChannels: a peer
// that starts a 1,000-byte message on every channel is bounded by the
// connection's receive memory (its grants, D22), and each channel holding
// a packet costs its receiver and a queue of 4 places, not 64.
func TestPartialFloodDefault(t *testing.T) {
	tc := newTestEndpoint(t, Config{Role: Server})
	h, _ := tc.connectServer()
	enc := coalesce.AppendMessage(nil, make([]byte, 1000), true)
	before := heapInUse()
	flood(tc, func(int16) []byte { return dataPacket(true, true, 0, 1, enc[:500]) })
	grew := int64(heapInUse()) - int64(before)
	c := tc.ep.conns[h]
	t.Logf("32,768 partial messages: %d held, heap grew by %d bytes", c.recvBudget.Holders(), grew)
	if c.recvBudget.Used > tc.ep.cfg.ConnReceiveMemory {
		t.Errorf("receive memory %d above its limit %d", c.recvBudget.Used, tc.ep.cfg.ConnReceiveMemory)
	}
	if grew > 32<<20 { // 62 MB with a queue of 64 places for each
		t.Errorf("32,768 partial messages took %d bytes of heap", grew)
	}
}

// TestGrownSendersShrink checks N95: a sender whose burst of thousands of
// packets is all acked keeps its bookkeeping for the next burst, for
// channel.GrowthRetention at most, whether it stays idle or streams a few
// packets at a time meanwhile; a heap measure bounds what bursts on many
// channels keep.
func TestGrownSendersShrink(t *testing.T) {
	p := unpacedPair(t)
	p.keep = false
	c := p.cli.conns[p.ch]
	msg := make([]byte, 16)
	const burst = 12000 // as 64-byte messages at a 1 MiB window on loopback
	sent := 0
	send := func(ch, n int) *chanState {
		t.Helper()
		for range n {
			if err := p.cli.Send(p.now, p.ch, ch, msg, true); err != nil {
				t.Fatal(err)
			}
		}
		sent += n
		p.flush()
		cs := c.channel(int16(ch), false)
		if cs == nil || cs.snd == nil {
			t.Fatalf("channel %d has no sender", ch)
		}
		return cs
	}

	cs := send(1, burst)
	if !cs.snd.Grown() || !cs.inGrown || c.shrinkAt != p.now.Add(channel.GrowthRetention) {
		t.Fatalf("after a burst of %d: Grown %v, noted %v, shrinkAt %v; want true, true, %v",
			burst, cs.snd.Grown(), cs.inGrown, c.shrinkAt, p.now.Add(channel.GrowthRetention))
	}
	if d, ok := p.cli.NextDeadline(); !ok || d > c.shrinkAt {
		t.Errorf("next deadline %v, %v; want at most %v", d, ok, c.shrinkAt)
	}
	p.advance(channel.GrowthRetention)
	if cs.snd.Grown() || cs.inGrown || len(c.grown) != 0 || c.shrinkAt != 0 {
		t.Errorf("after GrowthRetention: Grown %v, noted %v, %d noted, shrinkAt %v; want false, false, 0, 0",
			cs.snd.Grown(), cs.inGrown, len(c.grown), c.shrinkAt)
	}

	// Bursts on many channels, then a stream of a few packets in flight
	// on each that never lets it fall idle (a review found the burst's
	// bookkeeping kept for good that way): by the deadline, each has moved
	// its packets' records into arrays their size.
	p.drop = func(from Role, b []byte) bool { return from == Server } // no acks for now
	var css []*chanState
	for ch := 1; ch <= 12; ch++ {
		p.drop = nil
		css = append(css, send(ch, burst))
		p.drop = func(from Role, b []byte) bool { return from == Server }
		send(ch, 3) // in flight until the drop ends
	}
	kept := heapInUse()
	for _, cs := range css {
		if p, _ := cs.snd.InFlight(); p == 0 || !cs.snd.Grown() || !cs.inGrown {
			t.Fatalf("channel %d: %d packets in flight, Grown %v, noted %v; want some, true, true", cs.id, p, cs.snd.Grown(), cs.inGrown)
		}
	}
	p.now = c.shrinkAt
	p.cli.HandleTimeout(p.now)
	for _, cs := range css {
		if cs.snd.Grown() || cs.inGrown {
			t.Errorf("channel %d, busy at the deadline: Grown %v, noted %v; want false, false", cs.id, cs.snd.Grown(), cs.inGrown)
		}
	}
	freed := int64(kept) - int64(heapInUse())
	t.Logf("bursts of %d packets on %d channels: %d bytes of heap freed at the deadline", burst, len(css), freed)
	// About 1.5 MB for each (a record, a queue entry and a bucket entry
	// for each of up to twice 12,000 packets).
	if freed < 8<<20 || freed > 36<<20 {
		t.Errorf("%d channels' bursts: %d bytes freed at the deadline, want 8-36 MB", len(css), freed)
	}
	p.drop = nil
	p.advance(channel.GrowthRetention) // the stream's packets are resent and acked
	if p.srvMsgs != sent {
		t.Errorf("delivered %d of %d messages", p.srvMsgs, sent)
	}
	if len(c.grown) != 0 || c.shrinkAt != 0 {
		t.Errorf("%d noted, shrinkAt %v; want 0, 0", len(c.grown), c.shrinkAt)
	}
}
