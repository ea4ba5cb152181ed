package fastnet_test

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/fastnet/fastnettest"
)

// N53, N84, N157: 24 clients connect at once to a server that answers one
// estimation at a time (MaxConcurrent 2). With the system's path MTU as a
// hint (D29), as udpdriver gives on Linux, each client uses 546 bytes at
// once (N84), above InitialPayloadMTU: an estimation of it refused waited
// Period (10 min), and 1 of 24 clients was at the path's MTU 5 minutes
// on. Refused estimations are now tried again after waits that double up
// to Period, and every client gets there, as without a hint (where the
// refusals are retried every 8 s or so, N44).
func TestHintedClientsBusyServer(t *testing.T) {
	for _, hint := range []bool{false, true} {
		const clients, path = 24, 1500
		n := fastnettest.NewNetwork(53)
		n.SetDefaultLink(mtuLink(path, 0))
		srv, err := fastnet.NewEndpoint(fastnet.Config{Role: fastnet.Server, Rand: n.Rand(), MTU: fastnet.MTUConfig{MaxConcurrent: 2}})
		if err != nil {
			t.Fatal(err)
		}
		n.Add(valServer, srv)
		var cli []*fastnet.Endpoint
		for i := range clients {
			addr := netip.MustParseAddrPort(fmt.Sprintf("10.0.1.%d:5000", i+1))
			var cfg fastnet.Config
			if hint {
				cfg.MTU.Path = func(netip.AddrPort) fastnet.PathInfo { return fastnet.PathInfo{PayloadMTU: path - 30} }
			}
			c := newClient(t, n, addr, cfg)
			if _, err := c.Connect(n.Now(), valServer); err != nil {
				t.Fatal(err)
			}
			cli = append(cli, c)
		}
		if err := n.RunUntil(clock.Epoch.Add(5 * time.Minute)); err != nil {
			t.Fatal(err)
		}
		full := 0
		for _, c := range cli {
			if st, ok := c.Stats(1); ok && within1pct(st.PayloadMTU, path-2) {
				full++
			}
		}
		if full != clients {
			t.Errorf("hint %v: 5 minutes on, %d of %d clients at the path's MTU", hint, full, clients)
		}
	}
}
