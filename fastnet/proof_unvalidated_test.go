package fastnet

import (
	"testing"
	"time"
)

// A forged "query:ext:bundle=yes" to a server's connection still proving
// its address (D25), which the server never asked (it asks once
// validated, N69): the server's challenge heartbeats go in bundles, which
// a strict 1.0 client drops, for the next 8 of them, 0.8 s, whenever the
// first heartbeat or its echo was lost.
func TestForgedAnswerUnvalidated(t *testing.T) {
	tc := newTestEndpoint(t, Config{Role: Server, MTU: MTUConfig{Disabled: true}})
	tc.recvControl(control{kind: ctlConnect})
	tc.sent = nil                               // "connected" and the first challenge, lost
	tc.recvControl(control{kind: ctlBundleYes}) // forged
	plain, bundled := 0, 0
	for range 10 {
		tc.advance(100 * time.Millisecond)
		for _, p := range tc.sent {
			switch p.ch {
			case chHeartbeat:
				plain++
			case chBundle:
				bundled++
			}
		}
		tc.sent = nil
	}
	if bundled > 0 {
		t.Errorf("in the first second, %d challenge heartbeats went in bundles a strict client drops, %d alone", bundled, plain)
	}
}
