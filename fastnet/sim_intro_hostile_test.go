package fastnet_test

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/fastnet/fastnettest"
)

// An introducer whose TTL is shorter than the punching and the wait for
// the target's decision: the initiator still gets an outcome, with no
// path between the peers "no answer from the peer" or the target's
// decision, and forgets the introduction (N133). Before, both sides
// forgot it at the TTL with no outcome at all.
func TestSimIntroShortTTL(t *testing.T) {
	link := fastnettest.Link{Delay: 10 * time.Millisecond}
	w := newIntroWorld(t, 21, fastnet.Config{Punch: fastnet.PunchConfig{TTL: time.Second}}, link,
		fastnet.Config{}, fastnet.Config{Punch: fastnet.PunchConfig{Consent: consentAll}})
	w.n.Filter = func(from, to netip.AddrPort, b []byte) bool { // no path between the peers
		return !(from == w.addrs[0] && to == w.addrs[1] || from == w.addrs[1] && to == w.addrs[0])
	}
	if ev, _ := w.introduce(0, w.ids[1], 2*time.Second); ev.Kind != fastnet.EventIntroduced {
		t.Fatalf("introduce: %v", ev)
	}
	var failed *fastnet.IntroError
	w.run(func() bool {
		for _, ev := range w.n.Events(w.addrs[0]) {
			if ev.Kind == fastnet.EventIntroFailed && errors.As(ev.Err, &failed) {
				return true
			}
		}
		return false
	}, 20*time.Second)
	if failed.Code != fastnet.IntroNoPeer && failed.Code != fastnet.IntroNoPath {
		t.Errorf("initiator's outcome %v, want no answer from the peer or no path", failed)
	}
	w.n.RunFor(10 * time.Second)
	for i, ep := range w.peers {
		if n := fastnet.IntroCount(ep); n != 0 {
			t.Errorf("peer %d keeps %d introductions", i, n)
		}
	}
}

// Peers the target refuses cannot lock it out of introductions by asking
// over and over: a refusal is remembered only while the introducer may
// repeat its offer, and with the table of decisions full the oldest
// refusal makes room (N135). Before, two peers refused twice a second
// filled it within 20 s, and a peer the target would have accepted was
// refused "busy".
func TestSimIntroRefusalsNoLockout(t *testing.T) {
	var friend uint32
	b := fastnet.Config{Punch: fastnet.PunchConfig{Consent: func(o fastnet.IntroOffer) error {
		if o.InitiatorID == friend {
			return nil
		}
		return errors.New("go away")
	}}}
	link := fastnettest.Link{Delay: 10 * time.Millisecond}
	w := newIntroWorld(t, 22, fastnet.Config{}, link, fastnet.Config{}, fastnet.Config{}, fastnet.Config{}, b)
	friend = w.ids[2]
	most := 0
	for range 80 {
		for a := range 2 {
			w.peers[a].Introduce(w.n.Now(), w.toS[a], w.ids[3])
		}
		w.n.RunFor(250 * time.Millisecond)
		most = max(most, fastnet.IntroCount(w.peers[3]))
	}
	t.Logf("the target kept %d introductions at most", most)
	ev, _ := w.introduce(2, w.ids[3], 2*time.Second)
	if ev.Kind != fastnet.EventIntroduced {
		t.Errorf("the friend's introduction: %v, want EventIntroduced", ev.Err)
	}
}

// Forged repeats of an initiator's request, in its name, draw no more
// bytes at the initiator than were forged (N134, X14, X17): the
// introducer answers a repeat at most once per 100 ms and 32 times in
// all. Before, it answered every one with the whole go: with a relay
// named and four candidates, 20 times the forged bytes.
func TestSimIntroRepeatsNoReflection(t *testing.T) {
	cands := []netip.AddrPort{
		netip.MustParseAddrPort("10.0.0.2:40000"), netip.MustParseAddrPort("10.0.0.3:40000"),
		netip.MustParseAddrPort("10.0.0.4:40000"), netip.MustParseAddrPort("10.0.0.5:40000"),
	}
	link := fastnettest.Link{Delay: 10 * time.Millisecond}
	w := newIntroWorld(t, 23, fastnet.Config{Punch: fastnet.PunchConfig{Relay: string(bytes.Repeat([]byte("r"), 250)) + ":7100"}}, link,
		fastnet.Config{}, fastnet.Config{Punch: fastnet.PunchConfig{Consent: consentAll, Candidates: cands}})
	if ev, _ := w.introduce(0, w.ids[1], 2*time.Second); ev.Kind != fastnet.EventIntroduced {
		t.Fatalf("introduce: %v", ev)
	}
	before, _ := w.n.Forger().Reflected(iwS, w.addrs[0])
	f := w.n.Forger()
	forged := append([]byte{0xff, 0xff}, fastnet.AppendIntroRequest(nil, 1, w.ids[1])...)
	for range 1000 {
		f.Send(w.addrs[0], iwS, forged)
		w.n.RunFor(time.Millisecond)
	}
	after, _ := f.Reflected(iwS, w.addrs[0])
	// What S sends A anyway meanwhile: heartbeats and acks, a few
	// hundred bytes a second.
	drawn, sent := after-before, f.Forged(w.addrs[0], iwS)
	t.Logf("forged %d bytes, S sent A %d meanwhile", sent, drawn)
	if drawn > sent {
		t.Errorf("S sent A %d bytes for %d forged", drawn, sent)
	}
}
