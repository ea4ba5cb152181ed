package fastnet_test

// Unreliable data beside MTU probes (D30, D19, N153): a game's position
// updates share a lossy path with reliable traffic on other channels while
// the connection estimates its MTU.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/fastnet/fastnettest"
)

// gameMix is a game connection's traffic, from the client: reliable
// messages on channels 1-3 and position updates, unreliable, on channel 0.
type gameMix struct {
	// bulk keeps channels 1-3's send queues full, leaving room in the
	// connection's send queue for the position updates; otherwise they
	// carry fastnet demo's rates: 25 a second of 16-300 bytes, 10 of
	// 300-4000 and 2 of 4-32 KiB.
	bulk bool
	// echo makes the server send back every message it receives, as
	// fastnet demo's server does.
	echo     bool
	posRate  int // position updates a second
	posSize  int // their bytes, at least 12
	duration time.Duration
}

// gameResult is what a gameMix measured.
type gameResult struct {
	posSent, posGot           int
	expiredCli, expiredSrv    uint64 // Stats.UnreliableExpired of each side
	waits                     []time.Duration
	reliable                  int // reliable bytes the server received
	mtuCli, mtuSrv            int // the payload MTUs reached
	estimationsCli, resentCli uint64
	// estimated is when each side's first estimation ended, from the
	// connection's start; 0 if it did not.
	estimatedCli, estimatedSrv time.Duration
}

// wait returns the q-quantile of the position updates' waits.
func (r gameResult) wait(q float64) time.Duration {
	w := slices.Clone(r.waits)
	slices.Sort(w)
	if len(w) == 0 {
		return 0
	}
	return w[min(len(w)-1, int(q*float64(len(w))))]
}

func (r gameResult) String() string {
	return fmt.Sprintf("%d position updates sent, %d (%.1f %%) at the server, %d expired at the client, %d at the server; waits p50 %v, p99 %v, max %v; %d kB reliable; payload MTU %d/%d, first estimation over at %v/%v",
		r.posSent, r.posGot, 100*float64(r.posGot)/float64(max(r.posSent, 1)), r.expiredCli, r.expiredSrv,
		r.wait(0.5).Round(100*time.Microsecond), r.wait(0.99).Round(100*time.Microsecond), r.wait(1).Round(100*time.Microsecond),
		r.reliable/1000, r.mtuCli, r.mtuSrv, r.estimatedCli.Round(time.Millisecond), r.estimatedSrv.Round(time.Millisecond))
}

// runGameMix runs mix for one client and a server over links up and down,
// of one-way delay oneWay and no jitter, with cfg on both sides. A
// position update's wait is its time from Send to its arrival at the
// server, less oneWay: how long it stayed with its sender, and behind the
// link's own queue if it has one.
func runGameMix(t *testing.T, seed uint64, cfg fastnet.Config, up, down fastnettest.Link, oneWay time.Duration, mix gameMix) gameResult {
	t.Helper()
	n := fastnettest.NewNetwork(seed)
	n.DiscardEvents = true
	cliAddr, srvAddr := netip.MustParseAddrPort("10.1.0.1:5000"), netip.MustParseAddrPort("10.0.0.1:7000")
	scfg, ccfg := cfg, cfg
	scfg.Role, scfg.Rand = fastnet.Server, n.Rand()
	ccfg.Role, ccfg.Rand = fastnet.Client, n.Rand()
	srv, err := fastnet.NewEndpoint(scfg)
	if err != nil {
		t.Fatal(err)
	}
	cli, err := fastnet.NewEndpoint(ccfg)
	if err != nil {
		t.Fatal(err)
	}
	n.Add(srvAddr, srv)
	n.Add(cliAddr, cli)
	n.SetLink(cliAddr, srvAddr, up)
	n.SetLink(srvAddr, cliAddr, down)
	var res gameResult
	var ch, sh fastnet.Handle
	elapsed := func() time.Duration { return n.Now().Sub(clock.Epoch) }
	n.OnEvent = func(at clock.Time, node netip.AddrPort, ev fastnet.Event) {
		switch {
		case ev.Kind == fastnet.EventConnected && node == cliAddr:
			ch = ev.Conn
		case ev.Kind == fastnet.EventConnected && node == srvAddr:
			sh = ev.Conn
		case ev.Kind == fastnet.EventMessage && node == srvAddr:
			if ev.Channel == 0 {
				res.posGot++
				sent := time.Duration(binary.BigEndian.Uint64(ev.Data[4:]))
				res.waits = append(res.waits, at.Sub(clock.Epoch)-sent-oneWay)
			} else {
				res.reliable += len(ev.Data)
			}
			if mix.echo {
				if err := srv.Send(at, ev.Conn, ev.Channel, ev.Data, ev.Reliable); err != nil && !errors.Is(err, fastnet.ErrQueueFull) {
					t.Fatalf("echo: %v", err)
				}
			}
		case ev.Kind == fastnet.EventDisconnected:
			t.Fatalf("%v: disconnected: %v", node, ev.Err)
		}
	}
	if _, err := cli.Connect(n.Now(), srvAddr); err != nil {
		t.Fatal(err)
	}
	if err := n.RunUntilCond(func() bool { return ch != 0 && sh != 0 }, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 7))
	kinds := [3]struct {
		lo, hi  int
		perSec  float64
		sent    int
		pending []byte
	}{{lo: 16, hi: 300, perSec: 25}, {lo: 300, hi: 4000, perSec: 10}, {lo: 4 << 10, hi: 32 << 10, perSec: 2}}
	const tick = 20 * time.Millisecond // as fastnet demo's clients send
	begin := elapsed()
	for elapsed()-begin < mix.duration {
		secs := (elapsed() - begin).Seconds()
		for i := range kinds {
			k := &kinds[i]
			for mix.bulk || k.sent < int(secs*k.perSec) {
				if st, _ := cli.Stats(ch); mix.bulk && st.SendQueueBytes > fastnet.DefaultSendQueueSize-64<<10 {
					break
				}
				if k.pending == nil {
					k.pending = make([]byte, k.lo+rng.IntN(k.hi-k.lo+1))
				}
				err := cli.Send(n.Now(), ch, i+1, k.pending, true)
				if errors.Is(err, fastnet.ErrQueueFull) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				k.pending = nil
				k.sent++
			}
		}
		for res.posSent < int(secs*float64(mix.posRate)) {
			msg := make([]byte, mix.posSize)
			binary.BigEndian.PutUint32(msg, uint32(res.posSent))
			binary.BigEndian.PutUint64(msg[4:], uint64(elapsed()))
			if err := cli.Send(n.Now(), ch, 0, msg, false); err != nil {
				t.Fatal(err)
			}
			res.posSent++
		}
		if err := n.RunFor(tick); err != nil {
			t.Fatal(err)
		}
		if st, _ := cli.Stats(ch); res.estimatedCli == 0 && st.MTUEstimations > 0 {
			res.estimatedCli = elapsed() - begin
		}
		if st, _ := srv.Stats(sh); res.estimatedSrv == 0 && st.MTUEstimations > 0 {
			res.estimatedSrv = elapsed() - begin
		}
	}
	if err := n.RunFor(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	cs, _ := cli.Stats(ch)
	ss, _ := srv.Stats(sh)
	res.expiredCli, res.expiredSrv = cs.UnreliableExpired, ss.UnreliableExpired
	res.mtuCli, res.mtuSrv = cs.PayloadMTU, ss.PayloadMTU
	res.estimationsCli, res.resentCli = cs.MTUEstimations, cs.PacketsResent
	return res
}

// Position updates, 30 a second of 100 bytes, beside reliable traffic on
// other channels, over a path that loses 5 % of the datagrams each way
// with a 40 ms round trip, with no rate limit or a 20 Mbit/s one far above
// what is sent: the loss keeps the window near its floor, the pacing rate
// near 100 kB/s, and the estimator's probes, 548 to 1,472 bytes, take the
// pacer's tokens a datagram's time each. Beside unreliable data the probes
// and the data take turns, byte for byte (N153), so that updates are not
// dropped at the sender for waiting longer than UnreliableMaxDelay (D30);
// before, a round of probes had every token while it lasted: 1.9-6.8 % of
// the updates expired at the client, and up to 3 % of the echoes at the
// server, where the waits reached 99.7 ms; now none, the longest wait
// 64 ms.
// With MTU estimation off nothing expires either. The path hints are a
// 1,500-byte path's and the one the UDP driver reports on loopback, as
// fastnet demo's clients and server have through its relay (N91).
func TestUnreliableBesideProbes(t *testing.T) {
	if testing.Short() {
		t.Skip("seconds of traffic over simulated lossy links")
	}
	const oneWay = 20 * time.Millisecond
	const mbit = 1_000_000 / 8
	lossy := fastnettest.Link{Delay: oneWay, Loss: 0.05, MTU: 1500 - 28}
	rated := lossy
	rated.Bandwidth, rated.QueueLimit = 20*mbit, 100_000
	hint := func(payload int) fastnet.MTUConfig {
		return fastnet.MTUConfig{Path: func(netip.AddrPort) fastnet.PathInfo { return fastnet.PathInfo{PayloadMTU: payload} }}
	}
	mtuOff := fastnet.Config{InitialPayloadMTU: 1200, MTU: fastnet.MTUConfig{Disabled: true}}
	for _, tc := range []struct {
		name string
		cfg  fastnet.Config
		link fastnettest.Link
		mix  gameMix
	}{
		{"bulk-hint1470", fastnet.Config{MTU: hint(1500 - 28 - 2)}, lossy, gameMix{bulk: true}},
		{"bulk-hint65505", fastnet.Config{MTU: hint(65535 - 28 - 2)}, lossy, gameMix{bulk: true}},
		{"bulk-hint65505-20mbit", fastnet.Config{MTU: hint(65535 - 28 - 2)}, rated, gameMix{bulk: true}},
		{"demo-hint1470", fastnet.Config{MTU: hint(1500 - 28 - 2)}, lossy, gameMix{echo: true}},
		{"demo-hint65505", fastnet.Config{MTU: hint(65535 - 28 - 2)}, lossy, gameMix{echo: true}},
		{"demo-hint65505-20mbit", fastnet.Config{MTU: hint(65535 - 28 - 2)}, rated, gameMix{echo: true}},
		{"bulk-mtu-off", mtuOff, lossy, gameMix{bulk: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mix := tc.mix
			mix.posRate, mix.posSize, mix.duration = 30, 100, 20*time.Second
			var sent, expired int
			for seed := uint64(1); seed <= 3; seed++ {
				r := runGameMix(t, seed, tc.cfg, tc.link, tc.link, oneWay, mix)
				t.Logf("seed %d: %v", seed, r)
				sent += r.posSent
				expired += int(r.expiredCli + r.expiredSrv)
				// The probes still have their turns: the estimation
				// ends at the path's 1,470 bytes, or within its last
				// step of it.
				if !tc.cfg.MTU.Disabled && (r.estimationsCli == 0 || r.mtuCli < 1400 || r.mtuCli > 1500-28-2) {
					t.Errorf("seed %d: %d estimations, payload MTU %d: want the estimator to have found the path's 1,470", seed, r.estimationsCli, r.mtuCli)
				}
			}
			if expired*200 > sent {
				t.Errorf("%d of %d position updates or their echoes expired at the sender, want at most 0.5 %%", expired, sent)
			}
		})
	}
}
