package fastnet

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/fastnet-engine/fastnet/channel"
)

// reuseMsg is the i-th message of the ReuseMessageBuffers tests: its
// index, then bytes that depend on it, n bytes in all (at least 4).
func reuseMsg(i, n int) []byte {
	b := make([]byte, n)
	binary.BigEndian.PutUint32(b, uint32(i))
	for j := 4; j < n; j++ {
		b[j] = byte(i*7 + j)
	}
	return b
}

// With ReuseMessageBuffers, the Data of a message is intact until the
// next datagrams are handled after it was polled, and a message not yet
// polled keeps its Data however many datagrams come meanwhile; small and
// large messages, reliable and not, arrive in order and whole (N103).
func TestReuseMessageBuffers(t *testing.T) {
	for _, tc := range []struct {
		mtu int
		// The most events polled after the client's datagrams and after
		// the server's: about 20 messages arrive a round, so that the
		// first keeps up and the second leaves a backlog that comes and
		// goes.
		poll1, poll2 int
	}{
		{1200, 25, 25},
		{fullBundleMTU, 25, 25},
		{1200, 24, 16},
		{fullBundleMTU, 24, 16},
	} {
		mtu := tc.mtu
		cfg := Config{InitialPayloadMTU: mtu, MTU: MTUConfig{Disabled: true}, ReuseMessageBuffers: true}
		p := newPair(t, cfg, cfg)
		p.keep = false
		rng := rand.New(rand.NewPCG(uint64(tc.poll2), uint64(mtu)))
		type lent struct {
			data []byte
			want []byte
		}
		var (
			sent, got int
			sizes     []int
			polled    []lent // polled since the server last handled datagrams
			backlog   int    // the most events left unpolled
		)
		checkPolled := func(when string) {
			t.Helper()
			for _, l := range polled {
				if !bytes.Equal(l.data, l.want) {
					t.Fatalf("mtu %d, %s: a message polled since the last datagram changed: %x, want %x", mtu, when, l.data, l.want)
				}
			}
		}
		poll := func(n int) {
			for ; n > 0; n-- {
				ev, ok := p.srv.PollEvent()
				if !ok {
					return
				}
				if ev.Kind != EventMessage {
					continue
				}
				want := reuseMsg(got, sizes[got])
				if !bytes.Equal(ev.Data, want) {
					t.Fatalf("mtu %d: message %d is %x, want %x", mtu, got, ev.Data, want)
				}
				if cap(ev.Data) != len(ev.Data) {
					// An append would write over the next message.
					t.Fatalf("mtu %d: message %d has %d bytes, capacity %d", mtu, got, len(ev.Data), cap(ev.Data))
				}
				polled = append(polled, lent{ev.Data, want})
				got++
			}
		}
		for round := range 400 {
			for k := rng.IntN(40); k > 0; k-- {
				n := 4 + rng.IntN(120)
				if rng.IntN(10) == 0 {
					n = 4 + rng.IntN(1000) // past the arena's largest
				}
				sizes = append(sizes, n)
				if err := p.cli.Send(p.now, p.ch, 3, reuseMsg(sent, n), true); err != nil {
					t.Fatal(err)
				}
				sent++
			}
			p.now = p.now.Add(benchStep)
			p.cli.HandleTimeout(p.now)
			checkPolled("before the client's datagrams")
			polled = polled[:0]
			p.pump(Client, p.cli, p.srv, clientAddr)
			// Poll some of what arrived, not always all.
			if round%5 != 0 {
				poll(rng.IntN(tc.poll1))
			}
			backlog = max(backlog, sent-got)
			checkPolled("before the server's datagrams")
			p.srv.HandleTimeout(p.now)
			polled = polled[:0]
			p.pump(Server, p.srv, p.cli, serverAddr)
			p.events(p.cli, &p.cliEvs, &p.cliMsgs, &p.cliBytes)
			poll(rng.IntN(tc.poll2))
		}
		t.Logf("mtu %d, polls %d/%d: %d messages, at most %d left unpolled", mtu, tc.poll1, tc.poll2, sent, backlog)
		for i := 0; got < sent && i < 1000; i++ {
			p.flushOnce()
			poll(sent)
		}
		if got != sent {
			t.Fatalf("mtu %d: %d of %d messages delivered", mtu, got, sent)
		}
	}
}

// flushOnce moves the datagrams of both sides once, without polling the
// server's events.
func (p *pair) flushOnce() {
	p.now = p.now.Add(benchStep)
	p.cli.HandleTimeout(p.now)
	p.srv.HandleTimeout(p.now)
	p.pump(Client, p.cli, p.srv, clientAddr)
	p.pump(Server, p.srv, p.cli, serverAddr)
	p.events(p.cli, &p.cliEvs, &p.cliMsgs, &p.cliBytes)
}

// Without ReuseMessageBuffers, messages polled keep their Data for good.
func TestMessageBuffersKept(t *testing.T) {
	cfg := Config{InitialPayloadMTU: 1200, MTU: MTUConfig{Disabled: true}}
	p := newPair(t, cfg, cfg)
	p.step = benchStep
	for i := range 2000 {
		p.cli.Send(p.now, p.ch, 1, reuseMsg(i, 64), i%2 == 0)
		if i%50 == 49 {
			p.flush()
		}
	}
	p.flush()
	got := messagesData(p.srvEvs)
	if len(got) != 2000 {
		t.Fatalf("%d messages", len(got))
	}
	for i, d := range got {
		if !bytes.Equal(d, reuseMsg(i, 64)) {
			t.Fatalf("message %d changed", i)
		}
	}
}

func messagesData(evs []Event) [][]byte {
	var out [][]byte
	for _, ev := range evs {
		if ev.Kind == EventMessage {
			out = append(out, ev.Data)
		}
	}
	return out
}

// A block's buffers are carved again only once every message carved out
// of it was polled: with the last k messages of a block left unpolled
// while a second flight of messages fills new blocks, those k keep their
// Data (N103).
func TestReuseMessageBuffersUnpolledTail(t *testing.T) {
	const size = 64 // channel.ArenaBlock/size messages to a block
	for _, k := range []int{1, 2, 7} {
		cfg := Config{InitialPayloadMTU: fullBundleMTU, MTU: MTUConfig{Disabled: true}, ReuseMessageBuffers: true}
		p := newPair(t, cfg, cfg)
		p.keep = false
		p.step = benchStep
		// Fill the arena's first blocks with a warm-up flight, all polled.
		sent, got := 0, 0
		flight := func(n int) {
			for range n {
				if err := p.cli.Send(p.now, p.ch, 2, reuseMsg(sent, size), true); err != nil {
					t.Fatal(err)
				}
				sent++
			}
			p.flushOnce()
		}
		var kept [][]byte
		poll := func(n int, keep bool) {
			for n > 0 {
				ev, ok := p.srv.PollEvent()
				if !ok {
					t.Fatalf("k %d: %d messages polled of %d sent, wanted %d more", k, got, sent, n)
				}
				if ev.Kind != EventMessage {
					continue
				}
				if want := reuseMsg(got, size); !bytes.Equal(ev.Data, want) {
					t.Fatalf("k %d: message %d is %x, want %x", k, got, ev.Data, want)
				}
				if keep {
					kept = append(kept, ev.Data)
				}
				got++
				n--
			}
		}
		perBlock := 4096 / size
		flight(perBlock)
		poll(perBlock-k, false)
		// The last k of the block stay unpolled while new blocks fill.
		for range 4 {
			flight(perBlock)
		}
		poll(k, true)
		for i, d := range kept {
			if want := reuseMsg(perBlock-k+i, size); !bytes.Equal(d, want) {
				t.Fatalf("k %d: message %d changed", k, perBlock-k+i)
			}
		}
		poll(sent-got, false)
	}
}

// With ReuseMessageBuffers, a steady stream of small messages, each
// polled as it arrives, allocates nothing on either side; without it,
// the receiver allocates a block per 64 messages of 64 bytes (N88, N103).
func TestReuseMessageBuffersAllocations(t *testing.T) {
	if raceOn {
		t.Skip("the race detector allocates")
	}
	for _, reuse := range []bool{false, true} {
		cfg := Config{InitialPayloadMTU: fullBundleMTU, MTU: MTUConfig{Disabled: true}, ReuseMessageBuffers: reuse}
		p := newPair(t, cfg, cfg)
		p.keep, p.step = false, benchStep
		msg := make([]byte, 64)
		round := func() {
			for range fullBundleBurst {
				if err := p.cli.Send(p.now, p.ch, 1, msg, true); err != nil {
					t.Fatal(err)
				}
			}
			p.flush()
		}
		for range 20 {
			round() // warm up buffers, free lists and the arena
		}
		allocs := testing.AllocsPerRun(50, round)
		switch want := fullBundleBurst * 64 / 4096; {
		case reuse && allocs != 0:
			t.Errorf("reusing: %v allocations a round of %d messages, want 0", allocs, fullBundleBurst)
		case !reuse && allocs != float64(want):
			t.Errorf("not reusing: %v allocations a round of %d messages, want %d (one a block)", allocs, fullBundleBurst, want)
		}
	}
}

// A message whose buffer is not lent (larger than the arena carves)
// between two lent from the same block does not count as one of them:
// with everything up to the last of the block's messages polled, that
// one keeps its Data while the next flight fills the same memory
// (N103).
func TestReuseMessageBuffersGap(t *testing.T) {
	cfg := Config{InitialPayloadMTU: fullBundleMTU, MTU: MTUConfig{Disabled: true}, ReuseMessageBuffers: true}
	p := newPair(t, cfg, cfg)
	p.keep, p.step = false, benchStep
	// 62 and then 2 messages of 64 bytes fill a 4 KiB block exactly;
	// one of 300 bytes, between them, has a buffer of its own.
	var sizes []int
	for i := range 65 {
		n := 64
		if i == 62 {
			n = 300
		}
		sizes = append(sizes, n)
	}
	for i := range 80 {
		sizes = append(sizes, 64+i%2)
	}
	got := 0
	poll := func(n int) {
		for ; n > 0; n-- {
			ev, ok := p.srv.PollEvent()
			if !ok {
				t.Fatalf("%d messages polled, wanted %d more", got, n)
			}
			if ev.Kind != EventMessage {
				t.Fatalf("event %v", ev.Kind)
			}
			if want := reuseMsg(got, sizes[got]); !bytes.Equal(ev.Data, want) {
				t.Fatalf("message %d is %x, want %x", got, ev.Data, want)
			}
			got++
		}
	}
	send := func(from, to int) {
		for i := from; i < to; i++ {
			if err := p.cli.Send(p.now, p.ch, 5, reuseMsg(i, sizes[i]), true); err != nil {
				t.Fatal(err)
			}
		}
		p.flushOnce()
	}
	send(0, 65)
	poll(64) // all but the block's last
	send(65, len(sizes))
	poll(len(sizes) - got)
}

// With ReuseMessageBuffers, the messages of a run that emitWhole lends
// in spans (lendWhole, Arena.Span: N127) are the messages lent one at a
// time (emitMessage, through Arena.Take and Owner), intact until polled:
// two pairs play the same traffic and polls, one of them with its
// server's event queue clipped before each datagram so that emitWhole
// has no room and lends one at a time, and every event polled from
// either has the same data. A lent buffer's capacity is its length, so
// that an append never writes over what lies after it in the span, and
// the notes of lent buffers name events in order, each once (N103).
func TestReuseLentInRuns(t *testing.T) {
	for _, mtu := range []int{1200, fullBundleMTU} {
		cfg := Config{InitialPayloadMTU: mtu, MTU: MTUConfig{Disabled: true}, ReuseMessageBuffers: true}
		a, b := newPair(t, cfg, cfg), newPair(t, cfg, cfg)
		a.keep, b.keep = false, false
		rng := rand.New(rand.NewPCG(41, uint64(mtu)))
		oneByOne, sent, polled := 0, 0, 0
		compare := func(when string) {
			t.Helper()
			for _, e := range []*Endpoint{a.srv, b.srv} {
				// None polled is noted, and each event at most once: the
				// first note may begin among the events polled, each
				// other where the one before ends or after.
				next := e.evBase + e.evHead
				for i := range e.lent.Len() {
					if l := e.lent.At(i); l.block == nil || l.n <= 0 || l.ev+l.n <= next || i > 0 && l.ev < next {
						t.Fatalf("mtu %d, %s: note %d of %d is of events %d..%d, block %p, after %d", mtu, when, i, e.lent.Len(), l.ev, l.ev+l.n-1, l.block, next)
					} else {
						next = l.ev + l.n
					}
				}
				if next > e.evBase+len(e.events) {
					t.Fatalf("mtu %d, %s: notes of events up to %d, of %d", mtu, when, next, e.evBase+len(e.events))
				}
			}
		}
		poll := func(n int) {
			for ; n > 0; n-- {
				ea, oka := a.srv.PollEvent()
				eb, okb := b.srv.PollEvent()
				if oka != okb || ea.Kind != eb.Kind || !bytes.Equal(ea.Data, eb.Data) {
					t.Fatalf("mtu %d: event %d differs: %v %v %x; one by one %v %v %x", mtu, polled, oka, ea.Kind, ea.Data, okb, eb.Kind, eb.Data)
				}
				if cap(ea.Data) != len(ea.Data) {
					t.Fatalf("mtu %d: event %d lent %d bytes with capacity %d", mtu, polled, len(ea.Data), cap(ea.Data))
				}
				if !oka {
					return
				}
				polled++
			}
		}
		for round := range 300 {
			for k := rng.IntN(200); k > 0; k-- {
				n := 1 + rng.IntN(120)
				switch rng.IntN(20) {
				case 0:
					n = 200 + rng.IntN(800) // past the arena's largest
				case 1:
					// Empty, and about the arena's largest.
					n = []int{0, channel.ArenaMax - 1, channel.ArenaMax, channel.ArenaMax + 1}[rng.IntN(4)]
				}
				reliable := rng.IntN(2) == 0
				for _, p := range []*pair{a, b} {
					if err := p.cli.Send(p.now, p.ch, 3, reuseMsg(sent, max(n, 4))[:n], reliable); err != nil {
						t.Fatal(err)
					}
				}
				sent++
			}
			for _, p := range []*pair{a, b} {
				p.now = p.now.Add(benchStep)
				p.cli.HandleTimeout(p.now)
				p.srv.HandleTimeout(p.now)
			}
			// The client's datagrams, one at a time, b's server with no
			// room in its event queue before each.
			for {
				ta, oka := a.cli.PollTransmit(a.now, a.buf)
				tb, okb := b.cli.PollTransmit(b.now, b.buf[1<<20:])
				if oka != okb || ta.N != tb.N {
					t.Fatalf("mtu %d: the clients' datagrams differ", mtu)
				}
				if !oka {
					break
				}
				b.srv.events = slices.Clip(b.srv.events)
				before := b.srv.events
				a.srv.HandleDatagram(a.now, clientAddr, a.buf[:ta.N])
				b.srv.HandleDatagram(b.now, clientAddr, b.buf[1<<20:][:tb.N])
				if len(b.srv.events) > len(before) && cap(before) == len(before) {
					oneByOne++
				}
				compare(fmt.Sprintf("round %d", round))
				if rng.IntN(3) == 0 {
					poll(rng.IntN(120))
				}
			}
			for _, p := range []*pair{a, b} {
				p.pump(Server, p.srv, p.cli, serverAddr)
				p.events(p.cli, &p.cliEvs, &p.cliMsgs, &p.cliBytes)
			}
			poll(rng.IntN(150))
		}
		poll(sent)
		if polled != sent || oneByOne < 100 {
			t.Fatalf("mtu %d: %d of %d messages polled; %d datagrams lent one by one", mtu, polled, sent, oneByOne)
		}
	}
}
