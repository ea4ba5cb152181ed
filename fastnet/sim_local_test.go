package fastnet_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/fastnet/fastnettest"
)

// localNode is an endpoint whose datagrams all arrive at the local address
// local (Incoming.Local), as a driver's socket bound to an unspecified
// address reports them, and which records every datagram it sends.
type localNode struct {
	*fastnet.Endpoint
	local netip.Addr
	sent  []fastnet.Transmit
}

func (n *localNode) HandleDatagram(now clock.Time, from netip.AddrPort, b []byte) {
	n.Endpoint.HandleDatagrams(now, []fastnet.Incoming{{From: from, Local: n.local, Data: b}})
}

func (n *localNode) HandleDatagrams(now clock.Time, ds []fastnet.Incoming) {
	in := make([]fastnet.Incoming, len(ds))
	for i, d := range ds {
		in[i] = fastnet.Incoming{From: d.From, Local: n.local, Data: d.Data}
	}
	n.Endpoint.HandleDatagrams(now, in)
}

func (n *localNode) PollTransmit(now clock.Time, buf []byte) (fastnet.Transmit, bool) {
	t, ok := n.Endpoint.PollTransmit(now, buf)
	if ok {
		n.sent = append(n.sent, t)
	}
	return t, ok
}

// TestSimPunchesNotFromIntroducersLocal: the punches a peer sends to the
// other peer's candidates when the introducer's "intro=" arrives answer
// no datagram of theirs: they go from the socket's choice of address (the
// zero Transmit.Local), as the later punches do, not from the local
// address the introducer's datagram went to, which may be of the other
// family (the socket then refuses the datagram, EINVAL) or not the one the
// route to the candidate takes (N149). The connection to the introducer,
// a client's, leaves its address to the socket too.
func TestSimPunchesNotFromIntroducersLocal(t *testing.T) {
	n := fastnettest.NewNetwork(7)
	n.SetDefaultLink(fastnettest.Link{Delay: 20 * time.Millisecond})
	srv := netEndpoint(t, n, fastnet.Config{Role: fastnet.Server, Punch: fastnet.PunchConfig{Introducer: true}})
	n.Add(iwS, srv)
	aLocal := iwAddr(0).Addr()
	candB := []netip.AddrPort{netip.MustParseAddrPort("[fd00::b]:40000"), netip.MustParseAddrPort("192.168.7.2:40000")}
	a := &localNode{Endpoint: netEndpoint(t, n, fastnet.Config{Role: fastnet.Peer}), local: aLocal}
	b := netEndpoint(t, n, fastnet.Config{Role: fastnet.Peer, Punch: fastnet.PunchConfig{Candidates: candB, Consent: consentAll}})
	n.Add(iwAddr(0), a)
	n.Add(iwAddr(1), b)
	ha, err := a.Connect(n.Now(), iwS)
	if err != nil {
		t.Fatal(err)
	}
	hb, err := b.Connect(n.Now(), iwS)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.RunUntilCond(func() bool { return a.PunchNegotiated(ha) && b.PunchNegotiated(hb) }, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	n.RunFor(2 * time.Second)
	idB, _ := b.ConnID(hb)
	if _, err := a.Introduce(n.Now(), ha, idB); err != nil {
		t.Fatal(err)
	}
	n.RunFor(3 * time.Second)
	punched := map[netip.AddrPort]bool{}
	for _, tr := range a.sent {
		punched[tr.To] = true
	}
	for _, c := range candB {
		if !punched[c] {
			t.Fatalf("A sent nothing to B's candidate %v", c)
		}
	}
	for _, tr := range a.sent {
		switch {
		case tr.Local.IsValid() && tr.Local.Is4() != tr.To.Addr().Is4():
			t.Errorf("A sent to %v from %v, an address of the other family", tr.To, tr.Local)
		case tr.To != iwAddr(1) && tr.Local.IsValid():
			t.Errorf("A sent to %v from %v: not an answer to a datagram from there", tr.To, tr.Local)
		}
	}
}
