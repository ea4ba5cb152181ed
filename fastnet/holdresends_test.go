package fastnet

import (
	"bytes"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
)

// TestHoldResends runs a reliable packet whose ack was lost past its
// resend, with resends held back (N130): no resend goes, and no deadline
// is left in the past for it, while acks, heartbeats and first-time data
// still go; released, the resend goes with the next poll.
func TestHoldResends(t *testing.T) {
	first, second := []byte("first message, lost ack"), []byte("second message, new")
	p := newPair(t, Config{}, Config{})
	p.drop = func(from Role, b []byte) bool { return from == Server } // the ack is lost
	if err := p.cli.Send(p.now, p.ch, 1, first, true); err != nil {
		t.Fatal(err)
	}
	p.flush()
	p.drop = nil
	if p.srvMsgs != 1 {
		t.Fatalf("server got %d messages, want 1", p.srvMsgs)
	}
	// poll returns the client's datagrams at the pair's time, after its
	// timers then due if timers is set, and whether any carried msg.
	poll := func(msg []byte, timers bool) (n int, carried bool) {
		if d, ok := p.cli.NextDeadline(); timers && ok && d <= p.now {
			p.cli.HandleTimeout(p.now)
		}
		for {
			tx, ok := p.cli.PollTransmit(p.now, p.buf)
			if !ok {
				return n, carried
			}
			n++
			carried = carried || bytes.Contains(p.buf[:tx.N], msg)
		}
	}
	p.now = p.now.Add(time.Second) // long past the first resend (D14)
	p.cli.HoldResends(p.now, true)
	if _, resent := poll(first, true); resent {
		t.Fatal("resent while resends were held")
	}
	if d, ok := p.cli.NextDeadline(); !ok || d <= p.now {
		t.Fatalf("next deadline %v (set %v), want one after now, %v: the held resend left out", d, ok, p.now)
	}
	if err := p.cli.Send(p.now, p.ch, 2, second, true); err != nil {
		t.Fatal(err)
	}
	if _, sent := poll(second, true); !sent {
		t.Fatal("a first-time message did not go while resends were held")
	}
	if st, _ := p.cli.Stats(p.ch); st.PacketsResent != 0 {
		t.Fatalf("%d packets resent while held, want 0", st.PacketsResent)
	}
	p.cli.HoldResends(p.now, false)
	if _, resent := poll(first, false); !resent { // PollTransmit alone
		t.Fatal("not resent once resends were no longer held")
	}
	if st, _ := p.cli.Stats(p.ch); st.PacketsResent == 0 {
		t.Fatal("no packet counted as resent once released")
	}
}

// HoldResends looks again at the connections in the order of their
// handles, so that what the endpoint then sends comes in the same order
// on every run (the core is deterministic): a server with packets in
// flight to several clients, their acks lost, resends held and let go,
// sends its resends to its clients in one order, run after run.
func TestHoldResendsSameOrder(t *testing.T) {
	const clients = 6
	run := func() []netip.AddrPort {
		now := clock.Epoch
		srv, err := NewEndpoint(Config{Role: Server})
		if err != nil {
			t.Fatal(err)
		}
		eps := map[netip.AddrPort]*Endpoint{serverAddr: srv}
		var addrs []netip.AddrPort
		for i := range clients {
			a := netip.AddrPortFrom(clientAddr.Addr(), uint16(50000+i))
			cli, err := NewEndpoint(Config{Role: Client})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := cli.Connect(now, serverAddr); err != nil {
				t.Fatal(err)
			}
			eps[a] = cli
			addrs = append(addrs, a)
		}
		buf := make([]byte, DefaultMaxDatagram)
		var hs []Handle // the server's connections
		// route moves every datagram to its endpoint until none is
		// left, dropping those from the clients if drop is set.
		route := func(drop bool) {
			for moved := true; moved; {
				moved = false
				for _, from := range append([]netip.AddrPort{serverAddr}, addrs...) {
					for {
						tx, ok := eps[from].PollTransmit(now, buf)
						if !ok {
							break
						}
						moved = true
						if to := eps[tx.To]; to != nil && !(drop && from != serverAddr) {
							to.HandleDatagram(now, from, buf[:tx.N])
						}
					}
					for ev, ok := eps[from].PollEvent(); ok; ev, ok = eps[from].PollEvent() {
						if from == serverAddr && ev.Kind == EventConnected {
							hs = append(hs, ev.Conn)
						}
					}
				}
			}
		}
		route(false)
		if len(hs) != clients {
			t.Fatalf("%d connections, want %d", len(hs), clients)
		}
		for _, h := range hs {
			if err := srv.Send(now, h, 1, []byte("its ack lost"), true); err != nil {
				t.Fatal(err)
			}
		}
		route(true)
		now = now.Add(time.Second) // every resend long due (D14)
		srv.HoldResends(now, true)
		srv.HoldResends(now, false)
		var order []netip.AddrPort
		for {
			tx, ok := srv.PollTransmit(now, buf)
			if !ok {
				return order
			}
			order = append(order, tx.To)
		}
	}
	want := run()
	if len(want) < clients {
		t.Fatalf("%d datagrams sent once resends were let go, want at least %d: %v", len(want), clients, want)
	}
	for range 20 {
		if got := run(); !slices.Equal(got, want) {
			t.Fatalf("datagrams sent to %v, then to %v in another run", want, got)
		}
	}
}
