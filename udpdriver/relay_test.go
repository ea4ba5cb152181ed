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
	"github.com/fastnet-engine/fastnet/urp"
	"github.com/fastnet-engine/fastnet/urp/urpclient"
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
	s, stop := relayIntroducer(t, ctx)
	punch := fastnet.PunchConfig{PunchTimeout: 300 * time.Millisecond}
	a, aS := openPeer(t, ctx, s, nil, Config{Engine: fastnet.Config{Punch: punch}})
	bp := punch
	bp.Consent = consentAll
	b, bS := hiddenPeer(t, ctx, s, Config{Engine: fastnet.Config{Punch: bp}})

	c, path, err := introduceKnown(ctx, a, aS, bS.ID())
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
	// The group is B's and A's alone: B locked it once A's connection was
	// up, before Accept returned it, and the relay refuses anyone else,
	// even with the password.
	x, _ := a.Introduction(c)
	if x.Relay == "" || x.RelayGroup == 0 || x.RelayPassword == 0 {
		t.Fatalf("A's introduction names no group: %+v", x)
	}
	_, err = urpdriver.Dial(ctx, x.Relay, x.RelayGroup, x.RelayPassword, urpdriver.Config{})
	var me *urpclient.MadeError
	if !errors.As(err, &me) || me.Status != urp.StatLock {
		t.Fatalf("a third party joining the group: %v, want it locked", err)
	}
	// Their statistics say relay too, though their engines know nothing
	// of the introduction.
	for _, x := range []*Conn{c, bc} {
		if p := x.Stats().Path; p != fastnet.PathRelay {
			t.Fatalf("%v: Stats.Path %v, want the relay", x.RemoteAddr(), p)
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
	// Forgotten just after Done, by a goroutine waiting for it.
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, ok := b.Introduction(bc); !ok {
			break
		}
		if time.Now().After(end) {
			t.Fatal("B still knows its ended relayed connection")
		}
	}
	for _, x := range []*Conn{c, bc} {
		if p := x.Stats().Path; p != fastnet.PathRelay {
			t.Fatalf("%v: ended, Stats.Path %v, want the relay", x.RemoteAddr(), p)
		}
	}
	a.Close()
	b.Close()
	stop()
	waitGoroutines(t, before)
}

// TestPeerCloseEndsRelayed checks that Close ends the relayed connections
// of both Peers, which do not run over their sockets (X13).
func TestPeerCloseEndsRelayed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, _ := relayIntroducer(t, ctx)
	punch := fastnet.PunchConfig{PunchTimeout: 300 * time.Millisecond, Consent: consentAll}
	a, aS := openPeer(t, ctx, s, nil, Config{Engine: fastnet.Config{Punch: punch}})
	b, bS := hiddenPeer(t, ctx, s, Config{Engine: fastnet.Config{Punch: punch}})
	c, _, err := introduceKnown(ctx, a, aS, bS.ID())
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

// relayIntroducer starts a URP relay and an introducer that names it
// (X13), which keeps its clients' connections open. stop closes both;
// the test's end does too.
func relayIntroducer(tb testing.TB, ctx context.Context) (s *Listener, stop func()) {
	tb.Helper()
	relay, err := urpserver.Listen(ctx, "127.0.0.1:0", urpserver.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	s, err = Listen(ctx, "127.0.0.1:0", Config{Engine: fastnet.Config{MaxConnections: 4096,
		Punch: fastnet.PunchConfig{Introducer: true, Relay: relay.Addr().String()}}})
	if err != nil {
		relay.Close()
		tb.Fatal(err)
	}
	go func() {
		for {
			if _, err := s.Accept(ctx); err != nil {
				return
			}
		}
	}()
	stop = func() {
		s.Close()
		relay.Close()
	}
	tb.Cleanup(stop)
	return s, stop
}

// hiddenPeer opens a Peer whose socket hears nobody but the introducer s,
// so that no punch reaches it (X13), and connects it to s.
func hiddenPeer(tb testing.TB, ctx context.Context, s *Listener, cfg Config) (*Peer, *Conn) {
	tb.Helper()
	saddr, _ := udpio.AddrPort(s.Addr())
	raw, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	return openPeer(tb, ctx, s, &onlyFrom{PacketConn: raw, from: saddr}, cfg)
}

// introduceKnown is p.Introduce, asked again while the target is unknown
// to the introducer for up to 5 s: the introducer asks its new clients
// whether they speak the extension with its first heartbeats (X2), and
// knows the target only once it has answered.
func introduceKnown(ctx context.Context, p *Peer, via *Conn, target uint32) (*Conn, fastnet.IntroPath, error) {
	c, path, err := p.Introduce(ctx, via, target)
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); {
		var ie *fastnet.IntroError
		if !errors.As(err, &ie) || ie.Code != fastnet.IntroUnknownTarget {
			break
		}
		time.Sleep(time.Millisecond)
		c, path, err = p.Introduce(ctx, via, target)
	}
	return c, path, err
}
