package fastnet_test

// Named scenarios on the simulated network, one per decision of
// docs/decisions.md that can be seen from outside an endpoint: on the wire
// (through Network.Filter), in the events, and in the statistics. Each
// opens with the decision and the sentence of the specification it checks.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/fastnet/fastnettest"
)

// The protocol's channels (spec "Basic Packet Format").
const (
	wireControl   = -1
	wireHeartbeat = -2
	wireAck       = -5
)

// wirePacket is a datagram as the test reads it, independently of the
// engine's own parsers.
type wirePacket struct {
	ch       int16
	payload  []byte
	reliable bool  // message channels: flag 0x01 (D4)
	start    bool  // flag 0x02
	seq, rel int32 // the 24-bit sequence numbers (D1, D5, D7)
}

// get24 reads a 24-bit two's complement big-endian integer (D1).
func get24(b []byte) int32 {
	return int32(uint32(b[0])<<24|uint32(b[1])<<16|uint32(b[2])<<8) >> 8
}

// parseWire parses a datagram; a message channel packet must carry the
// 7-byte header of D4.
func parseWire(t simT, b []byte) wirePacket {
	t.Helper()
	if len(b) < 2 {
		t.Fatalf("datagram of %d bytes", len(b))
	}
	p := wirePacket{ch: int16(binary.BigEndian.Uint16(b)), payload: b[2:]}
	if p.ch >= 0 {
		if len(p.payload) < 7 {
			t.Fatalf("channel %d packet of %d bytes, shorter than its header", p.ch, len(b))
		}
		h := p.payload
		p.reliable, p.start = h[0]&1 != 0, h[0]&2 != 0
		p.seq, p.rel = get24(h[1:4]), get24(h[4:7])
	}
	return p
}

// encodedLen is the size of a message of n bytes in the message format:
// flags, the shortest length field, payload, checksum (D2, D3).
func encodedLen(n int) int {
	lenLen := 1
	for v := n; v > 0xff; v >>= 8 {
		lenLen++
	}
	sum := n
	if n >= 16 {
		sum = 16
	}
	return 1 + lenLen + n + sum
}

// fixedMTU returns a configuration whose payload MTU stays at mtu.
func fixedMTU(mtu int) fastnet.Config {
	c := fastnet.Config{InitialPayloadMTU: mtu}
	c.MTU.Disabled = true
	return c
}

// messagesOn returns the messages side received on channel ch.
func (s *sim) messagesOn(side, ch int) []received {
	var out []received
	for _, m := range s.got[side] {
		if m.channel == ch {
			out = append(out, m)
		}
	}
	return out
}

// D5, D6, D7: "The sequence number starts at 0"; packet sequence numbers
// are per channel and per direction and increase by one per packet; the
// reliable sequence number R starts at 0 and advances before each reliable
// packet, which carries the new R, while an unreliable packet carries the
// current R.
func TestScenarioSequenceNumbers(t *testing.T) {
	cfg := fixedMTU(32)
	cfg.NoBundles = true // the filter reads one packet per datagram
	s := newSim(t, simSetup{Cli: cfg, Srv: cfg})
	s.connect(time.Second)
	type key struct {
		from netip.AddrPort
		ch   int16
	}
	type state struct{ seq, rel, n int32 }
	seen := map[key]*state{}
	s.net.Filter = func(from, to netip.AddrPort, b []byte) bool {
		p := parseWire(t, b)
		if p.ch < 0 {
			return true
		}
		k := key{from, p.ch}
		st := seen[k]
		if st == nil {
			if p.seq != 0 || p.rel != 0 && p.rel != 1 {
				t.Errorf("%v channel %d: first packet has sequence numbers %d, %d; want 0 and R 0 or 1", from, p.ch, p.seq, p.rel)
			}
			st = &state{seq: -1}
			seen[k] = st
		}
		wantRel := st.rel
		if p.reliable {
			wantRel++
		}
		if p.seq != st.seq+1 || p.rel != wantRel {
			t.Errorf("%v channel %d packet %d: sequence numbers %d, %d after %d, %d (reliable %v)", from, p.ch, st.n, p.seq, p.rel, st.seq, st.rel, p.reliable)
		}
		st.seq, st.rel = p.seq, p.rel
		st.n++
		return true
	}
	// Messages of 1, 3 and 41 packets, mixed, on two channels each way.
	sizes := []int{5, 60, 1000}
	id := uint32(0)
	for round := range 3 {
		for _, side := range []int{cliSide, srvSide} {
			for _, ch := range []int{1, 2} {
				for i, size := range sizes {
					id++
					if err := s.send(side, ch, payload(id, size), (i+round+ch+side)%2 == 0); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		s.run(100 * time.Millisecond)
	}
	if !s.runUntil(s.settled, time.Minute) {
		t.Fatal("not everything delivered")
	}
	if len(seen) != 4 {
		t.Fatalf("saw %d channel-directions, want 4", len(seen))
	}
	want := int32(0)
	for _, size := range sizes {
		want += 3 * int32((encodedLen(size)+24)/25)
	}
	for k, st := range seen {
		if st.n != want {
			t.Errorf("%v channel %d: %d packets, want %d", k.from, k.ch, st.n, want)
		}
	}
}

// D7: "A packet p is unblocked iff need(p) == L": an unreliable message
// sent after a reliable one waits for it. The reliable packet's first send
// is lost; the unreliable message behind it arrives first but is delivered
// only when the resend of the reliable one arrives, right after it.
func TestScenarioUnreliableWaitsForReliable(t *testing.T) {
	link := fastnettest.Link{Delay: 20 * time.Millisecond}
	s := newSim(t, simSetup{Cli: fixedMTU(100), Srv: fixedMTU(100), Up: link, Down: link, KeepMessages: true})
	s.connect(time.Second)
	var firstSend, resend, unrelArrive clock.Time
	sends := 0
	s.net.Filter = func(from, to netip.AddrPort, b []byte) bool {
		p := parseWire(t, b)
		if from != cliAddr || p.ch != 1 {
			return true
		}
		if p.reliable {
			sends++
			if sends == 1 {
				firstSend = s.net.Now()
				return false
			}
			if resend == 0 {
				resend = s.net.Now()
			}
		} else if unrelArrive == 0 {
			unrelArrive = s.net.Now().Add(link.Delay)
		}
		return true
	}
	s.send(cliSide, 1, payload(1, 20), true)
	s.send(cliSide, 1, payload(2, 20), false)
	if !s.runUntil(func() bool { return len(s.got[srvSide]) == 2 }, 10*time.Second) {
		t.Fatalf("delivered %d of 2 messages", len(s.got[srvSide]))
	}
	got := s.got[srvSide]
	if !got[0].reliable || got[1].reliable {
		t.Fatalf("delivered reliable %v then %v; want the reliable message first", got[0].reliable, got[1].reliable)
	}
	if resend == 0 || got[0].at != resend.Add(link.Delay) || got[1].at != got[0].at {
		t.Errorf("first send at %v, resend at %v, unreliable arrived at %v; delivered at %v and %v: want both when the resend arrives",
			firstSend.Sub(clock.Epoch), resend.Sub(clock.Epoch), unrelArrive.Sub(clock.Epoch), got[0].at.Sub(clock.Epoch), got[1].at.Sub(clock.Epoch))
	}
	if unrelArrive >= got[1].at {
		t.Errorf("the unreliable message arrived at %v, not before the resend", unrelArrive.Sub(clock.Epoch))
	}
}

// D8: "A reliable packet at or before G, or already in the queue, is a
// duplicate: it is acked again and dropped." The first ack is lost; the
// resend is acked again, not delivered twice, and the sender frees it.
func TestScenarioDuplicateAckedAgain(t *testing.T) {
	srv := fixedMTU(100)
	srv.NoBundles = true // its acks travel alone, for the filter
	s := newSim(t, simSetup{Cli: fixedMTU(100), Srv: srv, KeepMessages: true})
	s.connect(time.Second)
	acks := 0
	s.net.Filter = func(from, to netip.AddrPort, b []byte) bool {
		if from == srvAddr && parseWire(t, b).ch == wireAck {
			acks++
			return acks > 1
		}
		return true
	}
	s.send(cliSide, 1, payload(1, 20), true)
	if !s.runUntil(s.settled, 10*time.Second) {
		t.Fatal("not settled")
	}
	st := s.stats(srvSide)
	if acks != 2 || st.Dropped[fastnet.DropDuplicate] != 1 || st.AcksSent != 2 {
		t.Errorf("%d ack packets, %d ack entries, %d duplicates; want 2, 2, 1", acks, st.AcksSent, st.Dropped[fastnet.DropDuplicate])
	}
	if c := s.stats(cliSide); c.PacketsResent != 1 || c.InFlightPackets != 0 {
		t.Errorf("client resent %d packets, has %d in flight; want 1 and 0", c.PacketsResent, c.InFlightPackets)
	}
	if n := len(s.got[srvSide]); n != 1 {
		t.Errorf("delivered %d times", n)
	}
}

// D9: "A packet more than W packets after G ... is dropped and not acked."
// With the first packet lost and a window of 8, packets 9 and on are
// dropped unacked; once the first is resent, the resends of the others
// deliver everything, in order.
func TestScenarioReceiveWindow(t *testing.T) {
	cfg := fixedMTU(32)
	cfg.MaxMessageSize = 100 // 5 packets at most, so a window of 8 is valid
	srv := cfg
	srv.ReceiveWindow = 8
	s := newSim(t, simSetup{Cli: cfg, Srv: srv, Up: fastnettest.Link{Delay: 5 * time.Millisecond},
		Down: fastnettest.Link{Delay: 5 * time.Millisecond}, KeepMessages: true})
	s.connect(time.Second)
	lost := false
	var acked []int32
	s.net.Filter = func(from, to netip.AddrPort, b []byte) bool {
		p := parseWire(t, b)
		if from == cliAddr && p.ch == 1 && p.seq == 0 && !lost {
			lost = true
			return false
		}
		if from == srvAddr && p.ch == wireAck {
			for a := p.payload; len(a) >= 5; a = a[5:] {
				acked = append(acked, get24(a[2:5]))
			}
		}
		return true
	}
	for i := range 20 {
		s.send(cliSide, 1, payload(uint32(i), 10), true)
	}
	if !s.runUntil(s.settled, time.Minute) {
		t.Fatalf("not settled: %s", s.led[srvSide].firstMissing())
	}
	if d := s.stats(srvSide).Dropped[fastnet.DropWindow]; d == 0 {
		t.Error("no packet dropped for the window")
	}
	// Before the first packet was resent, only packets 1..8 (within 8 of
	// G = -1) were acked.
	for i, seq := range acked {
		if seq == 0 {
			for _, early := range acked[:i] {
				if early > 8 {
					t.Errorf("packet %d acked while packet 0 was missing", early)
				}
			}
			break
		}
	}
	if n := len(s.got[srvSide]); n != 20 {
		t.Errorf("delivered %d of 20", n)
	}
}

// D10, D11 rule 3: "The CMG is unreliable and its newest packet arrived
// more than MCI ago: drop it and set G to its last sequence number." A
// three-packet unreliable message loses its middle packet; the message
// sent right behind it waits until the MCI (25 ms) has passed since the
// newest packet of the broken one, then flows.
func TestScenarioIncompleteUnreliableExpires(t *testing.T) {
	s := newSim(t, simSetup{Cli: fixedMTU(32), Srv: fixedMTU(32), KeepMessages: true})
	s.connect(time.Second)
	var lastBroken clock.Time
	s.net.Filter = func(from, to netip.AddrPort, b []byte) bool {
		p := parseWire(t, b)
		if from != cliAddr || p.ch != 1 || p.seq > 2 {
			return true
		}
		lastBroken = s.net.Now()
		return p.seq != 1
	}
	s.send(cliSide, 1, payload(1, 40), false) // 3 packets (D12)
	s.send(cliSide, 1, payload(2, 10), false)
	s.send(cliSide, 1, payload(3, 10), true)
	if !s.runUntil(func() bool { return len(s.got[srvSide]) == 2 }, time.Second) {
		t.Fatalf("delivered %d of 2", len(s.got[srvSide]))
	}
	// The start packet expires, then the orphaned last packet.
	st := s.stats(srvSide)
	if st.Dropped[fastnet.DropExpired] == 0 {
		t.Errorf("Dropped[expired] = 0")
	}
	mci := fastnet.DefaultCoalesceInterval
	for _, m := range s.got[srvSide] {
		if m.at != lastBroken.Add(mci) {
			t.Errorf("message of %d bytes delivered at %v, want the MCI after the last packet of the broken message, %v",
				len(m.data), m.at.Sub(clock.Epoch), lastBroken.Add(mci).Sub(clock.Epoch))
		}
	}
	// Later messages flow at once.
	at := s.net.Now()
	s.send(cliSide, 1, payload(4, 100), false)
	if !s.runUntil(func() bool { return len(s.got[srvSide]) == 3 }, time.Second) || s.got[srvSide][2].at != at {
		t.Errorf("a later message was not delivered at once")
	}
}

// D10, D11: the packets of an unreliable message may arrive in any order;
// a head that does not start a message waits, since its start may still
// come ("includes an unreliable head that does not start a message but
// may still be preceded by its start").
func TestScenarioReorderedUnreliableMessage(t *testing.T) {
	for _, order := range [][]int{{1, 2, 0}, {2, 1, 0}, {1, 0, 2}, {2, 0, 1}} {
		s := newSim(t, simSetup{Cli: fixedMTU(32), Srv: fixedMTU(32), KeepMessages: true})
		s.connect(time.Second)
		var held [][]byte
		s.net.Filter = func(from, to netip.AddrPort, b []byte) bool {
			if from == cliAddr && parseWire(t, b).ch == 1 && len(held) < 3 {
				held = append(held, bytes.Clone(b))
				return false
			}
			return true
		}
		s.send(cliSide, 1, payload(1, 40), false) // 3 packets (D12)
		s.run(time.Millisecond)
		if len(held) != 3 {
			t.Fatalf("%d packets sent for a message of 40 bytes, want 3", len(held))
		}
		for _, i := range order {
			s.net.Inject(cliAddr, srvAddr, held[i])
		}
		s.run(time.Second)
		if n := len(s.got[srvSide]); n != 1 {
			t.Errorf("packets in order %v: %d messages delivered, want 1; dropped %v", order, n, s.stats(srvSide).Dropped)
		}
	}
}

// D12: "a datagram is at most payload MTU + 2 bytes. Message MTU = payload
// MTU - 7. The encoded message ... is cut into message-MTU chunks with
// consecutive sequence numbers; the first carries the start flag; all carry
// the message's reliability."
func TestScenarioFragmentation(t *testing.T) {
	for _, mtu := range []int{32, 100, 1200} {
		s := newSim(t, simSetup{Cli: fixedMTU(mtu), Srv: fixedMTU(mtu), KeepMessages: true})
		s.connect(time.Second)
		var pkts []wirePacket
		s.net.Filter = func(from, to netip.AddrPort, b []byte) bool {
			if len(b) > mtu+2 {
				t.Errorf("MTU %d: datagram of %d bytes", mtu, len(b))
			}
			if p := parseWire(t, b); from == cliAddr && p.ch == 3 {
				pkts = append(pkts, p)
			}
			return true
		}
		for i, n := range []int{0, 1, 15, 16, 17, mtu - 7 - 3, mtu - 7 - 2, mtu, 1000, 5000, 65000} {
			pkts = pkts[:0]
			reliable := i%2 == 0
			s.send(cliSide, 3, payload(uint32(i), n), reliable)
			if !s.runUntil(s.settled, time.Second) {
				t.Fatalf("MTU %d: message of %d bytes not delivered", mtu, n)
			}
			chunk := mtu - 7
			want := (encodedLen(n) + chunk - 1) / chunk
			if len(pkts) != want {
				t.Errorf("MTU %d: message of %d bytes (%d encoded) took %d packets, want %d", mtu, n, encodedLen(n), len(pkts), want)
				continue
			}
			total := 0
			for j, p := range pkts {
				total += len(p.payload) - 7
				if p.start != (j == 0) || p.reliable != reliable || j > 0 && p.seq != pkts[j-1].seq+1 {
					t.Errorf("MTU %d, %d bytes, packet %d: start %v, reliable %v, seq %d", mtu, n, j, p.start, p.reliable, p.seq)
				}
				if j < len(pkts)-1 && len(p.payload) != mtu {
					t.Errorf("MTU %d, %d bytes: packet %d carries %d bytes, not a full chunk", mtu, n, j, len(p.payload))
				}
			}
			if total != encodedLen(n) {
				t.Errorf("MTU %d: message of %d bytes sent as %d chunk bytes, want %d", mtu, n, total, encodedLen(n))
			}
		}
	}
}

// batchNode hands the datagrams that arrive at one instant to its endpoint
// together, as a driver reading a batch of datagrams (recvmmsg) before it
// polls does: the network delivers every arrival of an instant before it
// fires the node's deadline, set to that instant.
type batchNode struct {
	ep    *fastnet.Endpoint
	queue []batchDatagram
}

type batchDatagram struct {
	at   clock.Time
	from netip.AddrPort
	b    []byte
}

func (n *batchNode) HandleDatagram(now clock.Time, from netip.AddrPort, b []byte) {
	n.queue = append(n.queue, batchDatagram{now, from, bytes.Clone(b)})
}

func (n *batchNode) HandleTimeout(now clock.Time) {
	for _, d := range n.queue {
		n.ep.HandleDatagram(d.at, d.from, d.b)
	}
	n.queue = n.queue[:0]
	n.ep.HandleTimeout(now)
}

func (n *batchNode) NextDeadline() (clock.Time, bool) {
	if len(n.queue) > 0 {
		return n.queue[0].at, true
	}
	return n.ep.NextDeadline()
}

func (n *batchNode) PollTransmit(now clock.Time, buf []byte) (fastnet.Transmit, bool) {
	return n.ep.PollTransmit(now, buf)
}

func (n *batchNode) PollEvent() (fastnet.Event, bool) { return n.ep.PollEvent() }

// D13: "Acks are batched into as few ack packets as the payload MTU allows
// and flushed no later than the end of handling the current input." Twenty
// reliable packets handled as one input are acked in ceil(20/6) packets at
// payload MTU 32 (six 5-byte entries each), none above the MTU. Repeats of
// earlier entries (N29) fill only the room the fresh ones leave: they never
// add a packet.
func TestScenarioAcksBatched(t *testing.T) {
	for _, mtu := range []int{32, 100} {
		n := fastnettest.NewNetwork(1)
		cfg := fixedMTU(mtu)
		cfg.Role = fastnet.Server
		srv, err := fastnet.NewEndpoint(cfg)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Role = fastnet.Client
		cli, err := fastnet.NewEndpoint(cfg)
		if err != nil {
			t.Fatal(err)
		}
		n.Add(srvAddr, &batchNode{ep: srv})
		n.Add(cliAddr, cli)
		n.SetDefaultLink(fastnettest.Link{Delay: 10 * time.Millisecond})
		h, err := cli.Connect(n.Now(), srvAddr)
		if err != nil {
			t.Fatal(err)
		}
		if err := n.RunFor(time.Second); err != nil {
			t.Fatal(err)
		}
		var ackPackets, entries int
		distinct := map[string]bool{}
		n.Filter = func(from, to netip.AddrPort, b []byte) bool {
			if p := parseWire(t, b); from == srvAddr && p.ch == wireAck {
				ackPackets++
				entries += len(p.payload) / 5
				for e := range slices.Chunk(p.payload, 5) {
					distinct[string(e)] = true
				}
				if len(p.payload)%5 != 0 || len(p.payload) > mtu {
					t.Errorf("MTU %d: ack payload of %d bytes", mtu, len(p.payload))
				}
			}
			return true
		}
		for i := range 20 {
			if err := cli.Send(n.Now(), h, i%3, payload(uint32(i), 10), true); err != nil {
				t.Fatal(err)
			}
		}
		if err := n.RunFor(time.Second); err != nil {
			t.Fatal(err)
		}
		per := mtu / 5
		if want := (20 + per - 1) / per; len(distinct) != 20 || ackPackets != want {
			t.Errorf("MTU %d: %d acks in %d packets, want 20 in %d", mtu, len(distinct), ackPackets, want)
		}
		if room := ackPackets * per; entries > room || entries > 20*(1+fastnet.DefaultAckRepeats) {
			t.Errorf("MTU %d: %d entries sent in %d packets", mtu, entries, ackPackets)
		}
		if st, _ := cli.Stats(h); st.InFlightPackets != 0 || st.PacketsResent != 0 {
			t.Errorf("MTU %d: %d packets in flight, %d resent", mtu, st.InFlightPackets, st.PacketsResent)
		}
	}
}

// D14: "An unacked reliable packet is resent RTT x fib(n+2) after its
// previous send ... (so 2, 3, 5, 8, 13 ... RTTs) ... capped at a
// configurable maximum interval (default 5 s)." On a jitter-free path of
// 100 ms round trip, measured by heartbeats (D17), a packet whose every
// copy is lost goes out at intervals of 200, 300, 500, 800, 1300, 2100,
// 3400 ms, then every 5 s; and "A reliable packet still unacked after the
// connection timeout closes the connection ('peer is not acknowledging')",
// though heartbeats still flow.
func TestScenarioResendSchedule(t *testing.T) {
	link := fastnettest.Link{Delay: 50 * time.Millisecond}
	cfg := fixedMTU(100)
	cfg.NoBundles = true // the filter reads one packet per datagram
	cfg.Timeout = 60 * time.Second
	s := newSim(t, simSetup{Cli: cfg, Srv: cfg, Up: link, Down: link})
	s.connect(time.Second)
	s.run(5 * time.Second)
	if rtt := s.stats(cliSide).RTT; rtt != 100*time.Millisecond {
		t.Fatalf("RTT %v on a path of 2 x 50 ms", rtt)
	}
	var sends []clock.Time
	s.net.Filter = func(from, to netip.AddrPort, b []byte) bool {
		if from == cliAddr && parseWire(t, b).ch == 1 {
			sends = append(sends, s.net.Now())
			return false
		}
		return true
	}
	s.send(cliSide, 1, payload(1, 10), true)
	first := s.net.Now()
	s.runUntil(func() bool { return s.ended[cliSide] != nil }, 2*time.Minute)
	var got []time.Duration
	for i := 1; i < len(sends); i++ {
		got = append(got, sends[i].Sub(sends[i-1]))
	}
	want := []time.Duration{200, 300, 500, 800, 1300, 2100, 3400, 5000, 5000, 5000}
	for i := range want {
		want[i] *= time.Millisecond
	}
	if len(got) < len(want) || !slices.Equal(got[:len(want)], want) {
		t.Errorf("resend intervals %v, want %v then 5s", got, want)
	}
	for _, d := range got[min(len(got), len(want)):] {
		if d != 5*time.Second {
			t.Errorf("resend interval %v after the cap, want 5s", d)
		}
	}
	if !errors.Is(s.ended[cliSide], fastnet.ErrNotAcknowledging) || s.endAt[cliSide] != first.Add(cfg.Timeout) {
		t.Errorf("client ended at %v with %v; want ErrNotAcknowledging at %v", s.endAt[cliSide].Sub(clock.Epoch), s.ended[cliSide], first.Add(cfg.Timeout).Sub(clock.Epoch))
	}
	// The client says why (D18): the server hears it, with the reason.
	var pc *fastnet.PeerClosedError
	if s.runUntil(func() bool { return s.ended[srvSide] != nil }, time.Second); !errors.As(s.ended[srvSide], &pc) {
		t.Errorf("server ended with %v, want a *PeerClosedError", s.ended[srvSide])
	}
}

// D14: a peer that receives but never acks ("peer is not acknowledging"):
// every ack is lost, heartbeats flow both ways, and the sender closes the
// connection Config.Timeout after its first unacked send.
func TestScenarioPeerNeverAcks(t *testing.T) {
	cfg := fixedMTU(100)
	cfg.Timeout = 10 * time.Second
	link := fastnettest.Link{Delay: 10 * time.Millisecond, Loss: 0.1}
	s := newSim(t, simSetup{Seed: 3, Cli: cfg, Srv: cfg, Up: link, Down: link})
	s.connect(10 * time.Second)
	s.net.Filter = func(from, to netip.AddrPort, b []byte) bool {
		return parseWire(t, b).ch != wireAck
	}
	s.run(3 * time.Second)
	first := s.net.Now()
	s.send(cliSide, 1, payload(1, 10), true)
	s.run(time.Second)
	s.send(cliSide, 2, payload(2, 10), true)
	hb := s.stats(srvSide).PacketsReceived
	s.runUntil(func() bool { return s.ended[cliSide] != nil }, time.Minute)
	if !errors.Is(s.ended[cliSide], fastnet.ErrNotAcknowledging) || s.endAt[cliSide] != first.Add(cfg.Timeout) {
		t.Errorf("client ended at %v with %v; want ErrNotAcknowledging at %v",
			s.endAt[cliSide].Sub(clock.Epoch), s.ended[cliSide], first.Add(cfg.Timeout).Sub(clock.Epoch))
	}
	if s.led[srvSide].delivered != 2 {
		t.Errorf("server delivered %d of 2 messages", s.led[srvSide].delivered)
	}
	if st := s.stats(srvSide); st.PacketsReceived-hb < 10 {
		t.Errorf("only %d packets reached the server while it was not acking: heartbeats stopped?", st.PacketsReceived-hb)
	}
}

// D15: "A client sends both queries together every 200 ms until both are
// answered ..., then connect? every 200 ms, all within the connect timeout
// (default 5 s)." The handshake gets through 50 % loss each way.
func TestScenarioHandshakeThroughLoss(t *testing.T) {
	link := fastnettest.Link{Loss: 0.5, Delay: 30 * time.Millisecond, Jitter: 10 * time.Millisecond}
	slow := 0
	for seed := range uint64(30) {
		cfg := fastnet.Config{ConnectTimeout: 30 * time.Second}
		s := newSim(t, simSetup{Seed: seed, Cli: cfg, Srv: cfg, Up: link, Down: link})
		var queries, connects []clock.Time
		s.net.Filter = func(from, to netip.AddrPort, b []byte) bool {
			if p := parseWire(t, b); from == cliAddr && p.ch == wireControl {
				switch string(p.payload) {
				case "query:fastnet":
					queries = append(queries, s.net.Now())
				case "connect?":
					connects = append(connects, s.net.Now())
				}
			}
			return true
		}
		start := s.net.Now()
		s.connect(30 * time.Second)
		if s.net.Now().Sub(start) > fastnet.DefaultConnectTimeout {
			slow++
		}
		for _, ts := range [][]clock.Time{queries, connects} {
			for i := 1; i < len(ts); i++ {
				if d := ts[i].Sub(ts[i-1]); d != 200*time.Millisecond {
					t.Errorf("seed %d: retry after %v, want 200ms", seed, d)
				}
			}
		}
	}
	// Each retry gets through with probability 1/16 (four datagrams), so a
	// few of 30 handshakes take longer than the default 5 s.
	if slow > 10 {
		t.Errorf("%d of 30 handshakes took more than %v", slow, fastnet.DefaultConnectTimeout)
	}
}

// D16: "Any heartbeat from the peer restarts its timeout", and the interval
// is min(1 s, timeout/20). When the path dies, both sides report ErrTimeout
// Config.Timeout after the last heartbeat they heard.
func TestScenarioHeartbeatTimeout(t *testing.T) {
	cfg := fixedMTU(100)
	cfg.Timeout = 2 * time.Second
	link := fastnettest.Link{Delay: 15 * time.Millisecond}
	s := newSim(t, simSetup{Cli: cfg, Srv: cfg, Up: link, Down: link})
	s.connect(time.Second)
	var lastHeard [2]clock.Time
	var originated [2][]clock.Time
	dead := false
	s.net.Filter = func(from, to netip.AddrPort, b []byte) bool {
		if dead {
			return false
		}
		p := parseWire(t, b)
		if p.ch != wireHeartbeat || len(p.payload) != 2 {
			return true
		}
		v := int16(binary.BigEndian.Uint16(p.payload))
		side := cliSide
		if from == srvAddr {
			side = srvSide
		}
		lastHeard[1-side] = s.net.Now().Add(link.Delay)
		if (side == srvSide) == (v > 0) {
			originated[side] = append(originated[side], s.net.Now())
		}
		return true
	}
	s.run(5 * time.Second)
	dead = true
	s.runUntil(func() bool { return s.ended[0] != nil && s.ended[1] != nil }, 10*time.Second)
	for side := range 2 {
		if !errors.Is(s.ended[side], fastnet.ErrTimeout) || s.endAt[side] != lastHeard[side].Add(cfg.Timeout) {
			t.Errorf("%s ended at %v with %v; want ErrTimeout at %v", sideName(side), s.endAt[side].Sub(clock.Epoch),
				s.ended[side], lastHeard[side].Add(cfg.Timeout).Sub(clock.Epoch))
		}
		ts := originated[side]
		if len(ts) < 40 {
			t.Errorf("%s originated %d heartbeats in 5 s", sideName(side), len(ts))
		}
		for i := 1; i < len(ts); i++ {
			if d := ts[i].Sub(ts[i-1]); d != cfg.Timeout/20 {
				t.Errorf("%s: heartbeat interval %v, want %v", sideName(side), d, cfg.Timeout/20)
				break
			}
		}
	}
}

// D17: "A sample is the time from sending an originated heartbeat to
// receiving its echo ... Smoothed as in RFC 6298 ... 200 ms until the
// first sample." On a jitter-free path the estimate settles on the round
// trip, different delays each way included; with jitter it stays near it.
func TestScenarioRTTEstimate(t *testing.T) {
	for _, tt := range []struct {
		up, down, jitter time.Duration
	}{
		{20 * time.Millisecond, 20 * time.Millisecond, 0},
		{10 * time.Millisecond, 140 * time.Millisecond, 0},
		{100 * time.Millisecond, 100 * time.Millisecond, 20 * time.Millisecond},
	} {
		s := newSim(t, simSetup{Cli: fixedMTU(100), Srv: fixedMTU(100),
			Up: fastnettest.Link{Delay: tt.up, Jitter: tt.jitter}, Down: fastnettest.Link{Delay: tt.down, Jitter: tt.jitter}})
		s.connect(2 * time.Second)
		if rtt := s.stats(cliSide).RTT; rtt != 200*time.Millisecond {
			t.Errorf("RTT %v before any sample, want 200ms", rtt)
		}
		s.run(20 * time.Second)
		want := tt.up + tt.down
		for side := range 2 {
			st := s.stats(side)
			// A jittered sample lies in [want, want+2*jitter).
			lo, hi := want, want+2*tt.jitter
			if tt.jitter == 0 && (st.RTT != want || st.MinRTT != want) ||
				st.RTT < lo-lo/10 || st.RTT > hi+hi/10 || st.MinRTT < lo || st.MinRTT >= hi+1 {
				t.Errorf("%v/%v±%v: %s RTT %v, min %v; want near %v", tt.up, tt.down, tt.jitter, sideName(side), st.RTT, st.MinRTT, want)
			}
		}
	}
}

// D18: "A graceful close first waits, up to a linger timeout, for its
// reliable data to be acked." Through 30 % loss, everything queued before
// Close is delivered; Send after Close fails with ErrClosed; the closing
// side ends with a *LocalCloseError once all is acked, the other hears
// "disconnect" with the reason (or, if it was lost, times out).
func TestScenarioGracefulCloseThroughLoss(t *testing.T) {
	for seed := range uint64(5) {
		cfg := fixedMTU(200)
		cfg.Linger = time.Minute
		link := fastnettest.Link{Loss: 0.3, Delay: 40 * time.Millisecond, Jitter: 10 * time.Millisecond}
		s := newSim(t, simSetup{Seed: seed, Cli: cfg, Srv: cfg, Up: link, Down: link})
		s.connect(20 * time.Second)
		for i := range 50 {
			s.send(cliSide, i%4, payload(uint32(i), 50+i*37), i%5 != 0)
		}
		if err := s.ep[cliSide].Close(s.net.Now(), s.h[cliSide], "bye"); err != nil {
			t.Fatal(err)
		}
		if err := s.ep[cliSide].Send(s.net.Now(), s.h[cliSide], 1, []byte("late"), true); !errors.Is(err, fastnet.ErrClosed) {
			t.Errorf("Send after Close: %v, want ErrClosed", err)
		}
		s.runUntil(func() bool { return s.ended[0] != nil && s.ended[1] != nil }, 2*time.Minute)
		var lc *fastnet.LocalCloseError
		if !errors.As(s.ended[cliSide], &lc) || lc.Reason != "bye" {
			t.Errorf("seed %d: client ended with %v", seed, s.ended[cliSide])
		}
		var pc *fastnet.PeerClosedError
		if !(errors.As(s.ended[srvSide], &pc) && pc.Reason == "bye") && !errors.Is(s.ended[srvSide], fastnet.ErrTimeout) {
			t.Errorf("seed %d: server ended with %v", seed, s.ended[srvSide])
		}
		if s.led[srvSide].pendingRel != 0 {
			t.Errorf("seed %d: %d reliable messages lost in the close: %s", seed, s.led[srvSide].pendingRel, s.led[srvSide].firstMissing())
		}
	}
}

// D11, D22, D23: "No byte sequence from the network ... makes memory grow
// past the limits", and an incomplete unreliable message is dropped after
// the MCI. A flood of start-of-message packets that never complete, 8,000
// a second of 1 kB from the client's address on other channels, stays
// within the receive memory limits while the real traffic keeps flowing.
func TestScenarioPartialMessageFlood(t *testing.T) {
	cfg := fixedMTU(1200)
	cfg.MaxMessageSize = 4096
	cfg.ChannelReceiveMemory = 64 << 10
	cfg.ConnReceiveMemory = 128 << 10
	link := fastnettest.Link{Delay: 10 * time.Millisecond}
	s := newSim(t, simSetup{Cli: cfg, Srv: cfg, Up: link, Down: link})
	s.connect(time.Second)
	// A start packet of an unreliable message announcing 4000 bytes, with
	// 1000 of them (D2, D4, D12).
	pkt := make([]byte, 1009)
	seqs := map[int16]int32{}
	maxBytes := 0
	id := uint32(0)
	for ms := range 3000 {
		for i := range 8 {
			ch := int16(10 + i%4)
			seq := seqs[ch]
			seqs[ch] = seq + 2 // holes, so that nothing ever completes
			binary.BigEndian.PutUint16(pkt, uint16(ch))
			pkt[2] = 0x02 // unreliable, start of message
			pkt[3], pkt[4], pkt[5] = byte(seq>>16), byte(seq>>8), byte(seq)
			pkt[6], pkt[7], pkt[8] = 0, 0, 0
			pkt[9], pkt[10], pkt[11] = 0x40, 4000>>8, 4000&0xff // flags, 2-byte length
			s.net.Inject(cliAddr, srvAddr, pkt)
		}
		if ms%10 == 0 {
			id++
			s.send(cliSide, 1, payload(id, 300), ms%20 == 0)
		}
		s.run(time.Millisecond)
		maxBytes = max(maxBytes, s.stats(srvSide).ReceiveBytes)
	}
	if !s.runUntil(s.settled, time.Minute) || s.ended[srvSide] != nil {
		t.Fatalf("after the flood: %s missing, server ended with %v", s.led[srvSide].firstMissing(), s.ended[srvSide])
	}
	st := s.stats(srvSide)
	if st.Dropped[fastnet.DropExpired]+st.Dropped[fastnet.DropMemory]+st.Dropped[fastnet.DropMalformedMessage] == 0 {
		t.Errorf("nothing of the flood dropped: %v", st.Dropped)
	}
	if maxBytes > cfg.ConnReceiveMemory || maxBytes == 0 {
		t.Errorf("receive memory peaked at %d, limit %d", maxBytes, cfg.ConnReceiveMemory)
	}
	// Unreliable messages may be lost to the memory the flood takes, but
	// most get through.
	if d := s.led[srvSide].delivered; d < int(id)*3/4 {
		t.Errorf("delivered %d of %d real messages", d, id)
	}
	t.Logf("flood: receive memory peaked at %d bytes; drops %v; %d of %d real messages delivered", maxBytes, st.Dropped, s.led[srvSide].delivered, id)
}

// D9, D22 and the specification's "Regardless of the determined payload
// MTU, either end of the connection must be prepared for packets of up to
// the maximum packet size", with "The Payload MTU ... should never be
// allowed to fall below 32": a receiver whose own payload MTU is larger
// gets messages cut at the peer's MTU, as small as 32. With the smallest
// ReceiveWindow and receive memory that Validate accepts, a message of
// MaxMessageSize from a peer at MTU 32 must still be delivered.
func TestScenarioReceiveLimitsAtPeerMTU(t *testing.T) {
	srv := fixedMTU(117)
	srv.MaxMessageSize = 16 << 10
	encoded := srv.MaxMessageSize + 21
	// Limits sized for the receiver's own MTU (110-byte chunks) are refused:
	// the peer may cut at 32.
	local := (encoded + 109) / 110
	if err := (fastnet.Config{Role: fastnet.Server, InitialPayloadMTU: 117, MaxMessageSize: srv.MaxMessageSize,
		ReceiveWindow: local, ChannelReceiveMemory: encoded + local*fastnet.PacketMemoryOverhead}).Validate(); err == nil {
		t.Fatal("Validate accepted receive limits sized for the local payload MTU")
	}
	// The smallest limits Validate accepts are sized for 25-byte chunks.
	packets := (encoded + 24) / 25
	srv.ReceiveWindow = packets
	srv.ChannelReceiveMemory = encoded + packets*fastnet.PacketMemoryOverhead
	if err := (fastnet.Config{Role: fastnet.Server, InitialPayloadMTU: 117, MaxMessageSize: srv.MaxMessageSize,
		ReceiveWindow: srv.ReceiveWindow, ChannelReceiveMemory: srv.ChannelReceiveMemory}).Validate(); err != nil {
		t.Fatalf("the limits of this test: %v", err)
	}
	cli := fixedMTU(32)
	cli.MaxMessageSize = srv.MaxMessageSize
	s := newSim(t, simSetup{Cli: cli, Srv: srv})
	s.connect(time.Second)
	s.send(cliSide, 1, payload(1, srv.MaxMessageSize), true)
	if !s.runUntil(s.settled, time.Minute) || s.ended[srvSide] != nil {
		t.Errorf("a message of MaxMessageSize at payload MTU 32: server ended with %v, %d of 1 delivered", s.ended[srvSide], s.led[srvSide].delivered)
	}
}

// D11 "Nothing stalls forever" and D22 "a reliable packet that does not
// fit is not acked, so the sender resends it later": the first packet of a
// reliable burst larger than the channel's receive memory is lost. The
// receiver must keep room for it, or the packets after it, acked and
// queued, fill the memory and its resends never fit.
func TestScenarioReceiveMemoryHeadOfLine(t *testing.T) {
	cfg := fixedMTU(1200)
	cfg.MaxMessageSize = 64 << 10 // ChannelReceiveMemory 256 KiB
	cfg.Timeout = 20 * time.Second
	link := fastnettest.Link{Delay: 10 * time.Millisecond}
	s := newSim(t, simSetup{Cli: cfg, Srv: cfg, Up: link, Down: link})
	s.connect(time.Second)
	lost := false
	s.net.Filter = func(from, to netip.AddrPort, b []byte) bool {
		if p := parseWire(t, b); from == cliAddr && p.ch == 1 && !lost {
			lost = true
			return false
		}
		return true
	}
	for i := range 10 {
		s.send(cliSide, 1, payload(uint32(i), 60_000), true)
	}
	if !s.runUntil(s.settled, time.Minute) || s.ended[cliSide] != nil {
		t.Errorf("600 kB on one channel, first packet lost: client ended with %v, %d of 10 delivered; server drops %v",
			s.ended[cliSide], s.led[srvSide].delivered, s.stats(srvSide).Dropped)
	}
}

// D22 "a reliable packet that does not fit is not acked, so the sender
// resends it later" and D11 "Nothing stalls forever", across the channels
// that share ConnReceiveMemory: with the default limits for a
// MaxMessageSize of 16 KiB (112 KiB a channel, 448 KiB a connection), a
// peer at payload MTU 32 sends one message of MaxMessageSize on each of 16
// channels at once. Each channel's partial message fits its own limit, but
// together they fill the connection's budget; the receiver must not let
// them take it all, or no message ever completes. The sender reads each
// refusal as a loss (D30): its window stays at the minimum and the resends
// of refused packets take most of its paced rate, so the transfer
// outlasts a 20 s timeout; the test's is a minute.
func TestScenarioConnReceiveMemoryAcrossChannels(t *testing.T) {
	cfg := fixedMTU(32)
	cfg.MaxMessageSize = 16 << 10
	cfg.Timeout = time.Minute
	link := fastnettest.Link{Delay: 10 * time.Millisecond}
	s := newSim(t, simSetup{Cli: cfg, Srv: cfg, Up: link, Down: link})
	s.connect(time.Second)
	for ch := range 16 {
		s.send(cliSide, ch, payload(uint32(ch), cfg.MaxMessageSize), true)
	}
	if !s.runUntil(s.settled, 2*time.Minute) || s.ended[cliSide] != nil {
		t.Errorf("16 channels of 16 KiB: client ended with %v, %d of 16 delivered; server drops %v",
			s.ended[cliSide], s.led[srvSide].delivered, s.stats(srvSide).Dropped)
	}
}

// N15 (docs/protocol.md): damage that escapes the transport's checksum and
// hits a message's payload is caught by the message checksum (D3): "an
// unreliable message that fails it is dropped (D11); a reliable message
// that fits in one packet is verified when the packet arrives, before it
// is acked, and a bad one is dropped unacked and counted as
// malformed-message, so the sender's resend repairs it; a reliable message
// of several packets ... ends the connection with a *ProtocolError."
// Nothing corrupt is delivered.
func TestScenarioCorruptPayload(t *testing.T) {
	for _, tt := range []struct {
		name     string
		mtu      int
		reliable bool
		packet   int // which packet of the message to damage
	}{
		{"unreliable", 100, false, 0},
		{"unreliable of three packets", 32, false, 1},
		{"reliable in one packet", 100, true, 0},
		{"reliable of three packets", 32, true, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newSim(t, simSetup{Cli: fixedMTU(tt.mtu), Srv: fixedMTU(tt.mtu), KeepMessages: true,
				Up: fastnettest.Link{Delay: 10 * time.Millisecond}, Down: fastnettest.Link{Delay: 10 * time.Millisecond}})
			s.connect(time.Second)
			n := 0
			var acks int
			s.net.Filter = func(from, to netip.AddrPort, b []byte) bool {
				p := parseWire(t, b)
				switch {
				case from == cliAddr && p.ch == 1:
					if n == tt.packet {
						b[2+7+5] ^= 0x10 // a payload byte of the message (D3: MD5 of 20 bytes)
					}
					n++
				case from == srvAddr && p.ch == wireAck:
					acks++
				}
				return true
			}
			s.send(cliSide, 1, payload(1, 20), tt.reliable) // 38 bytes encoded
			s.runUntil(func() bool { return s.settled() && s.net.Now() > clock.Epoch.Add(2*time.Second) }, time.Minute)
			st := s.stats(srvSide)
			got := s.messagesOn(srvSide, 1)
			switch {
			case !tt.reliable:
				if len(got) != 0 || st.Dropped[fastnet.DropMalformedMessage] != 1 || s.ended[srvSide] != nil {
					t.Errorf("%d delivered, %d malformed, ended %v; want 0, 1, still connected", len(got), st.Dropped[fastnet.DropMalformedMessage], s.ended[srvSide])
				}
			case tt.packet == 0:
				if len(got) != 1 || st.Dropped[fastnet.DropMalformedMessage] != 1 || s.stats(cliSide).PacketsResent == 0 || acks != 1 {
					t.Errorf("%d delivered, %d malformed, %d resent, %d acks, server ended with %v; want 1, 1, some, 1 (the damaged copy unacked), connected",
						len(got), st.Dropped[fastnet.DropMalformedMessage], s.stats(cliSide).PacketsResent, acks, s.ended[srvSide])
				}
			default:
				if len(got) != 0 || !errors.Is(s.ended[srvSide], fastnet.ErrProtocol) || !errors.Is(s.ended[cliSide], fastnet.ErrPeerClosed) {
					t.Errorf("%d delivered, server ended with %v, client with %v; want 0, a *ProtocolError, closed by peer", len(got), s.ended[srvSide], s.ended[cliSide])
				}
			}
		})
	}
}

// N25 with D22 and D23: when more channels begin messages at once than
// MaxHoldingChannels lets hold packets, the packets that do not fit are
// refused and resent, and every message still arrives, intact and in
// order (the refused packets back off as any unacked packet does, D14, so
// a bound far below the channels in use costs time).
func TestScenarioMaxHoldingChannels(t *testing.T) {
	cfg := fixedMTU(32) // every message below is several packets
	cfg.MaxHoldingChannels = 16
	link := fastnettest.Link{Delay: 5 * time.Millisecond}
	s := newSim(t, simSetup{Seed: 7, Cli: cfg, Srv: cfg, Up: link, Down: link})
	s.connect(time.Second)
	for round := range 2 {
		for ch := range 64 {
			s.send(cliSide, ch, payload(uint32(round*1000+ch), 200), true)
		}
	}
	if !s.runUntil(s.settled, 2*time.Minute) || s.ended[cliSide] != nil {
		t.Fatalf("128 messages on 64 channels, 16 may hold packets: client ended with %v, %d of 128 delivered; server drops %v",
			s.ended[cliSide], s.led[srvSide].delivered, s.stats(srvSide).Dropped)
	}
	st := s.stats(srvSide)
	if st.Dropped[fastnet.DropMemory] == 0 {
		t.Errorf("no packet refused for MaxHoldingChannels: the scenario does not test it")
	}
	t.Logf("settled after %v; %d packets refused, %d resent", s.elapsed(), st.Dropped[fastnet.DropMemory], s.stats(cliSide).PacketsResent)
}
