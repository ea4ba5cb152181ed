package driver

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/internal/udpio"
)

// answerTransport keeps the datagrams the engine writes and, for each
// write, how many datagrams the engine had taken in when it was made. It
// can hold the next write back until told to go on.
type answerTransport struct {
	e    *Engine
	peer netip.AddrPort
	// record: read the engine's count at each write, which takes its
	// lock; with Options.CombineWrites every write is made outside it,
	// but Close's last one, so recording stops before Close.
	record atomic.Bool
	// holdNext makes the next write signal held, then wait for release.
	holdNext atomic.Bool
	held     chan struct{}
	release  chan struct{}

	mu      sync.Mutex
	out     []udpio.Message
	takenAt []uint64
}

func (t *answerTransport) WriteBatch(msgs []udpio.Message) {
	if t.holdNext.CompareAndSwap(true, false) {
		t.held <- struct{}{}
		<-t.release
	}
	taken := t.taken()
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, m := range msgs {
		t.out = append(t.out, udpio.Message{Buf: append([]byte(nil), m.Buf[:m.N]...), N: m.N, Addr: m.Addr})
	}
	t.takenAt = append(t.takenAt, taken)
}

// taken returns the datagrams the engine has taken in from the peer, or 0
// when not recording.
func (t *answerTransport) taken() uint64 {
	if !t.record.Load() {
		return 0
	}
	t.e.mu.Lock()
	defer t.e.mu.Unlock()
	return t.takenLocked()
}

func (t *answerTransport) takenLocked() uint64 {
	if c := t.e.byAddr[t.peer]; c != nil {
		if st, ok := t.e.ep.Stats(c.h); ok {
			return st.PacketsReceived
		}
	}
	return 0
}

func (t *answerTransport) Close() error { return nil }

func (t *answerTransport) take() ([]udpio.Message, []uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	out, at := t.out, t.takenAt
	t.out, t.takenAt = nil, nil
	return out, at
}

// answerSetup is a server engine over an answerTransport and a client
// endpoint connected to it, driven by hand.
type answerSetup struct {
	e      *Engine
	tr     *answerTransport
	conn   *Conn // the server's end
	ep     *fastnet.Endpoint
	h      fastnet.Handle
	clk    *clock.Real
	server netip.AddrPort
	client netip.AddrPort
	buf    []byte
}

func newAnswerSetup(t *testing.T) *answerSetup {
	t.Helper()
	e, err := NewEngine(fastnet.Config{Role: fastnet.Server}, Options{CombineWrites: true})
	if err != nil {
		t.Fatal(err)
	}
	s := &answerSetup{
		e:      e,
		clk:    clock.NewReal(),
		server: netip.MustParseAddrPort("192.0.2.1:7000"),
		client: netip.MustParseAddrPort("192.0.2.2:1000"),
		buf:    make([]byte, fastnet.DefaultMaxDatagram),
	}
	s.tr = &answerTransport{e: e, peer: s.client, held: make(chan struct{}), release: make(chan struct{})}
	l := e.NewListener(net.UDPAddrFromAddrPort(s.server))
	e.Start(s.tr)
	t.Cleanup(func() {
		s.tr.record.Store(false)
		e.Close()
	})
	// No congestion control at the client, so that its window lets a
	// whole batch go at once.
	s.ep, err = fastnet.NewEndpoint(fastnet.Config{Role: fastnet.Client, Congestion: fastnet.CongestionConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	if s.h, err = s.ep.Connect(s.clk.Now(), s.server); err != nil {
		t.Fatal(err)
	}
	established := false
	for range 20 {
		s.toServer()
		s.toClient()
		for {
			ev, ok := s.ep.PollEvent()
			if !ok {
				break
			}
			established = established || ev.Kind == fastnet.EventConnected
		}
		if established {
			break
		}
	}
	if !established {
		t.Fatal("the client never connected")
	}
	s.toServer()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if s.conn, err = l.Accept(ctx); err != nil {
		t.Fatal(err)
	}
	s.tr.take()
	s.tr.record.Store(true)
	return s
}

// toServer hands the server what the client has to send, one by one.
func (s *answerSetup) toServer() {
	for {
		tx, ok := s.ep.PollTransmit(s.clk.Now(), s.buf)
		if !ok {
			return
		}
		s.e.Input(s.client, s.buf[:tx.N])
	}
}

// toClient hands the client what the server wrote; it returns the counts
// taken at the writes.
func (s *answerSetup) toClient() []uint64 {
	out, at := s.tr.take()
	for _, m := range out {
		s.ep.HandleDatagram(s.clk.Now(), s.server, m.Buf[:m.N])
	}
	return at
}

// batch queues reliable messages at the client until its datagrams hold
// at least size bytes, and returns them as one read would, with the
// number of messages.
func (s *answerSetup) batch(t *testing.T, size int) ([]udpio.Message, int) {
	t.Helper()
	var msgs []udpio.Message
	n, sent := 0, 0
	for n < size {
		if err := s.ep.Send(s.clk.Now(), s.h, 0, fmt.Appendf(nil, "message %d of the batch", sent), true); err != nil {
			t.Fatalf("message %d: %v", sent, err)
		}
		sent++
		for {
			tx, ok := s.ep.PollTransmit(s.clk.Now(), s.buf)
			if !ok {
				break
			}
			msgs = append(msgs, udpio.Message{Buf: append([]byte(nil), s.buf[:tx.N]...), N: tx.N, Addr: s.client})
			n += tx.N
		}
	}
	return msgs, sent
}

// takenNow returns the datagrams the server has taken in from the client.
func (s *answerSetup) takenNow() uint64 {
	s.e.mu.Lock()
	defer s.e.mu.Unlock()
	return s.tr.takenLocked()
}

// finish delivers what the server writes to the client until every packet
// is acknowledged, then receives the n messages of the batch in order.
func (s *answerSetup) finish(t *testing.T, n int) {
	t.Helper()
	for start := time.Now(); ; time.Sleep(time.Millisecond) {
		s.toClient()
		st, _ := s.ep.Stats(s.h)
		if st.InFlightPackets == 0 {
			break
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("%d packets still unacknowledged after 5 s", st.InFlightPackets)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i := range n {
		m, err := s.conn.Receive(ctx)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if want := fmt.Sprintf("message %d of the batch", i); string(m.Data) != want {
			t.Fatalf("received %q, want %q", m.Data, want)
		}
	}
}

// TestLargeInputAnsweredAsItGoes feeds the engine one batch of datagrams,
// as a batched read returns them, holding several times answerBytes of
// reliable messages: the acks of its first datagrams are written before
// its last are taken in, not once all of it is, so that the sender's
// window does not run dry while the receiver works through the batch
// (N100). Every message is delivered in order, and every packet
// acknowledged, all the same.
func TestLargeInputAnsweredAsItGoes(t *testing.T) {
	s := newAnswerSetup(t)
	msgs, n := s.batch(t, 2*answerBytes)
	before := s.takenNow()
	s.e.InputBatch(msgs)
	final := s.takenNow()
	at := s.toClient()
	t.Logf("%d datagrams, %d messages: writes made with %v of them taken in, from %d to %d", len(msgs), n, at, before, final)
	mid := false
	for _, x := range at {
		mid = mid || before < x && x < final
	}
	if !mid {
		t.Errorf("no write while the batch was being taken in (from %d to %d datagrams): writes at %v", before, final, at)
	}
	s.finish(t, n)
}

// TestLargeInputAnsweredBesideWriter is TestLargeInputAnsweredAsItGoes
// with another goroutine writing outside the lock when the input reaches
// answerBytes: a Send of the server's, whose write the transport holds
// back. The input cannot write itself, and the writer cannot take what
// the input polled while the input holds the lock: the input lets the
// lock go until the writer has taken it, rather than handling the rest of
// the batch first (N100).
func TestLargeInputAnsweredBesideWriter(t *testing.T) {
	s := newAnswerSetup(t)
	msgs, n := s.batch(t, 2*answerBytes)
	before := s.takenNow()
	final := before + uint64(len(msgs))

	// The Send's unlock writes its datagram outside the lock, held.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s.tr.record.Store(false) // the counts would need the lock
	s.tr.holdNext.Store(true)
	sent := make(chan error, 1)
	go func() { sent <- s.conn.Send(ctx, 0, []byte("reply"), true) }()
	select {
	case <-s.tr.held:
	case <-ctx.Done():
		t.Fatal("the Send never wrote")
	}
	fed := make(chan struct{})
	go func() {
		s.e.InputBatch(msgs)
		close(fed)
	}()
	// The input holds the lock while it works; it lets it go in the
	// middle of the batch only to wait for the writer.
	waited := false
	for !waited {
		select {
		case <-fed:
			close(s.tr.release)
			t.Fatal("the input was handled to its end while the writer waited for the lock")
		case <-ctx.Done():
			t.Fatal("the input neither ended nor let the lock go")
		default:
		}
		if s.e.mu.TryLock() {
			x := s.tr.takenLocked()
			s.e.mu.Unlock()
			waited = before < x && x < final
		}
		time.Sleep(100 * time.Microsecond)
	}
	close(s.tr.release)
	select {
	case <-fed:
	case <-ctx.Done():
		t.Fatal("the input never ended")
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	s.finish(t, n)
}
