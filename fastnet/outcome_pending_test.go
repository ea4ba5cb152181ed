package fastnet

import (
	"fmt"
	"testing"
)

// TestOutcomeSentPacketWritten: an unreliable message reported
// OutcomeSent is written, even when its packet waited for the next
// datagram (it did not fit the bundle, N71) and the connection was
// aborted before the next PollTransmit (N147). The packet was dropped
// with its connection, its outcome saying it was sent.
func TestOutcomeSentPacketWritten(t *testing.T) {
	cfg := Config{InitialPayloadMTU: 300, MTU: MTUConfig{Disabled: true}, Congestion: CongestionConfig{Disabled: true}}
	p := newPair(t, cfg, cfg)
	msgs := map[MessageID]string{}
	for i := range 20 {
		m := fmt.Sprintf("message %02d %0120d", i, i)
		id, err := p.cli.SendTracked(p.now, p.ch, 1, []byte(m), false)
		if err != nil {
			t.Fatal(err)
		}
		msgs[id] = m
	}
	tr, ok := p.cli.PollTransmit(p.now, p.buf) // one datagram, then the driver lets go
	if !ok {
		t.Fatal("nothing to send")
	}
	p.srv.HandleDatagram(p.now, clientAddr, p.buf[:tr.N])
	if err := p.cli.Abort(p.now, p.ch, "gone"); err != nil {
		t.Fatal(err)
	}
	p.flush()
	got := map[string]bool{}
	for _, ev := range p.srvEvs {
		if ev.Kind == EventMessage {
			got[string(ev.Data)] = true
		}
	}
	sent := 0
	for _, ev := range p.cliEvs {
		if ev.Kind == EventOutcome && ev.Outcome == OutcomeSent {
			sent++
			if !got[msgs[ev.Message]] {
				t.Errorf("message %d reported sent, never received on a lossless link", ev.Message)
			}
		}
	}
	if sent == 0 {
		t.Fatal("no message reported sent")
	}
}
