package fastnet_test

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/fastnet/fastnettest"
)

// An introducer and a strict 1.0 client (X2, X20): the client is asked
// punchAsks times, drops each query as an unknown literal, never answers,
// and so is never sent any other literal of the extension.
func TestSimPunchStrictClient(t *testing.T) {
	link := fastnettest.Link{Delay: 20 * time.Millisecond, Loss: 0.1}
	s := newSim(t, simSetup{Seed: 5, Srv: fastnet.Config{Punch: fastnet.PunchConfig{Introducer: true}}, Up: link, Down: link})
	s.net.Filter = func(from, to netip.AddrPort, b []byte) bool {
		if len(b) > 2 && b[0] == 0xff && b[1] == 0xff {
			if p := string(b[2:]); strings.HasPrefix(p, "intro") || strings.HasPrefix(p, "punch") || p == "query:ext:punch=yes" {
				t.Errorf("%q on the wire from %v", p, from)
			}
		}
		return true
	}
	s.connect(5 * time.Second)
	s.run(15 * time.Second)
	if s.ep[srvSide].PunchNegotiated(s.h[srvSide]) {
		t.Error("negotiated with a strict peer")
	}
	if got := s.stats(cliSide).Dropped[fastnet.DropBadControl]; got < 1 || got > 6 {
		t.Errorf("the strict client dropped %d queries, want 1..6 (6 sent, 10%% loss)", got)
	}
}
