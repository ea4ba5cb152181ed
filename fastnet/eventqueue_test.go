package fastnet

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"
)

// An application that polls one event for each one queued, but is always
// some events behind, never empties the queue: the places of the events
// it polled are reused, and the queue's memory stays proportional to the
// events it holds (N106). Each message comes out once, in order, with its
// own bytes, lent buffers included (N103).
func TestEventQueueBehind(t *testing.T) {
	for _, reuse := range []bool{false, true} {
		for _, behind := range []int{1, 7, 100} {
			t.Run(fmt.Sprintf("reuse=%v/behind=%d", reuse, behind), func(t *testing.T) {
				testEventQueueBehind(t, behind, reuse)
			})
		}
	}
}

func testEventQueueBehind(t *testing.T, behind int, reuse bool) {
	const rounds = 20000
	cfg := Config{InitialPayloadMTU: 1200, MTU: MTUConfig{Disabled: true}, ReuseMessageBuffers: reuse}
	p := newPair(t, cfg, cfg)
	p.keep = false
	srv := p.srv
	sent, next := 0, 0
	send := func() {
		t.Helper()
		msg := binary.BigEndian.AppendUint64(make([]byte, 0, 40), uint64(sent))
		msg = append(msg, make([]byte, 32)...) // a checksum of its own (D3)
		if err := p.cli.Send(p.now, p.ch, 1, msg, true); err != nil {
			t.Fatal(err)
		}
		sent++
		// The pair's flush, but for the server's events, which the
		// test polls itself.
		p.now = p.now.Add(time.Millisecond)
		for _, ep := range []*Endpoint{p.cli, srv} {
			if d, ok := ep.NextDeadline(); ok && d <= p.now {
				ep.HandleTimeout(p.now)
			}
		}
		for moved := true; moved; {
			moved = p.pump(Client, p.cli, srv, clientAddr)
			moved = p.pump(Server, srv, p.cli, serverAddr) || moved
			p.events(p.cli, &p.cliEvs, &p.cliMsgs, &p.cliBytes)
		}
	}
	poll := func() bool {
		t.Helper()
		ev, ok := srv.PollEvent()
		if ok && ev.Kind == EventMessage {
			if got := binary.BigEndian.Uint64(ev.Data); got != uint64(next) || len(ev.Data) != 40 {
				t.Fatalf("message %d: got %d, %d bytes", next, got, len(ev.Data))
			}
			next++
		}
		return ok
	}
	for range behind {
		send()
	}
	for i := range rounds {
		send()
		if !poll() {
			t.Fatalf("round %d: no event", i)
		}
		if n := len(srv.events) - srv.evHead; n > behind+8 {
			t.Fatalf("round %d: %d events queued", i, n)
		}
	}
	if c := cap(srv.events); c > 4*(behind+8) {
		t.Errorf("the queue holds %d places for %d events", c, len(srv.events)-srv.evHead)
	}
	for poll() {
	}
	if next != sent {
		t.Errorf("%d messages, want %d", next, sent)
	}
}
