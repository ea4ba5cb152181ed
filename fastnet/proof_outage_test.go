package fastnet_test

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/fastnet/fastnettest"
)

// N156: two honest bundle-capable peers on a LAN (1 ms round trip); the
// path drops everything for a while from when the server's answer
// "query:ext:bundle=yes" reaches the client. The client's proofs went 20
// ms apart (2 x MinResendRTT), all 8 within a 200 ms outage, and it never
// bundled for the rest of the connection; before N156 it bundled on the
// answer. They now go from 50 ms apart, each wait twice the last, up to
// the heartbeat interval: 10 of them span 5.5 s, as the queries' six
// retries span seconds (N69).
func TestProofsOutlastShortOutage(t *testing.T) {
	for _, outage := range []time.Duration{200 * time.Millisecond, 2 * time.Second, 4 * time.Second} {
		t.Run(fmt.Sprint(outage), func(t *testing.T) {
			const d = 500 * time.Microsecond
			link := fastnettest.Link{Delay: d}
			s := newSim(t, simSetup{Seed: 1, Up: link, Down: link})
			var at time.Duration = -1
			s.net.Filter = func(from, to netip.AddrPort, b []byte) bool {
				now := s.elapsed()
				if at < 0 && to == cliAddr && string(b) == "\xff\xffquery:ext:bundle=yes" {
					at = now + d // when it arrives
					return true
				}
				return at < 0 || now < at || now >= at+outage
			}
			s.connect(5 * time.Second)
			s.run(time.Minute)
			if to, _ := fastnet.BundlesNegotiated(s.ep[cliSide], s.h[cliSide]); !to {
				t.Errorf("a minute after a %v outage, the client does not bundle to a server that reads bundles", outage)
			}
		})
	}
}
