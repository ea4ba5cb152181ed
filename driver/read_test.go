package driver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/internal/udpio"
)

// socket is a Reader transport over a loopback UDP socket, as the UDP
// driver's.
type socket struct{ uc *udpio.Conn }

func (s socket) WriteBatch(msgs []udpio.Message) {
	for len(msgs) > 0 {
		n, err := s.uc.WriteBatch(msgs)
		if err == nil || errors.Is(err, net.ErrClosed) {
			return
		}
		msgs = msgs[n+1:]
	}
}
func (s socket) Close() error                                { return s.uc.Close() }
func (s socket) ReadBatch(msgs []udpio.Message) (int, error) { return s.uc.ReadBatch(msgs) }
func (s socket) SetReadDeadline(t time.Time) error           { return s.uc.SetReadDeadline(t) }

// pair connects a client engine to a server engine over loopback UDP and
// returns both ends of the connection.
func pair(t *testing.T, ctx context.Context) (c, sc *Conn) {
	t.Helper()
	engine := func(role fastnet.Role) *Engine {
		e, err := NewEngine(fastnet.Config{Role: role, Transport: fastnet.Datagram}, Options{CombineWrites: true})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	se := engine(fastnet.Server)
	suc, err := udpio.Listen(ctx, "udp4", "127.0.0.1:0", udpio.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l := se.NewListener(net.UDPAddrFromAddrPort(suc.LocalAddr()))
	se.Start(socket{suc})
	t.Cleanup(func() { se.Close() })

	ce := engine(fastnet.Client)
	cuc, err := udpio.Listen(ctx, "udp4", "127.0.0.1:0", udpio.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ce.Start(socket{cuc})
	t.Cleanup(func() { ce.Close() })
	if c, err = ce.Dial(ctx, suc.LocalAddr()); err != nil {
		t.Fatal(err)
	}
	if sc, err = l.Accept(ctx); err != nil {
		t.Fatal(err)
	}
	return c, sc
}

// waitFor polls cond under the engine's lock until it holds.
func waitFor(t *testing.T, e *Engine, what string, cond func() bool) {
	t.Helper()
	for start := time.Now(); ; time.Sleep(time.Millisecond) {
		e.mu.Lock()
		ok := cond()
		e.mu.Unlock()
		if ok {
			return
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("still not %s after 5 s", what)
		}
	}
}

// warm exchanges a few messages both ways: the client's read role moves
// from the background reader to its Receive calls.
func warm(t *testing.T, ctx context.Context, c, sc *Conn) {
	t.Helper()
	for i := range 3 {
		echo(t, ctx, c, sc, fmt.Sprint("ping ", i))
		echo(t, ctx, sc, c, fmt.Sprint("pong ", i))
	}
}

// echo sends msg from a and receives it at b.
func echo(t *testing.T, ctx context.Context, a, b *Conn, msg string) {
	t.Helper()
	if err := a.Send(ctx, 0, []byte(msg), true); err != nil {
		t.Fatal(err)
	}
	m, err := b.Receive(ctx)
	if err != nil || string(m.Data) != msg {
		t.Fatalf("Receive = %q, %v; want %q", m.Data, err, msg)
	}
}

// A Receive with nothing queued takes the read role and waits in the
// socket read itself: the goroutine the kernel wakes is the one that
// returns the message, with no hand-off.
func TestReceiveReadsInline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, sc := pair(t, ctx)
	warm(t, ctx, c, sc)
	got := make(chan error, 1)
	go func() {
		m, err := c.Receive(ctx)
		if err == nil && string(m.Data) != "late" {
			err = fmt.Errorf("received %q", m.Data)
		}
		got <- err
	}()
	waitFor(t, c.e, "reading in Receive", func() bool { return c.e.role == roleReceive && c.e.reading == c })
	if err := sc.Send(ctx, 0, []byte("late"), true); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}

// A Receive reading the socket returns when its context is done, and
// leaves no deadline behind: the next reader reads normally.
func TestReceiveCancelWhileReading(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, sc := pair(t, ctx)
	warm(t, ctx, c, sc)
	rctx, rcancel := context.WithCancel(ctx)
	got := make(chan error, 1)
	go func() {
		_, err := c.Receive(rctx)
		got <- err
	}()
	waitFor(t, c.e, "reading in Receive", func() bool { return c.e.reading == c })
	start := time.Now()
	rcancel()
	select {
	case err := <-got:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Receive = %v, want context.Canceled", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Receive still blocked 2 s after its context was canceled")
	}
	t.Logf("returned %v after the cancel", time.Since(start))
	for i := range 3 {
		echo(t, ctx, sc, c, fmt.Sprint("after ", i))
	}
}

// An application that stops calling Receive still acknowledges what
// arrives: the background reader takes the role after idleDelay, so the
// peer's reliable messages are acked in time (with idleDelay far below the
// resend floor, none is resent).
func TestIdleRoleGoesToBackground(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, sc := pair(t, ctx)
	warm(t, ctx, c, sc)
	// c's application is now busy: no Receive for a while.
	resent := sc.Stats().PacketsResent
	const n = 200
	for i := range n {
		if err := sc.Send(ctx, 1, []byte(fmt.Sprint("busy ", i)), true); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, sc.e, "acked", func() bool {
		s, _ := sc.e.ep.Stats(sc.h)
		return s.SendQueueBytes == 0 && s.InFlightPackets == 0
	})
	// Resends would need a stall of twice the resend floor (D14,
	// MinResendRTT): possible on a loaded machine, so only reported.
	t.Logf("%d packets resent", sc.Stats().PacketsResent-resent)
	c.e.mu.Lock()
	role := c.e.role
	c.e.mu.Unlock()
	if role != roleBackground {
		t.Errorf("read role %d, want the background reader's", role)
	}
	for i := range n {
		m, err := c.Receive(ctx)
		if err != nil || string(m.Data) != fmt.Sprint("busy ", i) {
			t.Fatalf("Receive %d = %q, %v", i, m.Data, err)
		}
	}
}

// queueReader is a Reader with waiting datagrams of one byte; each read
// first sleeps for delay, as a read that waits for its datagram would.
type queueReader struct {
	waiting int
	delay   time.Duration
}

func (q *queueReader) ReadBatch(msgs []udpio.Message) (int, error) {
	time.Sleep(q.delay)
	n := min(q.waiting, len(msgs))
	for i := range n {
		msgs[i].N = 1
	}
	return n, nil
}
func (q *queueReader) SetReadDeadline(time.Time) error { return nil }

// TestReadSize checks how the batch a read asks for follows the traffic:
// it doubles after a full read, halves after one under a quarter full, and
// a read of one datagram that had to wait for it asks for one again (a
// request and its reply), while the second of two in a row that found it
// waiting asks for two.
func TestReadSize(t *testing.T) {
	tests := []struct {
		size, waiting int
		delay         time.Duration
		want          int
	}{
		{1, 1, time.Millisecond, 1}, // waited: one again
		{1, 5, time.Millisecond, 1},
		{2, 1, 0, 1},
		{2, 2, 0, 4},
		{8, 1, 0, 1},
		{8, 8, 0, 16},
		{16, 3, 0, 8},
		{16, 1, 0, 8},
		{64, 64, 0, 64},
		{64, 20, 0, 64},
		{64, 15, 0, 32},
	}
	for _, tt := range tests {
		e := &Engine{clk: clock.NewReal(), rd: &queueReader{tt.waiting, tt.delay}, rmsgs: make([]udpio.Message, readBatch), rsize: tt.size}
		if _, err := e.read(); err != nil {
			t.Fatal(err)
		}
		for i, m := range e.rmsgs[:tt.size] {
			if len(m.Buf) != udpio.BufferSize {
				t.Fatalf("read of %d: buffer %d has %d bytes", tt.size, i, len(m.Buf))
			}
		}
		if e.rsize != tt.want {
			t.Errorf("read of %d with %d waiting after %v: next asks for %d, want %d", tt.size, tt.waiting, tt.delay, e.rsize, tt.want)
		}
	}
	// A read of one that found its datagram waiting asks for two.
	e := &Engine{clk: clock.NewReal(), rd: &queueReader{waiting: 5}, rmsgs: make([]udpio.Message, readBatch)}
	if !timedReadGrows(e) {
		t.Error("reads of one that found 5 datagrams waiting never asked for two")
	}
}

// timedReadGrows reports whether a timed read of one, through a reader
// with datagrams waiting, asks for two next in one try of twenty: it takes
// well under readWaited unless the machine preempts it.
func timedReadGrows(e *Engine) bool {
	for range 20 {
		e.rsize = 1
		e.read()
		if e.rsize == 2 {
			return true
		}
	}
	return false
}

// TestReadBuffersFollowReads: an engine takes read buffers (64 KiB each)
// as its reads first need them, not readBatch of them at the start. Reads
// of one, as in a request-reply exchange, keep the smallest batch's worth
// the first read took; reads that fill their batch take more as the batch
// doubles.
func TestReadBuffersFollowReads(t *testing.T) {
	wr := &waitReader{queueReader{waiting: 1}, true, true}
	e := &Engine{rd: wr, wr: wr, rmsgs: make([]udpio.Message, readBatch), rsize: minReadBatch}
	for range 100 {
		if _, err := e.read(); err != nil {
			t.Fatal(err)
		}
	}
	if e.nbufs != minReadBatch {
		t.Errorf("after 100 reads of one: %d buffers, want %d", e.nbufs, minReadBatch)
	}
	wr.waiting, wr.waited = readBatch, false // a burst: reads find datagrams waiting
	for range 10 {
		e.read()
	}
	if e.nbufs != readBatch {
		t.Errorf("after full reads: %d buffers, want %d", e.nbufs, readBatch)
	}
	for i, m := range e.rmsgs {
		if len(m.Buf) != udpio.BufferSize {
			t.Fatalf("buffer %d has %d bytes", i, len(m.Buf))
		}
	}
}

// TestCloseReturnsReadBuffers: once an engine that read the socket has
// closed, it holds none of the pool's buffers.
func TestCloseReturnsReadBuffers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, sc := pair(t, ctx)
	warm(t, ctx, c, sc)
	for _, e := range []*Engine{c.e, sc.e} {
		e.Close() // every goroutine of the engine has returned
		if e.nbufs != 0 {
			t.Errorf("after Close: %d read buffers held", e.nbufs)
		}
		for i, m := range e.rmsgs {
			if m.Buf != nil {
				t.Errorf("after Close: buffer %d still held", i)
			}
		}
	}
}

// waitReader is a queueReader that says whether each read waited (a
// WaitReporter, as the UDP socket on Linux is), with no delay to time.
type waitReader struct {
	queueReader
	waited, known bool
}

func (w *waitReader) ReadWaited() (bool, bool) { return w.waited, w.known }

// TestReadSizeReported: with a WaitReporter, a read of one datagram asks
// for two next only if the reader says it and the read before it did not
// wait; the clock is not read. A reader that cannot tell counts as one
// that waited.
func TestReadSizeReported(t *testing.T) {
	const (
		w = true  // waited
		f = false // found its datagram waiting
	)
	tests := []struct {
		waits []bool // what the reader says of each read, in order
		known bool
		want  int // what the read after the last asks for
	}{
		{[]bool{w}, true, 1},
		{[]bool{f}, true, 1},
		{[]bool{f, f}, true, 2},
		{[]bool{f, w, f}, true, 1},
		{[]bool{f, w, f, f}, true, 2},
		{[]bool{f, f}, false, 1},
	}
	for _, tt := range tests {
		wr := &waitReader{queueReader{waiting: 5}, false, tt.known}
		// No clock: reading it would panic.
		e := &Engine{rd: wr, wr: wr, rmsgs: make([]udpio.Message, readBatch), rsize: 1}
		for _, waited := range tt.waits {
			wr.waited = waited
			if e.rsize != 1 {
				t.Fatalf("reads %v (known %v): asked for %d before the last", tt.waits, tt.known, e.rsize)
			}
			if _, err := e.read(); err != nil {
				t.Fatal(err)
			}
			if !tt.known {
				break // the rest are timed, as checked below
			}
		}
		if e.rsize != tt.want {
			t.Errorf("reads of one, reader says waited %v (known %v): next asks for %d, want %d", tt.waits, tt.known, e.rsize, tt.want)
		}
	}
	// A reader that cannot tell: its later reads of one are timed, and
	// one that found its datagram waiting asks for two.
	wr := &waitReader{queueReader{waiting: 5}, false, false}
	e := &Engine{clk: clock.NewReal(), rd: wr, wr: wr, rmsgs: make([]udpio.Message, readBatch), rsize: 1}
	e.read()
	if !e.waitsUnknown || e.rsize != 1 {
		t.Fatalf("first read through a reader that cannot tell: waitsUnknown %v, next asks for %d; want true, 1", e.waitsUnknown, e.rsize)
	}
	if !timedReadGrows(e) {
		t.Error("timed reads of one that found 5 datagrams waiting never asked for two")
	}
}

// A Receive woken by an input that brings more than streamInput
// messages, a stream's, writes that input's acks before it returns the
// first: left for its next read, or held for a reply (N75), they waited
// until the application had taken every message of the input, and the
// sender's window waited with them (N98).
func TestStreamAcksWrittenAtOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, sc := pair(t, ctx)
	warm(t, ctx, c, sc)
	// Bundles negotiated and MTU estimation over on both sides, so that
	// the messages below leave in one datagram, offload or not.
	for _, x := range []*Conn{c, sc} {
		waitFor(t, x.e, "bundling, MTU estimated", func() bool {
			st, ok := x.e.ep.Stats(x.h)
			return x.e.ep.Bundling(x.h) && ok && !st.MTUSearching && st.MTUEstimations > 0
		})
	}
	const k = 4 * streamInput
	got := make(chan error, 1)
	go func() {
		_, err := c.Receive(ctx)
		got <- err
	}()
	waitFor(t, c.e, "reading", func() bool { return c.e.reading == c })
	c.e.mu.Lock()
	before := c.e.delivered
	c.e.mu.Unlock()
	// k messages polled together, into one bundle.
	se := sc.e
	se.mu.Lock()
	for i := range k {
		if err := se.ep.Send(se.clk.Now(), sc.h, 0, []byte(fmt.Sprint("stream ", i)), true); err != nil {
			se.mu.Unlock()
			t.Fatal(err)
		}
	}
	se.flushLocked()
	se.unlock()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	e := c.e
	e.mu.Lock()
	delivered := e.delivered - before
	held, pending, unwritten := e.held, e.pending, len(e.out) > 0 && !e.writing
	e.mu.Unlock()
	switch {
	case delivered <= streamInput:
		t.Fatalf("the Receive returned after an input of %d messages, want all %d in one", delivered, k)
	case held || pending > 0 || unwritten:
		t.Errorf("after an input of %d messages: held %v, %d datagrams left for the next read, unwritten %v", delivered, held, pending, unwritten)
	}
	for range k - 1 {
		if _, err := c.Receive(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
