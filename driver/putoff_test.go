package driver

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/netip"
	"sync/atomic"
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
	tr := &captureTransport{}
	return newPutOffSetupOn(t, transport, opts, tr, tr)
}

// newPutOffSetupOn is newPutOffSetup with the server engine started on
// transport tr, whose output goes to capture.
func newPutOffSetupOn(t *testing.T, transport fastnet.Transport, opts Options, capture *captureTransport, tr Transport) *putOffSetup {
	t.Helper()
	e, err := NewEngine(fastnet.Config{Role: fastnet.Server, Transport: transport}, opts)
	if err != nil {
		t.Fatal(err)
	}
	s := &putOffSetup{e: e, tr: capture, clk: clock.NewReal(),
		server: netip.MustParseAddrPort("192.0.2.1:7000"),
		client: netip.MustParseAddrPort("192.0.2.2:1000"),
		buf:    make([]byte, fastnet.DefaultMaxDatagram)}
	s.l = e.NewListener(net.UDPAddrFromAddrPort(s.server))
	e.Start(tr)
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

// waitingTransport is a captureTransport that tells whether input waits
// (InputWaiter) as its test sets it.
type waitingTransport struct {
	captureTransport
	waiting atomic.Bool
}

func (t *waitingTransport) InputWaiting() (waiting, known bool) { return t.waiting.Load(), true }

// lostSetup is a putOffSetup over a waitingTransport that says whether
// input waits as waiting, whose server has sent msg reliably and never
// hears its ack: the client takes it but sends nothing back.
func lostSetup(t *testing.T, waiting bool, msg []byte) (*putOffSetup, *waitingTransport) {
	t.Helper()
	tr := &waitingTransport{}
	tr.waiting.Store(waiting)
	s := newPutOffSetupOn(t, fastnet.Datagram, Options{}, &tr.captureTransport, tr)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.conn.Send(ctx, 1, msg, true); err != nil {
		t.Fatal(err)
	}
	s.waitWritten(t, "for the first message")
	return s, tr
}

// written takes what the server wrote since it was last taken, and
// reports for each of msgs whether a datagram carried it.
func (s *putOffSetup) written(msgs ...[]byte) []bool {
	got := make([]bool, len(msgs))
	for _, m := range s.tr.take() {
		for i, msg := range msgs {
			got[i] = got[i] || bytes.Contains(m.Buf[:m.N], msg)
		}
	}
	return got
}

// flush runs a flush of the server's, as input or a Send does, within a
// put-off that must last.
func (s *putOffSetup) flush(t *testing.T) {
	t.Helper()
	s.e.mu.Lock()
	s.e.flushLocked()
	last := s.e.overdue.last
	s.e.mu.Unlock()
	if last == 0 {
		t.Fatal("the put-off ended before the test")
	}
}

// While a deadline is put off (N129), the resends that come due are held
// back while input waits, since the acks that free their packets may be
// in that input, and go with the reader's first flush that finds none
// waiting (N132); a first-time message goes at once, and with no input
// waiting, a resend due goes with it (N130).
func TestResendsHeldThroughPutOff(t *testing.T) {
	first, second := []byte("first, its ack lost"), []byte("second, sent anew")
	tests := []struct {
		name    string
		waiting bool
	}{
		{"input waiting", true},
		{"no input waiting", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, tr := lostSetup(t, tt.waiting, first)
			s.putOff()
			time.Sleep(200 * time.Millisecond) // the first resend long due (D14)
			s.flush(t)
			if s.written(first)[0] {
				t.Fatal("resent before the connection was polled") // the timer is stopped
			}
			// A Send has the connection polled: its message goes at
			// once, and the resend due with it unless held back.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := s.conn.Send(ctx, 2, second, true); err != nil {
				t.Fatal(err)
			}
			s.flush(t)
			got := s.written(second, first)
			if !got[0] {
				t.Fatal("a first-time message did not go during the put-off")
			}
			if got[1] != !tt.waiting {
				t.Fatalf("resent %v during the put-off, input waiting %v", got[1], tt.waiting)
			}
			if !tt.waiting {
				return
			}
			// The input read: a flush of another goroutine than the
			// reader (a Send's) still holds the resend, since it
			// cannot see a read that has taken datagrams and not yet
			// said so; the reader's, once it has fed what it read,
			// lets it go (N132).
			tr.waiting.Store(false)
			s.flush(t)
			if s.written(first)[0] {
				t.Fatal("resent by a flush not the reader's")
			}
			s.e.InputBatch(nil)
			if !s.written(first)[0] {
				t.Fatal("no resend once the reader found no input waiting")
			}
		})
	}
}

// waitWritten waits for the server to write something to the client.
func (s *putOffSetup) waitWritten(t *testing.T, when string) {
	t.Helper()
	for start := time.Now(); s.toClient() == 0; time.Sleep(time.Millisecond) {
		if time.Since(start) > 2*time.Second {
			t.Fatalf("nothing written %s", when)
		}
	}
}

// With no deadline overdue, input waiting holds nothing back: a packet
// whose ack never comes is resent on time (N130).
func TestResendsNotHeldOnTime(t *testing.T) {
	first := []byte("first, its ack lost")
	s, _ := lostSetup(t, true, first)
	for start := time.Now(); !s.written(first)[0]; time.Sleep(time.Millisecond) {
		if time.Since(start) > 2*time.Second {
			t.Fatal("not resent in 2 s with input waiting and no deadline overdue")
		}
	}
}
