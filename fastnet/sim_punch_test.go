package fastnet_test

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/fastnet/fastnettest"
)

// An introducer and a strict 1.0 client (X2, X20): the client is asked
// punchAsks times, drops each query as an unknown literal, never answers,
// and so is never sent any other literal of the extension.
func TestSimPunchStrictClient(t *testing.T) {
	link := fastnettest.Link{Delay: 20 * time.Millisecond, Loss: 0.1}
	s := newSim(t, simSetup{Seed: 5, Srv: fastnet.Config{Punch: fastnet.PunchConfig{Introducer: true}}, Up: link, Down: link})
	s.net.Filter = func(from, to netip.AddrPort, b []byte) bool {
		if len(b) > 2 && b[0] == 0xff && b[1] == 0xff {
			if p := string(b[2:]); strings.HasPrefix(p, "intro") || strings.HasPrefix(p, "punch") || p == "query:ext:punch=yes" {
				t.Errorf("%q on the wire from %v", p, from)
			}
		}
		return true
	}
	s.connect(5 * time.Second)
	s.run(15 * time.Second)
	if s.ep[srvSide].PunchNegotiated(s.h[srvSide]) {
		t.Error("negotiated with a strict peer")
	}
	if got := s.stats(cliSide).Dropped[fastnet.DropBadControl]; got < 1 || got > 6 {
		t.Errorf("the strict client dropped %d queries, want 1..6 (6 sent, 10%% loss)", got)
	}
}

// peerWorld is a network with an introducing server S, a Peer endpoint P
// and a plain client C, each at a public address.
type peerWorld struct {
	t       *testing.T
	n       *fastnettest.Network
	s, p, c *fastnet.Endpoint
}

var (
	pwS = netip.MustParseAddrPort("198.51.100.1:7000")
	pwP = netip.MustParseAddrPort("198.51.100.2:40000")
	pwC = netip.MustParseAddrPort("198.51.100.3:50000")
)

func newPeerWorld(t *testing.T, seed uint64, peer fastnet.Config) *peerWorld {
	t.Helper()
	n := fastnettest.NewNetwork(seed)
	n.SetDefaultLink(fastnettest.Link{Delay: 15 * time.Millisecond})
	mk := func(cfg fastnet.Config) *fastnet.Endpoint { return netEndpoint(t, n, cfg) }
	peer.Role = fastnet.Peer
	w := &peerWorld{t: t, n: n,
		s: mk(fastnet.Config{Role: fastnet.Server, Punch: fastnet.PunchConfig{Introducer: true}}),
		p: mk(peer),
		c: mk(fastnet.Config{Role: fastnet.Client}),
	}
	n.Add(pwS, w.s)
	n.Add(pwP, w.p)
	n.Add(pwC, w.c)
	return w
}

// event returns the first event of kind at addr, and whether there is one.
func (w *peerWorld) event(at netip.AddrPort, kind fastnet.EventKind) (fastnet.Event, bool) {
	for _, ev := range w.n.Events(at) {
		if ev.Kind == kind {
			return ev, true
		}
	}
	return fastnet.Event{}, false
}

// run runs the network until cond holds, failing the test after limit.
func (w *peerWorld) run(cond func() bool, limit time.Duration) {
	w.t.Helper()
	if err := w.n.RunUntilCond(cond, limit); err != nil {
		w.t.Fatal(err)
	}
}

// One socket, both roles (X19): a Peer endpoint keeps a client-role
// connection to a server and, on the same address, accepts a client's
// connection as its server; messages flow on both, each connection with
// the heartbeat signs, MTU channels and IDs of its own role, and the punch
// extension is negotiated with the introducer only.
func TestSimPeerBothRoles(t *testing.T) {
	w := newPeerWorld(t, 1, fastnet.Config{AcceptStrangers: true})
	toS, err := w.p.Connect(w.n.Now(), pwS)
	if err != nil {
		t.Fatal(err)
	}
	fromC, err := w.c.Connect(w.n.Now(), pwP)
	if err != nil {
		t.Fatal(err)
	}
	w.run(func() bool {
		_, a := w.event(pwC, fastnet.EventConnected)
		n := 0
		for _, ev := range w.n.Events(pwP) {
			if ev.Kind == fastnet.EventConnected {
				n++
			}
		}
		return a && n == 2
	}, 5*time.Second)
	var accepted fastnet.Handle
	for _, ev := range w.n.Events(pwP) {
		if ev.Kind == fastnet.EventConnected && ev.Addr == pwC {
			accepted = ev.Conn
		}
	}
	if accepted == 0 || accepted == toS {
		t.Fatalf("the peer's connections: to S %d, from C %d", toS, accepted)
	}
	// The server-role connection's ID is the one the peer drew (N1).
	idP, _ := w.p.ConnID(accepted)
	idC, _ := w.c.ConnID(fromC)
	if idP != idC || idP == 0 {
		t.Errorf("IDs: peer %d, client %d", idP, idC)
	}
	for _, m := range []struct {
		from *fastnet.Endpoint
		h    fastnet.Handle
		to   netip.AddrPort
	}{{w.p, toS, pwS}, {w.p, accepted, pwC}, {w.c, fromC, pwP}} {
		if err := m.from.Send(w.n.Now(), m.h, 3, []byte("both roles"), true); err != nil {
			t.Fatal(err)
		}
	}
	w.n.RunFor(3 * time.Second)
	for _, at := range []netip.AddrPort{pwS, pwC} {
		if _, ok := w.event(at, fastnet.EventMessage); !ok {
			t.Errorf("%v got no message from the peer", at)
		}
	}
	got := 0
	for _, ev := range w.n.Events(pwP) {
		if ev.Kind == fastnet.EventMessage && ev.Addr == pwC {
			got++
		}
	}
	if got != 1 {
		t.Errorf("the peer got %d messages from the client, want 1", got)
	}
	for _, h := range []fastnet.Handle{toS, accepted} {
		st, _ := w.p.Stats(h)
		if d := st.Dropped[fastnet.DropBadControl] + st.Dropped[fastnet.DropUnknownChannel] + st.Dropped[fastnet.DropNotConnected]; d != 0 {
			t.Errorf("connection %d dropped %v", h, st.Dropped)
		}
		if st.RTT == 200*time.Millisecond {
			t.Errorf("connection %d has no RTT sample: heartbeats of the wrong sign?", h)
		}
	}
	if !w.p.PunchNegotiated(toS) {
		t.Error("peer and introducer did not negotiate the punch extension (X2)")
	}
	if w.p.PunchNegotiated(accepted) {
		t.Error("negotiated with a plain client")
	}
}

// A Peer accepts only introduced clients by default (X12, X19): a stranger
// is refused with "not introduced"; MaxConnections counts the server-role
// connections only; Connect to an address with a connection fails.
func TestSimPeerRefusesStrangers(t *testing.T) {
	w := newPeerWorld(t, 2, fastnet.Config{MaxConnections: 1})
	if _, err := w.p.Connect(w.n.Now(), pwS); err != nil {
		t.Fatal(err)
	}
	if _, err := w.c.Connect(w.n.Now(), pwP); err != nil {
		t.Fatal(err)
	}
	w.run(func() bool {
		_, a := w.event(pwC, fastnet.EventRefused)
		_, b := w.event(pwP, fastnet.EventConnected)
		return a && b
	}, 5*time.Second)
	ev, _ := w.event(pwC, fastnet.EventRefused)
	var re *fastnet.RefusedError
	if !errors.As(ev.Err, &re) || re.Reason != "not introduced" {
		t.Errorf("refused with %v, want \"not introduced\"", ev.Err)
	}
	if _, err := w.p.Connect(w.n.Now(), pwS); !errors.Is(err, fastnet.ErrAlreadyConnected) {
		t.Errorf("second Connect to S: %v", err)
	}

	// With strangers allowed, the client-role connection to S does not
	// count against MaxConnections 1: one client is taken, a second is
	// refused as the server is full.
	w = newPeerWorld(t, 3, fastnet.Config{MaxConnections: 1, AcceptStrangers: true})
	if _, err := w.p.Connect(w.n.Now(), pwS); err != nil {
		t.Fatal(err)
	}
	c2, err := fastnet.NewEndpoint(fastnet.Config{Role: fastnet.Client, Rand: w.n.Rand()})
	if err != nil {
		t.Fatal(err)
	}
	pwC2 := netip.MustParseAddrPort("198.51.100.4:50000")
	w.n.Add(pwC2, c2)
	w.n.RunFor(time.Second)
	w.c.Connect(w.n.Now(), pwP)
	w.n.RunFor(time.Second)
	c2.Connect(w.n.Now(), pwP)
	w.n.RunFor(2 * time.Second)
	if _, ok := w.event(pwC, fastnet.EventConnected); !ok {
		t.Error("the first client was not taken")
	}
	ev, _ = w.event(pwC2, fastnet.EventRefused)
	if !errors.As(ev.Err, &re) || re.Reason != "server full" {
		t.Errorf("the second client: %v, want refused as full", ev.Err)
	}
}

// netEndpoint returns an endpoint configured by cfg, drawing from n's
// random source so that the run replays from n's seed.
func netEndpoint(t *testing.T, n *fastnettest.Network, cfg fastnet.Config) *fastnet.Endpoint {
	t.Helper()
	cfg.Rand = n.Rand()
	ep, err := fastnet.NewEndpoint(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return ep
}
