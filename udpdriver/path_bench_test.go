package udpdriver

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/internal/udpio"
	"github.com/fastnet-engine/fastnet/urp/urpserver"
)

// BenchmarkTimeToConnection measures, over loopback, the time from asking
// for a connection to a peer introduced by a server (docs/nat.md X6) to
// holding it, on each path: punched directly (X12), and through the URP
// relay the introducer names when no punch gets through (X13; the punch's
// own timeout, PunchTimeout, 300 ms here, is part of it). Each iteration
// opens two fresh Peers; only Introduce is timed.
//
//	go test -run '^$' -bench TimeToConnection -benchtime 10x ./udpdriver
func BenchmarkTimeToConnection(b *testing.B) {
	for _, relayed := range []bool{false, true} {
		name := "direct"
		if relayed {
			name = "relay"
		}
		b.Run(name, func(b *testing.B) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			relay, err := urpserver.Listen(ctx, "127.0.0.1:0", urpserver.Config{})
			if err != nil {
				b.Fatal(err)
			}
			defer relay.Close()
			s, err := Listen(ctx, "127.0.0.1:0", Config{Engine: fastnet.Config{MaxConnections: 4096,
				Punch: fastnet.PunchConfig{Introducer: true, Relay: relay.Addr().String()}}})
			if err != nil {
				b.Fatal(err)
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
			bp := punch
			bp.Consent = consentAll
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				a, aS := openPeer(b, ctx, s, nil, Config{Engine: fastnet.Config{Punch: punch}})
				var pc net.PacketConn
				if relayed {
					raw, err := net.ListenPacket("udp", "127.0.0.1:0")
					if err != nil {
						b.Fatal(err)
					}
					pc = &onlyFrom{PacketConn: raw, from: saddr}
				}
				t, tS := openPeer(b, ctx, s, pc, Config{Engine: fastnet.Config{Punch: bp}})
				// Both negotiate with S (X2), with their first heartbeats,
				// before the clock starts.
				time.Sleep(300 * time.Millisecond)
				b.StartTimer()
				c, path, err := a.Introduce(ctx, aS, tS.ID())
				for retry := 0; retry < 100; retry++ {
					var ie *fastnet.IntroError
					if !errors.As(err, &ie) || ie.Code != fastnet.IntroUnknownTarget {
						break
					}
					// S has not heard the target's answer yet (X2).
					time.Sleep(time.Millisecond)
					c, path, err = a.Introduce(ctx, aS, tS.ID())
				}
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				if want := map[bool]fastnet.IntroPath{false: fastnet.PathDirect, true: fastnet.PathRelay}[relayed]; path != want {
					b.Fatalf("path %v, want %v", path, want)
				}
				c.Close()
				a.Close()
				t.Close()
				b.StartTimer()
			}
		})
	}
}
