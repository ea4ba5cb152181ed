package driver

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"syscall"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/datagram"
	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/internal/udpio"
)

// A Reader is a transport whose datagrams all arrive on one socket that any
// goroutine may read (UDP). The engine then reads it itself, holding a read
// role that one goroutine has at a time:
//
//   - A goroutine waiting in Conn.Receive takes the role when it is free and
//     reads the socket itself until its own message arrives. An echo or a
//     request and its reply then cost no goroutine hand-off at all: the
//     goroutine that waits is the one the kernel wakes, as with a plain
//     socket read.
//   - Otherwise a background goroutine reads: when something other than
//     Receive waits for input (Dial, Accept, a Send on a full queue, a
//     graceful close), or when the role has been left free for idleDelay.
//     It gives the role to a waiting Receive after each batch it reads.
//
// Datagrams polled by a Receive about to return (its acks) are not written
// at once: the next Send carries them in its batched write (an echo's acks
// and its reply leave in one system call), or the next read before it
// blocks, or the timer goroutine after idleDelay. Those of an input that
// brought more than streamInput messages, a stream's, are written before
// the Receive returns (N98), and a large input has them written every
// answerBytes as it is handled (N100).
type Reader interface {
	// ReadBatch blocks until at least one datagram arrives and reads as
	// many as are waiting into msgs, as the UDP driver's batched socket reads do.
	ReadBatch(msgs []datagram.Message) (int, error)
	// SetReadDeadline sets the deadline of pending and future reads; a
	// time in the past unblocks a pending read, the zero time removes it.
	SetReadDeadline(t time.Time) error
}

// A WaitReporter is a Reader that can say whether its last read had to
// wait for its datagram (as the UDP driver's socket can), which spares the engine
// reading the clock around each read of one.
type WaitReporter interface {
	ReadWaited() (waited, known bool)
}

// An InputWaiter is a transport that can say whether input waits to be
// read, as the UDP driver's socket and the TCP driver's streams can: a
// deadline that comes overdue (the process was held up) is then put off
// while any does, within a bound, so that the heartbeats and acks that
// arrived meanwhile count before it (N129). known is false where it
// cannot tell. InputWaiting is called with the engine's lock held and
// must not call the engine.
type InputWaiter interface {
	InputWaiting() (waiting, known bool)
}

// StreamRole is the stream whose read role a StreamReader's TakeRole or
// WaitRole dealt with, the transport's own value, handed back to
// UnwaitRole and ReadFor: they act on that stream even if another one
// from the same address replaced it meanwhile (N110).
type StreamRole any

// A StreamReader is a transport with a stream per peer (TCP) that lets the
// goroutine waiting in Conn.Receive read its connection's stream itself,
// as the engine does with a Reader: each stream has a read role that one
// goroutine holds at a time, the transport's own reader when no Receive
// waits. Its methods may be called with the engine's lock held, except
// ReadFor, and must not call the engine then. A peer's packets reach the
// engine (Engine.Input, InputEstablished) only from the holder of its
// stream's role: the engine does not interrupt a Receive's ReadFor for
// the packets that ReadFor hands it itself (N104).
type StreamReader interface {
	// WaitRole registers a Receive waiting for the read role of addr's
	// stream and returns the channel a value of which gives the role, and
	// the stream, or a nil channel if Receive is not to read the stream
	// (it is ending or failed).
	WaitRole(addr netip.AddrPort) (<-chan struct{}, StreamRole)
	// TakeRole takes the read role of addr's stream for a Receive if it
	// is free now, without waiting or registering, and reports whether
	// it did, with the stream. The Receive then calls ReadFor.
	TakeRole(addr netip.AddrPort) (StreamRole, bool)
	// UnwaitRole undoes WaitRole for stream r; took says the role was
	// received.
	UnwaitRole(r StreamRole, took bool)
	// ReadFor reads stream r for a Receive holding its role, feeding its
	// packets to the engine, until done reports true, the stream ends,
	// fails or pauses, or ctx is done; then it gives the role up. It
	// returns ctx.Err() if ctx ended it.
	ReadFor(ctx context.Context, r StreamRole, done func() bool) error
	// Interrupt makes ReadFor ask done again, ending the read it is
	// blocked in if there is one.
	Interrupt(addr netip.AddrPort)
}

const (
	// maxIdleDelay bounds two waits, counted from the last time a Receive
	// left the role: how long the socket may go unread while nobody waits
	// for input before the background goroutine reads it again (the acks
	// and pings of an application busy between two Receive calls wait no
	// longer), and how long the datagrams polled by a returning Receive
	// may wait for a Send or a read to write them. The engine uses the
	// smaller of it and MinResendRTT/2, a quarter of the first resend
	// interval (D14), so that a delayed ack never causes a resend.
	//
	// It is not shorter because every move of a timer that makes it the
	// next one due wakes the runtime's network poller or another thread:
	// at 1 ms the idle timer cost W1 about 15 % of its round trip on
	// loopback, at 5 ms with IdleTimer's rule nothing measurable (N26).
	maxIdleDelay = 5 * time.Millisecond
	// minIdleDelay keeps a tiny MinResendRTT from spinning the timer.
	minIdleDelay = 100 * time.Microsecond
	// readBatch is how many datagrams one read may take, and
	// minReadBatch how many it asks for at least: a batched read costs
	// user-space work for every datagram it could take (a latency-bound
	// exchange takes one or two), so the batch follows the traffic.
	readBatch    = 64
	minReadBatch = 8
	// readWaited is how long a read of one datagram takes at least when
	// it waits for it: a context switch each way.
	readWaited = 5 * time.Microsecond
	// streamInput is how many messages an input that wakes a Receive
	// may bring and still have its acks wait for the application's reply
	// or next read (N75, N24); past it, they go at once (N98). Taking a
	// few messages costs the application little time; a datagram of
	// small messages, a hundred or more, costs it a millisecond.
	streamInput = 8
	// answerBytes is how many bytes of datagrams an input hands the
	// endpoint between two writes of what it has to send (N100): a
	// quarter of the default window (fastnet.DefaultMaxInFlight), about
	// 3,000 messages of 64 bytes, a millisecond of work at most. At 64
	// KiB W3 gained nothing and spent a system call for every 60
	// messages.
	answerBytes = 256 << 10
)

// readRole says who holds the read role.
type readRole uint8

const (
	roleFree       readRole = iota // nobody: the token is in Engine.token
	roleBackground                 // the background goroutine, readLoop
	roleReceive                    // a goroutine in Conn.Receive
)

// startReader sets the engine up to read rd itself. The background
// goroutine starts with the role.
func (e *Engine) startReader(rd Reader) {
	e.rd = rd
	e.wr, _ = rd.(WaitReporter)
	e.token = make(chan struct{}, 1)
	e.turn = make(chan struct{}, 1)
	e.role = roleBackground
	e.rmsgs = make([]datagram.Message, readBatch)
	e.rsize = minReadBatch
	e.Go(e.readLoop)
}

// readLoop is the background reader: it reads while it holds the role,
// hands the role over when a Receive waits for it, and waits for its turn
// (needInputLocked, idleDelay) to take it again.
func (e *Engine) readLoop() {
	defer func() {
		// The buffers are the role's: with the engine closed, no
		// Receive takes the role again.
		e.mu.Lock()
		for e.role == roleReceive {
			e.written.Wait()
		}
		for i := range e.nbufs {
			udpio.PutBuffer(e.rmsgs[i].Buf)
			e.rmsgs[i].Buf = nil
		}
		e.nbufs = 0
		e.mu.Unlock()
	}()
	for {
		if !e.readBackground() {
			return
		}
		e.releaseRole()
		select {
		case <-e.turn:
		case <-e.done:
			return
		}
		select {
		case <-e.token:
		case <-e.done:
			return
		}
		e.mu.Lock()
		e.role = roleBackground
		e.wanted = false
		e.mu.Unlock()
	}
}

// readBackground reads the socket until a Receive waits for the role
// (true) or the engine closes (false).
func (e *Engine) readBackground() bool {
	for {
		e.mu.Lock()
		closed, handOver := e.closed, e.receivers > 0
		e.mu.Unlock()
		switch {
		case closed:
			return false
		case handOver:
			return true
		}
		n, err := e.read()
		if n > 0 {
			e.InputBatch(e.rmsgs[:n])
		}
		if err != nil && errors.Is(err, net.ErrClosed) {
			return false
		}
		// Another error is an ICMP error surfaced by a read, or a
		// deadline a Receive set and cleared: go on.
		e.readError(err)
	}
}

// read reads a batch into rmsgs, for the role's holder, asking for twice
// as many datagrams after a read that filled its batch and half as many
// after one that took less than a quarter. A read of one datagram that
// came after a wait (a request and its reply, where a batch would only
// cost the work of its empty places) asks for one again: only the second
// of two in a row that found it already waiting, a sign that more wait,
// asks for two.
func (e *Engine) read() (int, error) {
	k := e.rsize
	var start clock.Time
	timed := k == 1 && (e.wr == nil || e.waitsUnknown)
	if timed {
		start = e.clk.Now()
	}
	for ; e.nbufs < k; e.nbufs++ {
		// Buffers are taken as reads first need them: an endpoint whose
		// reads stay small (request and reply) holds a few, not a
		// batch's worth (64 of 64 KiB).
		e.rmsgs[e.nbufs].Buf = udpio.GetBuffer()
	}
	n, err := e.rd.ReadBatch(e.rmsgs[:k])
	e.inHand.Store(n > 0) // until fed (feedLocked)
	switch {
	case k == 1:
		if n == 1 && !e.readWaited(start, timed) {
			// Its datagram was waiting. Twice in a row is the sign
			// that more wait; once is as often a reply that came
			// back before this goroutine returned to the socket.
			e.early++
			if e.early == 2 {
				e.rsize, e.early = 2, 0
			}
		} else {
			e.early = 0
		}
	case n == k:
		e.rsize = min(2*k, readBatch)
	case n == 1 && k <= minReadBatch:
		e.rsize = 1
	case n < k/4:
		e.rsize = max(k/2, minReadBatch)
	}
	return n, err
}

// readWaited reports whether a read of one datagram had to wait for it:
// as the reader says, or, if it cannot (a socket without udpio's own
// calls), as the clock does (readWaited since start, if the read was
// timed; the reader's first such read counts as a wait, and the later
// ones are timed).
func (e *Engine) readWaited(start clock.Time, timed bool) bool {
	if e.wr != nil && !e.waitsUnknown {
		if waited, known := e.wr.ReadWaited(); known {
			return waited
		}
		e.waitsUnknown = true
	}
	if !timed {
		return true
	}
	return e.clk.Now().Sub(start) >= readWaited
}

// releaseRole leaves the role free: a goroutine waiting for it (a Receive,
// or the background reader) takes it; if none, the timer hands it to the
// background reader after idleDelay.
func (e *Engine) releaseRole() {
	e.mu.Lock()
	e.endReadLocked()
	e.releaseRoleLocked(e.clk.Now())
	e.mu.Unlock()
	e.token <- struct{}{}
}

// releaseRoleLocked is releaseRole up to the unlock, after which the
// caller puts the token back.
func (e *Engine) releaseRoleLocked(now clock.Time) {
	e.role = roleFree
	e.freeSince = now
	if !e.closed {
		// Even with a Receive waiting: it may leave without the role,
		// its message having come in the batch just read.
		e.idle.Arm()
	}
	e.written.Broadcast() // readLoop may wait for the role to end at Close
}

// needInputLocked is called by a goroutine about to wait for something
// only input brings, other than its own message in Receive: the background
// reader takes the role if nobody reads.
func (e *Engine) needInputLocked() {
	if e.rd == nil || e.role == roleBackground || e.wanted {
		return
	}
	e.wanted = true
	select {
	case e.turn <- struct{}{}:
	default:
	}
}

// checkReadLocked runs when the idle timer fires: a role left free for
// idleDelay goes to the background reader. The datagrams a Receive left
// are written by the caller's unlock.
func (e *Engine) checkReadLocked(now clock.Time) {
	if e.rd == nil || e.role != roleFree || e.wanted {
		return
	}
	if left := e.freeSince.Add(e.idle.Delay()).Sub(now); left > 0 {
		e.idle.ArmIn(left)
		return
	}
	e.needInputLocked()
}

// readFor reads the socket for c's Receive, holding the role, until c has
// a message or has ended, the engine closes, or ctx is done; then it
// releases the role. It returns ctx.Err() if ctx ended the read. Unless
// watched says the caller did, it makes ctx interrupt the reads first.
func (c *Conn) readFor(ctx context.Context, watched bool) error {
	e := c.e
	if !watched && ctx.Done() != nil {
		e.mu.Lock()
		c.watchLocked(ctx)
		e.mu.Unlock()
	}
	var err error
	for {
		e.mu.Lock()
		e.endReadLocked()
		if c.readDoneLocked() {
			e.mu.Unlock()
			break
		}
		if err = ctx.Err(); err != nil {
			e.mu.Unlock()
			break
		}
		if e.unsent && !e.closed {
			// What a returning Receive left unpolled for a reply
			// that did not come (N75): out before the read blocks.
			e.flushLocked()
		}
		e.reading = c
		e.unlock() // writes what waits, before the read blocks
		n, rerr := e.read()
		if n > 0 && e.inputFor(c, e.rmsgs[:n]) {
			return nil // inputFor released the role
		}
		if rerr != nil && errors.Is(rerr, net.ErrClosed) {
			break
		}
		e.readError(rerr)
	}
	e.releaseRole()
	return err
}

// readDoneLocked reports whether a Receive reading for c has what it read
// for: a message, the end of c, or of the engine.
func (c *Conn) readDoneLocked() bool {
	return c.queue.Len() > 0 || c.err != nil || c.e.closed
}

// watchLocked makes ctx interrupt the reads made for c. The watch stays
// for the next Receive, which usually has the same context (an
// application's loop), until another context replaces it or c ends: a
// watch that fires for a later read only makes it read again.
func (c *Conn) watchLocked(ctx context.Context) {
	if c.watched == ctx {
		return
	}
	if c.unwatch != nil {
		c.unwatch()
	}
	e := c.e
	c.watched = ctx
	c.unwatch = context.AfterFunc(ctx, func() {
		e.mu.Lock()
		c.interruptLocked()
		e.mu.Unlock()
	})
}

// interruptLocked ends the read a Receive makes for c, if there is one:
// c has news that did not come from that read (a timeout, a close from
// another goroutine), or the Receive's context is done.
func (c *Conn) interruptLocked() {
	if c.e.reading == c {
		c.e.interruptReadLocked()
	} else if c.streamReads > 0 && c.remote != c.e.streamInput {
		// News that came from the stream itself was read by the
		// Receive holding its role, which asks done after each packet.
		c.e.sr.Interrupt(c.remote)
	}
}

// readStreamLocked reads c's stream r for its Receive, which holds the
// stream's read role (StreamReader), until c has a message or has ended,
// the engine closes, or ctx is done. It is called with e.mu held, and
// returns with it held again.
func (c *Conn) readStreamLocked(ctx context.Context, r StreamRole) error {
	e := c.e
	if ctx.Done() != nil {
		c.watchLocked(ctx)
	}
	c.streamReads++
	// Whatever makes readDoneLocked true signals c (signalLocked), which
	// sets news: ReadFor asks it after each packet without the lock.
	c.news.Store(c.readDoneLocked())
	if c.readDone == nil {
		c.readDone = c.news.Load
	}
	e.mu.Unlock()
	err := e.sr.ReadFor(ctx, r, c.readDone)
	e.mu.Lock()
	c.streamReads--
	return err
}

// endReadLocked follows a read of the role's holder: the deadline an
// interruption set is cleared before anyone reads again.
func (e *Engine) endReadLocked() {
	e.reading = nil
	if e.interrupted {
		e.interrupted = false
		e.rd.SetReadDeadline(time.Time{})
	}
}

// interruptReadLocked ends the pending read of a Receive holding the role:
// its connection has news that did not come from its own read (a timeout,
// a close from another goroutine), or its context is done.
func (e *Engine) interruptReadLocked() {
	if !e.interrupted {
		e.interrupted = true
		e.rd.SetReadDeadline(time.Unix(1, 0))
	}
}

// inputFor feeds datagrams c's Receive read. If c now has a message (or
// has ended), it releases the role and reports true, and the Receive
// returns at once: the datagrams polled are left for the next Send or
// read to write (idleDelay at the latest), unless the input brought more
// than streamInput messages, which are written before it returns (N98).
func (e *Engine) inputFor(c *Conn, msgs []datagram.Message) bool {
	e.mu.Lock()
	e.endReadLocked()
	if e.closed {
		e.mu.Unlock()
		return false
	}
	// The clock is read under the lock, never before it: another
	// goroutine may have fed the endpoint a later time meanwhile, and
	// the endpoint's time must not go backwards.
	now := e.clk.Now()
	delivered := e.delivered
	if now = e.feedLocked(msgs, now); e.closed {
		e.wakeLocked()
		e.mu.Unlock()
		return false // closed while a large input let the lock go (N100)
	}
	e.dispatchAllLocked()
	// An input that brought more than streamInput messages, to this
	// connection or others, is a stream's: its acks go out before the
	// Receive returns, rather than once the application has taken every
	// message and reads again (N98).
	stream := e.delivered-delivered > streamInput
	if !stream && c.queue.Len() > 0 && c.err == nil && e.opts.CombineWrites && e.ep.Bundling(c.h) {
		// The Receive returns a message from a peer that takes
		// bundles: what the endpoint has to send (the acks of that
		// message, first of all) stays unpolled, so that the reply the
		// application is about to send is polled with it and leaves
		// in the same datagram. The idle timer that releaseRoleLocked
		// arms polls it if no Send comes first (N75).
		e.unsent, e.held = true, true
		e.releaseRoleLocked(now)
		e.wakeLocked()
		e.mu.Unlock()
		e.token <- struct{}{}
		return true
	}
	e.fedFlushLocked(now)
	if c.queue.Len() == 0 && c.err == nil {
		e.unlock()
		return false
	}
	if len(e.out) > 0 && !e.writing && !stream {
		// Left for the next Send or read; the idle timer that
		// releaseRoleLocked arms bounds their wait: the timer
		// goroutine's unlock writes them.
		e.pending = len(e.out)
	}
	e.releaseRoleLocked(now)
	if stream {
		// The role goes back first (the token's channel has room for
		// it): another goroutine may read while this one writes, and
		// those waiting wake after the writes (N24).
		e.token <- struct{}{}
		e.unlock()
		return true
	}
	e.wakeLocked()
	e.mu.Unlock()
	e.token <- struct{}{}
	return true
}

// readError looks at an error of a read: the system's report that nothing
// listens at the peer's port (an ICMP port unreachable that a connected
// socket surfaces as ECONNREFUSED) fails the handshakes in progress (see
// Engine.Unreachable). Any other error is left to the next read.
func (e *Engine) readError(err error) {
	if err != nil && errors.Is(err, syscall.ECONNREFUSED) {
		e.Unreachable(err)
	}
}

// UnreachableError is the error of a Dial that the system reported
// unreachable before the server answered: nothing listens at that port
// (over UDP an ICMP port unreachable, over TCP a reset). It matches
// fastnet.ErrRefused, and unwraps to the system's error
// (syscall.ECONNREFUSED).
type UnreachableError struct {
	Err error
}

func (e *UnreachableError) Error() string {
	return "fastnet: connection refused: nothing listens there"
}

// Is reports whether target is fastnet.ErrRefused.
func (e *UnreachableError) Is(target error) bool { return target == fastnet.ErrRefused }

// Unwrap returns the system's error.
func (e *UnreachableError) Unwrap() error { return e.Err }

// Unreachable tells the engine that the system reported its peer
// unreachable (err): every connection still in its handshake fails with an
// *UnreachableError. An established connection ignores it: such a report
// can be forged, and the connection's own timers say whether the peer is
// still there (N65).
func (e *Engine) Unreachable(err error) {
	e.mu.Lock()
	now := e.clk.Now()
	var ended []*Conn
	for _, c := range e.conns {
		if !c.established && c.err == nil {
			ended = append(ended, c)
		}
	}
	for _, c := range ended {
		e.ep.Abort(now, c.h, "")
		c.endLocked(&UnreachableError{Err: err}, false)
	}
	if len(ended) > 0 {
		e.flushLocked()
	}
	e.unlock()
}
