package fastnet_test

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/fastnet/fastnettest"
)

var measureAcks = flag.Bool("acks.measure", false, "run TestMeasureAckRepeats, which prints the table behind Config.AckRepeats' default")

// lossyBulk runs one connection through link both ways, the client sending
// two reliable messages of 4-32 KiB a second for 8 s (what the demo sends
// on its channel 3), most of them cut at the small payload MTU of the
// start, before MTU estimation has grown it. It returns whether the
// connection ended because a packet went unacknowledged for the whole
// Timeout (D14), and the packets the client resent.
func lossyBulk(t *testing.T, seed uint64, link fastnettest.Link, cfg fastnet.Config) (ended bool, resent uint64) {
	t.Helper()
	s := newSim(t, simSetup{Seed: seed, Cli: cfg, Srv: cfg, Up: link, Down: link})
	s.connect(time.Minute)
	rng := rand.New(rand.NewPCG(seed, 7))
	for id := range uint32(16) {
		if err := s.send(cliSide, 3, payload(id+1, 4<<10+rng.IntN(28<<10)), true); err != nil {
			t.Fatalf("Send: %v", err)
		}
		s.run(500 * time.Millisecond)
		resent = s.stats(cliSide).PacketsResent
	}
	for !s.settled() {
		resent = s.stats(cliSide).PacketsResent
		s.runUntil(s.settled, time.Second)
	}
	for side := range 2 {
		if err := s.ended[side]; err != nil {
			if !errors.Is(err, fastnet.ErrNotAcknowledging) {
				t.Fatalf("seed %d: %s: %v", seed, sideName(side), err)
			}
			return true, resent
		}
	}
	if s.led[srvSide].pendingRel != 0 {
		t.Fatalf("seed %d: settled with %d reliable messages undelivered", seed, s.led[srvSide].pendingRel)
	}
	return false, s.stats(cliSide).PacketsResent
}

// lossyBulkRuns runs lossyBulk for seeds 1..n and returns how many
// connections ended and the packets resent in all.
func lossyBulkRuns(t *testing.T, n int, link fastnettest.Link, cfg fastnet.Config) (ended int, resent uint64) {
	for seed := range uint64(n) {
		e, r := lossyBulk(t, seed+1, link, cfg)
		if e {
			ended++
		}
		resent += r
	}
	return ended, resent
}

// Repeating ack entries in the spare room of later ack packets (N29) keeps
// one lost ack packet from costing a resend. At 15 % loss each way and a
// 200 ms round trip, with every entry sent once, about one connection in
// 20-40 in lossyBulk loses some packet's every ack for the whole 20 s
// Timeout and ends (1 of these 40); with the default repeats none does,
// and the client resends markedly less (about half).
func TestAckRepeatsKeepLossyConnections(t *testing.T) {
	if testing.Short() {
		t.Skip("40 simulated connections")
	}
	link := fastnettest.Link{Loss: 0.15, Delay: 100 * time.Millisecond}
	const n = 40
	// Without congestion control (D30), as the engine sent before it:
	// the controller's slower pace leaves fewer packets to lose every
	// ack of, and no connection ends either way.
	off := fastnet.CongestionConfig{Disabled: true}
	onceEnded, onceResent := lossyBulkRuns(t, n, link, fastnet.Config{AckRepeats: -1, Congestion: off})
	ended, resent := lossyBulkRuns(t, n, link, fastnet.Config{Congestion: off})
	t.Logf("each ack once: %d of %d connections ended, %d packets resent; repeated (default): %d ended, %d resent",
		onceEnded, n, onceResent, ended, resent)
	if ended != 0 {
		t.Errorf("%d of %d connections ended 'not acknowledging' with ack repeats", ended, n)
	}
	if onceEnded == 0 {
		t.Errorf("no connection ended without ack repeats: the test no longer shows what the repeats are for")
	}
	// Resends are compared over the connections that survived both ways;
	// the sum favours the runs without repeats, whose ended connections
	// stop resending.
	if resent >= onceResent {
		t.Errorf("%d packets resent with ack repeats, %d without", resent, onceResent)
	}
}

// TestMeasureAckRepeats prints the table of N29: connections ended and
// packets resent, by AckRepeats and loss, 20 seeds each.
//
//	go test ./fastnet -run TestMeasureAckRepeats -acks.measure -v
func TestMeasureAckRepeats(t *testing.T) {
	if !*measureAcks {
		t.Skip("a measurement: run with -acks.measure")
	}
	links := []fastnettest.Link{
		{Loss: 0.05, Delay: 100 * time.Millisecond},
		{Loss: 0.15, Delay: 100 * time.Millisecond},
		{Loss: 0.25, Delay: 100 * time.Millisecond},
		{Loss: 0.25, Delay: 10 * time.Millisecond},
	}
	var out strings.Builder
	fmt.Fprintf(&out, "%-8s", "repeats")
	for _, l := range links {
		fmt.Fprintf(&out, " | loss %2.0f%% rtt %3v", 100*l.Loss, 2*l.Delay)
	}
	out.WriteString("\n")
	for _, r := range []int{-1, 1, 2, 3, 4, 8} {
		fmt.Fprintf(&out, "%-8d", max(r, 0))
		for _, l := range links {
			ended, resent := lossyBulkRuns(t, 20, l, fastnet.Config{AckRepeats: r})
			fmt.Fprintf(&out, " | %2d ended %7d", ended, resent)
		}
		out.WriteString("\n")
	}
	t.Logf("connections ended of 20, packets resent by the client:\n%s", out.String())
}

// N29: the server's ack packet for a first message is lost; the ack packet
// for a second one, sent before the first's resend is due, repeats the
// first's entry in its spare room, so the client frees the first packet
// without resending it. With AckRepeats -1 the same loss costs a resend.
func TestAckRepeatsSaveAResend(t *testing.T) {
	for _, tt := range []struct {
		repeats    int
		wantResent uint64
		wantRepeat bool
	}{
		{0, 0, true}, // the default, 2
		{1, 0, true},
		{-1, 1, false},
	} {
		cfg := fixedMTU(100)
		cfg.AckRepeats = tt.repeats
		s := newSim(t, simSetup{Seed: 1, Cli: cfg, Srv: cfg,
			Up: fastnettest.Link{Delay: 10 * time.Millisecond}, Down: fastnettest.Link{Delay: 10 * time.Millisecond}})
		s.connect(time.Minute)
		s.run(time.Second)
		dropped, repeated := 0, false
		s.net.Filter = func(from, to netip.AddrPort, b []byte) bool {
			p := parseWire(t, b)
			if from != srvAddr || p.ch != wireAck {
				return true
			}
			if dropped == 0 {
				dropped++
				return false
			}
			repeated = repeated || len(p.payload) > 5
			return true
		}
		if err := s.send(cliSide, 1, payload(1, 10), true); err != nil {
			t.Fatal(err)
		}
		s.run(2 * time.Millisecond) // a fraction of the resend interval
		if err := s.send(cliSide, 1, payload(2, 10), true); err != nil {
			t.Fatal(err)
		}
		if !s.runUntil(s.settled, time.Minute) {
			t.Fatalf("AckRepeats %d: not settled", tt.repeats)
		}
		cs, ss := s.stats(cliSide), s.stats(srvSide)
		if dropped != 1 || cs.PacketsResent != tt.wantResent || repeated != tt.wantRepeat || (ss.AcksRepeated > 0) != tt.wantRepeat {
			t.Errorf("AckRepeats %d: %d ack packets dropped, %d packets resent, repeat seen %v, server AcksRepeated %d; want 1, %d, %v",
				tt.repeats, dropped, cs.PacketsResent, repeated, ss.AcksRepeated, tt.wantResent, tt.wantRepeat)
		}
		if cs.AcksReceived != 2 {
			t.Errorf("AckRepeats %d: client AcksReceived %d, want 2 (repeats that free nothing are not counted)", tt.repeats, cs.AcksReceived)
		}
	}
}

// N29: an ack entry is repeated only within a second of its first sending,
// so that an entry kept across a long run of unreliable packets, which
// advance the sequence numbers without acks (D5), can never acknowledge a
// new packet that reuses its number. An ack packet sent 100 ms after the
// previous one carries the earlier entry again; one sent 2 s after it does
// not.
func TestAckRepeatsExpire(t *testing.T) {
	for _, tt := range []struct {
		gap         time.Duration
		wantEntries int
	}{
		{100 * time.Millisecond, 2},
		{2 * time.Second, 1},
	} {
		s := newSim(t, simSetup{Seed: 1, Cli: fixedMTU(100), Srv: fixedMTU(100),
			Up: fastnettest.Link{Delay: 10 * time.Millisecond}, Down: fastnettest.Link{Delay: 10 * time.Millisecond}})
		s.connect(time.Minute)
		s.run(time.Second)
		var entries []int
		s.net.Filter = func(from, to netip.AddrPort, b []byte) bool {
			if p := parseWire(t, b); from == srvAddr && p.ch == wireAck {
				entries = append(entries, len(p.payload)/5)
			}
			return true
		}
		if err := s.send(cliSide, 1, payload(1, 10), true); err != nil {
			t.Fatal(err)
		}
		s.run(tt.gap)
		if err := s.send(cliSide, 1, payload(2, 10), true); err != nil {
			t.Fatal(err)
		}
		s.run(time.Second)
		if len(entries) != 2 || entries[0] != 1 || entries[1] != tt.wantEntries {
			t.Errorf("gap %v: ack packets with %v entries, want [1 %d]", tt.gap, entries, tt.wantEntries)
		}
	}
}

// N40: a duplicate reliable packet shows that its ack was lost; its ack
// then goes out twice, the second time in an ack packet of repeats alone
// a little later, though no other ack packet follows. With AckRepeats -1
// it goes out once.
func TestDuplicateAckSentTwice(t *testing.T) {
	for _, tt := range []struct {
		repeats   int
		wantAcked int
	}{
		{0, 2},  // the default, 2 repeats
		{-1, 1}, // repeats off
	} {
		cfg := fixedMTU(100)
		cfg.AckRepeats = tt.repeats
		s := newSim(t, simSetup{Seed: 1, Cli: cfg, Srv: cfg,
			Up: fastnettest.Link{Delay: 10 * time.Millisecond}, Down: fastnettest.Link{Delay: 10 * time.Millisecond}})
		s.connect(time.Minute)
		s.run(time.Second)
		// The server's first ack is lost: the client resends, and the
		// server sees a duplicate.
		first := true
		var acksAfterDup int
		dupSeen := false
		s.net.Filter = func(from, to netip.AddrPort, b []byte) bool {
			p := parseWire(t, b)
			if from == srvAddr && p.ch == wireAck {
				if first {
					first = false
					return false
				}
				if dupSeen {
					acksAfterDup++
				}
			}
			if from == cliAddr && p.ch == 1 && !first {
				dupSeen = true
			}
			return true
		}
		if err := s.send(cliSide, 1, payload(1, 10), true); err != nil {
			t.Fatal(err)
		}
		s.run(5 * time.Second)
		if !dupSeen {
			t.Fatal("the client did not resend")
		}
		if acksAfterDup != tt.wantAcked {
			t.Errorf("AckRepeats %d: %d ack packets after the duplicate, want %d", tt.repeats, acksAfterDup, tt.wantAcked)
		}
		if st := s.stats(cliSide); st.InFlightPackets != 0 {
			t.Errorf("AckRepeats %d: %d packets still in flight", tt.repeats, st.InFlightPackets)
		}
	}
}
