package fastnet

import (
	"testing"

	"github.com/fastnet-engine/fastnet/coalesce"
)

// turnsMTU is the payload MTU of the turn tests: a bundle of 9,002 bytes
// holds 96 packets of a 64-byte message (smallPacket, 93 bytes each with
// turnOverhead) beside its channel id.
const turnsMTU = 9000

// smallPacket is what a packet of a 64-byte message takes in a bundle.
var smallPacket = turnOverhead + coalesce.EncodedLen(64)

// turnsPair returns a connected pair at turnsMTU, estimation and
// congestion control off (no pacer or window holds packets back), whose
// client sends bundles unless noBundles is set, and nothing queued.
func turnsPair(t *testing.T, noBundles bool) *pair {
	t.Helper()
	cfg := Config{InitialPayloadMTU: turnsMTU, MTU: MTUConfig{Disabled: true}, NoBundles: noBundles,
		Congestion: CongestionConfig{Disabled: true}}
	p := newPair(t, cfg, cfg)
	if !noBundles {
		p.awaitBundles(t)
	}
	p.cliEvs, p.srvEvs = nil, nil
	return p
}

// awaitBundles lets time pass until p's client may send bundles (D24).
func (p *pair) awaitBundles(t *testing.T) {
	t.Helper()
	c := p.cli.conns[p.ch]
	for i := 0; !c.bundleTo; i++ {
		if i == 100 {
			t.Fatal("bundles never negotiated")
		}
		p.advance(heartbeatInterval(p.cli.cfg.Timeout))
	}
}

// sendN queues n messages of size bytes on channel ch of p's client.
func (p *pair) sendN(t *testing.T, ch, n, size int, reliable bool) {
	t.Helper()
	for range n {
		if err := p.cli.Send(p.now, p.ch, ch, make([]byte, size), reliable); err != nil {
			t.Fatal(err)
		}
	}
}

// pollDatagram returns the channels of the data packets, in order, of
// the client's next datagram, nil if it has none to send.
func (p *pair) pollDatagram(t *testing.T) []int16 {
	t.Helper()
	buf := make([]byte, 1<<16)
	tr, ok := p.cli.PollTransmit(p.now, buf)
	if !ok {
		return nil
	}
	return dataChannels(t, buf[:tr.N])
}

// dataChannels returns the channels of the data packets of datagram d, a
// lone packet or a bundle of them, in order.
func dataChannels(t *testing.T, d []byte) []int16 {
	t.Helper()
	ch, payload, err := parsePacket(d)
	if err != nil {
		t.Fatal(err)
	}
	if ch != chBundle {
		if ch >= 0 {
			return []int16{ch}
		}
		return []int16{}
	}
	out := []int16{}
	for len(payload) > 0 {
		inner, rest, ok := cutBundle(payload)
		if !ok {
			t.Fatal("bad bundle")
		}
		payload = rest
		ich, _, err := parsePacket(inner)
		if err != nil {
			t.Fatal(err)
		}
		if ich >= 0 {
			out = append(out, ich)
		}
	}
	return out
}

// groups returns the channels of chs with the packets of each run of one
// channel counted: [1 1 2 2 2] gives [1 2] and [2 3].
func groups(chs []int16) (ids []int16, counts []int) {
	for _, ch := range chs {
		if n := len(ids); n > 0 && ids[n-1] == ch {
			counts[n-1]++
			continue
		}
		ids, counts = append(ids, ch), append(counts, 1)
	}
	return ids, counts
}

// N122: the channels of a connection to a peer that takes bundles take
// turns of their share of a bundle, not of a packet: with two or three
// channels queueing small messages, each datagram holds each channel's
// packets together, every channel gets its share of every datagram, and
// the runs of one channel's packets are written and taken in one step
// (N101). Packet by packet (noRuns), the datagrams are the same.
func TestTurnsShareEachBundle(t *testing.T) {
	for _, tc := range []struct {
		chans  int
		noRuns bool
	}{{2, false}, {3, false}, {2, true}, {3, true}} {
		chans := tc.chans
		p := turnsPair(t, false)
		p.cli.noRuns = tc.noRuns
		for ch := 1; ch <= chans; ch++ {
			p.sendN(t, ch, 300, 64, ch%2 == 0)
		}
		share := (turnsMTU + 2) / chans / smallPacket
		runs := p.cli.runSent
		for d := 0; d < 3; d++ {
			chs := p.pollDatagram(t)
			ids, counts := groups(chs)
			t.Logf("%d channels, datagram %d: channels %v, packets %v", chans, d, ids, counts)
			if len(ids) < chans || len(ids) > chans+1 {
				t.Fatalf("%d channels, datagram %d: runs of channels %v, want each channel's packets together", chans, d, ids)
			}
			per := map[int16]int{}
			for i, id := range ids {
				if counts[i] > share {
					t.Errorf("datagram %d: %d packets of channel %d in a row, more than its share, %d", d, counts[i], id, share)
				}
				per[id] += counts[i]
			}
			for ch := 1; ch <= chans; ch++ {
				if n := per[int16(ch)]; n < share-1 || n > share+1 {
					t.Errorf("%d channels, datagram %d: %d packets of channel %d, want its share, %d", chans, d, n, ch, share)
				}
			}
		}
		if sent := p.cli.runSent - runs; !tc.noRuns && sent < uint64(2*chans*share) {
			t.Errorf("%d channels: %d packets written in runs, want most of them", chans, sent)
		}
	}
}

// N122: a channel that queues data while another's turn is under way
// waits behind at most the share the turn would start with now. The
// client's only channel begins a turn of a whole bundle; once a second
// channel joins, its message goes within the first's share of two.
func TestTurnCutWhenChannelJoins(t *testing.T) {
	p := turnsPair(t, false)
	p.sendN(t, 1, 600, 64, false)
	// The first datagram ends part of the way into a turn of channel 1:
	// the packet polled that did not fit it, which waits for the next
	// datagram (N71), began a turn of a whole bundle.
	if chs := p.pollDatagram(t); len(chs) == 0 {
		t.Fatal("nothing sent")
	}
	c := p.cli.conns[p.ch]
	if c.turnLeft == 0 {
		t.Fatal("no turn under way after the first datagram: the test tests nothing")
	}
	p.sendN(t, 2, 1, 64, true)
	chs := p.pollDatagram(t)
	at := -1
	for i, ch := range chs {
		if ch == 2 {
			at = i
			break
		}
	}
	share := (turnsMTU + 2) / 2 / smallPacket
	if at < 0 || at > share+1 {
		t.Fatalf("channel 2's message at %d of the datagram's packets %v, want within channel 1's share, %d", at, chs, share)
	}
}

// N122, N10: a large message's packets, larger than a channel's share,
// go one a turn, as before turns were shares: a channel queueing small
// messages gets its share between two of them.
func TestTurnOfLargePackets(t *testing.T) {
	p := turnsPair(t, false)
	p.sendN(t, 1, 1, 50000, false)
	p.sendN(t, 2, 300, 64, false)
	// The turns, datagram after datagram: each a channel and its packets.
	var ids []int16
	var counts []int
	for range 6 {
		i, c := groups(p.pollDatagram(t))
		ids, counts = append(ids, i...), append(counts, c...)
	}
	share := (turnsMTU + 2) / 2 / smallPacket
	for i := range ids {
		want, n := int16(1+i%2), 1
		if want == 2 {
			n = share
		}
		if ids[i] != want || counts[i] != n {
			t.Fatalf("turns of channels %v of %v packets, want a large packet of channel 1 and %d small ones of channel 2 in turn", ids, counts, share)
		}
	}
	if len(ids) < 6 {
		t.Fatalf("turns of channels %v, want them alternating", ids)
	}
}

// N122, N10: to a peer that takes no bundles, every datagram is one
// packet, and the channels take turns a packet each, as in 1.0.
func TestTurnsWithoutBundles(t *testing.T) {
	p := turnsPair(t, true)
	p.sendN(t, 1, 10, 64, false)
	p.sendN(t, 2, 10, 64, false)
	var seq []int16
	for range 20 {
		chs := p.pollDatagram(t)
		if len(chs) != 1 {
			t.Fatalf("a datagram of packets %v, want one", chs)
		}
		seq = append(seq, chs...)
	}
	for i := range seq {
		if want := int16(1 + i%2); seq[i] != want {
			t.Fatalf("channels in order %v, want 1 and 2 in turn", seq)
		}
	}
}
