package fastnet

import (
	"math/rand/v2"
	"testing"
	"time"
)

// introducerConfig is a server that introduces (X2), with the
// unpredictable source an introducer must have (X16), seeded for replay.
func introducerConfig(seed uint64) Config {
	return Config{Role: Server, Rand: rand.New(rand.NewPCG(seed, 1)), Punch: PunchConfig{Introducer: true},
		MTU: MTUConfig{Disabled: true}}
}

// countControl takes every channel -1 packet of kind k the endpoint sent
// and returns how many there were.
func (tc *testEndpoint) countControl(k controlKind) int {
	n := 0
	for tc.tookControl(k) {
		n++
	}
	return n
}

// The negotiation of X2, against a scripted peer: a strict 1.0 peer that
// never answers is asked with the first punchAsks heartbeats, then never
// again; a capable one that answers at once is asked once. The server
// asks only once the address is validated (D25).
func TestPunchNegotiation(t *testing.T) {
	for _, tt := range []struct {
		name    string
		answer  bool // the scripted peer answers "=yes" to the first query
		asked   int
		capable bool
	}{
		{"X2 strict 1.0 peer", false, punchAsks, false},
		{"X2 capable peer", true, 1, true},
	} {
		tc := newTestEndpoint(t, introducerConfig(1))
		tc.punchQueries = true
		tc.recvControl(control{kind: ctlConnect})
		tc.advance(300 * time.Millisecond)
		if n := tc.countControl(ctlQueryPunch); n != 0 {
			t.Errorf("%s: asked %d times before validation (D25)", tt.name, n)
		}
		tc.echoChallenge()
		h := tc.evs[len(tc.evs)-1].Conn
		if n := tc.countControl(ctlQueryPunch); n != 1 {
			t.Fatalf("%s: asked %d times at validation, want 1", tt.name, n)
		}
		if tt.answer {
			tc.recvControl(control{kind: ctlPunchYes})
		}
		tc.advance(15 * time.Second)
		if n := 1 + tc.countControl(ctlQueryPunch); n != tt.asked {
			t.Errorf("%s: asked %d times, want %d", tt.name, n, tt.asked)
		}
		if got := tc.ep.PunchNegotiated(h); got != tt.capable {
			t.Errorf("%s: negotiated %v, want %v", tt.name, got, tt.capable)
		}
	}
}

// Who answers and who drops (X2): an endpoint that speaks the extension
// answers the query for anyone, statelessly, in fewer than 3 times its
// bytes (D25), and drops an "=yes" from an address without a connection;
// a plain server, and an introducer with Punch.Disabled, are strict 1.0
// peers: both literals are unknown, dropped as bad-control, never answered.
func TestPunchAnswers(t *testing.T) {
	plain := Config{Role: Server, MTU: MTUConfig{Disabled: true}}
	off := introducerConfig(2)
	off.Punch.Disabled = true
	for _, tt := range []struct {
		name    string
		cfg     Config
		answers bool
	}{
		{"X2 introducer", introducerConfig(2), true},
		{"X2 plain server", plain, false},
		{"X2 Punch.Disabled", off, false},
	} {
		tc := newTestEndpoint(t, tt.cfg)
		tc.punchQueries = true
		tc.recvControl(control{kind: ctlQueryPunch})
		if got := tc.tookControl(ctlPunchYes); got != tt.answers {
			t.Errorf("%s: answered %v, want %v", tt.name, got, tt.answers)
		}
		tc.wantNoPacket(tt.name)
		tc.recvControl(control{kind: ctlPunchYes})
		tc.wantNoPacket(tt.name)
		d := tc.ep.Dropped()
		want := [NumDropReasons]uint64{}
		if tt.answers {
			want[DropNotConnected] = 1
		} else {
			want[DropBadControl] = 2
		}
		if d != want {
			t.Errorf("%s: dropped %v, want %v", tt.name, d, want)
		}
	}
	q := len(appendControl(appendPacketHeader(nil, chControl), control{kind: ctlQueryPunch}))
	a := len(appendControl(appendPacketHeader(nil, chControl), control{kind: ctlPunchYes}))
	if q != 17 || a != 21 || a >= 3*q {
		t.Errorf("query %d bytes, answer %d: want 15+2 and 19+2, under 3 times (X2, D25)", q, a)
	}
}

// An introducer must be given its random source (X16), and only a server
// introduces.
func TestPunchConfig(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"X16 introducer with Rand", introducerConfig(3), true},
		{"X16 introducer on the default PCG", Config{Role: Server, Punch: PunchConfig{Introducer: true}}, false},
		{"X2 client introducer", Config{Role: Client, Rand: rand.New(rand.NewPCG(1, 2)), Punch: PunchConfig{Introducer: true}}, false},
		{"X2 disabled", Config{Role: Client, Punch: PunchConfig{Disabled: true}}, true},
		{"X19 peer", Config{Role: Peer}, true},
		{"X19 peer introducer", Config{Role: Peer, Rand: rand.New(rand.NewPCG(1, 2)), Punch: PunchConfig{Introducer: true}}, true},
		{"X19 peer over a stream", Config{Role: Peer, Transport: Stream}, false},
	} {
		if err := tt.cfg.Validate(); (err == nil) != tt.ok {
			t.Errorf("%s: Validate = %v, want ok %v", tt.name, err, tt.ok)
		}
	}
}
