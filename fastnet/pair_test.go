package fastnet

import (
	"bytes"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
)

// pair is a client and a server endpoint joined by a lossless, instant link:
// the smallest harness for end-to-end tests and the engine benchmarks. The
// simulated network of package fastnettest covers everything harder.
type pair struct {
	tb       testing.TB
	now      clock.Time
	cli, srv *Endpoint
	ch, sh   Handle // the client's and the server's handle of the connection
	buf      []byte
	in       []Incoming // a batch of datagrams in buf (pump)
	cliEvs   []Event
	srvEvs   []Event
	// keep, when false, discards message events instead of recording them
	// (benchmarks count them instead).
	keep               bool
	cliMsgs, srvMsgs   int
	cliBytes, srvBytes int
	drop               func(from Role, b []byte) bool // optional loss
	// step, if set, moves the clock on by that much at each flush and
	// runs the timers then due, as time passes on a machine and a driver
	// does: benchmarks set it so that the pacer (D30) lets packets go.
	step time.Duration
}

func newPair(tb testing.TB, cli, srv Config) *pair {
	tb.Helper()
	cli.Role, srv.Role = Client, Server
	p := &pair{tb: tb, now: clock.Epoch, buf: make([]byte, 1<<21), keep: true}
	var err error
	if p.cli, err = NewEndpoint(cli); err != nil {
		tb.Fatal(err)
	}
	if p.srv, err = NewEndpoint(srv); err != nil {
		tb.Fatal(err)
	}
	if p.ch, err = p.cli.Connect(p.now, serverAddr); err != nil {
		tb.Fatal(err)
	}
	p.flush()
	for _, ev := range p.srvEvs {
		if ev.Kind == EventConnected {
			p.sh = ev.Conn
		}
	}
	if p.sh == 0 {
		tb.Fatalf("no connection: client events %v", p.cliEvs)
	}
	p.cliEvs, p.srvEvs = nil, nil
	return p
}

// flush moves datagrams both ways until neither endpoint has more.
func (p *pair) flush() {
	if p.step > 0 {
		p.now = p.now.Add(p.step)
		for _, ep := range []*Endpoint{p.cli, p.srv} {
			if d, ok := ep.NextDeadline(); ok && d <= p.now {
				ep.HandleTimeout(p.now)
			}
		}
	}
	for moved := true; moved; {
		moved = p.pump(Client, p.cli, p.srv, clientAddr)
		moved = p.pump(Server, p.srv, p.cli, serverAddr) || moved
		p.events(p.cli, &p.cliEvs, &p.cliMsgs, &p.cliBytes)
		p.events(p.srv, &p.srvEvs, &p.srvMsgs, &p.srvBytes)
	}
}

// pump moves every datagram from has to send to the other endpoint, to,
// which takes them in batches (HandleDatagrams) as a driver reading
// several at once hands them over; it reports whether there were any.
// Handled one at a time as each is polled, they would make the same
// state: the sending side does not hear from the other meanwhile.
func (p *pair) pump(role Role, from, to *Endpoint, addr netip.AddrPort) bool {
	moved, off := false, 0
	p.in = p.in[:0]
	for {
		if len(p.buf)-off < DefaultMaxDatagram && len(p.in) > 0 {
			to.HandleDatagrams(p.now, p.in)
			p.in, off = p.in[:0], 0
		}
		t, ok := from.PollTransmit(p.now, p.buf[off:])
		if !ok {
			break
		}
		moved = true
		b := p.buf[off : off+t.N]
		off += t.N
		if p.drop == nil || !p.drop(role, b) {
			p.in = append(p.in, Incoming{From: addr, Data: b})
		}
	}
	if len(p.in) > 0 {
		to.HandleDatagrams(p.now, p.in)
	}
	return moved
}

func (p *pair) events(ep *Endpoint, evs *[]Event, msgs, n *int) {
	var ev Event
	for ep.NextEvent(&ev) {
		if ev.Kind == EventMessage {
			*msgs++
			*n += len(ev.Data)
			if !p.keep {
				continue
			}
		}
		*evs = append(*evs, ev)
	}
}

// advance moves time by d, firing deadlines of both endpoints on the way.
func (p *pair) advance(d time.Duration) {
	end := p.now.Add(d)
	for {
		next := end
		if t, ok := p.cli.NextDeadline(); ok && t < next {
			next = t
		}
		if t, ok := p.srv.NextDeadline(); ok && t < next {
			next = t
		}
		if next > p.now {
			p.now = next
		}
		p.cli.HandleTimeout(p.now)
		p.srv.HandleTimeout(p.now)
		p.flush()
		if p.now >= end {
			return
		}
	}
}

func messagesOf(evs []Event) []string {
	var out []string
	for _, ev := range evs {
		if ev.Kind == EventMessage {
			out = append(out, fmt.Sprintf("ch%d %v %s", ev.Channel, ev.Reliable, ev.Data))
		}
	}
	return out
}

func TestPairMessages(t *testing.T) {
	for _, tr := range []Transport{Datagram, Stream} {
		t.Run(tr.String(), func(t *testing.T) {
			p := newPair(t, Config{Transport: tr}, Config{Transport: tr})
			big := bytes.Repeat([]byte("0123456789"), 10000) // 100 kB: 4,000 packets at MTU 32
			p.cli.Send(p.now, p.ch, 0, []byte("hello"), true)
			p.cli.Send(p.now, p.ch, 7, []byte("unreliable"), false)
			p.cli.Send(p.now, p.ch, 0, big, true)
			p.cli.Send(p.now, p.ch, 32767, []byte(""), true)
			p.flush()
			p.advance(100 * time.Millisecond)
			got := messagesOf(p.srvEvs)
			want := []string{"ch0 true hello", "ch7 false unreliable", "ch32767 true ", "ch0 true " + string(big)}
			if len(got) != len(want) {
				t.Fatalf("got %d messages: %.200q", len(got), got)
			}
			seen := map[string]bool{}
			for _, g := range got {
				seen[g] = true
			}
			for _, w := range want {
				if !seen[w] {
					t.Errorf("missing %.60q", w)
				}
			}
			st, _ := p.cli.Stats(p.ch)
			if st.InFlightBytes != 0 || st.SendQueueBytes != 0 {
				t.Errorf("after delivery: %d in flight, %d queued", st.InFlightBytes, st.SendQueueBytes)
			}
			// And back.
			p.srv.Send(p.now, p.sh, 3, []byte("pong"), true)
			p.flush()
			if got := messagesOf(p.cliEvs); len(got) != 1 || got[0] != "ch3 true pong" {
				t.Fatalf("client got %q", got)
			}
		})
	}
}
