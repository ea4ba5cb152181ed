package udpdriver

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/internal/udpio"
)

// introducer starts an introducing server (S of docs/nat.md) on loopback.
func introducer(tb testing.TB, ctx context.Context, on bool) *Listener {
	tb.Helper()
	l, err := Listen(ctx, "127.0.0.1:0", Config{Engine: fastnet.Config{Punch: fastnet.PunchConfig{Introducer: on}}})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { l.Close() })
	go func() { // S keeps its clients' connections open
		for {
			if _, err := l.Accept(ctx); err != nil {
				return
			}
		}
	}()
	return l
}

// openPeer opens a Peer on loopback, or on pc if not nil, and connects it
// to S.
func openPeer(tb testing.TB, ctx context.Context, s *Listener, pc net.PacketConn, cfg Config) (*Peer, *Conn) {
	tb.Helper()
	var p *Peer
	var err error
	if pc != nil {
		p, err = OpenPacket(ctx, pc, cfg)
	} else {
		p, err = Open(ctx, "127.0.0.1:0", cfg)
	}
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { p.Close() })
	c, err := p.Dial(ctx, s.Addr().String())
	if err != nil {
		tb.Fatal(err)
	}
	return p, c
}

// onlyFrom is a socket that hears nobody but from: a NAT that keeps every
// other peer out, so that no punch gets through.
type onlyFrom struct {
	net.PacketConn
	from netip.AddrPort
}

func (o *onlyFrom) ReadFrom(b []byte) (int, net.Addr, error) {
	for {
		n, a, err := o.PacketConn.ReadFrom(b)
		if err != nil {
			return n, a, err
		}
		if ap, ok := udpio.AddrPort(a); ok && ap == o.from {
			return n, a, nil
		}
	}
}

func consentAll(fastnet.IntroOffer) error { return nil }

// TestPeerIntroduce runs introductions between two Peers on loopback
// sockets through an introducer on a third, each case citing the design
// note it checks.
func TestPeerIntroduce(t *testing.T) {
	type outcome struct {
		code     fastnet.IntroCode // 0: a direct connection
		noIntro  bool              // fastnet.ErrNoIntroducer
		deadline bool              // ctx's deadline
	}
	cases := []struct {
		name       string
		introducer bool                           // S introduces
		consent    func(fastnet.IntroOffer) error // B's
		deaf       bool                           // B hears only S: no punch gets through
		target     func(bID uint32) uint32
		ctxLimit   time.Duration
		want       outcome
	}{
		{name: "X12 direct", introducer: true, consent: consentAll},
		{name: "X5 refused", introducer: true, consent: func(fastnet.IntroOffer) error { return errors.New("in a match") }, want: outcome{code: fastnet.IntroRefused}},
		{name: "X5 no consent hook", introducer: true, want: outcome{code: fastnet.IntroRefused}},
		{name: "X4 unknown target", introducer: true, consent: consentAll, target: func(b uint32) uint32 { return b + 1000 }, want: outcome{code: fastnet.IntroUnknownTarget}},
		{name: "X13 no path", introducer: true, consent: consentAll, deaf: true, want: outcome{code: fastnet.IntroNoPath}},
		{name: "ctx deadline mid-punch", introducer: true, consent: consentAll, deaf: true, ctxLimit: 200 * time.Millisecond, want: outcome{deadline: true}},
		{name: "X2 no introducer", consent: consentAll, want: outcome{noIntro: true}},
	}
	defer func(w time.Duration) { negotiationWait = w }(negotiationWait)
	negotiationWait = time.Second
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := runtime.NumGoroutine()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			punch := fastnet.PunchConfig{PunchTimeout: 300 * time.Millisecond}
			s := introducer(t, ctx, tc.introducer)
			saddr, _ := udpio.AddrPort(s.Addr())
			a, aS := openPeer(t, ctx, s, nil, Config{Engine: fastnet.Config{Punch: punch}})
			var pc net.PacketConn
			if tc.deaf {
				raw, err := net.ListenPacket("udp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				pc = &onlyFrom{PacketConn: raw, from: saddr}
			}
			bp := punch
			bp.Consent = tc.consent
			b, bS := openPeer(t, ctx, s, pc, Config{Engine: fastnet.Config{Punch: bp}})
			target := bS.ID()
			if tc.target != nil {
				target = tc.target(target)
			}
			ictx := ctx
			if tc.ctxLimit > 0 {
				var c2 context.CancelFunc
				ictx, c2 = context.WithTimeout(ctx, tc.ctxLimit)
				defer c2()
			}
			start := time.Now()
			c, path, err := a.Introduce(ictx, aS, target)
			for end := start.Add(5 * time.Second); tc.introducer && target == bS.ID() && time.Now().Before(end); {
				// S asks its new clients whether they speak the
				// extension with its first heartbeats (X2): until B
				// has answered, B is an unknown target.
				var ie *fastnet.IntroError
				if !errors.As(err, &ie) || ie.Code != fastnet.IntroUnknownTarget {
					break
				}
				time.Sleep(20 * time.Millisecond)
				start = time.Now()
				c, path, err = a.Introduce(ictx, aS, target)
			}
			took := time.Since(start)
			switch {
			case tc.want.noIntro:
				if !errors.Is(err, fastnet.ErrNoIntroducer) || took > negotiationWait+time.Second {
					t.Fatalf("got %v after %v, want ErrNoIntroducer", err, took)
				}
				return
			case tc.want.deadline:
				if !errors.Is(err, context.DeadlineExceeded) || took > time.Second {
					t.Fatalf("got %v after %v, want the deadline", err, took)
				}
				return
			case tc.want.code != 0:
				var ie *fastnet.IntroError
				if !errors.As(err, &ie) || ie.Code != tc.want.code || !errors.Is(err, fastnet.ErrIntroFailed) {
					t.Fatalf("got %v, want code %d", err, tc.want.code)
				}
				if took > 10*time.Second {
					t.Fatalf("took %v", took)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			if path != fastnet.PathDirect {
				t.Fatalf("path %v", path)
			}
			bc, err := b.Accept(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if bc.ID() != c.ID() || c.RemoteAddr() != netip.MustParseAddrPort(b.Addr().String()) {
				t.Fatalf("A's connection %d to %v, B's %d, B at %v", c.ID(), c.RemoteAddr(), bc.ID(), b.Addr())
			}
			for _, side := range []struct {
				p         *Peer
				c         *Conn
				initiator bool
				peerID    uint32
			}{{a, c, true, bS.ID()}, {b, bc, false, aS.ID()}} {
				x, ok := side.p.Introduction(side.c)
				if !ok || x.Path != fastnet.PathDirect || x.Initiator != side.initiator || x.PeerID != side.peerID {
					t.Fatalf("introduction %+v, %v", x, ok)
				}
			}
			// Messages both ways, and the introducers' connections
			// still up beside the new one (X19: one socket).
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
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			if aS.Err() != nil || bS.Err() != nil {
				t.Fatalf("connections to S ended: %v, %v", aS.Err(), bS.Err())
			}
			a.Close()
			b.Close()
			s.Close()
			waitGoroutines(t, before)
		})
	}
}

// waitGoroutines fails unless the goroutines return to n within a second.
func waitGoroutines(t *testing.T, n int) {
	t.Helper()
	for end := time.Now().Add(2 * time.Second); runtime.NumGoroutine() > n; {
		if time.Now().After(end) {
			t.Fatalf("%d goroutines, %d before", runtime.NumGoroutine(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
