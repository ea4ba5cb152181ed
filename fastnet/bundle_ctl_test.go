package fastnet

import (
	"encoding/binary"
	"testing"
)

// TestBundleRepeatedControl: a bundle of a thousand "query:version"
// packets, and one of "connect?" packets, draws one answer each, not a
// datagram an inner packet; the repeats are counted (N139). The next
// bundle is answered again.
func TestBundleRepeatedControl(t *testing.T) {
	for _, kind := range []controlKind{ctlQueryVersion, ctlQueryFastnet, ctlConnect} {
		tc := newTestEndpoint(t, Config{Role: Server})
		h, _ := tc.connectServer()
		tc.recvControl(control{kind: ctlQueryBundle})
		tc.sent, tc.evs = nil, nil
		inner := appendControl(appendPacketHeader(nil, chControl), control{kind: kind})
		const n = 1000
		var b []byte
		for range n {
			b = binary.BigEndian.AppendUint16(b, uint16(len(inner)))
			b = append(b, inner...)
		}
		for round := range 2 {
			tc.recv(chBundle, b)
			answers := 0
			for _, p := range tc.sent {
				if p.ch == chControl {
					answers++
				}
			}
			if answers != 1 {
				t.Errorf("%v, bundle %d: %d answers to %d packets of one kind, want 1", kind, round, answers, n)
			}
			tc.sent = nil
		}
		st, _ := tc.ep.Stats(h)
		if got := st.Dropped[DropRepeatedControl]; got != 2*(n-1) {
			t.Errorf("%v: %d counted as repeated, want %d", kind, got, 2*(n-1))
		}
	}
}

// A lone "query:version" after a bundle that held one is answered: the
// bundle's state ends with it (N139).
func TestBundleRepeatedControlEnds(t *testing.T) {
	tc := newTestEndpoint(t, Config{Role: Server})
	tc.connectServer()
	tc.recvControl(control{kind: ctlQueryBundle})
	tc.sent, tc.evs = nil, nil
	inner := appendControl(appendPacketHeader(nil, chControl), control{kind: ctlQueryVersion})
	b := append([]byte{0, byte(len(inner))}, inner...)
	tc.recv(chBundle, b)
	tc.sent = nil
	tc.recvControl(control{kind: ctlQueryVersion})
	if len(tc.sent) != 1 {
		t.Errorf("lone query after a bundle drew %d answers, want 1", len(tc.sent))
	}
}
