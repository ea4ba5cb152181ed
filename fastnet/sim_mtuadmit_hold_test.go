package fastnet_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/fastnet/fastnettest"
)

// N53: a peer whose estimation was admitted keeps its place among those a
// server answers only while an estimation could still be under way. A
// peer that sends one reset and then a small payload on its estimator's
// channel every 300 ms, forever, must not keep the server from ever
// answering another client's estimation: that client's payload MTU would
// stay at its initial size for the whole connection.
func TestMTUAdmissionPlaceNotHeldForever(t *testing.T) {
	const path = 1500
	n := fastnettest.NewNetwork(5301)
	n.SetDefaultLink(mtuLink(path, 0))
	// One place for the peers' estimations (MaxConcurrent/2).
	srv, err := fastnet.NewEndpoint(fastnet.Config{Role: fastnet.Server, Rand: n.Rand(), MTU: fastnet.MTUConfig{MaxConcurrent: 2}})
	if err != nil {
		t.Fatal(err)
	}
	n.Add(valServer, srv)

	// The holder: a connected client whose own estimation is off, so that
	// everything on its estimator's channel (-4) comes from the test.
	holdAddr := netip.MustParseAddrPort("10.0.1.1:5000")
	holder := newClient(t, n, holdAddr, fastnet.Config{MTU: fastnet.MTUConfig{Disabled: true}})
	if _, err := holder.Connect(n.Now(), valServer); err != nil {
		t.Fatal(err)
	}
	if err := n.RunUntilCond(func() bool { return srv.NumConns() == 1 }, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := n.RunFor(time.Second); err != nil {
		t.Fatal(err)
	}
	// On channel -4 from the holder's address: a reset, admitted while
	// the place is free, then a one-byte "probe" every 300 ms, and a
	// reset again every few seconds, asking for a place if it lost it.
	f := n.Forger()
	pkt := func(p byte) []byte { return []byte{0xff, 0xfc, p} }
	f.Send(holdAddr, valServer, pkt(0))
	sent := 0
	keep := func() {
		sent++
		if sent%5 == 0 {
			f.Send(holdAddr, valServer, pkt(0))
		} else {
			f.Send(holdAddr, valServer, pkt(7))
		}
	}

	// The honest client, with no hint from the system: it starts at the
	// specification's 32 bytes and needs the server's answers to grow.
	cliAddr := netip.MustParseAddrPort("10.0.1.2:5000")
	cli := newClient(t, n, cliAddr, fastnet.Config{})
	h, err := cli.Connect(n.Now(), valServer)
	if err != nil {
		t.Fatal(err)
	}
	grown := func() bool {
		st, ok := cli.Stats(h)
		return ok && within1pct(st.PayloadMTU, path-2)
	}
	deadline := n.Now().Add(2 * time.Minute)
	for !grown() && n.Now() < deadline {
		keep()
		if err := n.RunFor(300 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	st, _ := cli.Stats(h)
	es := srv.EndpointStats()
	if !grown() {
		t.Fatalf("after 2 min beside a peer that holds its place: client payload MTU %d (want within 1 %% of %d), %d estimations, %d of its resets refused by the server",
			st.PayloadMTU, path-2, st.MTUEstimations, es.MTUResetsRefused)
	}
	t.Logf("client at %d after %v; %d resets refused", st.PayloadMTU, n.Now().Sub(deadline.Add(-2*time.Minute)), es.MTUResetsRefused)
}
