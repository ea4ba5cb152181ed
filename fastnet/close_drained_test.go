package fastnet

import (
	"testing"
	"time"
)

// TestCloseFinishesWhenWritten: a graceful close whose last messages
// need no ack (over a stream, or unreliable ones) finishes once they are
// written (N146). Only acks finished a close, and the close waited its
// whole Linger (an hour here).
func TestCloseFinishesWhenWritten(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cfg      Config
		reliable bool
	}{
		{"stream", Config{Transport: Stream, Linger: time.Hour}, true},
		{"datagram, unreliable", Config{Linger: time.Hour, MTU: MTUConfig{Disabled: true}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t, tc.cfg, tc.cfg)
			if err := p.cli.Send(p.now, p.ch, 1, []byte("goodbye"), tc.reliable); err != nil {
				t.Fatal(err)
			}
			if err := p.cli.Close(p.now, p.ch, "done"); err != nil {
				t.Fatal(err)
			}
			p.flush() // as a driver polls after each call
			p.advance(time.Second)
			got, heard, closed := 0, false, false
			for _, ev := range p.srvEvs {
				if ev.Kind == EventMessage && string(ev.Data) == "goodbye" {
					got++
				}
				if ev.Kind == EventDisconnected {
					heard = true
				}
			}
			for _, ev := range p.cliEvs {
				if ev.Kind == EventDisconnected {
					closed = true
					if lc, ok := ev.Err.(*LocalCloseError); !ok || lc.Unacknowledged {
						t.Errorf("the client's end: %v, want a close with nothing unacknowledged", ev.Err)
					}
				}
			}
			if got != 1 || !heard || !closed {
				t.Errorf("a second after Close: the peer got %d messages and heard the close %v, the client's close finished %v; want 1, true, true", got, heard, closed)
			}
		})
	}
}
