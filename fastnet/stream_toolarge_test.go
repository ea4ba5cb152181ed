package fastnet

import (
	"bytes"
	"errors"
	"testing"
)

// TestStreamPacketTooLarge: over a stream, a packet longer than any the
// endpoint takes (the peers' MaxMessageSize differ) ends the connection
// with a *ProtocolError (N147). It was dropped and counted, and the
// messages after it delivered: a hole in what the stream carries
// reliably and in order. A message just over the limit, within the
// largest packet, ended the connection already.
func TestStreamPacketTooLarge(t *testing.T) {
	p := newPair(t, Config{Transport: Stream}, Config{Transport: Stream, MaxMessageSize: 64 << 10})
	for _, m := range [][]byte{[]byte("first"), bytes.Repeat([]byte("x"), 100<<10), []byte("third")} {
		if err := p.cli.Send(p.now, p.ch, 0, m, true); err != nil {
			t.Fatal(err)
		}
	}
	p.flush()
	var got []string
	var end error
	for _, ev := range p.srvEvs {
		switch ev.Kind {
		case EventMessage:
			got = append(got, string(ev.Data[:min(len(ev.Data), 8)]))
		case EventDisconnected:
			end = ev.Err
		}
	}
	var pe *ProtocolError
	if !errors.As(end, &pe) {
		t.Errorf("the server's connection ended with %v, want a *ProtocolError", end)
	}
	if len(got) != 1 || got[0] != "first" {
		t.Errorf("the server delivered %q, want only the message before the hole", got)
	}
}
