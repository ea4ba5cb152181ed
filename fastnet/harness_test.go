package fastnet

import (
	"bytes"
	"encoding/hex"
	"net/netip"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
)

// testEndpoint plays the peer against one real Endpoint, packet by packet,
// in virtual time (the style of x/net/quic's testConn).
type testEndpoint struct {
	t    testing.TB
	ep   *Endpoint
	now  clock.Time
	peer netip.AddrPort
	buf  []byte
	sent []sentPacket // transmitted and not yet consumed by want*
	evs  []Event
	// firstBeat is the server's first heartbeat, echoed by connectServer
	// (D25).
	firstBeat int16
	// bundleQueries keeps the endpoint's "query:ext:bundle" in sent; by
	// default the scripted peer is a strict 1.0 peer, which ignores them
	// (D24), and so do the tests that play it.
	bundleQueries bool
	// punchQueries likewise keeps its "query:ext:punch" (X2).
	punchQueries bool
}

type sentPacket struct {
	to      netip.AddrPort
	ch      int16
	payload []byte
}

var (
	serverAddr = netip.MustParseAddrPort("10.0.0.1:7000")
	clientAddr = netip.MustParseAddrPort("10.0.0.2:50000")
)

func newTestEndpoint(t testing.TB, cfg Config) *testEndpoint {
	t.Helper()
	ep, err := NewEndpoint(cfg)
	if err != nil {
		t.Fatal(err)
	}
	peer := clientAddr
	if cfg.Role == Client {
		peer = serverAddr
	}
	return &testEndpoint{t: t, ep: ep, now: clock.Epoch, peer: peer, buf: make([]byte, 65536)}
}

// drain pulls every datagram and event, as a driver must after each input.
func (tc *testEndpoint) drain() {
	for {
		tr, ok := tc.ep.PollTransmit(tc.now, tc.buf)
		if !ok {
			break
		}
		ch, p, err := parsePacket(tc.buf[:tr.N])
		if err != nil {
			tc.t.Fatalf("endpoint sent a packet of %d bytes", tr.N)
		}
		if ch == chControl && string(p) == litQueryBundle && !tc.bundleQueries {
			continue
		}
		if ch == chControl && string(p) == litQueryPunch && !tc.punchQueries {
			continue
		}
		tc.sent = append(tc.sent, sentPacket{tr.To, ch, bytes.Clone(p)})
	}
	for {
		ev, ok := tc.ep.PollEvent()
		if !ok {
			break
		}
		tc.evs = append(tc.evs, ev)
	}
}

// recv delivers a packet from addr (the default peer if zero).
func (tc *testEndpoint) recvFrom(from netip.AddrPort, ch int16, payload []byte) {
	tc.t.Helper()
	tc.ep.HandleDatagram(tc.now, from, append(appendPacketHeader(nil, ch), payload...))
	tc.drain()
}

func (tc *testEndpoint) recv(ch int16, payload []byte) { tc.recvFrom(tc.peer, ch, payload) }

func (tc *testEndpoint) recvControl(c control) { tc.recv(chControl, appendControl(nil, c)) }

// advance moves time forward by d, firing every deadline on the way.
func (tc *testEndpoint) advance(d time.Duration) {
	end := tc.now.Add(d)
	for {
		dl, ok := tc.ep.NextDeadline()
		if !ok || dl > end {
			break
		}
		if dl > tc.now {
			tc.now = dl
		}
		tc.ep.HandleTimeout(tc.now)
		tc.drain()
	}
	tc.now = end
	tc.ep.HandleTimeout(tc.now)
	tc.drain()
}

// wantPacket consumes the next transmitted packet and checks it.
func (tc *testEndpoint) wantPacket(what string, ch int16, payload []byte) {
	tc.t.Helper()
	if len(tc.sent) == 0 {
		tc.t.Fatalf("%s: want a packet on channel %d (%q), endpoint sent nothing", what, ch, payload)
	}
	p := tc.sent[0]
	tc.sent = tc.sent[1:]
	if p.ch != ch || !bytes.Equal(p.payload, payload) {
		tc.t.Fatalf("%s:\n got channel %d %s (%q)\nwant channel %d %s (%q)", what, p.ch, hex.EncodeToString(p.payload), p.payload, ch, hex.EncodeToString(payload), payload)
	}
}

func (tc *testEndpoint) wantControl(what string, c control) {
	tc.t.Helper()
	tc.wantPacket(what, chControl, appendControl(nil, c))
}

// skipChannel drops transmitted packets of channel ch (heartbeats, say) that
// a test is not about.
func (tc *testEndpoint) skipChannel(ch int16) {
	kept := tc.sent[:0]
	for _, p := range tc.sent {
		if p.ch != ch {
			kept = append(kept, p)
		}
	}
	tc.sent = kept
}

func (tc *testEndpoint) wantNoPacket(what string) {
	tc.t.Helper()
	if len(tc.sent) > 0 {
		p := tc.sent[0]
		tc.t.Fatalf("%s: want no packet, got channel %d %q (and %d more)", what, p.ch, p.payload, len(tc.sent)-1)
	}
}

// wantEvent consumes the next event and checks its kind.
func (tc *testEndpoint) wantEvent(what string, kind EventKind) Event {
	tc.t.Helper()
	if len(tc.evs) == 0 {
		tc.t.Fatalf("%s: want event %v, got none", what, kind)
	}
	ev := tc.evs[0]
	tc.evs = tc.evs[1:]
	if ev.Kind != kind {
		tc.t.Fatalf("%s: want event %v, got %v (err %v)", what, kind, ev.Kind, ev.Err)
	}
	return ev
}

func (tc *testEndpoint) wantNoEvent(what string) {
	tc.t.Helper()
	if len(tc.evs) > 0 {
		tc.t.Fatalf("%s: want no event, got %v (err %v)", what, tc.evs[0].Kind, tc.evs[0].Err)
	}
}

// connectClient runs a client endpoint's handshake against the scripted
// server and returns the connection's handle.
func (tc *testEndpoint) connectClient(id uint32) Handle {
	tc.t.Helper()
	h, err := tc.ep.Connect(tc.now, tc.peer)
	if err != nil {
		tc.t.Fatal(err)
	}
	tc.drain()
	tc.wantControl("query", control{kind: ctlQueryFastnet})
	tc.wantControl("query", control{kind: ctlQueryVersion})
	tc.recvControl(control{kind: ctlFastnetYes})
	tc.recvControl(control{kind: ctlVersion, text: "1.0"})
	tc.wantControl("connect after both answers", control{kind: ctlConnect})
	tc.recvControl(control{kind: ctlConnected, id: id})
	tc.wantEvent("connected", EventConnected)
	return h
}

// connectServer plays a client connecting to a server endpoint and returns
// the server's handle and the ID it chose.
func (tc *testEndpoint) connectServer() (Handle, uint32) {
	tc.t.Helper()
	tc.recvControl(control{kind: ctlConnect})
	if len(tc.sent) == 0 {
		tc.t.Fatal("server did not answer connect?")
	}
	m, err := parseControl(tc.sent[0].payload)
	if err != nil || m.kind != ctlConnected {
		tc.t.Fatalf("server answered connect? with %q", tc.sent[0].payload)
	}
	tc.sent = tc.sent[1:]
	tc.wantNoEvent("server unvalidated (D25)")
	tc.firstBeat = tc.echoChallenge()
	ev := tc.wantEvent("server connected", EventConnected)
	if ev.ID != m.id {
		tc.t.Fatalf("Connected event ID %d, but sent %d", ev.ID, m.id)
	}
	return ev.Conn, m.id
}

// echoChallenge plays the client echoing the server's first heartbeat, the
// challenge of address validation (D25), and consumes that heartbeat.
func (tc *testEndpoint) echoChallenge() int16 {
	tc.t.Helper()
	return tc.echoChallengeFrom(tc.peer)
}

// echoChallengeFrom echoes the first heartbeat the server sent to from,
// from there, and returns its value.
func (tc *testEndpoint) echoChallengeFrom(from netip.AddrPort) int16 {
	tc.t.Helper()
	for i, p := range tc.sent {
		if p.ch == chHeartbeat && p.to == from {
			tc.sent = append(tc.sent[:i:i], tc.sent[i+1:]...)
			v, err := parseHeartbeat(p.payload)
			if err != nil || v <= 0 {
				tc.t.Fatalf("server heartbeat %x", p.payload)
			}
			tc.recvFrom(from, chHeartbeat, p.payload)
			return v
		}
	}
	tc.t.Fatal("server sent no heartbeat to echo")
	return 0
}
