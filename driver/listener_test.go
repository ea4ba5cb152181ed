package driver

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/internal/udpio"
)

// captureTransport keeps copies of the datagrams the engine writes.
type captureTransport struct {
	mu  sync.Mutex
	out []udpio.Message
}

func (t *captureTransport) WriteBatch(msgs []udpio.Message) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, m := range msgs {
		t.out = append(t.out, udpio.Message{Buf: append([]byte(nil), m.Buf[:m.N]...), N: m.N, Addr: m.Addr})
	}
}

func (t *captureTransport) Close() error { return nil }

func (t *captureTransport) take() []udpio.Message {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := t.out
	t.out = nil
	return out
}

// TestBacklogFullAtEstablishment lets two clients in together while the
// backlog has room for one: each "connect?" is admitted by the accept hook,
// or the second refused by it, depending on whether the endpoint reports
// a connection at once or after validating its client (D25). Either way
// exactly one connection waits for Accept and the other client is turned
// away with "server busy" (N47).
func TestBacklogFullAtEstablishment(t *testing.T) {
	e, err := NewEngine(fastnet.Config{Role: fastnet.Server}, Options{Backlog: 1})
	if err != nil {
		t.Fatal(err)
	}
	tr := &captureTransport{}
	server := netip.MustParseAddrPort("192.0.2.1:7000")
	l := e.NewListener(net.UDPAddrFromAddrPort(server))
	e.Start(tr)
	defer e.Close()

	clk := clock.NewReal()
	type client struct {
		addr netip.AddrPort
		ep   *fastnet.Endpoint
		evs  []fastnet.Event
	}
	var clients []*client
	for _, a := range []string{"192.0.2.2:1000", "192.0.2.3:1000"} {
		ep, err := fastnet.NewEndpoint(fastnet.Config{Role: fastnet.Client})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ep.Connect(clk.Now(), server); err != nil {
			t.Fatal(err)
		}
		clients = append(clients, &client{addr: netip.MustParseAddrPort(a), ep: ep})
	}
	// Rounds in lockstep: what every client sent reaches the server,
	// then what the server sent reaches the clients.
	buf := make([]byte, fastnet.DefaultMaxDatagram)
	for range 20 {
		for _, c := range clients {
			for {
				tx, ok := c.ep.PollTransmit(clk.Now(), buf)
				if !ok {
					break
				}
				e.Input(c.addr, buf[:tx.N])
			}
		}
		for _, m := range tr.take() {
			for _, c := range clients {
				if c.addr == m.Addr {
					c.ep.HandleDatagram(clk.Now(), server, m.Buf[:m.N])
				}
			}
		}
		for _, c := range clients {
			for {
				ev, ok := c.ep.PollEvent()
				if !ok {
					break
				}
				c.evs = append(c.evs, ev)
			}
		}
	}

	turnedAway := 0
	for i, c := range clients {
		for _, ev := range c.evs {
			var re *fastnet.RefusedError
			var pc *fastnet.PeerClosedError
			if errors.As(ev.Err, &re) && re.Reason == "server busy" ||
				errors.As(ev.Err, &pc) && pc.Reason == "server busy" {
				turnedAway++
				t.Logf("client %d: %v", i, ev.Err)
			}
		}
	}
	if turnedAway != 1 {
		t.Errorf("%d clients turned away with \"server busy\", want 1", turnedAway)
	}
	s := l.DriverStats()
	if s.Backlog != 1 || s.BacklogRefused != 1 {
		t.Errorf("backlog %d, %d refused; want 1 and 1", s.Backlog, s.BacklogRefused)
	}
	if n := l.NumConns(); n != 1 {
		t.Errorf("server holds %d connections, want 1", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if c, err := l.Accept(ctx); err != nil {
		t.Errorf("Accept: %v", err)
	} else if c.Err() != nil {
		t.Errorf("the accepted connection has ended: %v", c.Err())
	}
}
