package fastnet_test

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/fastnet/fastnettest"
)

// N53: a server runs at most MTUConfig.MaxConcurrent estimations of its
// own at once and answers at most as many of its clients' at once; the
// others wait or retry, and every estimation of both sides still ends
// within 1 % of the path.
func TestMTUAdmission(t *testing.T) {
	const (
		clients = 6
		limit   = 2
		path    = 1500
	)
	n := fastnettest.NewNetwork(53)
	n.SetDefaultLink(mtuLink(path, 0))
	srvCfg := fastnet.Config{Role: fastnet.Server, Rand: n.Rand(), MTU: fastnet.MTUConfig{MaxConcurrent: limit}}
	srv, err := fastnet.NewEndpoint(srvCfg)
	if err != nil {
		t.Fatal(err)
	}
	n.Add(valServer, srv)
	var cli []*fastnet.Endpoint
	for i := range clients {
		addr := netip.MustParseAddrPort(fmt.Sprintf("10.0.1.%d:5000", i+1))
		c := newClient(t, n, addr, fastnet.Config{})
		if _, err := c.Connect(n.Now(), valServer); err != nil {
			t.Fatal(err)
		}
		cli = append(cli, c)
	}
	maxRunning := 0
	done := func() bool {
		es := srv.EndpointStats()
		maxRunning = max(maxRunning, es.MTURunning)
		if srv.NumConns() != clients || es.MTURunning+es.MTUWaiting > 0 {
			return false
		}
		for _, c := range cli {
			for h := fastnet.Handle(1); h < 3; h++ {
				// A client refused at first backs off and tries again
				// (N44): done once it reached the path.
				if st, ok := c.Stats(h); ok && (st.MTUEstimations == 0 || st.MTUSearching || !within1pct(st.PayloadMTU, path-2)) {
					return false
				}
			}
		}
		return true
	}
	if err := n.RunUntilCond(done, 5*time.Minute); err != nil {
		t.Fatalf("%v: server %+v", err, srv.EndpointStats())
	}
	if maxRunning > limit || maxRunning == 0 {
		t.Errorf("server ran up to %d estimations at once, want 1..%d", maxRunning, limit)
	}
	if es := srv.EndpointStats(); es.MTUResetsRefused == 0 {
		t.Errorf("no client reset refused with %d clients and a limit of %d: %+v", clients, limit, es)
	}
	largest := path - 2
	for i, c := range cli {
		st, _ := c.Stats(1)
		if !within1pct(st.PayloadMTU, largest) || st.PayloadMTU > largest {
			t.Errorf("client %d: payload MTU %d, want within 1 %% of %d", i, st.PayloadMTU, largest)
		}
	}
	for h := fastnet.Handle(1); h <= clients+1; h++ {
		if st, ok := srv.Stats(h); ok && (!within1pct(st.PayloadMTU, largest) || st.PayloadMTU > largest) {
			t.Errorf("server connection %d: payload MTU %d, want within 1 %% of %d", h, st.PayloadMTU, largest)
		}
	}
}
