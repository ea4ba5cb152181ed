package fastnet_test

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/fastnet/fastnettest"
)

// The sequence numbers of D5: after 8388607 comes -10000, M = 8,398,608
// values.
const (
	maxSeq   = 8388607
	minSeq   = -10000
	seqSpace = maxSeq - minSeq + 1
)

func nextSeq(s int32) int32 {
	if s == maxSeq {
		return minSeq
	}
	return s + 1
}

// D5, D6: "the value after 8388607 is -10000", and comes-before is serial
// number arithmetic across the wrap. One channel carries 8,500,000
// reliable messages, one packet each, through 1 % loss each way: its
// packet sequence numbers run up to 8388607, wrap to -10000, pass 0 again
// and go on, and its reliable sequence numbers (D7) wrap with them. Every
// message arrives once and in order; every resend repeats a sequence number
// already sent; acks, resends and the receive window work across the wrap.
//
// It takes tens of seconds, so it runs only without the race detector and
// -short, as its own step: go test -run TestSequenceWrap ./fastnet
func TestSequenceWrap(t *testing.T) {
	if raceEnabled {
		t.Skip("runs in the non-race pass: go test -run TestSequenceWrap ./fastnet")
	}
	if testing.Short() {
		t.Skip("runs in the non-race pass: go test -run TestSequenceWrap ./fastnet")
	}
	const total = 8_500_000
	wall := time.Now()
	n := fastnettest.NewNetwork(5)
	n.DiscardEvents = true
	cfg := fixedMTU(1200)
	cfg.NoBundles = true // the filter reads one packet per datagram
	cfg.Rand = n.Rand()
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
	// Acks of a batch of arrivals leave in a few packets (D13).
	n.Add(srvAddr, &batchNode{ep: srv})
	n.Add(cliAddr, cli)
	n.SetDefaultLink(fastnettest.Link{Loss: 0.01, Delay: time.Millisecond})

	const ch = 7
	var (
		delivered uint32
		failure   string
		ended     error
	)
	fail := func(format string, args ...any) {
		if failure == "" {
			failure = n.Now().Sub(clock.Epoch).String() + ": " + fmt.Sprintf(format, args...)
		}
	}
	n.OnEvent = func(at clock.Time, node netip.AddrPort, ev fastnet.Event) {
		switch ev.Kind {
		case fastnet.EventMessage:
			if node != srvAddr || ev.Channel != ch || !ev.Reliable || len(ev.Data) != 4 {
				fail("unexpected message %v", fastnettest.DescribeEvent(ev))
				return
			}
			if got := binary.BigEndian.Uint32(ev.Data); got != delivered {
				fail("message %d delivered after %d", got, delivered)
			}
			delivered++
		case fastnet.EventDisconnected:
			ended = ev.Err
		}
	}

	// The wire: first-time packets carry the next sequence number, resends
	// an earlier one (D6); R advances with every packet (D7).
	var (
		highest     int32 = -1
		highestR    int32
		sent, wraps int
		topSeen     bool
		afterWrap   []int32
		resends     int
	)
	n.Filter = func(from, to netip.AddrPort, b []byte) bool {
		if from != cliAddr || int16(binary.BigEndian.Uint16(b)) != ch {
			return true
		}
		seq, r := get24(b[3:6]), get24(b[6:9])
		switch {
		case seq == nextSeq(highest) && sent < total:
			if r != nextSeq(highestR) && !(sent == 0 && r == 1) {
				fail("packet %d: R %d after %d", seq, r, highestR)
			}
			if seq == minSeq {
				wraps++
			}
			if seq == maxSeq {
				topSeen = true
			}
			if wraps > 0 && len(afterWrap) < 3 {
				afterWrap = append(afterWrap, seq)
			}
			highest, highestR = seq, r
			sent++
		default:
			// A resend: at most a window behind the newest (D6, D9).
			d := (int(highest) - int(seq) + seqSpace) % seqSpace
			if d >= 65536 {
				fail("packet %d sent after %d: neither the next nor a resend", seq, highest)
			}
			resends++
		}
		return true
	}

	h, err := cli.Connect(n.Now(), srvAddr)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.RunUntilCond(func() bool { return cli.NumConns() == 1 && srv.NumConns() == 1 }, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := n.RunFor(time.Second); err != nil {
		t.Fatal(err)
	}
	msg := make([]byte, 4)
	const batch = 20_000
	for next := uint32(0); next < total && failure == "" && ended == nil; {
		for end := min(next+batch, total); next < end; next++ {
			binary.BigEndian.PutUint32(msg, next)
			if err := cli.Send(n.Now(), h, ch, msg, true); err != nil {
				t.Fatalf("Send %d: %v", next, err)
			}
		}
		target := next
		if err := n.RunUntilCond(func() bool { return delivered == target || failure != "" || ended != nil }, time.Minute); err != nil {
			t.Fatalf("%v with %d of %d delivered", err, delivered, target)
		}
	}
	if err := n.RunUntilCond(func() bool {
		st, _ := cli.Stats(h)
		return st.InFlightPackets == 0 || failure != "" || ended != nil
	}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if failure != "" {
		t.Fatal(failure)
	}
	if ended != nil {
		t.Fatalf("connection ended: %v", ended)
	}
	if delivered != total || sent != total || !topSeen || wraps != 1 {
		t.Fatalf("%d delivered, %d sent, top seen %v, %d wraps; want %d, %d, true, 1", delivered, sent, topSeen, wraps, total, total)
	}
	if afterWrap[0] != minSeq || afterWrap[1] != minSeq+1 || afterWrap[2] != minSeq+2 || highest != total-seqSpace-1 {
		t.Fatalf("after the wrap: %v ... %d", afterWrap, highest)
	}
	cs, _ := cli.Stats(h)
	t.Logf("%d messages across the wrap (last sequence number %d), %d resends, %v of virtual time, %v wall",
		delivered, highest, resends, n.Now().Sub(clock.Epoch).Round(time.Millisecond), time.Since(wall).Round(time.Millisecond))
	if cs.PacketsResent == 0 {
		t.Error("no resends")
	}
}
