package udpdriver

import (
	"context"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/fastnet"
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
			s, _ := relayIntroducer(b, ctx)
			punch := fastnet.PunchConfig{PunchTimeout: 300 * time.Millisecond}
			bp := punch
			bp.Consent = consentAll
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				a, aS := openPeer(b, ctx, s, nil, Config{Engine: fastnet.Config{Punch: punch}})
				var t *Peer
				var tS *Conn
				if relayed {
					t, tS = hiddenPeer(b, ctx, s, Config{Engine: fastnet.Config{Punch: bp}})
				} else {
					t, tS = openPeer(b, ctx, s, nil, Config{Engine: fastnet.Config{Punch: bp}})
				}
				// Both negotiate with S (X2), with their first heartbeats,
				// before the clock starts.
				time.Sleep(300 * time.Millisecond)
				b.StartTimer()
				c, path, err := introduceKnown(ctx, a, aS, tS.ID())
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
