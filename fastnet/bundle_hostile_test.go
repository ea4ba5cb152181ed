package fastnet

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/channel"
	"github.com/fastnet-engine/fastnet/coalesce"
)

// N101, N113, N114: random bundles, runs of whole messages mixed with
// hostile packets (duplicates, packets ahead of the window or far ahead,
// a wrong R, broken checksums, cut and non-start chunks, messages over
// MaxMessageSize, short ones, heartbeats, junk on negative channels, a
// bad trailing length), handed to an endpoint that takes runs and to one
// that takes every packet alone: after every step both must have
// delivered, held (an unvalidated connection's messages, D25), acked,
// sent, dropped and counted the same. Across the seeds, runs must have
// been taken, or the comparison proves nothing.
func TestBundleRunsLikePacketsOnHostileBundles(t *testing.T) {
	const seeds = 300
	var taken, steps uint64
	variants := []struct {
		name        string
		cfg         Config
		unvalidated bool
		batch       bool
	}{
		{"default", Config{Role: Server, MTU: MTUConfig{Disabled: true}}, false, false},
		{"default-batch", Config{Role: Server, MTU: MTUConfig{Disabled: true}}, false, true},
		{"small", Config{Role: Server, MTU: MTUConfig{Disabled: true}, MaxMessageSize: 1000, ChannelReceiveMemory: 4000, ConnReceiveMemory: 9000, EndpointReceiveMemory: 1 << 20, ReceiveWindow: 64}, false, false},
		{"small-batch", Config{Role: Server, MTU: MTUConfig{Disabled: true}, MaxMessageSize: 1000, ChannelReceiveMemory: 4000, ConnReceiveMemory: 9000, EndpointReceiveMemory: 1 << 20, ReceiveWindow: 64}, false, true},
		{"reuse", Config{Role: Server, MTU: MTUConfig{Disabled: true}, ReuseMessageBuffers: true}, false, false},
		{"reuse-batch", Config{Role: Server, MTU: MTUConfig{Disabled: true}, ReuseMessageBuffers: true}, false, true},
		{"unvalidated", Config{Role: Server, MTU: MTUConfig{Disabled: true}, UnvalidatedReceiveMemory: 3000}, true, false},
		{"unvalidated-reuse", Config{Role: Server, MTU: MTUConfig{Disabled: true}, UnvalidatedReceiveMemory: 3000, ReuseMessageBuffers: true}, true, true},
	}
	for _, v := range variants {
		for seed := range seeds {
			var got [2][]string
			for i := range got {
				got[i] = hostileBundles(t, v.cfg, v.unvalidated, v.batch, i == 1, uint64(seed), &taken, &steps)
			}
			if len(got[0]) != len(got[1]) {
				t.Fatalf("%s seed %d: %d steps with runs, %d without", v.name, seed, len(got[0]), len(got[1]))
			}
			for k := range got[0] {
				if got[0][k] != got[1][k] {
					t.Fatalf("%s seed %d step %d:\nwith runs: %s\nwithout:   %s", v.name, seed, k, got[0][k], got[1][k])
				}
			}
		}
	}
	if taken == 0 {
		t.Fatalf("no packet taken in a run over %d steps: the comparison proves nothing", steps)
	}
	t.Logf("%d packets taken in runs over %d steps", taken, steps)
}

// hostileBundles plays seed's random bundles (HandleDatagrams batches of
// them too, if batch is set) to a server connection, validated or not,
// taking runs unless noRuns, and returns what each step left: events,
// packets sent, statistics, held messages and acks waiting. It adds the
// packets taken in runs and the steps to *taken and *steps.
func hostileBundles(t *testing.T, cfg Config, unvalidated, batch, noRuns bool, seed uint64, taken, steps *uint64) []string {
	rng := rand.New(rand.NewPCG(seed, 99))
	tc := newTestEndpoint(t, cfg)
	if unvalidated {
		tc.recvControl(control{kind: ctlConnect})
	} else {
		tc.connectServer()
	}
	tc.recvControl(control{kind: ctlQueryBundle})
	tc.sent, tc.evs = nil, nil
	tc.ep.noRuns = noRuns
	// Room in the event queue, as a server with other connections has:
	// emitWhole then takes its one-by-one path for an unvalidated
	// connection because the connection is unvalidated, not for want
	// of room (D25).
	tc.ep.events = make([]Event, 0, 1024)
	c := tc.ep.lastConn
	maxMsg := tc.ep.cfg.MaxMessageSize
	type chs struct{ seq, rel channel.Seq }
	state := map[int16]*chs{}
	var trace []string
	record := func() {
		var sb strings.Builder
		for _, ev := range tc.evs {
			fmt.Fprintf(&sb, "ev %v ch %d rel %v %x;", ev.Kind, ev.Channel, ev.Reliable, ev.Data)
		}
		for _, p := range tc.sent {
			fmt.Fprintf(&sb, "pkt %d %x;", p.ch, p.payload)
		}
		fmt.Fprintf(&sb, "stats %+v; state %d", c.stats, c.state)
		if c.unvalidated {
			fmt.Fprintf(&sb, " held %d %d used %d", len(c.held), c.heldCharge, c.recvBudget.Used)
			for _, ev := range c.held {
				fmt.Fprintf(&sb, " h%d:%x", ev.Channel, ev.Data)
			}
		}
		fmt.Fprintf(&sb, " pending acks %v", c.acks[c.acksHead:])
		trace = append(trace, sb.String())
		tc.sent, tc.evs = nil, nil
	}
	bundle := func() []byte {
		var payload []byte
		npk := 1 + rng.IntN(12)
		for range npk {
			var ch int16
			switch r := rng.IntN(20); {
			case r < 12:
				ch = 1
			case r < 17:
				ch = 2
			case r < 18:
				ch = chHeartbeat
			case r < 19:
				ch = int16(rng.IntN(5))
			default:
				ch = -2 - int16(rng.IntN(6))
			}
			if ch < 0 {
				if ch == chHeartbeat {
					payload = appendBundled(payload, appendHeartbeat(appendPacketHeader(nil, chHeartbeat), int16(rng.IntN(100))))
				} else {
					junk := make([]byte, rng.IntN(8))
					for i := range junk {
						junk[i] = byte(rng.Uint32())
					}
					payload = appendBundled(payload, append(appendPacketHeader(nil, ch), junk...))
				}
				continue
			}
			st := state[ch]
			if st == nil {
				st = &chs{}
				state[ch] = st
			}
			reliable := rng.IntN(2) == 0
			seq := st.seq
			switch r := rng.IntN(60); {
			case r == 0:
				seq = seq.Add(1 + rng.IntN(3)) // ahead
			case r == 1 && seq > 0:
				seq = channel.Seq(int(seq) - 1) // duplicate
			case r == 2:
				seq = seq.Add(rng.IntN(200)) // far ahead
			}
			rel := st.rel
			if reliable {
				rel = rel.Next()
			}
			if rng.IntN(400) == 0 {
				rel = rel.Add(1)
			}
			n := 16 + rng.IntN(200)
			switch r := rng.IntN(20); {
			case r == 0:
				n = rng.IntN(16)
			case r == 1:
				n = maxMsg - 5 + rng.IntN(10)
			case r == 2:
				n = 300 + rng.IntN(700)
			}
			if n > 1100 {
				n = 1100 // a bundle's room
			}
			msg := make([]byte, n)
			for i := range msg {
				msg[i] = byte(rng.Uint32())
			}
			enc := coalesce.AppendMessage(nil, msg, reliable)
			start := true
			switch r := rng.IntN(40); {
			case r == 0:
				enc[len(enc)-1] ^= 1
			case r == 1:
				enc = enc[:len(enc)/2]
			case r == 2:
				start = false
			case r == 3:
				enc = append(enc, 0)
			}
			if rng.IntN(30) != 0 {
				st.seq = seq.Next()
				st.rel = rel
			}
			payload = appendBundled(payload, append(appendPacketHeader(nil, ch), dataPacket(reliable, start, seq, rel, enc)...))
		}
		if rng.IntN(15) == 0 {
			payload = append(payload, 0x7f, 0xff, 1)
		}
		return payload
	}
	n := 10 + rng.IntN(30)
	for s := 0; s < n && c.state != 0; s++ {
		if batch && rng.IntN(2) == 0 {
			var ds []Incoming
			for range 2 + rng.IntN(4) {
				ds = append(ds, Incoming{From: tc.peer, Data: append(appendPacketHeader(nil, chBundle), bundle()...)})
			}
			tc.ep.HandleDatagrams(tc.now, ds)
			tc.drain()
		} else {
			tc.recv(chBundle, bundle())
		}
		record()
		if rng.IntN(4) == 0 {
			tc.advance(time.Duration(rng.IntN(300)) * time.Millisecond)
			record()
		}
	}
	*taken += tc.ep.runTaken
	*steps += uint64(len(trace))
	return trace
}
