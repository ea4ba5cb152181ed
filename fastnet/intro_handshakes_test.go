package fastnet_test

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/fastnet/fastnettest"
)

// N109: the handshake an introduction starts once it proved a path (X12)
// counts toward MaxPendingHandshakes, as a Connect does: with one Connect
// still in its handshake and a bound of 1, the introduction ends with
// IntroTooManyHandshakes rather than run a second handshake beside it.
func TestIntroHandshakeBound(t *testing.T) {
	a := fastnet.Config{MaxPendingHandshakes: 1, ConnectTimeout: 30 * time.Second}
	b := fastnet.Config{Punch: fastnet.PunchConfig{Consent: consentAll}}
	w := newIntroWorld(t, 11, fastnet.Config{}, fastnettest.Link{Delay: 20 * time.Millisecond}, a, b)
	// A handshake that stays pending: nothing answers at this address.
	silent := netip.MustParseAddrPort("203.0.113.200:7000")
	hs, err := w.peers[0].Connect(w.n.Now(), silent)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.peers[0].Connect(w.n.Now(), netip.MustParseAddrPort("203.0.113.201:7000")); err != fastnet.ErrTooManyHandshakes {
		t.Fatalf("a second Connect: %v, want ErrTooManyHandshakes", err)
	}
	if ev, _ := w.introduce(0, w.ids[1], 5*time.Second); ev.Kind != fastnet.EventIntroduced {
		t.Fatalf("A got %v (%v)", ev.Kind, ev.Err)
	}
	failed := func() *fastnet.IntroError {
		for _, ev := range w.n.Events(w.addrs[0]) {
			var ie *fastnet.IntroError
			if ev.Kind == fastnet.EventIntroFailed && errors.As(ev.Err, &ie) {
				return ie
			}
		}
		return nil
	}
	w.n.RunUntilCond(func() bool { return failed() != nil }, 8*time.Second)
	ie := failed()
	if ie == nil || ie.Code != fastnet.IntroTooManyHandshakes {
		t.Fatalf("A's introduction: %v, want it failed with IntroTooManyHandshakes", ie)
	}
	for _, ev := range w.n.Events(w.addrs[0]) {
		if ev.Kind == fastnet.EventConnected && ev.Addr == w.addrs[1] {
			t.Fatal("A connected to B directly while its Connect was in its handshake")
		}
		if ev.Conn == hs && ev.Kind != fastnet.EventConnected {
			t.Fatalf("the Connect ended (%v): the bound was not what held the introduction", ev.Kind)
		}
	}
}
