package udpdriver

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/fastnet/fastnettest"
	"github.com/fastnet-engine/fastnet/internal/usernat"
)

// TestPeerThroughNATs runs introductions between two Peers each behind a
// userspace NAT over real loopback sockets, through an introducer on
// loopback: a direct path exactly where X23's table opens one, otherwise
// the target's fallback with no relay (X13).
func TestPeerThroughNATs(t *testing.T) {
	probe, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 21)})
	if err != nil {
		t.Skipf("no loopback address 127.0.0.21 here: %v", err)
	}
	probe.Close()
	cases := []struct {
		a, b fastnettest.NATType
	}{
		{fastnettest.FullCone, fastnettest.FullCone},
		{fastnettest.PortRestricted, fastnettest.PortRestricted},
		{fastnettest.Symmetric, fastnettest.FullCone},
		{fastnettest.Symmetric, fastnettest.PortRestricted},
	}
	for i, tc := range cases {
		direct := fastnettest.OpensDirectPath(tc.a, tc.b)
		t.Run(tc.a.String()+"/"+tc.b.String(), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			s := introducer(t, ctx, true)
			punch := fastnet.PunchConfig{PunchTimeout: 500 * time.Millisecond, Candidates: []netip.AddrPort{}}
			peers := make([]*Peer, 2)
			toS := make([]*Conn, 2)
			nats := make([]*usernat.Host, 2)
			for j, typ := range []fastnettest.NATType{tc.a, tc.b} {
				nat := usernat.NewHost(netip.AddrFrom4([4]byte{127, 0, 0, byte(21 + 2*i + j)}), typ.Config())
				nats[j] = nat
				p := punch
				p.Consent = consentAll
				peers[j], toS[j] = openPeer(t, ctx, s, nat, Config{Engine: fastnet.Config{Punch: p}})
			}
			var c *Conn
			for end := time.Now().Add(5 * time.Second); ; {
				c, _, err = peers[0].Introduce(ctx, toS[0], toS[1].ID())
				var ie *fastnet.IntroError
				if !errors.As(err, &ie) || ie.Code != fastnet.IntroUnknownTarget || time.Now().After(end) {
					break // (S knows B once B has answered its query, X2)
				}
				time.Sleep(20 * time.Millisecond)
			}
			if !direct {
				var ie *fastnet.IntroError
				if !errors.As(err, &ie) || ie.Code != fastnet.IntroNoPath {
					t.Fatalf("got %v, %v; want no path", c, err)
				}
				st := nats[1].NAT().Stats()
				if st.Filtered+st.NoMapping == 0 {
					t.Fatalf("B's NAT kept nothing out: %+v", st)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			bc, err := peers[1].Accept(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if pub := netip.AddrFrom4([4]byte{127, 0, 0, byte(22 + 2*i)}); c.RemoteAddr().Addr() != pub {
				t.Fatalf("A reaches B at %v, want B's NAT %v", c.RemoteAddr(), pub)
			}
			if err := c.Send(ctx, 0, []byte("through two NATs"), true); err != nil {
				t.Fatal(err)
			}
			if m, err := bc.Receive(ctx); err != nil || string(m.Data) != "through two NATs" {
				t.Fatalf("B got %q, %v", m.Data, err)
			}
		})
	}
}
