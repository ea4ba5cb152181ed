package fastnet

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/coalesce"
)

// turnCutCase plays, with runs (N101) or without, a turn of channel 1
// under way whose next packet, 4,600 bytes, fits what is left of the turn
// until channel 2 joins the ring and cuts it to its share, 4,501 (N122).
// The next datagram does not begin with that packet: before it is
// polled, a packet left over from the last bundle (N71) goes first
// (paced false), or an ack does, after the pacer ended the last drain
// (paced true). It returns the datagrams the client sent after the join.
func turnCutCase(t *testing.T, noRuns, paced bool) [][]byte {
	t.Helper()
	cfg := Config{InitialPayloadMTU: turnsMTU, MTU: MTUConfig{Disabled: true}}
	const rate = 10_000_000
	if paced {
		cfg.Congestion.FixedRate = rate
	} else {
		cfg.Congestion.Disabled = true
	}
	p := newPair(t, cfg, cfg)
	c := p.cli.conns[p.ch]
	p.awaitBundles(t)
	p.advance(10 * time.Millisecond)
	p.cli.noRuns = noRuns
	buf := make([]byte, 1<<16)
	var in []Incoming
	poll := func(all bool) [][]byte {
		var ds [][]byte
		for {
			tr, ok := p.cli.PollTransmit(p.now, buf)
			if !ok {
				break
			}
			ds = append(ds, bytes.Clone(buf[:tr.N]))
			if !all {
				break
			}
		}
		return ds
	}
	if paced {
		// Empty the pacer's bucket, then let it hold a byte.
		p.sendN(t, 3, 4, 8990, false)
		poll(true)
		p.now = p.now.Add(time.Duration(float64(time.Second) * (1 - c.cc.tokens) / rate))
	}
	// 5,000 bytes go alone; 4,000 do not fit beside them and begin
	// channel 1's turn; 4,600 fit what is left of it.
	for _, n := range []int{5000, 4000, 4600, 100} {
		p.sendN(t, 1, 1, n, false)
	}
	if paced {
		for _, d := range poll(true) {
			in = append(in, Incoming{From: clientAddr, Data: d})
		}
	} else {
		for _, d := range poll(false) { // the 4,000 bytes wait (N71)
			in = append(in, Incoming{From: clientAddr, Data: d})
		}
	}
	if c.turnLeft == 0 || len(c.ring) != 1 {
		t.Fatalf("turn left %d, %d channels in the ring: the test tests nothing", c.turnLeft, len(c.ring))
	}
	p.srv.HandleDatagrams(p.now, in)
	p.sendN(t, 2, 1, 64, false)
	if paced {
		// Something the client owes an ack for, and time for the pacer.
		if err := p.srv.Send(p.now, p.sh, 0, []byte("x"), true); err != nil {
			t.Fatal(err)
		}
		p.now = p.now.Add(2 * time.Millisecond)
		for {
			tr, ok := p.srv.PollTransmit(p.now, buf)
			if !ok {
				break
			}
			p.cli.HandleDatagram(p.now, serverAddr, bytes.Clone(buf[:tr.N]))
		}
	}
	out := poll(true)
	for _, d := range out {
		p.srv.HandleDatagram(p.now, clientAddr, d)
	}
	if n := p.srv.conns[p.sh].stats.Dropped[DropBundleNested]; n != 0 {
		t.Errorf("noRuns %v, paced %v: %d datagrams with a bundle in a bundle", noRuns, paced, n)
	}
	return out
}

// N101, N122: a turn cut short by a channel that joins the ring is
// written in a run as poll writes it, whatever comes first in the
// datagram.
func TestTurnCutRunsChangeNothing(t *testing.T) {
	for _, paced := range []bool{false, true} {
		runs, polled := turnCutCase(t, false, paced), turnCutCase(t, true, paced)
		if len(runs) != len(polled) {
			t.Fatalf("paced %v: %d datagrams with runs, %d without", paced, len(runs), len(polled))
		}
		for i := range runs {
			if !bytes.Equal(runs[i], polled[i]) {
				t.Errorf("paced %v: datagram %d with runs, channels %v, differs from the one without, %v",
					paced, i, dataChannels(t, runs[i]), dataChannels(t, polled[i]))
			}
		}
	}
}

// N122: a packet that fills exactly what is left of a turn is the turn's
// last: two channels of messages whose packets take a seventh of a share
// each in a bundle send seven a turn, in runs or not.
func TestTurnFilledExactly(t *testing.T) {
	share := (turnsMTU + 2) / 2
	size := 0
	for n := 17; n < 2000 && size == 0; n++ {
		if share%(turnOverhead+coalesce.EncodedLen(n)) == 0 && share/(turnOverhead+coalesce.EncodedLen(n)) > 1 {
			size = n
		}
	}
	if size == 0 {
		t.Fatal("no message size fills a share exactly")
	}
	want := share / (turnOverhead + coalesce.EncodedLen(size))
	for _, noRuns := range []bool{false, true} {
		p := turnsPair(t, false)
		p.cli.noRuns = noRuns
		p.sendN(t, 1, 60, size, false)
		p.sendN(t, 2, 60, size, false)
		var seq []int16
		for range 6 {
			seq = append(seq, p.pollDatagram(t)...)
		}
		ids, counts := groups(seq)
		for i := range ids[:len(ids)-1] {
			if counts[i] != want {
				t.Fatalf("noRuns %v: turns of channels %v of %v packets, want %d each", noRuns, ids, counts, want)
			}
		}
	}
}

// N122, N87: a channel whose reliable packet does not fit ends its turn
// there; the next channel's turn is a whole share, not what was left.
func TestTurnAfterHeldChannel(t *testing.T) {
	for _, noRuns := range []bool{false, true} {
		cfg := Config{InitialPayloadMTU: turnsMTU, MTU: MTUConfig{Disabled: true},
			Congestion: CongestionConfig{Disabled: true}, MaxInFlight: turnsMTU + 10*coalesce.EncodedLen(64)}
		p := newPair(t, cfg, cfg)
		p.awaitBundles(t)
		p.cli.noRuns = noRuns
		p.sendN(t, 1, 100, 64, true)
		p.sendN(t, 2, 100, 64, false)
		p.sendN(t, 3, 100, 64, false)
		ids, counts := groups(p.pollDatagram(t))
		share := (turnsMTU + 2) / 3 / smallPacket
		t.Logf("noRuns %v: channels %v, packets %v", noRuns, ids, counts)
		if len(ids) < 3 || ids[0] != 1 || counts[0] >= share || counts[1] != share {
			t.Errorf("noRuns %v: channels %v of %v packets in turn, want channel 1's held short of its share, then channel 2's share, %d", noRuns, ids, counts, share)
		}
	}
}

// appendRun gives back first as it was, not a bundle of it alone, should
// the sender append nothing once first is wrapped: bundle would wrap it
// again, and the peer drop the datagram as a bundle in a bundle (D24).
func TestAppendRunNothingUnwraps(t *testing.T) {
	p := turnsPair(t, false)
	c := p.cli.conns[p.ch]
	p.sendN(t, 1, 1, 64, false)
	cs := c.ring[0]
	first := p.pollDatagram(t) // the message, alone
	if len(first) != 1 || cs.snd.MayAppend() {
		t.Fatalf("setup: %v sent, channel may append %v", first, cs.snd.MayAppend())
	}
	// As if it were still in the ring, at the ring's position.
	cs.inRing, c.ring, c.ringPos = true, []*chanState{cs}, 0
	buf := make([]byte, 0, 1<<16)
	pkt := appendPacketHeader(buf, 9)
	pkt = append(pkt, "a packet"...)
	want := bytes.Clone(pkt)
	got, k := c.appendRun(p.now, pkt, pkt, true, cs)
	if k != 0 || !bytes.Equal(got, want) {
		t.Fatalf("appendRun with nothing to append: %d packets, %x, want 0 and %x", k, got, want)
	}
}

// N122: a channel that pollNew takes out of the ring, its messages all
// expired (D30, N80), ends its turn there: the next channel's turn is a
// whole share, not what was left of the turn of the one taken out.
func TestTurnAfterChannelExpired(t *testing.T) {
	for _, noRuns := range []bool{false, true} {
		cfg := Config{InitialPayloadMTU: turnsMTU, MTU: MTUConfig{Disabled: true},
			Congestion: CongestionConfig{FixedRate: 1 << 30}, UnreliableMaxDelay: 10 * time.Millisecond}
		p := newPair(t, cfg, cfg)
		c := p.cli.conns[p.ch]
		p.awaitBundles(t)
		p.advance(time.Second)
		p.cli.noRuns = noRuns
		// Channel 1 alone: its turn, begun by the packet that did not
		// fit the first datagram, is under way when that one is sent.
		p.sendN(t, 1, 200, 64, false)
		if chs := p.pollDatagram(t); len(chs) == 0 || c.turnLeft == 0 {
			t.Fatalf("setup: %d packets sent, turn left %d", len(chs), c.turnLeft)
		}
		// Channel 1's messages expire; channels 2 and 3 join, cutting
		// its turn to a third of a bundle.
		p.now = p.now.Add(20 * time.Millisecond)
		p.sendN(t, 2, 100, 64, false)
		p.sendN(t, 3, 100, 64, false)
		ids, counts := groups(p.pollDatagram(t))
		share := (turnsMTU + 2) / 2 / smallPacket
		t.Logf("noRuns %v: channels %v, packets %v", noRuns, ids, counts)
		if len(ids) < 3 || ids[0] != 1 || counts[0] != 1 || ids[1] != 2 || counts[1] != share {
			t.Errorf("noRuns %v: channels %v of %v packets in turn, want channel 1's leftover packet, then channel 2's share of two, %d", noRuns, ids, counts, share)
		}
	}
}

// N122, N87: a held channel whose packet fits once acks make room goes
// first, in a turn of its own: a whole share, not what was left of the
// turn under way when it went.
func TestTurnOfHeldChannelReleased(t *testing.T) {
	for _, noRuns := range []bool{false, true} {
		cfg := Config{InitialPayloadMTU: turnsMTU, MTU: MTUConfig{Disabled: true},
			Congestion: CongestionConfig{Disabled: true}, MaxInFlight: 64 << 10}
		p := newPair(t, cfg, cfg)
		c := p.cli.conns[p.ch]
		p.awaitBundles(t)
		p.cli.noRuns = noRuns
		// Channel 1's reliable packets fill MaxInFlight, and the rest
		// are held; channel 2's unreliable ones take every turn after,
		// one under way when a datagram ends.
		p.sendN(t, 1, 1000, 64, true)
		p.sendN(t, 2, 3000, 64, false)
		buf := make([]byte, 1<<16)
		var sent [][]byte
		for c.holdCh == nil || c.turnLeft == 0 || c.ring[c.ringPos%len(c.ring)] == c.holdCh {
			tr, ok := p.cli.PollTransmit(p.now, buf)
			if !ok || len(sent) == 100 {
				t.Fatalf("setup: %d datagrams, held %v, turn left %d", len(sent), c.holdCh != nil, c.turnLeft)
			}
			sent = append(sent, bytes.Clone(buf[:tr.N]))
		}
		// Their acks come back: channel 1 may send again.
		for _, d := range sent {
			p.srv.HandleDatagram(p.now, clientAddr, d)
		}
		for {
			tr, ok := p.srv.PollTransmit(p.now, buf)
			if !ok {
				break
			}
			p.cli.HandleDatagram(p.now, serverAddr, bytes.Clone(buf[:tr.N]))
		}
		ids, counts := groups(p.pollDatagram(t))
		share := (turnsMTU + 2) / 2 / smallPacket
		t.Logf("noRuns %v: channels %v, packets %v", noRuns, ids, counts)
		at := slices.Index(ids, 1)
		if at < 0 || counts[at] != share {
			t.Errorf("noRuns %v: channels %v of %v packets in turn, want channel 1's turn a share, %d", noRuns, ids, counts, share)
		}
	}
}
