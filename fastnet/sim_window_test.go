package fastnet_test

// Scenarios of D26 (an ack means delivery) and D27 (the receive window
// moves only on evidence): forged or damaged packets far ahead in a
// channel's sequence must never make reliable data disappear silently.

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/coalesce"
	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/fastnet/fastnettest"
)

// dataPacket builds a message channel datagram (D4): channel id, flags,
// 24-bit sequence number and R, chunk.
func dataPacket(ch int16, reliable, start bool, seq, rel int32, chunk []byte) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(ch))
	var flags byte
	if reliable {
		flags |= 1
	}
	if start {
		flags |= 2
	}
	b = append(b, flags, byte(seq>>16), byte(seq>>8), byte(seq), byte(rel>>16), byte(rel>>8), byte(rel))
	return append(b, chunk...)
}

// TestScenarioD26ForgedPacketEndsLoudly is the attack of D26. A reliable
// message is on its way on channel 1 (its first sends are lost), and one
// unreliable packet with R = L = 0 arrives far ahead within the window
// (forged, or a bit flipped in a real packet's sequence number): it is a
// whole message, so the server delivers it and moves G past the reliable
// packets still in flight. Before D26 their resends were then acked as
// duplicates and dropped: the client was told its message was delivered,
// and it never was. Now the server acks none of them and ends the
// connection with a protocol error, which the client hears as the
// "disconnect" reason (D18).
func TestScenarioD26ForgedPacketEndsLoudly(t *testing.T) {
	cfg := fixedMTU(32)
	link := fastnettest.Link{Delay: 5 * time.Millisecond}
	s := newSim(t, simSetup{Cli: cfg, Srv: cfg, Up: link, Down: link, Loose: true})
	s.connect(time.Second)
	firstSends := true
	acked := 0
	s.net.Filter = func(from, to netip.AddrPort, b []byte) bool {
		p := parseWire(t, b)
		if from == cliAddr && p.ch == 1 && p.reliable && firstSends {
			return false
		}
		if from == srvAddr && p.ch == wireAck {
			for a := p.payload; len(a) >= 5; a = a[5:] {
				if int16(binary.BigEndian.Uint16(a)) == 1 {
					acked++
				}
			}
		}
		return true
	}
	if err := s.send(cliSide, 1, payload(1, 100), true); err != nil {
		t.Fatal(err)
	}
	s.run(2 * time.Millisecond) // the first sends go out, and are lost
	firstSends = false
	forged := dataPacket(1, false, true, 4000, 0, coalesce.AppendMessage(nil, []byte("x"), false))
	s.net.Inject(cliAddr, srvAddr, forged)
	if !s.runUntil(func() bool { return s.ended[srvSide] != nil && s.ended[cliSide] != nil }, 10*time.Second) {
		t.Fatalf("the connection did not end: server %v, client %v, %d acks on channel 1", s.ended[srvSide], s.ended[cliSide], acked)
	}
	if err := s.ended[srvSide]; !errors.Is(err, fastnet.ErrProtocol) {
		t.Errorf("server ended with %v, want a protocol error", err)
	}
	var pc *fastnet.PeerClosedError
	if err := s.ended[cliSide]; !errors.As(err, &pc) || !strings.Contains(pc.Reason, "never delivered") {
		t.Errorf("client ended with %v, want the server's disconnect with the protocol error as its reason", err)
	}
	if acked != 0 {
		t.Errorf("the server acked %d packets of a message it never delivered", acked)
	}
	if s.led[srvSide].pendingRel != 1 {
		t.Errorf("%d reliable messages pending, want the one never delivered", s.led[srvSide].pendingRel)
	}
}

// TestScenarioD27ForgedPacketBeyondWindow checks D9 and D27 end to end: a
// single forged unblocked packet beyond the receive window is dropped
// unacked and does not move the window, so reliable messages delayed
// behind it are delivered and the connection stays up.
func TestScenarioD27ForgedPacketBeyondWindow(t *testing.T) {
	cfg := fixedMTU(32)
	cfg.MaxMessageSize = 1000
	srv := cfg
	srv.ReceiveWindow = 100
	link := fastnettest.Link{Delay: 5 * time.Millisecond}
	s := newSim(t, simSetup{Cli: cfg, Srv: srv, Up: link, Down: link})
	s.connect(time.Second)
	firstSends := true
	s.net.Filter = func(from, to netip.AddrPort, b []byte) bool {
		p := parseWire(t, b)
		return !(from == cliAddr && p.ch == 1 && p.reliable && firstSends)
	}
	for i := range 3 {
		s.send(cliSide, 1, payload(uint32(i), 40), true)
	}
	s.run(2 * time.Millisecond)
	firstSends = false
	s.net.Inject(cliAddr, srvAddr, dataPacket(1, false, true, 500, 0, coalesce.AppendMessage(nil, []byte("x"), false)))
	if !s.runUntil(s.settled, 10*time.Second) || s.ended[srvSide] != nil {
		t.Fatalf("not settled: %s, server %v", s.led[srvSide].firstMissing(), s.ended[srvSide])
	}
	if s.led[srvSide].delivered != 3 {
		t.Errorf("delivered %d messages, want the 3 reliable ones", s.led[srvSide].delivered)
	}
	if d := s.stats(srvSide).Dropped[fastnet.DropWindow]; d == 0 {
		t.Error("the forged packet was not dropped for the window")
	}
}

// TestScenarioD27LongUnreliableLoss checks that a genuine loss of more
// than W unreliable packets in a row still recovers (D23, D27): the
// packets that follow it are evidence enough, the window moves, and
// the messages sent afterwards, reliable ones included, are delivered.
func TestScenarioD27LongUnreliableLoss(t *testing.T) {
	cfg := fixedMTU(32)
	cfg.MaxMessageSize = 1000
	srv := cfg
	srv.ReceiveWindow = 100
	link := fastnettest.Link{Delay: 5 * time.Millisecond}
	s := newSim(t, simSetup{Cli: cfg, Srv: srv, Up: link, Down: link, KeepMessages: true})
	s.connect(time.Second)
	blackout := true
	s.net.Filter = func(from, to netip.AddrPort, b []byte) bool {
		p := parseWire(t, b)
		return !(from == cliAddr && p.ch == 1 && blackout)
	}
	for i := range 300 { // 300 packets lost in a row, window 100
		s.send(cliSide, 1, payload(uint32(i), 4), false)
	}
	s.run(50 * time.Millisecond)
	blackout = false
	for i := range 10 {
		s.send(cliSide, 1, payload(uint32(1000+i), 4), false)
	}
	s.send(cliSide, 1, payload(2000, 40), true)
	if !s.runUntil(s.settled, 10*time.Second) || s.ended[srvSide] != nil {
		t.Fatalf("not settled: %s, server %v", s.led[srvSide].firstMissing(), s.ended[srvSide])
	}
	got := s.messagesOn(srvSide, 1)
	if n := len(got); n < 8 || !got[n-1].reliable {
		t.Errorf("delivered %d messages after the loss, want the reliable one and most unreliable ones", n)
	}
	if d := s.stats(srvSide).Dropped[fastnet.DropWindow]; d < 2 {
		t.Errorf("DropWindow = %d, want the evidence packets counted", d)
	}
}
