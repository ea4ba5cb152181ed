package fastnet

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"
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
	for _, mtu := range []int{1200, fullBundleMTU} {
		cfg := Config{InitialPayloadMTU: mtu, MTU: MTUConfig{Disabled: true}, ReuseMessageBuffers: true}
		p := newPair(t, cfg, cfg)
		p.keep = false
		rng := rand.New(rand.NewPCG(1, uint64(mtu)))
		type lent struct {
			data []byte
			want []byte
		}
		var (
			sent, got int
			sizes     []int
			polled    []lent // polled since the server last handled datagrams
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
				poll(rng.IntN(25))
			}
			checkPolled("before the server's datagrams")
			p.srv.HandleTimeout(p.now)
			polled = polled[:0]
			p.pump(Server, p.srv, p.cli, serverAddr)
			p.events(p.cli, &p.cliEvs, &p.cliMsgs, &p.cliBytes)
			poll(rng.IntN(25))
		}
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
