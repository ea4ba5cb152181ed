package fastnet_test

// An off-path forger against an established connection: datagrams with the
// client's or the server's source address, made without seeing the traffic.
// Fastnet 1.0 has no authentication, so a forged packet that guesses a
// channel's state exactly is taken as the peer's (D15, D18, D26); what a
// blind forger must not achieve is harm with guesses that are wrong.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/coalesce"
	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/fastnet/fastnettest"
)

// forgeChannels are the message channels forged packets name: those the
// workload uses, one it never uses, the last, and any.
var forgeChannels = []int{0, 1, 2, 3, 9, fastnet.MaxChannel, -1}

// drawForgedChannel draws a message channel for a forged packet.
func drawForgedChannel(t *rapid.T) int16 {
	ch := rapid.SampledFrom(forgeChannels).Draw(t, "fch")
	if ch < 0 {
		ch = rapid.IntRange(0, fastnet.MaxChannel).Draw(t, "fchAny")
	}
	return int16(ch)
}

// drawForgedSeq draws a packet sequence number (D5) a blind forger might
// try: any, near the start where every channel begins, around the edge
// of the default receive window (D9), just before 0 in D6's order, and
// below -10000 (malformed).
func drawForgedSeq(t *rapid.T) int32 {
	switch rapid.IntRange(0, 4).Draw(t, "fseqKind") {
	case 0:
		return int32(rapid.IntRange(-10000, 1<<23-1).Draw(t, "fseq"))
	case 1:
		return int32(rapid.IntRange(0, 3000).Draw(t, "fseqLow"))
	case 2:
		return int32(rapid.IntRange(60000, 70000).Draw(t, "fseqEdge"))
	case 3:
		return int32(rapid.IntRange(-10000, -1).Draw(t, "fseqNeg"))
	}
	return int32(rapid.IntRange(-1<<23, -10001).Draw(t, "fseqBad"))
}

// drawWrongRel draws a reliable sequence number (D7) that no sender of
// the workload reaches: its channels send far fewer than 100,000 reliable
// packets, so an R from 1,000,000 on, or one just before 0 in D6's order,
// is a wrong guess whatever the channel's state.
func drawWrongRel(t *rapid.T) int32 {
	if rapid.IntRange(0, 3).Draw(t, "frelNeg") == 0 {
		return int32(rapid.IntRange(-10000, -100).Draw(t, "frel"))
	}
	return int32(rapid.IntRange(1_000_000, 1<<23-1).Draw(t, "frel"))
}

// drawForgedPacket draws one forged Fastnet packet (channel id included)
// of any kind but a bundle. early is set while the server may not have
// validated the client (D25): heartbeats are then left out, since a
// wrong echo of the server's challenge, or a positive value the client
// echoes for the forger, ends an unvalidated connection by design (N33).
func drawForgedPacket(t *rapid.T, early, bundles bool) []byte {
	const (
		kRandom = iota
		kData
		kAck
		kHeartbeat
		kMTU
		kControl
		kinds
	)
	k := rapid.IntRange(0, kinds-1).Draw(t, "fkind")
	if k == kHeartbeat && early {
		k = kAck
	}
	switch k {
	case kRandom:
		return rapid.SliceOfN(rapid.Byte(), 0, 64).Draw(t, "fbytes")
	case kData:
		reliable := rapid.Bool().Draw(t, "frel?")
		start := rapid.IntRange(0, 3).Draw(t, "fstart") > 0
		var chunk []byte
		switch rapid.IntRange(0, 2).Draw(t, "fchunk") {
		case 0: // a whole message, which would be delivered at once if unblocked
			chunk = coalesce.AppendMessage(nil, rapid.SliceOfN(rapid.Byte(), 0, 40).Draw(t, "fmsg"), reliable)
		case 1: // a header announcing a long message
			// Its payload is not zeros: a bundle whose lengths do not
			// add up is read on from inside it, and zeros read as
			// packets of channel 0 at sequence number 0 with R 0 or
			// 1, a right guess for a channel that has received
			// nothing yet (N154).
			long := bytes.Repeat([]byte{0x5a}, rapid.IntRange(100, 60000).Draw(t, "flong"))
			chunk = coalesce.AppendMessage(nil, long, reliable)
			chunk = chunk[:min(len(chunk), rapid.IntRange(1, 200).Draw(t, "fcut"))]
		default:
			chunk = rapid.SliceOfN(rapid.Byte(), 0, 200).Draw(t, "fjunk")
		}
		return dataPacket(drawForgedChannel(t), reliable, start, drawForgedSeq(t), drawWrongRel(t), chunk)
	case kAck:
		// Entries for packets never sent: sequence numbers no channel
		// of the workload reaches (D13), or a length that is no
		// multiple of 5.
		b := binary.BigEndian.AppendUint16(nil, 0xfffb)
		for range rapid.IntRange(0, 30).Draw(t, "facks") {
			b = binary.BigEndian.AppendUint16(b, uint16(drawForgedChannel(t)))
			var s int32
			if rapid.Bool().Draw(t, "fackNeg") {
				s = int32(rapid.IntRange(-10000, -100).Draw(t, "fackSeq"))
			} else {
				s = int32(rapid.IntRange(1_000_000, 1<<23-1).Draw(t, "fackSeq"))
			}
			b = append(b, byte(s>>16), byte(s>>8), byte(s))
		}
		if rapid.IntRange(0, 4).Draw(t, "fackOdd") == 0 {
			b = append(b, rapid.SliceOfN(rapid.Byte(), 1, 4).Draw(t, "fackTail")...)
		}
		return b
	case kHeartbeat:
		b := binary.BigEndian.AppendUint16(nil, 0xfffe)
		if rapid.IntRange(0, 5).Draw(t, "fhbOdd") == 0 {
			return append(b, rapid.SliceOfN(rapid.Byte(), 0, 5).Draw(t, "fhbBytes")...)
		}
		return binary.BigEndian.AppendUint16(b, uint16(rapid.Int16().Draw(t, "fhb")))
	case kMTU:
		ch := rapid.SampledFrom([]uint16{0xfffd, 0xfffc}).Draw(t, "fmtuCh")
		b := binary.BigEndian.AppendUint16(nil, ch)
		switch rapid.IntRange(0, 3).Draw(t, "fmtuKind") {
		case 0:
			return append(b, byte(rapid.IntRange(0, 1).Draw(t, "fmtuReset")))
		case 1:
			return binary.BigEndian.AppendUint32(b, uint32(rapid.IntRange(0, 200).Draw(t, "fmtuCount")))
		case 2:
			return binary.BigEndian.AppendUint32(b, rapid.Uint32().Draw(t, "fmtuCountAny"))
		}
		return append(b, make([]byte, rapid.IntRange(0, 1400).Draw(t, "fmtuProbe"))...)
	}
	// Channel -1, but for what ends a connection by design: "disconnect"
	// (D18), "connect?" (D28) and "abort" (N33), nor answers of the
	// handshake while the client waits for them (D15).
	// "query:ext:bundle=yes" too, to a side whose peer may take no
	// bundles (N156).
	lits := []string{"query:fastnet", "query:version", "query:ext:bundle", "query:ext:punch",
		"query:fastnet=yes", "query:ext:punch=yes", "connected\x00\x00\x00\x07", "query:", "", "discon",
		"query:ext:bundle=yes"}
	lit := rapid.SampledFrom(lits).Draw(t, "fctl")
	if early && (lit == "query:fastnet=yes" || len(lit) > 9 && lit[:9] == "connected") {
		lit = "query:fastnet"
	}
	return append([]byte{0xff, 0xff}, lit...)
}

// drawForgery draws one forged datagram: a packet, or a bundle (channel -6,
// D24) of forged packets, well formed or not.
func drawForgery(t *rapid.T, early, bundles bool) []byte {
	if rapid.IntRange(0, 4).Draw(t, "fbundle?") > 0 {
		return drawForgedPacket(t, early, bundles)
	}
	b := binary.BigEndian.AppendUint16(nil, 0xfffa)
	for range rapid.IntRange(1, 4).Draw(t, "finner") {
		p := drawForgedPacket(t, early, bundles)
		n := len(p)
		switch rapid.IntRange(0, 9).Draw(t, "fbadLen") {
		case 0:
			n += rapid.IntRange(1, 50).Draw(t, "fover")
		case 1:
			n = rapid.IntRange(0, n).Draw(t, "funder")
		}
		b = binary.BigEndian.AppendUint16(b, uint16(n))
		b = append(b, p...)
	}
	return b
}

// A forgeCase is a sim with its workload and forgeries: at each of ticks
// 20 ms apart, the sends and forged datagrams drawn for it.
type forgeCase struct {
	setup   simSetup
	ticks   []forgeTick
	atStart [][]byte // forged toward the server while the client connects
}

type forgeTick struct {
	sends  []op
	forged []forgedDatagram
}

type forgedDatagram struct {
	toClient bool
	b        []byte
}

func drawForgeCase(t *rapid.T) forgeCase {
	link := func(label string) fastnettest.Link {
		return fastnettest.Link{
			MTU:     1500,
			Loss:    pct(t, 15, label+".loss"),
			Delay:   ms(t, 1, 80, label+".delay"),
			Jitter:  ms(t, 0, 20, label+".jitter"),
			Dup:     pct(t, 5, label+".dup"),
			Reorder: pct(t, 10, label+".reorder"),
		}
	}
	cfg := fastnet.Config{MaxMessageSize: maxMsg, Timeout: 60 * time.Second, ConnectTimeout: 30 * time.Second}
	if rapid.Bool().Draw(t, "fixedMTU") {
		cfg.MTU.Disabled = true
		cfg.InitialPayloadMTU = rapid.SampledFrom([]int{32, 200, 1400}).Draw(t, "payloadMTU")
	}
	// Either side may take no bundles, as a strict 1.0 peer (N156).
	cli, srv := cfg, cfg
	cli.NoBundles = rapid.IntRange(0, 3).Draw(t, "cliNoBundles") == 0
	srv.NoBundles = rapid.IntRange(0, 3).Draw(t, "srvNoBundles") == 0
	bundles := !cli.NoBundles || !srv.NoBundles
	c := forgeCase{setup: simSetup{
		Seed: rapid.Uint64().Draw(t, "seed"),
		Cli:  cli, Srv: srv,
		Up: link("up"), Down: link("down"),
		// Default, or receivers parked whenever idle (N25): a parked
		// channel keeps where L's packet was only if it was at its
		// ignore number (N154).
		LiveReceivers: rapid.SampledFrom([]int{0, 1}).Draw(t, "liveReceivers"),
	}}
	for range rapid.IntRange(0, 5).Draw(t, "atStart") {
		c.atStart = append(c.atStart, drawForgery(t, true, bundles))
	}
	forgeries := rapid.IntRange(1, 100).Draw(t, "forgeries")
	ticks := rapid.IntRange(10, 100).Draw(t, "ticks")
	c.ticks = make([]forgeTick, ticks)
	for i := range c.ticks {
		tk := &c.ticks[i]
		for range rapid.IntRange(0, 2).Draw(t, "sends") {
			o := op{
				side:     rapid.IntRange(0, 1).Draw(t, "side"),
				channel:  rapid.IntRange(0, 3).Draw(t, "channel"),
				reliable: true,
				size:     rapid.SampledFrom([]int{0, 5, 40, 300, 3000}).Draw(t, "size"),
				n:        rapid.IntRange(1, 3).Draw(t, "n"),
			}
			// Channel 3 is unreliable only, channel 2 mixed; with
			// receivers parked, reliable only: a parked mixed
			// channel does not keep where L's packet was, and D26
			// then ends the connection for any reliable packet
			// behind its window with an R after L (N154).
			o.reliable = o.channel < 2 || o.channel == 2 && (c.setup.LiveReceivers > 0 || rapid.Bool().Draw(t, "reliable"))
			tk.sends = append(tk.sends, o)
		}
	}
	for range forgeries {
		// The ticks begin once the server has validated the client.
		i := rapid.IntRange(0, ticks-1).Draw(t, "forgeTick")
		c.ticks[i].forged = append(c.ticks[i].forged, forgedDatagram{
			toClient: rapid.Bool().Draw(t, "toClient"),
			b:        drawForgery(t, false, bundles),
		})
	}
	return c
}

// playForgeCase runs c: the handshake with the forgeries of atStart, then
// the ticks, then until every reliable message is delivered and acked.
func playForgeCase(t simT, c forgeCase) *sim {
	s := newSim(t, c.setup)
	if _, err := s.ep[cliSide].Connect(s.net.Now(), srvAddr); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	for _, b := range c.atStart {
		s.net.Inject(cliAddr, srvAddr, b)
		s.run(time.Millisecond)
	}
	if !s.runUntil(func() bool { return s.h[cliSide] != 0 && s.h[srvSide] != 0 || s.ended[cliSide] != nil }, c.setup.Cli.ConnectTimeout) ||
		s.h[srvSide] == 0 {
		t.Fatalf("not connected: client %v (%v), server %v", s.h[cliSide], s.ended[cliSide], s.h[srvSide])
	}
	id := uint32(1)
	for _, tk := range c.ticks {
		for _, o := range tk.sends {
			for range o.n {
				if s.ended[o.side] == nil {
					s.send(o.side, o.channel, payload(id, o.size), o.reliable)
				}
				id++
			}
		}
		for _, f := range tk.forged {
			if f.toClient {
				s.net.Inject(srvAddr, cliAddr, f.b)
			} else {
				s.net.Inject(cliAddr, srvAddr, f.b)
			}
		}
		s.run(20 * time.Millisecond)
	}
	if !s.runUntil(s.settled, 5*time.Minute) {
		t.Fatalf("not settled: %d client and %d server reliable messages missing (first %s / %s)",
			s.led[cliSide].pendingRel, s.led[srvSide].pendingRel, s.led[cliSide].firstMissing(), s.led[srvSide].firstMissing())
	}
	return s
}

// Against up to 100 datagrams forged from either side's address at any
// moment (the handshake, validation, established), with wrong guesses of
// the channels' state: random bytes; data packets on channels in use or
// not, any sequence number, reliable sequence numbers no sender reaches,
// any flags and chunks; acks of packets never sent; heartbeats of any
// value once the server has validated the client (D25); MTU resets,
// counts and probes (D19); channel -1 queries and stray answers; bundles
// of these, well formed or not (D24). Every reliable message arrives
// exactly once, intact and in order; no forged message is delivered; the
// connection stays up; memory stays within the limits after every step
// (D22, D23); and a graceful close still ends both sides.
func TestPropertyBlindForgery(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := playForgeCase(t, drawForgeCase(t))
		for side := range 2 {
			if s.ended[side] != nil {
				t.Fatalf("%s: connection ended: %v (at %v)", sideName(side), s.ended[side], s.endAt[side].Sub(clock.Epoch))
			}
		}
		s.closeAndIdle()
	})
}

// forgedStream connects a client and a server on a clean path, forges
// forged toward the server from the client's address, has the client send
// n reliable messages on channel 1, and runs until they are delivered and
// acked or the connection ends.
func forgedStream(t *testing.T, n int, forged ...[]byte) *sim {
	t.Helper()
	cfg := fixedMTU(200)
	link := fastnettest.Link{Delay: 10 * time.Millisecond}
	s := newSim(t, simSetup{Cli: cfg, Srv: cfg, Up: link, Down: link})
	s.connect(5 * time.Second)
	for _, b := range forged {
		s.net.Inject(cliAddr, srvAddr, b)
	}
	s.run(50 * time.Millisecond)
	for i := range n {
		s.send(cliSide, 1, payload(uint32(i+1), 10), true)
		s.run(20 * time.Millisecond)
	}
	s.runUntil(s.settled, time.Minute)
	return s
}

// checkIntact fails unless the connection is up and every reliable message
// arrived.
func (s *sim) checkIntact(t *testing.T) {
	t.Helper()
	for side := range 2 {
		if s.ended[side] != nil {
			t.Fatalf("%s: connection ended: %v", sideName(side), s.ended[side])
		}
	}
	if s.led[srvSide].pendingRel != 0 {
		t.Fatalf("%d reliable messages missing, first %s", s.led[srvSide].pendingRel, s.led[srvSide].firstMissing())
	}
}

// D7, D10, D23: a reliable packet within the window whose R waits for
// more reliable packets than there are places before it can never be
// unblocked, and no sender makes it. One forged with a wrong R, whatever
// its sequence number, used to be queued and acked; at the head of the
// queue it failed the channel ("inconsistent reliable sequence numbers")
// and ended the connection, at once when the queue was empty. It is now
// dropped unacked, and the messages really sent at its place arrive.
func TestForgedReliableWrongRDropped(t *testing.T) {
	msg := coalesce.AppendMessage(nil, []byte("forged"), true)
	s := forgedStream(t, 50,
		dataPacket(1, true, true, 30, 1234567, msg), // queue empty: the head at once
		dataPacket(1, true, true, 3, -5000, msg),    // an R before L
		dataPacket(7, true, false, 9, 777777, []byte{1, 2, 3}))
	s.checkIntact(t)
	if d := s.stats(srvSide).Dropped[fastnet.DropMalformedMessage]; d < 3 {
		t.Errorf("%d packets dropped as malformed, want the 3 forged ones", d)
	}
}

// D26, N38: a reliable packet at or before the ignore number whose R is
// after L is one the window passed without consuming it, and ends the
// connection loudly; but only one that lies after the packet with R = L,
// at least as many places after it as its R is after L, can be such a
// packet. One forged with a sequence number behind the window (half of
// all sequence numbers are) and a wrong R used to end the connection
// ("reliable packet passed by the receive window was never delivered");
// it is now dropped.
func TestForgedReliableBehindWindowDropped(t *testing.T) {
	msg := coalesce.AppendMessage(nil, []byte("forged"), true)
	s := forgedStream(t, 20,
		dataPacket(1, true, false, -1, 1000000, []byte{0}),
		dataPacket(1, true, true, -3000, 5, msg))
	s.checkIntact(t)
	// Later, behind messages already consumed.
	s.net.Inject(cliAddr, srvAddr, dataPacket(1, true, true, 5, 17, msg))
	s.net.Inject(cliAddr, srvAddr, dataPacket(1, true, true, 2000000, 30, msg))
	for i := range 10 {
		s.send(cliSide, 1, payload(uint32(100+i), 10), true)
	}
	s.runUntil(s.settled, time.Minute)
	s.checkIntact(t)
}

// D7, D10, D26: an unreliable packet whose R could never be unblocked at
// its place is dropped on arrival and, should it become so in the queue,
// dropped without moving the ignore number. Forged at the sequence number
// of a reliable packet still to come, it used to be discarded at the head
// with the ignore number moved past it, and the real packet, arriving
// after, ended the connection as passed by the window and never
// delivered.
func TestForgedUnreliableWrongRDoesNotMoveWindow(t *testing.T) {
	s := forgedStream(t, 20,
		dataPacket(1, false, false, 0, -100, []byte{0}),
		dataPacket(1, false, true, 4, 3000000, coalesce.AppendMessage(nil, []byte("forged"), false)))
	s.checkIntact(t)
}

// N155, D23, D26: an unreliable packet forged with an R plausible where
// it lies (N154) but more than the sender's there used to wait at the head
// of the channel's queue for reliable packets that never come, once the
// packets before it were lost: everything the channel received after it,
// reliable messages acked all the same, was never delivered. The sender's
// next packet disagrees with it (its R is less), and both are dropped; the
// reliable messages after them arrive.
func TestForgedUnreliableBlockerGivesWay(t *testing.T) {
	cfg := fixedMTU(200)
	cfg.NoBundles = true // the filter below reads single packets
	link := fastnettest.Link{Delay: 10 * time.Millisecond}
	s := newSim(t, simSetup{Cli: cfg, Srv: cfg, Up: link, Down: link})
	s.connect(5 * time.Second)
	s.net.Filter = func(from, to netip.AddrPort, b []byte) bool {
		p := parseWire(t, b)
		return !(from == cliAddr && p.ch == 1 && (p.seq == 1 || p.seq == 2)) // lost
	}
	s.send(cliSide, 1, payload(1, 10), true) // seq 0, R 1
	s.run(50 * time.Millisecond)
	// R 2 at seq 3 is plausible (seq 1 or 2 could carry it) but wrong.
	s.net.Inject(cliAddr, srvAddr, dataPacket(1, false, true, 3, 2, coalesce.AppendMessage(nil, []byte("forged"), false)))
	s.run(20 * time.Millisecond)
	for i := range 4 { // seq 1-4, R 1
		s.send(cliSide, 1, payload(uint32(10+i), 10), false)
		s.run(5 * time.Millisecond)
	}
	for i := range 5 {
		s.send(cliSide, 1, payload(uint32(2+i), 10), true)
		s.run(20 * time.Millisecond)
	}
	s.runUntil(s.settled, time.Minute)
	s.checkIntact(t)
	if d := s.stats(srvSide).Dropped[fastnet.DropMalformedMessage]; d < 2 {
		t.Errorf("%d packets dropped as malformed, want the forged one and the one it met", d)
	}
}

// D24, N69: bundles go to a peer once it answered "query:ext:bundle=yes",
// and a peer takes them once it answered. An answer forged before the
// peer heard the query (lost, or still on its way) made the client bundle
// and stop asking, and the server dropped its bundles for good: the
// client's data stalled until "peer is not acknowledging". A server that
// gets a bundle from a peer it never answered now answers it, as if
// asked; that bundle stays dropped, and the next ones are taken.
func TestForgedBundleAnswerBeforeQuery(t *testing.T) {
	cfg := fixedMTU(1200)
	cfg.Timeout = 10 * time.Second
	link := fastnettest.Link{Delay: 10 * time.Millisecond}
	s := newSim(t, simSetup{Cli: cfg, Srv: cfg, Up: link, Down: link})
	s.net.Filter = func(from, to netip.AddrPort, b []byte) bool {
		return !(from == cliAddr && string(b) == "\xff\xffquery:ext:bundle") // the client's query is lost
	}
	s.connect(5 * time.Second)
	s.forgedBundleAnswer()
	s.checkIntact(t)
	if st := s.stats(srvSide); st.BundlesReceived == 0 {
		t.Errorf("the server took no bundle")
	}
}

// forgedBundleAnswer forges "query:ext:bundle=yes" from the server to the
// client, then has the client send (sendRounds).
func (s *sim) forgedBundleAnswer() {
	s.net.Inject(srvAddr, cliAddr, []byte("\xff\xffquery:ext:bundle=yes"))
	s.run(50 * time.Millisecond)
	s.sendRounds(cliSide)
}

// sendRounds has side send 40 rounds of a small reliable message on each
// of channels 0-2, 20 ms apart, and runs until they settle.
func (s *sim) sendRounds(side int) {
	for i := range 40 {
		for ch := range 3 {
			s.send(side, ch, payload(uint32(3*i+ch+1), 20), true)
		}
		s.run(20 * time.Millisecond)
	}
	s.runUntil(s.settled, time.Minute)
}

// N156, D24: "query:ext:bundle=yes" is a literal anyone can forge. One
// forged to a client whose server takes no bundles (a strict 1.0 peer, or
// NoBundles) made the client bundle everything, acks and heartbeats
// included; the server dropped every bundle, and the connection ended as
// "peer is not acknowledging". The client now bundles only once the peer
// has echoed a heartbeat that went in a bundle: it sends a few such
// heartbeats, which the server drops, and nothing else changes.
func TestForgedBundleAnswerToStrictPeer(t *testing.T) {
	s := strictSim(t, srvSide)
	s.run(time.Second)
	s.forgedBundleAnswer()
	s.run(15 * time.Second)
	s.checkIntact(t)
	if to, _ := fastnet.BundlesNegotiated(s.ep[cliSide], s.h[cliSide]); to {
		t.Error("the client bundles to a server that takes no bundles")
	}
	if d := s.stats(srvSide).Dropped[fastnet.DropBundleUnnegotiated]; d == 0 || d > 10 {
		t.Errorf("the server dropped %d bundles, want the client's proofs, 1 to 10", d)
	}
}

// N154, N25: a channel whose receiver was parked keeps where its packet
// with R = L was when that was its last packet, or when it never took a
// reliable packet, so that a forged reliable packet behind its window
// with an R no sender reached is dropped after the receiver is revived,
// as before it was parked: on a reliable channel, on an unreliable one.
func TestForgedBehindWindowOfParkedChannel(t *testing.T) {
	for _, reliable := range []bool{true, false} {
		t.Run(fmt.Sprintf("reliable=%v", reliable), func(t *testing.T) {
			cfg := fixedMTU(200)
			link := fastnettest.Link{Delay: 10 * time.Millisecond}
			s := newSim(t, simSetup{Cli: cfg, Srv: cfg, Up: link, Down: link, LiveReceivers: 1})
			s.connect(5 * time.Second)
			// Channels 1 and 2 in turn: each parks while the other
			// is used.
			for i := range 20 {
				s.send(cliSide, 1+i%2, payload(uint32(i+1), 10), reliable)
				s.run(20 * time.Millisecond)
			}
			s.runUntil(s.settled, time.Minute)
			msg := coalesce.AppendMessage(nil, []byte("forged"), true)
			// R values no sender reaches at those places: more
			// reliable packets after L's than places (N154).
			for _, seq := range []int32{2, 5} {
				for _, rel := range []int32{40, 2000000} {
					s.net.Inject(cliAddr, srvAddr, dataPacket(1, true, true, seq, rel, msg))
					s.run(20 * time.Millisecond)
				}
			}
			for i := range 4 {
				s.send(cliSide, 1+i%2, payload(uint32(100+i), 10), true)
				s.run(20 * time.Millisecond)
			}
			s.runUntil(s.settled, time.Minute)
			s.checkIntact(t)
		})
	}
}

// N154: a datagram of zeros is an unreliable packet of channel 0 at
// sequence number 0, R 0, that starts no message. On a channel that has
// received nothing yet it was taken for the rest of a message whose start
// was gone and discarded, the window moved past sequence number 0, and
// the channel's real first packet, reliable, then ended the connection
// (D26). A channel's first packet starts a message: it is dropped.
func TestZerosBeforeFirstPacket(t *testing.T) {
	cfg := fixedMTU(200)
	link := fastnettest.Link{Delay: 10 * time.Millisecond}
	s := newSim(t, simSetup{Cli: cfg, Srv: cfg, Up: link, Down: link})
	s.connect(5 * time.Second)
	for _, n := range []int{9, 40, 120} {
		s.net.Inject(cliAddr, srvAddr, make([]byte, n))
	}
	s.run(50 * time.Millisecond)
	for i := range 5 {
		s.send(cliSide, 0, payload(uint32(i+1), 10), true)
		s.run(20 * time.Millisecond)
	}
	s.runUntil(s.settled, time.Minute)
	s.checkIntact(t)
}

// N154: a mixed channel parked after an unreliable message does not know
// where its packet with R = L was; once revived, the next reliable message
// it takes tells it, and it keeps that when it parks again. A forged
// reliable packet behind its window with an R no sender reaches there is
// then dropped, as on a channel that never parked, instead of ending the
// connection.
func TestForgedBehindWindowAfterParkedUnknown(t *testing.T) {
	cfg := fixedMTU(200)
	link := fastnettest.Link{Delay: 10 * time.Millisecond}
	s := newSim(t, simSetup{Cli: cfg, Srv: cfg, Up: link, Down: link, LiveReceivers: 1})
	s.connect(5 * time.Second)
	// Channel 1 takes a reliable message, an unreliable one (it parks
	// not knowing where its packet with R = L was), then two reliable
	// ones; channel 2 in between, so that channel 1 parks each time.
	for i, rel := range []bool{true, false, true, true} {
		s.send(cliSide, 1, payload(uint32(2*i+1), 10), rel)
		s.run(20 * time.Millisecond)
		s.send(cliSide, 2, payload(uint32(2*i+2), 10), true)
		s.run(20 * time.Millisecond)
	}
	s.runUntil(s.settled, time.Minute)
	// Channel 1's packets are 0 to 3, the last reliable with R 3: R 40
	// at sequence number 2 no sender makes.
	s.net.Inject(cliAddr, srvAddr, dataPacket(1, true, true, 2, 40, coalesce.AppendMessage(nil, []byte("forged"), true)))
	s.run(20 * time.Millisecond)
	for i := range 4 {
		s.send(cliSide, 1+i%2, payload(uint32(100+i), 10), true)
		s.run(20 * time.Millisecond)
	}
	s.runUntil(s.settled, time.Minute)
	s.checkIntact(t)
}
