package fastnet_test

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/fastnet/fastnettest"
)

// introWorld is an introducer S and peers connected to it, on a simulated
// network, each peer's connection to S negotiated (X2).
type introWorld struct {
	t     *testing.T
	n     *fastnettest.Network
	s     *fastnet.Endpoint
	peers []*fastnet.Endpoint
	addrs []netip.AddrPort
	toS   []fastnet.Handle // each peer's connection to S
	ids   []uint32         // and its id at S
}

var iwS = netip.MustParseAddrPort("198.51.100.1:7000")

// iwAddr is peer i's public address.
func iwAddr(i int) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{203, 0, 113, byte(10 + i)}), 40000)
}

// newIntroWorld connects len(peers) Peers, configured by peers, to an
// introducer configured by srv; link is the default link.
func newIntroWorld(t *testing.T, seed uint64, srv fastnet.Config, link fastnettest.Link, peers ...fastnet.Config) *introWorld {
	t.Helper()
	n := fastnettest.NewNetwork(seed)
	n.SetDefaultLink(link)
	srv.Role, srv.Punch.Introducer = fastnet.Server, true
	s := netEndpoint(t, n, srv)
	n.Add(iwS, s)
	w := &introWorld{t: t, n: n, s: s}
	for i, cfg := range peers {
		cfg.Role = fastnet.Peer
		ep := netEndpoint(t, n, cfg)
		n.Add(iwAddr(i), ep)
		h, err := ep.Connect(n.Now(), iwS)
		if err != nil {
			t.Fatal(err)
		}
		w.peers, w.addrs, w.toS = append(w.peers, ep), append(w.addrs, iwAddr(i)), append(w.toS, h)
	}
	w.run(func() bool {
		for i, ep := range w.peers {
			if !peers[i].Punch.Disabled && !ep.PunchNegotiated(w.toS[i]) {
				return false
			}
		}
		return true
	}, 20*time.Second)
	for i, ep := range w.peers {
		id, _ := ep.ConnID(w.toS[i])
		w.ids = append(w.ids, id)
	}
	// S's side negotiates too, a heartbeat or so later.
	w.n.RunFor(2 * time.Second)
	return w
}

func (w *introWorld) run(cond func() bool, limit time.Duration) {
	w.t.Helper()
	if err := w.n.RunUntilCond(cond, limit); err != nil {
		w.t.Fatal(err)
	}
}

// introEvent returns peer i's first event of kind, if any.
func (w *introWorld) introEvent(i int, kind fastnet.EventKind) (fastnet.Event, bool) {
	for _, ev := range w.n.Events(w.addrs[i]) {
		if ev.Kind == kind {
			return ev, true
		}
	}
	return fastnet.Event{}, false
}

// introduce has peer a ask for peer b's id (or target, if b < 0) and runs
// until a has an answer or limit passes.
func (w *introWorld) introduce(a int, target uint32, limit time.Duration) (fastnet.Event, time.Duration) {
	w.t.Helper()
	start := w.n.Now()
	if _, err := w.peers[a].Introduce(w.n.Now(), w.toS[a], target); err != nil {
		w.t.Fatal(err)
	}
	var ev fastnet.Event
	w.run(func() bool {
		for _, e := range w.n.Events(w.addrs[a]) {
			if e.Kind == fastnet.EventIntroduced || e.Kind == fastnet.EventIntroFailed {
				ev = e
				return true
			}
		}
		return false
	}, limit)
	return ev, w.n.Now().Sub(start)
}

func consentAll(fastnet.IntroOffer) error { return nil }

// consenting returns the configurations of n peers that consent to every
// introduction and may ask for 16 at once.
func consenting(n int) []fastnet.Config {
	peers := make([]fastnet.Config, n)
	for i := range peers {
		peers[i] = fastnet.Config{Punch: fastnet.PunchConfig{MaxIntros: 16, Consent: consentAll}}
	}
	return peers
}

// The introduction of X4-X6 end to end: A asks for B's id, B's
// application consents, and both get EventIntroduced naming each other's
// id and reflexive address, the same intro id and lifetime, and the
// other's local candidates (X8, X9); through loss on the legs to S, the
// repeats of X7 get it through.
func TestSimIntroduction(t *testing.T) {
	for _, tt := range []struct {
		name string
		link fastnettest.Link
	}{
		{"X6 lossless", fastnettest.Link{Delay: 20 * time.Millisecond}},
		{"X7 30% loss", fastnettest.Link{Delay: 20 * time.Millisecond, Loss: 0.3}},
	} {
		var offers []fastnet.IntroOffer
		candA := []netip.AddrPort{netip.MustParseAddrPort("192.168.1.10:40000"), netip.MustParseAddrPort("127.0.0.1:40000")}
		candB := []netip.AddrPort{netip.MustParseAddrPort("10.1.2.3:40000")}
		w := newIntroWorld(t, 11, fastnet.Config{Punch: fastnet.PunchConfig{Relay: "relay.example:7100"}}, tt.link,
			fastnet.Config{Punch: fastnet.PunchConfig{Candidates: candA}},
			fastnet.Config{Punch: fastnet.PunchConfig{Candidates: candB, Consent: func(o fastnet.IntroOffer) error {
				offers = append(offers, o)
				return nil
			}}})
		ev, took := w.introduce(0, w.ids[1], 12*time.Second)
		if ev.Kind != fastnet.EventIntroduced {
			t.Fatalf("%s: A got %v (%v)", tt.name, ev.Kind, ev.Err)
		}
		w.run(func() bool { _, ok := w.introEvent(1, fastnet.EventIntroduced); return ok }, 5*time.Second)
		evB, _ := w.introEvent(1, fastnet.EventIntroduced)
		a, b := ev.Intro, evB.Intro
		if len(offers) != 1 {
			t.Fatalf("%s: consent asked %d times, want once per intro id (X5)", tt.name, len(offers))
		}
		o := offers[0]
		if o.InitiatorID != w.ids[0] || o.Addr != w.addrs[0] || len(o.Cands) != 1 || o.Cands[0] != candA[0] {
			t.Errorf("%s: offer %+v: want A's id %d, address %v and its one private candidate (X9 drops loopback)", tt.name, o, w.ids[0], w.addrs[0])
		}
		if !a.Initiator || b.Initiator || a.ID != b.ID || a.ID != o.ID || a.ID == (fastnet.IntroID{}) {
			t.Errorf("%s: roles or ids: A %+v, B %+v", tt.name, a, b)
		}
		if a.PeerID != w.ids[1] || a.PeerAddr != w.addrs[1] || len(a.PeerCands) != 1 || a.PeerCands[0] != candB[0] {
			t.Errorf("%s: A learned %+v", tt.name, a)
		}
		if b.PeerID != w.ids[0] || b.PeerAddr != w.addrs[0] || b.Req != 0 || a.Req == 0 {
			t.Errorf("%s: B learned %+v", tt.name, b)
		}
		if a.TTL != 30*time.Second || b.TTL != a.TTL || a.Relay != "relay.example:7100" || b.Relay != a.Relay {
			t.Errorf("%s: ttl %v/%v, relay %q/%q", tt.name, a.TTL, b.TTL, a.Relay, b.Relay)
		}
		if ta, tb := fastnet.IntroToken(w.peers[0], a.ID), fastnet.IntroToken(w.peers[1], b.ID); ta != tb || ta == ([16]byte{}) {
			t.Errorf("%s: tokens %x and %x", tt.name, ta, tb)
		}
		if tt.link.Loss == 0 && took != 4*tt.link.Delay {
			t.Errorf("%s: took %v, want four crossings of the S legs", tt.name, took)
		}
		if sev, ok := w.serverEvent(fastnet.EventIntroduction); !ok || sev.Err != nil || sev.ID != w.ids[1] || sev.Addr != w.addrs[0] {
			t.Errorf("%s: the introducer's EventIntroduction %+v (found %v), want A's introduction to %d", tt.name, sev, ok, w.ids[1])
		}
	}
}

// The failures of X6, each with its code, within its bound: an unknown
// id, A's own id and a peer that does not speak the extension all get
// code 1 (X4, X8); a refusal gets code 2 and the target's reason, and a
// target without a consent hook refuses (X1, X5); a target that never
// answers, code 3 after the consent timeout (X18); an introducer that
// never answers, the initiator's own failure after IntroTimeout (X7).
func TestSimIntroFailures(t *testing.T) {
	link := fastnettest.Link{Delay: 20 * time.Millisecond}
	refuse := fastnet.Config{Punch: fastnet.PunchConfig{Consent: func(fastnet.IntroOffer) error { return errors.New("not now") }}}
	strict := fastnet.Config{Punch: fastnet.PunchConfig{Disabled: true}}
	for _, tt := range []struct {
		name   string
		b      fastnet.Config
		target func(w *introWorld) uint32
		cut    string // "B": S's datagrams to B are lost; "S": every datagram to S
		code   fastnet.IntroCode
		reason string
		within time.Duration
	}{
		{"X4 unknown id", fastnet.Config{}, func(w *introWorld) uint32 { return w.ids[1] ^ 1 }, "", fastnet.IntroUnknownTarget, "", 100 * time.Millisecond},
		{"X4 own id", fastnet.Config{}, func(w *introWorld) uint32 { return w.ids[0] }, "", fastnet.IntroUnknownTarget, "", 100 * time.Millisecond},
		{"X20 strict target", strict, func(w *introWorld) uint32 { return w.ids[1] }, "", fastnet.IntroUnknownTarget, "", 100 * time.Millisecond},
		{"X5 refused", refuse, func(w *introWorld) uint32 { return w.ids[1] }, "", fastnet.IntroRefused, "not now", 200 * time.Millisecond},
		{"X1 no consent hook", fastnet.Config{}, func(w *introWorld) uint32 { return w.ids[1] }, "", fastnet.IntroRefused, "no consent", 200 * time.Millisecond},
		{"X18 target silent", fastnet.Config{}, func(w *introWorld) uint32 { return w.ids[1] }, "B", fastnet.IntroNoConsent, "", 5100 * time.Millisecond},
		{"X7 introducer silent", fastnet.Config{}, func(w *introWorld) uint32 { return w.ids[1] }, "S", fastnet.IntroNoIntroducer, "", 10 * time.Second},
	} {
		w := newIntroWorld(t, 12, fastnet.Config{}, link, fastnet.Config{}, tt.b)
		if tt.b.Punch.Disabled {
			id, _ := w.peers[1].ConnID(w.toS[1])
			w.ids[1] = id
		}
		switch tt.cut {
		case "B":
			w.n.Filter = func(from, to netip.AddrPort, b []byte) bool { return !(from == iwS && to == w.addrs[1]) }
		case "S":
			w.n.Filter = func(from, to netip.AddrPort, b []byte) bool { return to != iwS }
		}
		ev, took := w.introduce(0, tt.target(w), 12*time.Second)
		var ie *fastnet.IntroError
		if ev.Kind != fastnet.EventIntroFailed || !errors.As(ev.Err, &ie) {
			t.Errorf("%s: got %v (%v)", tt.name, ev.Kind, ev.Err)
			continue
		}
		if ie.Code != tt.code || ie.Reason != tt.reason || !errors.Is(ev.Err, fastnet.ErrIntroFailed) {
			t.Errorf("%s: code %d reason %q, want %d %q", tt.name, ie.Code, ie.Reason, tt.code, tt.reason)
		}
		if took > tt.within {
			t.Errorf("%s: took %v, want within %v", tt.name, took, tt.within)
		}
		if _, ok := w.introEvent(1, fastnet.EventIntroduced); ok {
			t.Errorf("%s: B introduced all the same", tt.name)
		}
		// The introducer reports the failure it sent, with its code,
		// when it saw the request at all.
		sev, ok := w.serverEvent(fastnet.EventIntroduction)
		switch {
		case tt.cut == "S":
			if ok {
				t.Errorf("%s: the introducer reported %v for a request it never saw", tt.name, sev.Err)
			}
		case !ok || !errors.As(sev.Err, &ie) || ie.Code != tt.code || sev.ID != tt.target(w) || sev.Addr != w.addrs[0]:
			t.Errorf("%s: the introducer's EventIntroduction %+v (found %v), want code %d for target %d from %v", tt.name, sev, ok, tt.code, tt.target(w), w.addrs[0])
		}
	}
}

// serverEvent returns the introducer's first event of kind, if any.
func (w *introWorld) serverEvent(kind fastnet.EventKind) (fastnet.Event, bool) {
	for _, ev := range w.n.Events(iwS) {
		if ev.Kind == kind {
			return ev, true
		}
	}
	return fastnet.Event{}, false
}

// The introducer's limits (X4, X17): 4 live introductions per requester,
// one per pair, 8 live offers per target, and a bucket of 4 filled at 2 a
// second; past each, code 4.
func TestSimIntroLimits(t *testing.T) {
	link := fastnettest.Link{Delay: 10 * time.Millisecond}
	w := newIntroWorld(t, 13, fastnet.Config{Punch: fastnet.PunchConfig{MaxOffers: 2}}, link, consenting(7)...)
	codes := func(a int) (ok, busy int) {
		for _, ev := range w.n.Events(w.addrs[a]) {
			var ie *fastnet.IntroError
			switch {
			case ev.Kind == fastnet.EventIntroduced && ev.Intro.Initiator:
				ok++
			case ev.Kind == fastnet.EventIntroFailed && errors.As(ev.Err, &ie) && ie.Code == fastnet.IntroBusy:
				busy++
			}
		}
		return
	}
	ask := func(a, b int) {
		if _, err := w.peers[a].Introduce(w.n.Now(), w.toS[a], w.ids[b]); err != nil {
			t.Fatal(err)
		}
	}
	// Peer 0 asks for 1..5 at once: 4 live, the fifth busy (X4).
	for b := 1; b <= 5; b++ {
		ask(0, b)
	}
	w.n.RunFor(time.Second)
	if ok, busy := codes(0); ok != 4 || busy != 1 {
		t.Errorf("X4 live per requester: %d introduced, %d busy; want 4, 1", ok, busy)
	}
	// One per pair: 1 asks for 0, which is introduced to it already.
	ask(1, 0)
	w.n.RunFor(time.Second)
	if ok, busy := codes(1); ok != 0 || busy != 1 {
		t.Errorf("X4 one per pair: %d introduced, %d busy; want 0, 1", ok, busy)
	}
	// Offers per target (MaxOffers 2 here): 6 already has none; 2, 3
	// and 4 ask for it, the third is busy.
	for a := 2; a <= 4; a++ {
		ask(a, 6)
	}
	w.n.RunFor(time.Second)
	busy := 0
	for a := 2; a <= 4; a++ {
		_, b := codes(a)
		busy += b
	}
	if busy != 1 {
		t.Errorf("X4 offers per target: %d busy, want 1", busy)
	}
}

// The bucket of X4: a requester with MaxIntros raised past the bucket
// starts 4 at once, then 2 a second.
func TestSimIntroRate(t *testing.T) {
	link := fastnettest.Link{Delay: 10 * time.Millisecond}
	w := newIntroWorld(t, 14, fastnet.Config{Punch: fastnet.PunchConfig{MaxIntros: 16}}, link, consenting(10)...)
	for b := 1; b <= 6; b++ {
		if _, err := w.peers[0].Introduce(w.n.Now(), w.toS[0], w.ids[b]); err != nil {
			t.Fatal(err)
		}
	}
	w.n.RunFor(100 * time.Millisecond)
	ok, busy := 0, 0
	for _, ev := range w.n.Events(w.addrs[0]) {
		switch ev.Kind {
		case fastnet.EventIntroduced:
			ok++
		case fastnet.EventIntroFailed:
			busy++
		}
	}
	if ok != 4 || busy != 2 {
		t.Errorf("burst: %d introduced, %d busy; want 4, 2", ok, busy)
	}
	w.n.RunFor(time.Second) // two more tokens
	for b := 7; b <= 9; b++ {
		w.peers[0].Introduce(w.n.Now(), w.toS[0], w.ids[b])
	}
	w.n.RunFor(100 * time.Millisecond)
	ok = 0
	for _, ev := range w.n.Events(w.addrs[0]) {
		if ev.Kind == fastnet.EventIntroduced {
			ok++
		}
	}
	if ok != 6 {
		t.Errorf("after a second: %d introduced in all, want 6", ok)
	}
}

// X7, X18: the target's connection to S ends while the offer waits (its
// application has not answered: the hook is slow here, so S's datagrams
// to it are lost): A gets code 5 at once.
func TestSimIntroTargetLeaves(t *testing.T) {
	link := fastnettest.Link{Delay: 20 * time.Millisecond}
	w := newIntroWorld(t, 15, fastnet.Config{}, link, fastnet.Config{}, fastnet.Config{Punch: fastnet.PunchConfig{Consent: consentAll}})
	w.n.Filter = func(from, to netip.AddrPort, b []byte) bool { return !(from == iwS && to == w.addrs[1]) }
	if _, err := w.peers[0].Introduce(w.n.Now(), w.toS[0], w.ids[1]); err != nil {
		t.Fatal(err)
	}
	w.n.RunFor(time.Second)
	w.n.Filter = nil
	w.peers[1].Abort(w.n.Now(), w.toS[1], "gone")
	w.run(func() bool { _, ok := w.introEvent(0, fastnet.EventIntroFailed); return ok }, time.Second)
	ev, _ := w.introEvent(0, fastnet.EventIntroFailed)
	var ie *fastnet.IntroError
	if !errors.As(ev.Err, &ie) || ie.Code != fastnet.IntroPeerGone {
		t.Errorf("got %v, want code 5", ev.Err)
	}
}

// Forged introductions (X16, X18): an "intro=" answering no request, an
// "intro>" or "intro=" from an address with no connection to an
// introducer, an "intro+" from someone other than the target, and an
// "intro!" for an unknown request are dropped and counted as bad-intro,
// never answered, and change nothing; malformed ones are bad-control.
func TestSimIntroForged(t *testing.T) {
	link := fastnettest.Link{Delay: 10 * time.Millisecond}
	w := newIntroWorld(t, 16, fastnet.Config{}, link, fastnet.Config{}, fastnet.Config{Punch: fastnet.PunchConfig{Consent: consentAll}})
	mallory := netip.MustParseAddrPort("192.0.2.66:6666")
	sent := 0
	w.n.Filter = func(from, to netip.AddrPort, b []byte) bool {
		if to == mallory {
			sent++
		}
		return true
	}
	ctl := func(payload []byte) []byte { return append([]byte{0xff, 0xff}, payload...) }
	goA := fastnet.AppendIntroGo(nil, 99, fastnet.IntroID{9}, 0, w.ids[1], w.addrs[1])
	offer := fastnet.AppendIntroOffer(nil, fastnet.IntroID{9}, w.ids[0], w.addrs[0])
	for _, f := range []struct {
		name     string
		from, to netip.AddrPort
		b        []byte
		reason   fastnet.DropReason
		conn     int // the peer whose connection counts it (at S: S's connection of it), -1: the receiver's strays
	}{
		{"X16 intro= for no request, from S", iwS, w.addrs[0], ctl(goA), fastnet.DropBadIntro, 0},
		{"X16 intro= from a stranger", mallory, w.addrs[0], ctl(goA), fastnet.DropBadIntro, -1},
		{"X16 intro> from a stranger", mallory, w.addrs[1], ctl(offer), fastnet.DropBadIntro, -1},
		{"X16 intro+ from the wrong peer", w.addrs[0], iwS, ctl(fastnet.AppendIntroAccept(nil, fastnet.IntroID{9})), fastnet.DropBadIntro, 0},
		{"X16 intro? from a stranger", mallory, iwS, ctl(fastnet.AppendIntroRequest(nil, 5, w.ids[1])), fastnet.DropBadIntro, -1},
		{"X3 malformed intro?", w.addrs[0], iwS, ctl([]byte("intro?\x00")), fastnet.DropBadControl, 0},
	} {
		ep, h := w.s, fastnet.Handle(0)
		for i, a := range w.addrs {
			if f.to == a {
				ep = w.peers[i]
				if f.conn >= 0 {
					h = w.toS[i]
				}
			}
		}
		if f.to == iwS && f.conn >= 0 {
			h = sConn(w, f.conn)
		}
		before := dropsOf(ep, h, f.reason)
		w.n.Inject(f.from, f.to, f.b)
		w.n.RunFor(200 * time.Millisecond)
		if got := dropsOf(ep, h, f.reason) - before; got != 1 {
			t.Errorf("%s: %d counted as %v, want 1", f.name, got, f.reason)
		}
	}
	if sent != 0 {
		t.Errorf("%d datagrams answered the forger", sent)
	}
	for i := range 2 {
		if _, ok := w.introEvent(i, fastnet.EventIntroduced); ok {
			t.Errorf("peer %d introduced by a forgery", i)
		}
	}
}

// sConn returns S's handle of peer i's connection.
func sConn(w *introWorld, i int) fastnet.Handle {
	for _, ev := range w.n.Events(iwS) {
		if ev.Kind == fastnet.EventConnected && ev.Addr == w.addrs[i] {
			return ev.Conn
		}
	}
	w.t.Fatalf("S has no connection of peer %d", i)
	return 0
}

// dropsOf returns the drops for r of ep's connection h, or of its strays
// if h is 0.
func dropsOf(ep *fastnet.Endpoint, h fastnet.Handle, r fastnet.DropReason) uint64 {
	if h == 0 {
		return ep.Dropped()[r]
	}
	st, _ := ep.Stats(h)
	return st.Dropped[r]
}
