package fuzz

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/fastnet/fastnettest"
)

// FuzzSimDelivery is the delivery property of the simulator tests (P1 in
// fastnet/sim_property_test.go) as a fuzz target: the input chooses, through
// rapid, a network (loss, delay, jitter, duplication, reordering, each way)
// and a workload of reliable and unreliable messages on a few channels
// from both sides. Every reliable message must arrive exactly once, intact
// and in order on its channel, unreliable ones at most once and in order,
// the connection must survive, and the receive memory must stay within its
// limit after every step (D7-D14, D22).
//
//	go test -run '^$' -fuzz '^FuzzSimDelivery$' -fuzztime 60s ./fuzz
func FuzzSimDelivery(f *testing.F) {
	// rapid reads its draws from the input, eight bytes at a time, and
	// skips an input that runs out: the seeds are long pseudo-random
	// streams.
	for seed := range uint64(4) {
		r := rand.New(rand.NewPCG(seed, 0x51d))
		b := make([]byte, 4096)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		f.Add(b)
	}
	f.Fuzz(rapid.MakeFuzz(simDelivery))
}

var (
	simSrv = netip.MustParseAddrPort("10.0.0.1:7000")
	simCli = netip.MustParseAddrPort("10.0.0.2:7000")
)

type simSent struct {
	data     []byte
	reliable bool
}

func simLink(t *rapid.T, dir string) fastnettest.Link {
	p := func(hi int, label string) float64 { return float64(rapid.IntRange(0, hi).Draw(t, dir+label)) / 100 }
	d := func(hi int, label string) time.Duration {
		return time.Duration(rapid.IntRange(0, hi).Draw(t, dir+label)) * time.Millisecond
	}
	return fastnettest.Link{MTU: 1500, Loss: p(50, ".loss"), Dup: p(20, ".dup"), Reorder: p(20, ".reorder"),
		Delay: d(200, ".delay"), Jitter: d(50, ".jitter")}
}

func simDelivery(t *rapid.T) {
	n := fastnettest.NewNetwork(rapid.Uint64().Draw(t, "seed"))
	n.DiscardEvents = true
	cfg := fastnet.Config{MaxMessageSize: 16 << 10, Timeout: 5 * time.Minute, ConnectTimeout: time.Minute,
		MaxResendInterval: time.Second, Rand: n.Rand()}
	if rapid.Bool().Draw(t, "fixedMTU") {
		cfg.MTU.Disabled = true
		cfg.InitialPayloadMTU = rapid.IntRange(32, 1498).Draw(t, "payloadMTU")
	}
	var ep [2]*fastnet.Endpoint // client, server
	for i, role := range []fastnet.Role{fastnet.Client, fastnet.Server} {
		cfg.Role = role
		e, err := fastnet.NewEndpoint(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ep[i] = e
	}
	addrs := [2]netip.AddrPort{simCli, simSrv}
	n.Add(simSrv, ep[1])
	n.Add(simCli, ep[0])
	n.SetLink(simCli, simSrv, simLink(t, "up"))
	n.SetLink(simSrv, simCli, simLink(t, "down"))

	var (
		h       [2]fastnet.Handle
		ended   [2]error
		sent    [2]map[int][]simSent // by receiving side and channel
		next    [2]map[int]int
		pending int // reliable messages not yet delivered
		failure string
	)
	for i := range sent {
		sent[i], next[i] = map[int][]simSent{}, map[int]int{}
	}
	n.OnEvent = func(at clock.Time, node netip.AddrPort, ev fastnet.Event) {
		side := 0
		if node == simSrv {
			side = 1
		}
		switch ev.Kind {
		case fastnet.EventConnected:
			h[side] = ev.Conn
		case fastnet.EventDisconnected, fastnet.EventConnectFailed:
			ended[side] = ev.Err
		case fastnet.EventMessage:
			list := sent[side][ev.Channel]
			for i := next[side][ev.Channel]; i < len(list); i++ {
				if list[i].reliable == ev.Reliable && bytes.Equal(list[i].data, ev.Data) {
					next[side][ev.Channel] = i + 1
					if ev.Reliable {
						pending--
					}
					return
				}
				if list[i].reliable {
					break
				}
			}
			if failure == "" {
				failure = "unexpected " + fastnettest.DescribeEvent(ev)
			}
		}
	}
	// run steps until cond holds, or for limit if cond is nil.
	run := func(cond func() bool, limit time.Duration) {
		wait := cond == nil
		if wait {
			cond = func() bool { return false }
		}
		err := n.RunUntilCond(func() bool {
			for side := range 2 {
				if st, ok := ep[side].Stats(h[side]); ok && st.ReceiveBytes > ep[side].Config().ConnReceiveMemory {
					t.Fatalf("%v: receive memory %d above its limit", addrs[side], st.ReceiveBytes)
				}
			}
			return failure != "" || cond()
		}, limit)
		if failure != "" {
			t.Fatal(failure)
		}
		if err != nil && !(wait && errors.Is(err, fastnettest.ErrTimeLimit)) {
			t.Fatalf("%v: %d reliable messages missing", err, pending)
		}
	}

	if _, err := ep[0].Connect(n.Now(), simSrv); err != nil {
		t.Fatal(err)
	}
	run(func() bool { return h[0] != 0 && h[1] != 0 }, time.Minute)
	id := uint32(0)
	for range rapid.IntRange(1, 20).Draw(t, "ops") {
		if wait := rapid.IntRange(0, 20).Draw(t, "wait100ms"); wait > 0 {
			run(nil, time.Duration(wait)*100*time.Millisecond)
			continue
		}
		from := rapid.IntRange(0, 1).Draw(t, "from")
		ch := rapid.IntRange(0, 3).Draw(t, "channel")
		reliable := rapid.Bool().Draw(t, "reliable")
		size := rapid.IntRange(0, 50).Draw(t, "size") * rapid.SampledFrom([]int{1, 7, 300}).Draw(t, "scale")
		for range rapid.IntRange(1, 10).Draw(t, "n") {
			id++
			msg := make([]byte, size)
			for i := range msg {
				msg[i] = byte(id*31 + uint32(i)*7)
			}
			if size >= 4 {
				binary.BigEndian.PutUint32(msg, id)
			}
			if err := ep[from].Send(n.Now(), h[from], ch, msg, reliable); err != nil {
				t.Fatalf("Send: %v", err)
			}
			sent[1-from][ch] = append(sent[1-from][ch], simSent{msg, reliable})
			if reliable {
				pending++
			}
		}
	}
	run(func() bool {
		if ended[0] != nil || ended[1] != nil {
			return true
		}
		for side := range 2 {
			if st, ok := ep[side].Stats(h[side]); !ok || st.InFlightBytes != 0 || st.SendQueueBytes != 0 {
				return false
			}
		}
		return pending == 0
	}, time.Hour)
	if ended[0] != nil || ended[1] != nil {
		t.Fatalf("connection lost: client %v, server %v", ended[0], ended[1])
	}
}
