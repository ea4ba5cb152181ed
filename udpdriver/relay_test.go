package udpdriver

import (
	"context"
	"errors"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/internal/udpio"
	"github.com/fastnet-engine/fastnet/urp/urpdriver"
	"github.com/fastnet-engine/fastnet/urp/urpserver"
)

// TestPeerIntroduceRelay checks the relay fallback of docs/nat.md X13 on
// real sockets: the target hears only the introducer, so no punch gets
// through, and the introducer names a URP relay; the target hosts the
// group, Introduce joins it, and the connection carries messages both
// ways with the relay path on each side.
func TestPeerIntroduceRelay(t *testing.T) {
	before := runtime.NumGoroutine()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	relay, err := urpserver.Listen(ctx, "127.0.0.1:0", urpserver.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer relay.Close()
	s, err := Listen(ctx, "127.0.0.1:0", Config{Engine: fastnet.Config{Punch: fastnet.PunchConfig{Introducer: true, Relay: relay.Addr().String()}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	go func() {
		for {
			if _, err := s.Accept(ctx); err != nil {
				return
			}
		}
	}()
	saddr, _ := udpio.AddrPort(s.Addr())
	punch := fastnet.PunchConfig{PunchTimeout: 300 * time.Millisecond}
	a, aS := openPeer(t, ctx, s, nil, Config{Engine: fastnet.Config{Punch: punch}})
	raw, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	bp := punch
	bp.Consent = consentAll
	b, bS := openPeer(t, ctx, s, &onlyFrom{PacketConn: raw, from: saddr}, Config{Engine: fastnet.Config{Punch: bp}})

	c, path, err := a.Introduce(ctx, aS, bS.ID())
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); {
		// B is an unknown target until it has negotiated with S (X2).
		var ie *fastnet.IntroError
		if !errors.As(err, &ie) || ie.Code != fastnet.IntroUnknownTarget {
			break
		}
		time.Sleep(20 * time.Millisecond)
		c, path, err = a.Introduce(ctx, aS, bS.ID())
	}
	if err != nil {
		t.Fatal(err)
	}
	if path != fastnet.PathRelay {
		t.Fatalf("path %v, want the relay", path)
	}
	if _, ok := urpdriver.UserOf(c.RemoteAddr()); !ok {
		t.Fatalf("A's connection goes to %v, not a relay user", c.RemoteAddr())
	}
	actx, acancel := context.WithTimeout(ctx, 5*time.Second)
	defer acancel()
	bc, err := b.Accept(actx)
	if err != nil {
		t.Fatal(err)
	}
	if bc.ID() != c.ID() {
		t.Fatalf("A's connection %d, B's %d", c.ID(), bc.ID())
	}
	for _, side := range []struct {
		p         *Peer
		c         *Conn
		initiator bool
		peerID    uint32
	}{{a, c, true, bS.ID()}, {b, bc, false, aS.ID()}} {
		x, ok := side.p.Introduction(side.c)
		if !ok || x.Path != fastnet.PathRelay || x.Initiator != side.initiator || x.PeerID != side.peerID || x.Addr != side.c.RemoteAddr() {
			t.Fatalf("introduction %+v, %v", x, ok)
		}
	}
	if err := c.Send(ctx, 1, []byte("ping"), true); err != nil {
		t.Fatal(err)
	}
	if m, err := bc.Receive(ctx); err != nil || string(m.Data) != "ping" {
		t.Fatalf("B got %q, %v", m.Data, err)
	}
	if err := bc.Send(ctx, 1, []byte("pong"), true); err != nil {
		t.Fatal(err)
	}
	if m, err := c.Receive(ctx); err != nil || string(m.Data) != "pong" {
		t.Fatalf("A got %q, %v", m.Data, err)
	}
	if aS.Err() != nil || bS.Err() != nil {
		t.Fatalf("connections to S ended: %v, %v", aS.Err(), bS.Err())
	}
	// Closing A's side ends B's, and the group with it; Close ends what
	// is left.
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-bc.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("B's relayed connection did not end")
	}
	if _, ok := b.Introduction(bc); ok {
		time.Sleep(100 * time.Millisecond) // forgotten just after Done
		if _, ok := b.Introduction(bc); ok {
			t.Fatal("B still knows its ended relayed connection")
		}
	}
	a.Close()
	b.Close()
	s.Close()
	relay.Close()
	waitGoroutines(t, before)
}

// TestPeerCloseEndsRelayed checks that Close ends the relayed connections
// of both Peers, which do not run over their sockets (X13).
func TestPeerCloseEndsRelayed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	relay, err := urpserver.Listen(ctx, "127.0.0.1:0", urpserver.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer relay.Close()
	s, err := Listen(ctx, "127.0.0.1:0", Config{Engine: fastnet.Config{Punch: fastnet.PunchConfig{Introducer: true, Relay: relay.Addr().String()}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	go func() {
		for {
			if _, err := s.Accept(ctx); err != nil {
				return
			}
		}
	}()
	saddr, _ := udpio.AddrPort(s.Addr())
	punch := fastnet.PunchConfig{PunchTimeout: 300 * time.Millisecond, Consent: consentAll}
	a, aS := openPeer(t, ctx, s, nil, Config{Engine: fastnet.Config{Punch: punch}})
	raw, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b, bS := openPeer(t, ctx, s, &onlyFrom{PacketConn: raw, from: saddr}, Config{Engine: fastnet.Config{Punch: punch}})
	c, _, err := a.Introduce(ctx, aS, bS.ID())
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); {
		var ie *fastnet.IntroError
		if !errors.As(err, &ie) || ie.Code != fastnet.IntroUnknownTarget {
			break
		}
		time.Sleep(20 * time.Millisecond)
		c, _, err = a.Introduce(ctx, aS, bS.ID())
	}
	if err != nil {
		t.Fatal(err)
	}
	bc, err := b.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	b.Close()
	for _, x := range []*Conn{c, bc} {
		select {
		case <-x.Done():
		default:
			t.Fatalf("relayed connection to %v still open after Close", x.RemoteAddr())
		}
	}
}
