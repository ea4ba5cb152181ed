package driver

import (
	"context"
	"errors"
	"net"
	"slices"
	"time"

	"github.com/fastnet-engine/fastnet/fastnet"
)

// Listener is a server: Accept returns its new connections.
type Listener struct {
	e    *Engine
	addr net.Addr

	// Guarded by e.mu.
	queue []*Conn // the backlog: established, not yet accepted (N47)
	// queued is the bytes the backlog's connections hold for Receive
	// together (their queueBytes), which one Options.ReceiveQueue bounds
	// (N152).
	queued int
	notify chan struct{}
	closed bool
	// closing is why the listener closes (CloseWithReason): the reason
	// given to the clients that ask to connect while the connections it
	// had linger (N144).
	closing error
	refused uint64 // Stats.BacklogRefused
	ended   uint64 // Stats.BacklogEnded
}

// ErrListenerClosed is what Accept returns once the listener is closed. It
// matches both fastnet.ErrClosed and net.ErrClosed with errors.Is.
var ErrListenerClosed error = listenerClosedError{}

type listenerClosedError struct{}

func (listenerClosedError) Error() string { return "fastnet: listener closed" }

// Is reports whether target is fastnet.ErrClosed or net.ErrClosed.
func (listenerClosedError) Is(target error) bool {
	return target == fastnet.ErrClosed || target == net.ErrClosed
}

// NewListener makes the engine, a server, hand its connections to a
// Listener.
func (e *Engine) NewListener(addr net.Addr) *Listener {
	l := &Listener{e: e, addr: addr, notify: make(chan struct{})}
	e.listener = l
	return l
}

// admitLocked is asked, through the endpoint's accept hook, whether a
// new client may be let in: not while the backlog is full (N47), nor once
// the listener is closing (N144): it would be accepted by nobody, and
// ended without a word when the engine shuts down.
func (e *Engine) admitLocked() error {
	l := e.listener
	switch {
	case l == nil:
	case l.closing != nil:
		return l.closing
	case len(l.queue) >= e.opts.Backlog:
		l.refused++
		return errServerBusy
	}
	return nil
}

// pushLocked adds c to the backlog, unless it is full (N47).
func (l *Listener) pushLocked(c *Conn) bool {
	if len(l.queue) >= l.e.opts.Backlog {
		l.refused++
		return false
	}
	c.backlogged = true
	l.queue = append(l.queue, c)
	close(l.notify)
	l.notify = make(chan struct{})
	return true
}

// removeLocked takes c, which has ended, out of the backlog, and drops
// the messages it held for Receive (N47): nobody will ever read them.
func (l *Listener) removeLocked(c *Conn) {
	c.backlogged = false
	if i := slices.Index(l.queue, c); i >= 0 {
		l.queue = slices.Delete(l.queue, i, i+1)
	}
	l.ended++
	l.queued -= c.queueBytes
	c.queue.Reset(0)
	c.queueBytes = 0
	l.resumeLocked()
}

// takeLocked takes the connection at the head of the backlog for Accept.
// It leaves the backlog's shared queue (N152) for its own ReceiveQueue:
// its intake resumes if its queue is within half of that, and the
// backlog's other connections' if what they hold together now is.
func (l *Listener) takeLocked() *Conn {
	c := l.queue[0]
	c.backlogged = false
	l.queue[0] = nil
	l.queue = l.queue[1:]
	l.queued -= c.queueBytes
	if c.paused && c.queueBytes <= l.e.opts.ReceiveQueue/2 {
		c.pauseLocked(false)
	}
	l.resumeLocked()
	return c
}

// resumeLocked resumes the intake of the backlog's paused connections
// once what they hold together is within half of a ReceiveQueue.
func (l *Listener) resumeLocked() {
	if l.queued > l.e.opts.ReceiveQueue/2 {
		return
	}
	for _, c := range l.queue {
		if c.paused {
			c.pauseLocked(false)
		}
	}
}

func (l *Listener) closeLocked() {
	if !l.closed {
		l.closed = true
		close(l.notify)
		l.notify = make(chan struct{})
	}
}

// Accept returns the next established connection, blocking until one
// arrives, the listener is closed (ErrListenerClosed, which matches
// fastnet.ErrClosed and net.ErrClosed) or ctx is done. A connection that
// ended before Accept could take it is never returned (N47).
func (l *Listener) Accept(ctx context.Context) (*Conn, error) {
	e := l.e
	for {
		e.mu.Lock()
		if len(l.queue) > 0 {
			c := l.takeLocked()
			e.mu.Unlock()
			return c, nil
		}
		if l.closed {
			e.mu.Unlock()
			return nil, ErrListenerClosed
		}
		wait := l.notify
		e.needInputLocked() // new connections
		e.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Addr returns the address the listener serves on.
func (l *Listener) Addr() net.Addr { return l.addr }

// Close stops accepting, closes every connection gracefully (each gets the
// configured linger to deliver what it sent), then closes the socket. Every
// goroutine of the listener has returned when Close returns.
func (l *Listener) Close() error { return l.CloseWithReason("server shutting down") }

// CloseWithReason is Close with the reason the clients receive.
func (l *Listener) CloseWithReason(reason string) error {
	e := l.e
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return e.Close()
	}
	l.closeLocked()
	why := reason
	if why == "" {
		why = "listener closed"
	}
	l.closing = errors.New(why)
	var waits []<-chan struct{}
	for _, c := range e.conns {
		waits = append(waits, c.done)
	}
	// Every connection closes, those still proving their address too,
	// which the listener has not heard of (N68).
	e.ep.CloseAll(e.clk.Now(), reason)
	e.flushLocked()
	e.needInputLocked() // the acks of what lingers
	e.unlock()
	limit := time.After(e.cfg.Linger + time.Second)
	for _, w := range waits {
		select {
		case <-w:
		case <-limit:
		}
	}
	return e.Close()
}

// NumConns returns the number of connections, established or closing.
func (l *Listener) NumConns() int {
	l.e.mu.Lock()
	defer l.e.mu.Unlock()
	return len(l.e.conns)
}

// ValidationStats returns what the server's address validation did: the
// connections validated, expired, evicted and refused, and the bytes
// withheld from addresses not yet validated (D25, N33).
func (l *Listener) ValidationStats() fastnet.ValidationStats {
	l.e.mu.Lock()
	defer l.e.mu.Unlock()
	return l.e.ep.ValidationStats()
}

// EndpointStats returns the counters of the endpoint that belong to no
// one connection, such as MTU estimations waiting for their turn (N53).
func (l *Listener) EndpointStats() fastnet.EndpointStats {
	l.e.mu.Lock()
	defer l.e.mu.Unlock()
	return l.e.ep.EndpointStats()
}

// Endpoint gives f the endpoint under the engine's lock, for tools that
// need more than the API offers (endpoint-wide drop counters, say).
func (e *Engine) Endpoint(f func(ep *fastnet.Endpoint)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	f(e.ep)
}

// Metrics is a snapshot of a listener's figures, for monitoring: the
// counters only grow, the gauges (Conns, Backlog, ...) are current. It
// marshals to JSON as it is, so publishing it is one line:
//
//	expvar.Publish("fastnet", expvar.Func(func() any { return l.Metrics() }))
type Metrics struct {
	Conns      int                     // connections, established or closing
	Endpoint   fastnet.EndpointStats   // the endpoint's totals and limits
	Validation fastnet.ValidationStats // address validation (D25)
	Driver     Stats                   // the driver's own counters
}

// Metrics returns a snapshot of the listener's figures.
func (l *Listener) Metrics() Metrics {
	return Metrics{
		Conns:      l.NumConns(),
		Endpoint:   l.EndpointStats(),
		Validation: l.ValidationStats(),
		Driver:     l.DriverStats(),
	}
}
