package fastnet

import (
	"net/netip"
	"testing"
	"time"
)

// An introducer forgets a connection's introduction counts (X4) when the
// connection ends, whether or not an introduction is live then (N107):
// kept, they would pin the ended connection, and clients that come, ask
// for an introduction, let it end and leave would grow the map without
// bound. Before the fix, 200 pairs of such clients left 400 entries.
func TestIntroCountsForgotten(t *testing.T) {
	tc := newTestEndpoint(t, introducerConfig(7))
	tc.punchQueries = true
	addr := func(i int) netip.AddrPort {
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), 40000)
	}
	// connect plays a client at from through the handshake, its
	// validation (D25) and the punch negotiation (X2); it returns its id.
	connect := func(from netip.AddrPort) uint32 {
		t.Helper()
		tc.sent = nil
		tc.recvFrom(from, chControl, appendControl(nil, control{kind: ctlConnect}))
		var id uint32
		for _, p := range tc.sent {
			if m, err := parseControl(p.payload); p.ch == chControl && p.to == from && err == nil && m.kind == ctlConnected {
				id = m.id
			}
		}
		if id == 0 {
			t.Fatal("no connected")
		}
		tc.echoChallengeFrom(from)
		tc.recvFrom(from, chControl, appendControl(nil, control{kind: ctlPunchYes}))
		tc.sent, tc.evs = nil, nil
		return id
	}
	const pairs = 200
	for round := range pairs {
		a, b := addr(2*round), addr(2*round+1)
		connect(a)
		idB := connect(b)
		// A asks to be introduced to B; B never answers (X5): the
		// introducer fails it after ConsentTimeout and forgets it
		// introFailKeep later (X7).
		tc.recvFrom(a, chControl, AppendIntroRequest(nil, 1, idB))
		tc.advance(16 * time.Second) // also heartbeats: answer none, they time out at 20 s
		if n := tc.ep.intros.n(); n != 0 {
			t.Fatalf("round %d: %d introductions still live", round, n)
		}
		for _, x := range []netip.AddrPort{a, b} {
			tc.recvFrom(x, chControl, appendControl(nil, control{kind: ctlDisconnect}))
		}
		tc.sent, tc.evs = nil, nil
	}
	if n := len(tc.ep.conns); n != 0 {
		t.Fatalf("%d connections left, want 0", n)
	}
	if n := len(tc.ep.intros.counts); n != 0 {
		t.Errorf("after %d pairs of clients came, asked for an introduction and left, the introducer keeps %d introCounts entries (each pinning its ended *conn); want 0", pairs, n)
	}
}

// An initiator's introduction whose introducer's connection ended goes on
// without it (X7: via is nil); its failure is reported all the same, with
// no connection to name (N109). It was reported through via.
func TestIntroReportWithoutIntroducer(t *testing.T) {
	ep, err := NewEndpoint(Config{Role: Peer})
	if err != nil {
		t.Fatal(err)
	}
	in := &intro{side: sideInitiator, peerAddr: netip.MustParseAddrPort("192.0.2.7:9000")}
	ep.introReport(in, &IntroError{Code: IntroNoPeer})
	ev, ok := ep.PollEvent()
	if !ok || ev.Kind != EventIntroFailed || ev.Conn != 0 || ev.Addr != in.peerAddr {
		t.Fatalf("event %+v, %v; want EventIntroFailed for %v with no connection", ev, ok, in.peerAddr)
	}
}
