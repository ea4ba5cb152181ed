package fastnet

import (
	"bytes"
	"testing"
	"time"
)

// TestHoldResends runs a reliable packet whose ack was lost past its
// resend, with resends held back (N130): no resend goes, and no deadline
// is left in the past for it, while acks, heartbeats and first-time data
// still go; released, the resend goes with the next poll.
func TestHoldResends(t *testing.T) {
	first, second := []byte("first message, lost ack"), []byte("second message, new")
	p := newPair(t, Config{}, Config{})
	p.drop = func(from Role, b []byte) bool { return from == Server } // the ack is lost
	if err := p.cli.Send(p.now, p.ch, 1, first, true); err != nil {
		t.Fatal(err)
	}
	p.flush()
	p.drop = nil
	if p.srvMsgs != 1 {
		t.Fatalf("server got %d messages, want 1", p.srvMsgs)
	}
	// poll returns the client's datagrams at the pair's time, after its
	// timers then due if timers is set, and whether any carried msg.
	poll := func(msg []byte, timers bool) (n int, carried bool) {
		if d, ok := p.cli.NextDeadline(); timers && ok && d <= p.now {
			p.cli.HandleTimeout(p.now)
		}
		for {
			tx, ok := p.cli.PollTransmit(p.now, p.buf)
			if !ok {
				return n, carried
			}
			n++
			carried = carried || bytes.Contains(p.buf[:tx.N], msg)
		}
	}
	p.now = p.now.Add(time.Second) // long past the first resend (D14)
	p.cli.HoldResends(p.now, true)
	if _, resent := poll(first, true); resent {
		t.Fatal("resent while resends were held")
	}
	if d, ok := p.cli.NextDeadline(); !ok || d <= p.now {
		t.Fatalf("next deadline %v (set %v), want one after now, %v: the held resend left out", d, ok, p.now)
	}
	if err := p.cli.Send(p.now, p.ch, 2, second, true); err != nil {
		t.Fatal(err)
	}
	if _, sent := poll(second, true); !sent {
		t.Fatal("a first-time message did not go while resends were held")
	}
	if st, _ := p.cli.Stats(p.ch); st.PacketsResent != 0 {
		t.Fatalf("%d packets resent while held, want 0", st.PacketsResent)
	}
	p.cli.HoldResends(p.now, false)
	if _, resent := poll(first, false); !resent { // PollTransmit alone
		t.Fatal("not resent once resends were no longer held")
	}
	if st, _ := p.cli.Stats(p.ch); st.PacketsResent == 0 {
		t.Fatal("no packet counted as resent once released")
	}
}
