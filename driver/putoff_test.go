package driver

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/fastnet"
)

// putOffSetup is a server engine over a captureTransport and a client
// endpoint driven by hand.
type putOffSetup struct {
	e      *Engine
	l      *Listener
	tr     *captureTransport
	conn   *Conn
	ep     *fastnet.Endpoint
	clk    *clock.Real
	server netip.AddrPort
	client netip.AddrPort
	buf    []byte
}

func newPutOffSetup(t *testing.T, transport fastnet.Transport, opts Options) *putOffSetup {
	t.Helper()
	e, err := NewEngine(fastnet.Config{Role: fastnet.Server, Transport: transport}, opts)
	if err != nil {
		t.Fatal(err)
	}
	s := &putOffSetup{e: e, tr: &captureTransport{}, clk: clock.NewReal(),
		server: netip.MustParseAddrPort("192.0.2.1:7000"),
		client: netip.MustParseAddrPort("192.0.2.2:1000"),
		buf:    make([]byte, fastnet.DefaultMaxDatagram)}
	s.l = e.NewListener(net.UDPAddrFromAddrPort(s.server))
	e.Start(s.tr)
	t.Cleanup(func() { e.Close() })
	if s.ep, err = fastnet.NewEndpoint(fastnet.Config{Role: fastnet.Client, Transport: transport}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ep.Connect(s.clk.Now(), s.server); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		s.toServer()
		s.toClient()
		if s.events(fastnet.EventConnected) != nil {
			break
		}
	}
	s.toServer()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if s.conn, err = s.l.Accept(ctx); err != nil {
		t.Fatal(err)
	}
	s.tr.take()
	return s
}

func (s *putOffSetup) toServer() {
	for {
		tx, ok := s.ep.PollTransmit(s.clk.Now(), s.buf)
		if !ok {
			return
		}
		s.e.Input(s.client, s.buf[:tx.N])
	}
}

func (s *putOffSetup) toClient() int {
	out := s.tr.take()
	for _, m := range out {
		s.ep.HandleDatagram(s.clk.Now(), s.server, m.Buf[:m.N])
	}
	return len(out)
}

// events drains the client's events and returns the last of kind.
func (s *putOffSetup) events(kind fastnet.EventKind) *fastnet.Event {
	var got *fastnet.Event
	for {
		ev, ok := s.ep.PollEvent()
		if !ok {
			return got
		}
		if ev.Kind == kind {
			got = &ev
		}
	}
}

// putOff leaves the engine as overdueLocked does, the timer stopped so
// that the put-off lasts the test.
func (s *putOffSetup) putOff() {
	s.e.mu.Lock()
	now := s.e.clk.Now()
	s.e.overdue = overdue{last: now, left: overdueMax}
	s.e.deadline = now.Add(-30 * time.Millisecond)
	s.e.timer.Stop()
	s.e.mu.Unlock()
}

func peerClosed(ev *fastnet.Event) bool {
	var pc *fastnet.PeerClosedError
	return ev != nil && errors.As(ev.Err, &pc)
}

// TestCloseDuringPutOff closes, with and without a deadline put off
// (N129), a listener over a Datagram transport, whose Close writes what
// held flushes left, and a connection over a Stream (TCP: an Ender, no
// acks, no resends), whose disconnect reaches the transport before Close
// returns, since the transport ends its stream once told the connection
// ended: either way the client hears the server's disconnect.
func TestCloseDuringPutOff(t *testing.T) {
	tests := []struct {
		name      string
		transport fastnet.Transport
		opts      Options
		close     func(s *putOffSetup) error
	}{
		{"listener, datagram", fastnet.Datagram, Options{CombineWrites: true}, func(s *putOffSetup) error { return s.l.CloseWithReason("bye") }},
		{"connection, stream", fastnet.Stream, Options{}, func(s *putOffSetup) error { return s.conn.CloseWithReason("bye") }},
	}
	for _, tt := range tests {
		for _, putOff := range []bool{false, true} {
			s := newPutOffSetup(t, tt.transport, tt.opts)
			if putOff {
				s.putOff()
			}
			if err := tt.close(s); err != nil {
				t.Fatal(err)
			}
			s.toClient()
			if ev := s.events(fastnet.EventDisconnected); !peerClosed(ev) {
				t.Errorf("%s, put off %v: client heard %v when Close returned, want the server's disconnect", tt.name, putOff, ev)
			}
		}
	}
}

// While a deadline is put off, a flush polls nothing, whether input waits
// or not: only the timer ends the put-off, and handles the deadline.
func TestFlushHeldThroughPutOff(t *testing.T) {
	s := newPutOffSetup(t, fastnet.Datagram, Options{})
	s.putOff()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.conn.Send(ctx, 0, []byte("held"), true); err != nil {
		t.Fatal(err)
	}
	s.e.mu.Lock()
	last := s.e.overdue.last
	s.e.mu.Unlock()
	if n := s.toClient(); n != 0 || last == 0 {
		t.Fatalf("wrote %d datagrams during the put-off (still put off: %v)", n, last != 0)
	}
	s.e.mu.Lock()
	s.e.timer.Reset(0) // the put-off ends: nothing waits
	s.e.mu.Unlock()
	for start := time.Now(); s.toClient() == 0; time.Sleep(time.Millisecond) {
		if time.Since(start) > 2*time.Second {
			t.Fatal("nothing written once the put-off ended")
		}
	}
}
