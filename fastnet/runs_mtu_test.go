package fastnet

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"
)

// N119: once its MTU estimation (D19) is over, a connection writes the
// packets of its bundles in runs (N101), as one that does not estimate
// does. Before, its estimator, between estimations, was taken for one
// whose probe might be due, and every packet went through poll alone.
// The messages arrive all the same; TestPropertyRunsChangeNothing shows
// that the runs change nothing else.
func TestRunsAfterEstimation(t *testing.T) {
	p := newPair(t, Config{}, Config{})
	p.keep = false
	c := p.cli.conns[p.ch]
	p.awaitEstimation(c)
	if c.payloadMTU < 1200 {
		t.Fatalf("payload MTU %d after the estimation", c.payloadMTU)
	}
	p.advance(time.Second)
	before, start := p.cli.runSent, p.srvMsgs
	const n = 500
	msg := make([]byte, 64)
	for i := range n {
		msg[0] = byte(i)
		if err := p.cli.Send(p.now, p.ch, 1, msg, true); err != nil {
			t.Fatal(err)
		}
	}
	p.settle(start + n)
	if got := p.srvMsgs - start; got != n {
		t.Fatalf("%d messages delivered, want %d", got, n)
	}
	t.Logf("payload MTU %d, %d of %d packets written in runs", c.payloadMTU, p.cli.runSent-before, n)
	if sent := p.cli.runSent - before; sent < n/2 {
		t.Errorf("%d of %d packets written in runs, want most", sent, n)
	}
}

// runChannel lets a run go past the estimator only when mtuPoll would do
// nothing before the run's first packet (N119): not while an estimation
// runs, nor while its place is not yet given back, nor once the next is
// due.
func TestRunChannelAndEstimator(t *testing.T) {
	p := newPair(t, Config{}, Config{})
	p.keep = false
	c := p.cli.conns[p.ch]
	// The data to send, a channel's worth of packets queued, and the
	// connection filling a bundle, as runChannel is asked.
	queue := func() {
		t.Helper()
		for range 20 {
			if err := p.cli.Send(p.now, p.ch, 1, make([]byte, 64), true); err != nil {
				t.Fatal(err)
			}
		}
		c.bundling = true
	}
	run := func(what string, want bool) {
		t.Helper()
		if got := c.runChannel(p.now) != nil; got != want {
			t.Errorf("%s: runChannel gave a channel %v, want %v (searching %v, running %v, probes %d, quiet %v)",
				what, got, want, c.estimator.Stats().Searching, c.mtuRunning, c.probeN, c.mtuQuiet(p.now))
		}
	}
	// Beyond the probe interval of the connection's first probes, in the
	// estimation those started.
	p.now = p.now.Add(10 * time.Millisecond)
	queue()
	if !c.mtuRunning {
		t.Fatal("setup: no estimation running after the handshake")
	}
	run("estimating", false)
	c.bundling = false
	p.awaitEstimation(c)
	queue()
	run("between estimations", true)
	// An estimation over whose place among those the endpoint runs at
	// once is not yet given back (estimationDone, N53), as for an
	// instant after each end.
	c.mtuRunning = true
	run("a place not yet given back", false)
	c.mtuRunning = false
	p.flush()
	// The next estimation's time, with the heartbeat due then put off,
	// so that only the estimation stands in the run's way.
	next := c.estimator.NextDeadline()
	if next <= p.now || !c.estimator.Due(next) {
		t.Fatalf("setup: next estimation at %v, now %v", next, p.now)
	}
	p.now = next
	queue()
	c.hb.nextSend = p.now.Add(time.Second)
	if c.mtuQuiet(p.now) {
		t.Fatal("quiet with the next estimation due")
	}
	run("the next estimation due", false)
}

// A Send at an instant past the next estimation's start, before the
// endpoint has had a HandleTimeout for it: the estimation starts at the
// next poll, and its first packet, a reset, goes before the data, with
// runs as without them (N119). The bundle opens with the heartbeat then
// also due, after which runChannel alone decides what comes next.
func TestRunsWhenEstimationDue(t *testing.T) {
	var got [2][]string
	for i, noRuns := range []bool{false, true} {
		p := newPair(t, Config{}, Config{})
		p.keep = false
		p.cli.noRuns = noRuns
		c := p.cli.conns[p.ch]
		p.awaitEstimation(c)
		p.advance(time.Second)
		next := c.estimator.NextDeadline()
		if next <= p.now {
			t.Fatalf("setup: next estimation at %v, now %v", next, p.now)
		}
		p.now = next // the estimation due, the heartbeat overdue, no HandleTimeout
		for range 20 {
			if err := p.cli.Send(p.now, p.ch, 1, make([]byte, 64), true); err != nil {
				t.Fatal(err)
			}
		}
		for range 4 {
			tr, ok := p.cli.PollTransmit(p.now, p.buf)
			if !ok {
				break
			}
			got[i] = append(got[i], packetChannels(p.buf[:tr.N]))
		}
	}
	if want := "[-2 -4 [1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1]]"; fmt.Sprint(got[1]) != want {
		t.Fatalf("setup: without runs the datagrams' channels are %v, want %s", got[1], want)
	}
	if fmt.Sprint(got[0]) != fmt.Sprint(got[1]) {
		t.Errorf("datagrams' channels with runs %v\nwithout runs %v", got[0], got[1])
	}
}

// packetChannels describes datagram b by its channel, or a bundle's by
// those of its packets in brackets.
func packetChannels(b []byte) string {
	ch := int16(binary.BigEndian.Uint16(b))
	if ch != chBundle {
		return fmt.Sprint(ch)
	}
	var chs []int16
	for rest := b[2:]; len(rest) > 0; {
		inner, r, ok := cutBundle(rest)
		if !ok {
			return fmt.Sprint(chs, "?")
		}
		chs = append(chs, int16(binary.BigEndian.Uint16(inner)))
		rest = r
	}
	return fmt.Sprint(chs)
}

// awaitEstimation moves time on, a second at a time, until the MTU
// estimation of c, the client's connection, is over and its place given
// back; it fails the test after ten minutes.
func (p *pair) awaitEstimation(c *conn) {
	p.tb.Helper()
	for i := 0; c.estimator.Stats().Searching || c.mtuRunning; i++ {
		if i == 600 {
			p.tb.Fatal("MTU estimation not over after 10 minutes")
		}
		p.advance(time.Second)
	}
}
