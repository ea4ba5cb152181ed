package driver

import (
	"context"
	"errors"
	"net/netip"
	"runtime"
	"sync/atomic"
	"unsafe"

	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/internal/fifo"
)

// Message is one message received on a connection.
type Message struct {
	Channel  int    // the channel it came on, 0..32767
	Reliable bool   // it was sent reliably: delivered once, in its channel's order
	Data     []byte // the receiver's to keep; small ones share 4 KiB blocks (fastnet.Event)
}

// Conn is one Fastnet connection. Its methods are safe for concurrent use.
type Conn struct {
	e           *Engine
	h           fastnet.Handle
	id          uint32
	remote      netip.AddrPort
	established bool
	owner       bool // a dialed connection owns its engine
	backlogged  bool // in its listener's backlog, not yet accepted (e.mu)

	// Guarded by e.mu.
	queue      fifo.Queue[Message]
	queueBytes int
	dropped    uint64          // unreliable messages dropped unread
	paused     bool            // intake paused: the queue is full (N13)
	pauses     uint64          // how often it was
	notify     chan struct{}   // closed and replaced on any change
	waited     bool            // a goroutine may be waiting on notify
	wake       bool            // in the engine's wakes
	err        error           // set once the connection has ended
	done       chan struct{}   // closed once the connection has ended
	watched    context.Context // the context that interrupts reads for c
	unwatch    func() bool     // stops watching it
	// streamReads counts its Receive calls in readStream: the role may
	// pass from one to the next before the first has left.
	streamReads int
	readDone    func() bool // news.Load, for StreamReader.ReadFor
	// news is set to readDoneLocked when a Receive starts reading its
	// stream, and then whenever c is signalled (signalLocked): while a
	// Receive reads the stream it is true whenever readDoneLocked is,
	// and it is read without e.mu.
	news      atomic.Bool
	final     *fastnet.Stats  // the statistics it ended with
	quality   fastnet.Quality // the last quality report
	sendDrops uint64          // unreliable messages TrySend dropped
}

// ID returns the Fastnet connection ID, the same on both sides.
func (c *Conn) ID() uint32 { return c.id }

// RemoteAddr returns the peer's address.
func (c *Conn) RemoteAddr() netip.AddrPort { return c.remote }

// Done is closed when the connection has ended.
func (c *Conn) Done() <-chan struct{} { return c.done }

// signalLocked wakes every goroutine waiting on the connection. With
// Options.CombineWrites the wake-up waits for the engine's unlock, after
// the datagrams queued with it are written (see Engine.unlock).
func (c *Conn) signalLocked() {
	if c.streamReads > 0 {
		c.news.Store(true) // read by the Receive reading the stream
	}
	// If its Receive is reading the socket or stream for it (Reader,
	// StreamReader), news from elsewhere (a timeout, a close) must end
	// that read.
	c.interruptLocked()
	if !c.waited {
		return
	}
	if c.e.opts.CombineWrites && !c.wake {
		c.wake = true
		c.e.wakes = append(c.e.wakes, c)
		return
	}
	c.wakeLocked()
}

// wakeLocked wakes the goroutines waiting on the connection now.
func (c *Conn) wakeLocked() {
	c.wake = false
	if !c.waited {
		return
	}
	c.waited = false
	close(c.notify)
	c.notify = make(chan struct{})
}

// waitLocked returns the channel closed by the next signal.
func (c *Conn) waitLocked() <-chan struct{} {
	c.waited = true
	return c.notify
}

// endLocked records the end of the connection.
func (c *Conn) endLocked(err error, local bool) {
	if c.err != nil {
		return
	}
	// A connection that was never established failed to connect: its
	// error is the dial's, as it is (a transport closed before the
	// handshake completed too, N144), not a *CloseError.
	if c.established && !errors.Is(err, fastnet.ErrRefused) && !errors.Is(err, fastnet.ErrIncompatible) {
		err = &CloseError{Local: local, Err: err, Net: c.e.opts.Network, Addr: c.remote}
	}
	if c.paused && c.e.pauser != nil {
		// Resumed as it ends (N144): nothing else would, and a
		// transport that pauses one stream for several connections
		// (urpdriver's relay connection) stayed paused for good.
		c.paused = false
		c.e.pauser.PauseRead(c.remote, false)
	}
	c.err = err
	if c.unwatch != nil {
		c.unwatch()
		c.watched, c.unwatch = nil, nil
	}
	delete(c.e.conns, c.h)
	if c.e.lastConn == c {
		c.e.lastConn = nil
	}
	if c.e.byAddr[c.remote] == c {
		delete(c.e.byAddr, c.remote)
	}
	if c.backlogged {
		c.e.listener.removeLocked(c)
	}
	close(c.done)
	c.signalLocked()
	if c.e.ender != nil {
		c.e.ender.Ended(c.remote)
	}
	if c.owner && c.established && !c.e.closed {
		// A dialed connection's engine serves it alone: it shuts down
		// once the connection has ended, however it ended, rather than
		// holding its socket and goroutines until Close (N142). What
		// the endpoint still has to send (an answer to the peer's
		// "disconnect") goes out first (Engine.Close); messages that
		// arrived before the end stay in the queue for Receive. Not
		// from here: the engine's lock is held, and Close waits for
		// the goroutine that may be calling.
		go c.e.Close()
	}
}

// messagePlace is what a message's place in a connection's receive queue
// costs beside its data: a Message.
const messagePlace = int(unsafe.Sizeof(Message{}))

// queueCharge is what a message of data takes from Options.ReceiveQueue:
// its bytes and its place in the queue, so that empty or tiny messages,
// which a peer may send by the million, fill the queue too (N107).
func queueCharge(data []byte) int { return len(data) + messagePlace }

// deliverLocked queues a message for Receive. When the queue reaches
// Options.ReceiveQueue bytes the connection's intake pauses (N13): the
// endpoint drops its message packets unacked, or the stream is no longer
// read, until Receive has taken half the queue. Reliable messages the
// endpoint already delivered are queued all the same (they were acked);
// an unreliable one that does not fit is dropped.
func (c *Conn) deliverLocked(ev *fastnet.Event) {
	limit := c.e.opts.ReceiveQueue
	if c.backlogged {
		// What the backlog's other connections hold counts too: they
		// share one ReceiveQueue (N152).
		limit -= c.e.listener.queued - c.queueBytes
	}
	if !ev.Reliable && c.queueBytes+queueCharge(ev.Data) > limit && c.queue.Len() > 0 {
		c.dropped++
		c.pauseLocked(true)
		return
	}
	c.queue.Push(Message{Channel: ev.Channel, Reliable: ev.Reliable, Data: ev.Data})
	c.queueBytes += queueCharge(ev.Data)
	if c.backlogged {
		c.e.listener.queued += queueCharge(ev.Data)
	}
	c.e.delivered++
	if c.queueBytes >= limit {
		c.pauseLocked(true)
	}
	c.signalLocked()
}

// pauseLocked pauses or resumes the intake of c's messages (N13): a
// transport that reads a stream per peer stops reading it (Pauser); on
// datagrams the endpoint drops them unacked, and the peer resends.
func (c *Conn) pauseLocked(paused bool) {
	if c.paused == paused || c.err != nil {
		return
	}
	c.paused = paused
	if paused {
		c.pauses++
	}
	if c.e.pauser != nil {
		c.e.pauser.PauseRead(c.remote, paused)
		return
	}
	c.e.ep.SetReceivePaused(c.h, paused)
}

// Send sends msg on channel (0..32767), reliably or not. It blocks while the
// connection's send queue is full, until ctx is done. The message is copied
// before Send returns. Errors: fastnet.ErrBadChannel,
// fastnet.ErrMessageTooLarge, the *CloseError of a connection that has
// ended, or ctx.Err().
func (c *Conn) Send(ctx context.Context, channel int, msg []byte, reliable bool) error {
	_, err := c.send(ctx, channel, msg, reliable, false, true)
	return err
}

// TrySend is Send that never blocks: when the send queue has no room it
// returns fastnet.ErrQueueFull at once. An unreliable message refused so
// is dropped and counted (Conn.SendsDropped, DriverStats.SendsDropped):
// the way to send a state update only if there is room for it, a newer
// one following anyway.
func (c *Conn) TrySend(channel int, msg []byte, reliable bool) error {
	_, err := c.send(context.Background(), channel, msg, reliable, false, false)
	return err
}

// SendTracked is Send for a message whose outcome the application wants to
// know: the Receipt's Done is closed once the peer acknowledged a reliable
// message (fastnet.OutcomeAcked) or the connection ended before it did
// (OutcomeLost), or once an unreliable one left in a datagram
// (OutcomeSent) or was dropped before it could (OutcomeDropped). Every
// message sent with SendTracked gets exactly one outcome (N55); messages
// sent with Send cost nothing of this.
func (c *Conn) SendTracked(ctx context.Context, channel int, msg []byte, reliable bool) (*Receipt, error) {
	return c.send(ctx, channel, msg, reliable, true, true)
}

func (c *Conn) send(ctx context.Context, channel int, msg []byte, reliable, tracked, block bool) (*Receipt, error) {
	e := c.e
	for {
		e.mu.Lock()
		if c.err != nil {
			err := c.err
			e.mu.Unlock()
			return nil, err
		}
		var err error
		var now clock.Time
		var read bool
		var id fastnet.MessageID
		if e.bp != nil && e.bp.Blocked(c.remote) {
			err = fastnet.ErrQueueFull
		} else {
			now, read = e.sendTimeLocked(reliable)
			if tracked {
				id, err = e.ep.SendTracked(now, c.h, channel, msg, reliable)
			} else {
				err = e.ep.Send(now, c.h, channel, msg, reliable)
			}
		}
		if err == nil {
			var r *Receipt
			if tracked {
				r = &Receipt{id: id, reliable: reliable, done: make(chan struct{})}
				if e.receipts == nil {
					e.receipts = make(map[fastnet.MessageID]*Receipt)
				}
				e.receipts[id] = r
			}
			yield := e.sentLocked(now, read)
			e.unlock()
			if yield {
				// The goroutines this burst woke (the timer goroutine
				// that writes it, a reader with acks waiting for the
				// lock) wait behind this one on its processor until it
				// blocks or is preempted: let them run.
				runtime.Gosched()
			}
			return r, nil
		}
		if !errors.Is(err, fastnet.ErrQueueFull) {
			e.mu.Unlock()
			if errors.Is(err, fastnet.ErrClosed) {
				return nil, &CloseError{Local: true, Err: err, Net: e.opts.Network, Addr: c.remote}
			}
			return nil, err
		}
		if !block {
			if !reliable {
				c.sendDrops++
				e.sendsDropped++
			}
			e.mu.Unlock()
			return nil, err
		}
		wait := c.waitLocked()
		e.needInputLocked() // the acks that make room
		e.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// SendsDropped returns how many unreliable messages TrySend dropped on
// this connection because the send queue had no room.
func (c *Conn) SendsDropped() uint64 {
	c.e.mu.Lock()
	defer c.e.mu.Unlock()
	return c.sendDrops
}

// Quality returns the connection's last quality report (round-trip time,
// loss, rates, MTU over the last fastnet.Config.QualityInterval; N57), or
// the zero Quality if reports are off (the default) or none came yet.
func (c *Conn) Quality() fastnet.Quality {
	c.e.mu.Lock()
	defer c.e.mu.Unlock()
	return c.quality
}

// Receive returns the next message, blocking until one arrives, the
// connection ends (its *CloseError, once every message that arrived before
// was received), or ctx is done.
func (c *Conn) Receive(ctx context.Context) (Message, error) {
	e := c.e
	e.mu.Lock()
	for {
		if m, ok := c.queue.Take(); ok {
			c.queueBytes -= queueCharge(m.Data)
			if c.paused && c.queueBytes <= e.opts.ReceiveQueue/2 {
				c.pauseLocked(false)
			}
			e.answered = true
			e.mu.Unlock()
			return m, nil
		}
		if c.err != nil {
			err := c.err
			e.mu.Unlock()
			return Message{}, err
		}
		if e.token != nil {
			// The read role is usually free (the previous Receive
			// left it): take it without registering to wait.
			select {
			case <-e.token:
				e.role = roleReceive
				if ctx.Done() != nil {
					c.watchLocked(ctx)
				}
				e.mu.Unlock()
				if err := c.readFor(ctx, true); err != nil {
					return Message{}, err
				}
				e.mu.Lock()
				continue
			default:
			}
		}
		if e.sr != nil {
			if r, ok := e.sr.TakeRole(c.remote); ok {
				// The same for a stream's role.
				if err := c.readStreamLocked(ctx, r); err != nil {
					e.mu.Unlock()
					return Message{}, err
				}
				continue
			}
		}
		// Wait for a message, or for the read role (see Reader and
		// StreamReader) to read the socket or stream here.
		wait := c.waitLocked()
		var (
			token  <-chan struct{}
			stream StreamRole
		)
		switch {
		case e.token != nil:
			token = e.token
			e.receivers++
		case e.sr != nil:
			token, stream = e.sr.WaitRole(c.remote)
		}
		e.mu.Unlock()
		var err error
		took := false
		select {
		case <-wait:
		case <-token:
			took = true
		case <-ctx.Done():
			err = ctx.Err()
		}
		switch {
		case e.token != nil:
			e.mu.Lock()
			e.receivers--
			if took {
				e.role = roleReceive
			}
			e.mu.Unlock()
			if took {
				err = c.readFor(ctx, false)
			}
		case token != nil:
			e.sr.UnwaitRole(stream, took)
			if took {
				e.mu.Lock()
				err = c.readStreamLocked(ctx, stream)
				e.mu.Unlock()
			}
		}
		if err != nil {
			return Message{}, err
		}
		e.mu.Lock()
	}
}

// Stats returns the connection's statistics; once it has ended, the
// statistics it ended with.
func (c *Conn) Stats() fastnet.Stats {
	c.e.mu.Lock()
	defer c.e.mu.Unlock()
	if c.err != nil {
		if c.final != nil {
			return *c.final
		}
		return fastnet.Stats{}
	}
	s, ok := c.e.ep.Stats(c.h)
	if !ok {
		return s
	}
	return *c.e.pathed(&s)
}

// DroppedUnread returns how many unreliable messages were dropped because
// the receive queue was full.
func (c *Conn) DroppedUnread() uint64 {
	c.e.mu.Lock()
	defer c.e.mu.Unlock()
	return c.dropped
}

// Queued returns the bytes of the messages waiting for Receive, with
// what each one's place in the queue costs (Options.ReceiveQueue).
func (c *Conn) Queued() int {
	c.e.mu.Lock()
	defer c.e.mu.Unlock()
	return c.queueBytes
}

// Pauses returns how many times the connection's intake paused because
// Receive fell ReceiveQueue bytes behind (N13).
func (c *Conn) Pauses() uint64 {
	c.e.mu.Lock()
	defer c.e.mu.Unlock()
	return c.pauses
}

// Close closes the connection gracefully (D18): messages already sent get
// up to the configured linger (fastnet.Config.Linger) to be acknowledged,
// then the peer is told. It returns when the connection has ended: nil
// if everything sent was acknowledged or the connection had already ended,
// and an error matching fastnet.ErrLingerExpired if the linger ran out with
// data unacknowledged, which the peer may then never have.
func (c *Conn) Close() error { return c.CloseWithReason("") }

// CloseWithReason is Close with a reason the peer receives.
func (c *Conn) CloseWithReason(reason string) error {
	e := c.e
	e.mu.Lock()
	if c.err == nil {
		e.ep.Close(e.clk.Now(), c.h, reason)
		e.flushLocked()
		// A Send blocked on a full queue returns now: the endpoint
		// refuses new messages on a closing connection.
		if c.err == nil {
			c.signalLocked()
		}
		e.needInputLocked() // the acks of what lingers
	}
	e.unlock()
	<-c.done
	var err error
	if errors.Is(c.err, fastnet.ErrLingerExpired) {
		err = c.err
	}
	if c.owner {
		if cerr := e.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// Abort closes the connection at once, dropping what is unsent, and tells
// the peer reason.
func (c *Conn) Abort(reason string) error {
	e := c.e
	e.mu.Lock()
	if c.err == nil {
		e.ep.Abort(e.clk.Now(), c.h, reason)
		e.flushLocked()
		e.needInputLocked()
	}
	e.unlock()
	<-c.done
	if c.owner {
		return e.Close()
	}
	return nil
}

// Err returns why the connection ended, or nil while it is open.
func (c *Conn) Err() error {
	c.e.mu.Lock()
	defer c.e.mu.Unlock()
	return c.err
}

// Dial connects the engine, a client, to addr and waits for the handshake.
// The returned connection owns the engine: the engine closes when the
// connection ends, however it ends, or when it is closed (N142). On
// failure the engine is closed.
func (e *Engine) Dial(ctx context.Context, addr netip.AddrPort) (*Conn, error) {
	return e.dial(ctx, addr, true)
}

// dial connects to addr and waits for the handshake; a connection that
// owns the engine closes it when it fails or ends.
func (e *Engine) dial(ctx context.Context, addr netip.AddrPort, own bool) (*Conn, error) {
	closeOwn := func() {
		if own {
			e.Close()
		}
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, ErrListenerClosed
	}
	h, err := e.ep.Connect(e.clk.Now(), addr)
	if err != nil {
		e.mu.Unlock()
		closeOwn()
		return nil, err
	}
	c := e.newConnLocked(h, addr)
	c.owner = own
	if e.gone[addr] {
		// Its transport connection closed already (N145).
		delete(e.gone, addr)
		e.ep.HandleTransportClosed(e.clk.Now(), addr)
	}
	e.flushLocked()
	e.unlock()
	for {
		e.mu.Lock()
		wait := c.waitLocked()
		est, cerr := c.established, c.err
		e.needInputLocked() // the handshake's answer
		e.mu.Unlock()
		switch {
		case est:
			return c, nil
		case cerr != nil:
			closeOwn()
			return nil, cerr
		}
		select {
		case <-wait:
		case <-ctx.Done():
			if !own {
				c.Abort("dial cancelled")
			}
			closeOwn()
			return nil, ctx.Err()
		}
	}
}
