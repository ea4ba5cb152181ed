package fastnet

import (
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
	for i := 0; c.estimator.Stats().Searching || c.mtuRunning; i++ {
		if i == 600 {
			t.Fatal("MTU estimation not over after 10 minutes")
		}
		p.advance(time.Second)
	}
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
// runs, not once the next is due, and not while a probe is still counted
// in the window, which probeReady would forget first; once that one is
// forgotten, the run goes.
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
	for i := 0; c.estimator.Stats().Searching || c.mtuRunning || c.probeN > 0; i++ {
		if i == 600 {
			t.Fatal("MTU estimation not over after 10 minutes")
		}
		p.advance(time.Second)
	}
	queue()
	run("between estimations", true)
	// An estimation over whose place among those the endpoint runs at
	// once is not yet given back (estimationDone, N53), as for an
	// instant after each end.
	c.mtuRunning = true
	run("a place not yet given back", false)
	c.mtuRunning = false
	// A probe sent longer ago than the probe interval, not yet forgotten.
	c.sentProbe(p.now.Add(-3*time.Millisecond), 1000)
	run("a probe counted", false)
	if c.probeN != 0 {
		t.Fatalf("setup: the probe is still counted after probeReady (RTT %v)", c.probeRTT())
	}
	run("the probe forgotten", true)
	p.flush()
	// The next estimation's time.
	next := c.estimator.NextDeadline()
	if next <= p.now || !c.estimator.Due(next) {
		t.Fatalf("setup: next estimation at %v, now %v", next, p.now)
	}
	p.now = next
	queue()
	run("the next estimation due", false)
}
