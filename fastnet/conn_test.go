package fastnet

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/channel"
)

// isAck reports whether a datagram is an ack packet (channel -5).
func isAck(b []byte) bool { ch, _, _ := parsePacket(b); return ch == chAck }

// D14: "A reliable packet still unacked after the connection timeout closes
// the connection ('peer is not acknowledging')", even while heartbeats keep
// the connection otherwise alive.
func TestPeerNeverAcks(t *testing.T) {
	cfg := Config{Timeout: 3 * time.Second, MTU: MTUConfig{Disabled: true}}
	srv := cfg
	srv.NoBundles = true // its acks travel alone, for the filter
	p := newPair(t, cfg, srv)
	p.drop = func(from Role, b []byte) bool { return from == Server && isAck(b) }
	p.cli.Send(p.now, p.ch, 0, []byte("never acked"), true)
	p.flush()
	p.advance(2900 * time.Millisecond)
	if len(p.cliEvs) != 0 {
		t.Fatalf("client events before the timeout: %v", p.cliEvs)
	}
	st, _ := p.cli.Stats(p.ch)
	// The in-memory RTT is 0, so resends run on the 10 ms floor at 2, 3,
	// 5, 8, 13, ... floors apart (D14): at least a handful went out.
	if st.PacketsResent < 5 {
		t.Fatalf("only %d resends in 2.9 s", st.PacketsResent)
	}
	p.advance(200 * time.Millisecond)
	if len(p.cliEvs) != 1 || !errors.Is(p.cliEvs[0].Err, ErrNotAcknowledging) {
		t.Fatalf("client events %v", p.cliEvs)
	}
	// The server heard "disconnect" with the reason.
	var pe *PeerClosedError
	if len(p.srvEvs) == 0 || !errors.As(p.srvEvs[len(p.srvEvs)-1].Err, &pe) {
		t.Fatalf("server events %v", p.srvEvs)
	}
	// Exactly one delivery despite the resends (D8).
	if got := messagesOf(p.srvEvs); len(got) != 1 {
		t.Fatalf("server delivered %q", got)
	}
}

// D18: a graceful close waits for its reliable data to be acknowledged,
// then sends "disconnect".
func TestGracefulCloseDrains(t *testing.T) {
	cfg := Config{MTU: MTUConfig{Disabled: true}}
	p := newPair(t, cfg, cfg)
	lossy := true
	p.drop = func(from Role, b []byte) bool { return lossy && from == Client && !isAck(b) }
	for i := 0; i < 10; i++ {
		p.cli.Send(p.now, p.ch, i, []byte("must arrive before the close"), true)
	}
	p.flush()
	p.cli.Close(p.now, p.ch, "done")
	p.flush()
	if len(p.cliEvs) != 0 || len(p.srvEvs) != 0 {
		t.Fatalf("closed before the data was acked: %v %v", p.cliEvs, p.srvEvs)
	}
	lossy = false
	p.advance(time.Second)
	if got := messagesOf(p.srvEvs); len(got) != 10 {
		t.Fatalf("server got %d messages", len(got))
	}
	last := p.srvEvs[len(p.srvEvs)-1]
	var pe *PeerClosedError
	if !errors.As(last.Err, &pe) || pe.Reason != "done" {
		t.Fatalf("server's last event %+v", last)
	}
	if len(p.cliEvs) != 1 || !errors.Is(p.cliEvs[0].Err, ErrClosed) {
		t.Fatalf("client events %v", p.cliEvs)
	}
}

// D18: the linger timeout bounds how long a close waits.
func TestCloseLingerExpires(t *testing.T) {
	cfg := Config{Linger: 500 * time.Millisecond, MTU: MTUConfig{Disabled: true}}
	p := newPair(t, cfg, cfg)
	p.drop = func(from Role, b []byte) bool { return from == Client && !isAck(b) }
	p.cli.Send(p.now, p.ch, 0, []byte("lost forever"), true)
	p.cli.Close(p.now, p.ch, "bye")
	p.advance(499 * time.Millisecond)
	if len(p.cliEvs) != 0 {
		t.Fatalf("closed before the linger: %v", p.cliEvs)
	}
	p.advance(time.Millisecond)
	if len(p.cliEvs) != 1 || !errors.Is(p.cliEvs[0].Err, ErrClosed) {
		t.Fatalf("client events %v", p.cliEvs)
	}
	if err := p.cli.Send(p.now, p.ch, 0, nil, true); !errors.Is(err, ErrUnknownConn) {
		t.Fatalf("Send after close: %v", err)
	}
}

// D22: a send into a full queue is an error the caller can wait on: it
// fails with ErrQueueFull, changes nothing, and EventWritable follows once
// the message fits.
func TestQueueFullAndWritable(t *testing.T) {
	// Without the pacer (D30), so that flush sends all at one instant.
	cfg := Config{MaxMessageSize: 10000, SendQueueSize: 30000, MaxInFlight: 64 << 10, MTU: MTUConfig{Disabled: true},
		Congestion: CongestionConfig{Disabled: true}}
	p := newPair(t, cfg, cfg)
	msg := make([]byte, 9000)
	sent := 0
	var err error
	for ; sent < 10; sent++ {
		if err = p.cli.Send(p.now, p.ch, 0, msg, true); err != nil {
			break
		}
	}
	if !errors.Is(err, ErrQueueFull) || sent != 3 {
		t.Fatalf("after %d sends: %v", sent, err)
	}
	st, _ := p.cli.Stats(p.ch)
	if st.SendQueueBytes > cfg.SendQueueSize {
		t.Fatalf("queue %d above its limit", st.SendQueueBytes)
	}
	p.flush()
	if len(p.cliEvs) != 1 || p.cliEvs[0].Kind != EventWritable {
		t.Fatalf("client events %v", p.cliEvs)
	}
	if err := p.cli.Send(p.now, p.ch, 0, msg, true); err != nil {
		t.Fatal(err)
	}
	p.flush()
	if got := len(messagesOf(p.srvEvs)); got != 4 {
		t.Fatalf("server got %d messages", got)
	}
}

// D22: reliable packets wait while Config.MaxInFlight bytes are
// unacknowledged; unreliable ones still flow.
func TestInFlightLimit(t *testing.T) {
	// D22's limit alone: the congestion window (D30) is off.
	cfg := Config{MaxInFlight: 64 << 10, InitialPayloadMTU: 1200, MTU: MTUConfig{Disabled: true},
		Congestion: CongestionConfig{Disabled: true}}
	p := newPair(t, cfg, cfg)
	acks := false
	p.drop = func(from Role, b []byte) bool { return !acks && from == Server && isAck(b) }
	p.cli.Send(p.now, p.ch, 0, make([]byte, 200<<10), true)
	p.cli.Send(p.now, p.ch, 1, []byte("fast lane"), false)
	p.flush()
	st, _ := p.cli.Stats(p.ch)
	if st.InFlightBytes > cfg.MaxInFlight || st.InFlightBytes < cfg.MaxInFlight-1200 {
		t.Fatalf("in flight %d, limit %d", st.InFlightBytes, cfg.MaxInFlight)
	}
	if got := messagesOf(p.srvEvs); len(got) != 1 || got[0] != "ch1 false fast lane" {
		t.Fatalf("unreliable message held up: %q", got)
	}
	acks = true
	p.advance(time.Second)
	if got := messagesOf(p.srvEvs); len(got) != 2 {
		t.Fatalf("server got %d messages", len(got))
	}
}

// D11, D23: an incomplete unreliable message is dropped once the MCI
// (25 ms) passes (DropExpired), and packets of a message whose start was
// consumed that way can never be delivered: they are dropped at once when
// they reach the head of the queue (DropOrphaned). Each counts in the
// statistics; the next message on the channel is delivered.
func TestDropExpiredAndOrphanedCounted(t *testing.T) {
	cfg := Config{MTU: MTUConfig{Disabled: true}} // payload MTU 32: 25-byte chunks
	p := newPair(t, cfg, cfg)
	var held [][]byte
	n := 0
	p.drop = func(from Role, b []byte) bool {
		if ch, _, _ := parsePacket(b); from != Client || ch != 3 {
			return false
		}
		n++
		if n >= 3 && n <= 5 { // the message's third to fifth packets
			held = append(held, append([]byte(nil), b...))
			return true
		}
		return false
	}
	p.cli.Send(p.now, p.ch, 3, make([]byte, 100), false) // 5 packets
	p.flush()
	p.advance(30 * time.Millisecond) // packets 1-2 expire
	st, _ := p.srv.Stats(p.sh)
	if st.Dropped[DropExpired] != 1 {
		t.Fatalf("after the MCI: Dropped[expired] = %d, want 1 (all: %v)", st.Dropped[DropExpired], st.Dropped)
	}
	// Packets 4 and 5 arrive, then 3: 3 directly follows the ignore
	// number and does not start a message, so {3, 4, 5} is an orphan.
	p.srv.HandleDatagram(p.now, clientAddr, held[1])
	p.srv.HandleDatagram(p.now, clientAddr, held[2])
	p.srv.HandleDatagram(p.now, clientAddr, held[0])
	p.flush()
	st, _ = p.srv.Stats(p.sh)
	if st.Dropped[DropOrphaned] != 1 {
		t.Fatalf("Dropped[orphaned] = %d, want 1 (all: %v)", st.Dropped[DropOrphaned], st.Dropped)
	}
	p.cli.Send(p.now, p.ch, 3, []byte("after"), false)
	p.flush()
	if got := messagesOf(p.srvEvs); len(got) != 1 || got[0] != "ch3 false after" {
		t.Fatalf("server delivered %q, want only the message after", got)
	}
}

// D22: a connection whose receiving is paused drops its message packets
// unacked (DropPaused) and stays up; once resumed, the peer's resends
// deliver every reliable message once and in order.
func TestReceivePaused(t *testing.T) {
	cfg := Config{MTU: MTUConfig{Disabled: true}}
	p := newPair(t, cfg, cfg)
	if err := p.srv.SetReceivePaused(p.sh, true); err != nil {
		t.Fatal(err)
	}
	want := []string{"ch1 true one", "ch1 true two", "ch1 true three"}
	for _, m := range []string{"one", "two", "three"} {
		if err := p.cli.Send(p.now, p.ch, 1, []byte(m), true); err != nil {
			t.Fatal(err)
		}
	}
	p.cli.Send(p.now, p.ch, 2, []byte("lost"), false)
	p.flush()
	p.advance(300 * time.Millisecond) // resends, heartbeats
	if got := messagesOf(p.srvEvs); len(got) != 0 {
		t.Fatalf("delivered while paused: %q", got)
	}
	st, _ := p.srv.Stats(p.sh)
	if st.Dropped[DropPaused] < 4 {
		t.Fatalf("DropPaused = %d, want the 4 packets and their resends", st.Dropped[DropPaused])
	}
	cst, _ := p.cli.Stats(p.ch)
	if cst.PacketsResent == 0 {
		t.Fatal("nothing resent: the paused packets were acked")
	}
	if len(p.cliEvs) != 0 || len(p.srvEvs) != 0 {
		t.Fatalf("events while paused: client %v, server %v", p.cliEvs, p.srvEvs)
	}
	if err := p.srv.SetReceivePaused(p.sh, false); err != nil {
		t.Fatal(err)
	}
	p.advance(2 * time.Second)
	if got := messagesOf(p.srvEvs); len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("delivered %q, want %q", got, want)
	}
	if err := p.srv.SetReceivePaused(Handle(12345), true); !errors.Is(err, ErrUnknownConn) {
		t.Fatalf("unknown handle: %v", err)
	}
	s := newPair(t, Config{Transport: Stream}, Config{Transport: Stream})
	if err := s.srv.SetReceivePaused(s.sh, true); !errors.Is(err, ErrStreamPause) {
		t.Fatalf("Stream: %v", err)
	}
}

// appendAcks keeps for repeating (N29) the entries still to be repeated
// and the newest it sends, at most maxSentAcks of them, the newest last;
// with maxSentAcks or more new entries, it leaves the old ones aside
// without looking at them. Each row starts from maxSentAcks entries sent
// before, some used up or too old to repeat, and is checked against the
// entries filtered and appended one by one.
func TestAppendAcksKept(t *testing.T) {
	for _, n := range []int{1, maxSentAcks - 2, maxSentAcks - 1, maxSentAcks, maxSentAcks + 1, 3 * maxSentAcks} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			tc := newTestEndpoint(t, Config{Role: Server, MTU: MTUConfig{Disabled: true}})
			h, _ := tc.connectServer()
			c := tc.ep.conns[h]
			c.payloadMTU = 1200 // room for all the new entries and some repeats
			now := tc.now.Add(10 * time.Second)
			c.sentAcks = c.sentAcks[:0]
			for i := range maxSentAcks {
				e := sentAck{a: channel.Ack{Channel: 1, Seq: channel.Seq(i)}, at: now.Add(-time.Duration(i%3) * maxAckRepeatAge), left: i % 4}
				c.sentAcks = append(c.sentAcks, e)
			}
			c.acks, c.acksHead = c.acks[:0], 0
			for i := range n {
				c.acks = append(c.acks, channel.Ack{Channel: 2, Seq: channel.Seq(i)})
			}
			// What is left of the old entries once the repeats are
			// written, then the new ones.
			old := slices.Clone(c.sentAcks)
			room := max(1, c.payloadMTU/channel.AckLen) - n
			for i := len(old) - 1; i >= 0 && room > 0; i-- {
				if e := &old[i]; e.left > 0 && e.at >= now.Add(-maxAckRepeatAge) {
					e.left--
					room--
				}
			}
			var want []sentAck
			for _, e := range old {
				if e.left > 0 && e.at >= now.Add(-maxAckRepeatAge) {
					want = append(want, e)
				}
			}
			for _, a := range c.acks[:n] {
				want = append(want, sentAck{a: a, at: now, left: tc.ep.cfg.AckRepeats})
			}
			want = want[max(0, len(want)-maxSentAcks):]
			c.appendAcks(now, nil)
			if !slices.Equal(c.sentAcks, want) {
				t.Errorf("kept %d entries %v\nwant %d %v", len(c.sentAcks), c.sentAcks, len(want), want)
			}
		})
	}
}
