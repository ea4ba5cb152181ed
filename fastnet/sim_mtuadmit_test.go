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

// N54: once idle past its early heartbeats, a client's echoes of the
// server's heartbeats are its heartbeats: it originates its own only every
// fifth interval, for RTT samples, and still sends the server a heartbeat
// at least every interval (D16).
func TestClientEchoesAreHeartbeats(t *testing.T) {
	n := fastnettest.NewNetwork(54)
	n.SetDefaultLink(fastnettest.Link{Delay: 20 * time.Millisecond})
	srv := newValServer(t, n, fastnet.Config{MTU: fastnet.MTUConfig{Disabled: true}})
	cli := newClient(t, n, valClient, fastnet.Config{MTU: fastnet.MTUConfig{Disabled: true}})
	h, err := cli.Connect(n.Now(), valServer)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.RunFor(15 * time.Second); err != nil { // past the early heartbeats (N33)
		t.Fatal(err)
	}
	var fromCli, fromSrv, own int
	var last, worst time.Duration
	n.Filter = func(from, to netip.AddrPort, b []byte) bool {
		if len(b) != 4 || b[0] != 0xff || b[1] != 0xfe {
			return true
		}
		at := n.Now().Sub(0)
		if from == valClient {
			fromCli++
			if b[2]&0x80 != 0 {
				own++ // negative: originated by the client
			}
			if last != 0 {
				worst = max(worst, at-last)
			}
			last = at
		} else {
			fromSrv++
		}
		return true
	}
	if err := n.RunFor(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	if fromCli < 19 || fromCli > 25 || own < 3 || own > 5 {
		t.Errorf("client sent %d heartbeats in 20 s, %d of its own; want about 24, 4", fromCli, own)
	}
	if fromSrv < 20 || fromSrv > 26 {
		t.Errorf("server sent %d heartbeats in 20 s, want about 24", fromSrv)
	}
	if worst > time.Second {
		t.Errorf("client went %v without a heartbeat, above D16's 1 s", worst)
	}
	st, _ := cli.Stats(h)
	if st.RTT < 40*time.Millisecond || st.RTT > 41*time.Millisecond {
		t.Errorf("client RTT %v, want 40 ms", st.RTT)
	}
	if srv.NumConns() != 1 {
		t.Fatal("connection lost")
	}
}

// N108: the estimations that start by themselves, Period after the last
// (and the retries after one that measured nothing, N44), and those a
// suspected black hole restarts, go through admission as the first does:
// at every moment the server's estimations searching are among those
// admitted, at most MaxConcurrent, and each connection's estimations go
// on, in turn.
func TestMTUAdmissionOfRestarts(t *testing.T) {
	const (
		clients = 4
		limit   = 1
		path    = 1500
		period  = 2 * time.Second
	)
	n := fastnettest.NewNetwork(108)
	n.SetDefaultLink(mtuLink(path, 0))
	srvCfg := fastnet.Config{Role: fastnet.Server, Rand: n.Rand(), MTU: fastnet.MTUConfig{MaxConcurrent: limit, Period: period}}
	srv, err := fastnet.NewEndpoint(srvCfg)
	if err != nil {
		t.Fatal(err)
	}
	n.Add(valServer, srv)
	for i := range clients {
		addr := netip.MustParseAddrPort(fmt.Sprintf("10.0.1.%d:5000", i+1))
		c := newClient(t, n, addr, fastnet.Config{MTU: fastnet.MTUConfig{Disabled: true}})
		if _, err := c.Connect(n.Now(), valServer); err != nil {
			t.Fatal(err)
		}
	}
	most, checks := 0, 0
	check := func() bool {
		searching := 0
		for h := fastnet.Handle(1); h <= clients+1; h++ {
			if st, ok := srv.Stats(h); ok && st.MTUSearching {
				searching++
			}
		}
		es := srv.EndpointStats()
		if searching > es.MTURunning || es.MTURunning > limit {
			t.Fatalf("at %v: %d estimations searching, %d admitted, limit %d", n.Now(), searching, es.MTURunning, limit)
		}
		most = max(most, searching)
		checks++
		return false
	}
	n.RunUntilCond(check, time.Minute)
	if most != limit {
		t.Errorf("at most %d estimations at once, want %d", most, limit)
	}
	for h := fastnet.Handle(1); h <= clients+1; h++ {
		if st, ok := srv.Stats(h); ok && st.MTUEstimations < 5 {
			t.Errorf("connection %d: %d estimations in a minute with a period of %v", h, st.MTUEstimations, period)
		}
	}
}
