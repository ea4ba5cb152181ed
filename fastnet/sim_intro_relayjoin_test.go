package fastnet_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/fastnet/fastnettest"
)

// TestRelayJoinDuringDirectHandshake: an initiator whose punch proved a
// path, and whose handshake over it is still under way when the target,
// which never proved the initiator's address, falls back to a relay
// group, goes on over the relay (N146). Its endpoint panicked inside
// HandleDatagram: the direct handshake was given up with the reason of
// an error there was none of. Found by a random search of NAT types,
// losses and relays (12 of 300 scenarios with a relay).
func TestRelayJoinDuringDirectHandshake(t *testing.T) {
	var (
		sAt = netip.MustParseAddrPort("198.51.100.1:7000")
		aAt = netip.MustParseAddrPort("203.0.113.10:40000")
		bAt = netip.MustParseAddrPort("203.0.113.20:40000")
	)
	n := fastnettest.NewNetwork(3)
	mk := func(cfg fastnet.Config) *fastnet.Endpoint {
		cfg.Rand = n.Rand()
		ep, err := fastnet.NewEndpoint(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return ep
	}
	consent := func(fastnet.IntroOffer) error { return nil }
	s := mk(fastnet.Config{Role: fastnet.Server, Punch: fastnet.PunchConfig{Introducer: true, Relay: "relay.example:7100"}})
	a := mk(fastnet.Config{Role: fastnet.Peer, Punch: fastnet.PunchConfig{Consent: consent}})
	b := mk(fastnet.Config{Role: fastnet.Peer, Punch: fastnet.PunchConfig{Consent: consent}})
	n.Add(sAt, s)
	n.Add(aAt, a)
	n.Add(bAt, b)
	n.SetPath(aAt, sAt, fastnettest.Link{Delay: 30 * time.Millisecond})
	n.SetPath(bAt, sAt, fastnettest.Link{Delay: 40 * time.Millisecond})
	n.SetPath(aAt, bAt, fastnettest.Link{Delay: 25 * time.Millisecond})
	aS, err := a.Connect(n.Now(), sAt)
	if err != nil {
		t.Fatal(err)
	}
	bS, err := b.Connect(n.Now(), sAt)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.RunUntilCond(func() bool { return a.PunchNegotiated(aS) && b.PunchNegotiated(bS) }, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := n.RunFor(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	bID, _ := b.ConnID(bS)
	aToB := 0
	n.Filter = func(from, to netip.AddrPort, _ []byte) bool {
		if from == aAt && to == bAt {
			aToB++
			return aToB == 1 // only A's first punch reaches B
		}
		return true
	}
	joined := 0
	n.OnEvent = func(at clock.Time, node netip.AddrPort, ev fastnet.Event) {
		switch {
		case node == bAt && ev.Kind == fastnet.EventRelayHost:
			if err := b.RelayHosted(at, ev.Intro.ID, 77); err != nil {
				t.Errorf("RelayHosted: %v", err)
			}
		case node == aAt && ev.Kind == fastnet.EventRelayJoin:
			joined++
		}
	}
	if _, err := a.Introduce(n.Now(), aS, bID); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("panic inside the endpoint: %v", r)
		}
	}()
	if err := n.RunFor(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if joined != 1 {
		t.Errorf("the initiator was told to join the relay group %d times, want once", joined)
	}
}
