// Package urpclient is a URP 1.0 user (package urp) over TCP, with the
// blocking, context-aware API of the project's drivers:
//
//	c, err := urpclient.Dial(ctx, "relay:7100", urpclient.Config{})
//	gid, err := c.Make(ctx)                      // host a group
//	err = c.Join(ctx, gid, password)             // or join one
//	err = c.Broadcast(ctx, 0, []byte("hello"))   // to the whole group
//	ev, err := c.Receive(ctx)                    // urp.GotText, GotJoined, ...
//
// Requests that the relay answers (Make, Join, Quit, Get, Set with
// urp.Respond) wait for their answer; the others return once the packet is
// queued. Every blocking method returns when its context is done. Methods
// may be called from any goroutine.
//
// Receive returns, in order, what the relay sent that is not an answer:
// messages (GotText), a host's members joining and leaving (GotJoined,
// GotLeft), notified settings (GotValue) and the user's return to
// CONNECTED when kicked or when its host left (GotRole).
//
// Memory is bounded both ways: Send, Broadcast and the other requests wait
// while Config.WriteQueue bytes are waiting to be written; when
// Config.ReceiveQueue bytes of events wait for Receive, the client stops
// reading the relay, whose own limit then closes this user if it goes on
// for long (U11). The U-numbers are the project's URP decisions, in
// docs/urp.md.
package urpclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"github.com/fastnet-engine/fastnet/internal/fifo"
	"github.com/fastnet-engine/fastnet/urp"
)

// Config configures a client. The zero value works.
type Config struct {
	// Client holds the protocol's limits (the longest message).
	Client urp.ClientConfig
	// ReceiveQueue bounds the bytes of events waiting for Receive, each
	// counting its data and its place in the queue (a ClientEvent), so that
	// empty messages and events without data fill it too (N107); the
	// relay's stream is not read while they reach it. Default 4 MiB.
	ReceiveQueue int
	// WriteQueue bounds the bytes waiting to be written to the relay:
	// requests wait while they exceed it. Default 4 MiB.
	WriteQueue int
	// OnWritten, if not nil, is called after each write to the relay,
	// from the writer goroutine, with no lock held: a transport that
	// queues with Queue learns that the queue shrank.
	OnWritten func()
}

const (
	defaultQueue = 4 << 20
	readBuffer   = 32 << 10
	// keepSpare is the largest write buffer the writer keeps for reuse:
	// a client has one connection, and a buffer that grew to carry a
	// burst saves allocating again for the next.
	keepSpare = 8 << 20
)

// Errors of the client. Test for them with errors.Is.
var (
	// ErrRefused: the relay answered a Make or Join with a failure (see
	// MadeError).
	ErrRefused = errors.New("urpclient: refused by the relay")
	// ErrLeft: a Get or Set was given up because the user left its group
	// before the relay handled it (U19).
	ErrLeft = errors.New("urpclient: no longer in the group")
	// ErrNoWelcome: Dial's error when the relay closed the connection
	// before its welcome, as a full relay does (U13).
	ErrNoWelcome = errors.New("urpclient: the relay closed the connection before its welcome (is it full?)")
)

// MadeError is a failed Make or Join: the relay's status code and the GID
// it answered with. It matches ErrRefused.
type MadeError struct {
	Status urp.Status
	GID    uint32
}

// Error says why the relay refused, in words.
func (e *MadeError) Error() string {
	switch e.Status {
	case urp.StatPass:
		return "urpclient: group " + strconv.FormatUint(uint64(e.GID), 10) + ": no such group, or wrong password"
	case urp.StatLock:
		return "urpclient: group " + strconv.FormatUint(uint64(e.GID), 10) + " is locked"
	case urp.StatFull:
		return "urpclient: group " + strconv.FormatUint(uint64(e.GID), 10) + " is full"
	case urp.StatLimit:
		return "urpclient: the relay has too many groups open"
	}
	return "urpclient: refused by the relay: " + e.Status.String()
}

// Is reports whether target is ErrRefused.
func (e *MadeError) Is(target error) bool { return target == ErrRefused }

// Conn is a user's connection to a relay.
type Conn struct {
	nc  net.Conn
	cfg Config

	mu       sync.Mutex
	core     *urp.Client
	changed  chan struct{} // closed and replaced when the state changes
	queue    fifo.Queue[urp.ClientEvent]
	qbytes   int
	made     *urp.ClientEvent          // the answer to the Make or Join waiting
	values   map[urp.Key][]chan uint32 // Gets and Sets waiting, by key, in order
	inflight int                       // bytes the writer is writing
	err      error                     // why the connection ended
	wake     chan struct{}             // the writer has bytes to take
	done     chan struct{}             // closed when the connection has ended
	wg       sync.WaitGroup
}

// Dial connects to the relay at addr ("host:port") and waits for its
// welcome. A failure names the address; a relay of another version is a
// *urp.VersionError.
func Dial(ctx context.Context, addr string, cfg Config) (*Conn, error) {
	if cfg.ReceiveQueue < 0 || cfg.WriteQueue < 0 {
		return nil, errors.New("urpclient: negative queue size")
	}
	core, err := urp.NewClient(cfg.Client)
	if err != nil {
		return nil, err
	}
	if cfg.WriteQueue == 0 {
		cfg.WriteQueue = defaultQueue
	}
	if cfg.ReceiveQueue == 0 {
		cfg.ReceiveQueue = defaultQueue
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	c := &Conn{
		nc: nc, cfg: cfg, core: core,
		changed: make(chan struct{}),
		values:  make(map[urp.Key][]chan uint32),
		wake:    make(chan struct{}, 1),
		done:    make(chan struct{}),
	}
	c.wg.Add(2)
	go c.readLoop()
	go c.writeLoop()
	err = c.wait(ctx, func() (bool, error) { return c.core.Welcomed(), nil })
	if errors.Is(err, io.EOF) {
		err = ErrNoWelcome
	}
	if err != nil {
		c.Abort()
		return nil, &net.OpError{Op: "dial", Net: "urp", Addr: nc.RemoteAddr(), Err: err}
	}
	return c, nil
}

// changeLocked wakes every goroutine waiting for the state to change.
func (c *Conn) changeLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// wait waits until cond, called with the lock held, reports true or an
// error, the connection ends, or ctx is done.
func (c *Conn) wait(ctx context.Context, cond func() (bool, error)) error {
	for {
		c.mu.Lock()
		ok, err := cond()
		if err == nil && !ok && c.err != nil {
			err = c.err
		}
		ch := c.changed
		c.mu.Unlock()
		if ok || err != nil {
			return err
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// request waits for room in the write queue, then calls do with the lock
// held, which queues a packet, and wakes the writer. With ctx already
// done it queues nothing and returns ctx's error: a request whose answer
// came before the caller noticed the cancellation would otherwise return
// either, at random.
func (c *Conn) request(ctx context.Context, do func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var derr error
	err := c.wait(ctx, func() (bool, error) {
		if c.err != nil {
			return false, c.err
		}
		if c.core.Buffered()+c.inflight > c.cfg.WriteQueue {
			return false, nil
		}
		derr = do()
		return true, nil
	})
	if err != nil {
		return err
	}
	if derr == nil {
		c.kick()
	}
	return derr
}

func (c *Conn) kick() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// UID returns the user's id on the relay.
func (c *Conn) UID() uint32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.core.UID()
}

// Brand returns the relay's brand, from its welcome.
func (c *Conn) Brand() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.core.Brand()
}

// Version returns the relay's protocol version and revision.
func (c *Conn) Version() (version, revision uint16) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.core.RelayVersion()
}

// Role returns the user's role as the client knows it.
func (c *Conn) Role() urp.Role {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.core.Role()
}

// GID returns the group the user is in, or 0.
func (c *Conn) GID() uint32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.core.GID()
}

// Members returns a host's members, itself excluded.
func (c *Conn) Members() []uint32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.core.Members()
}

// Make makes a group hosted by this user and returns its GID. A refusal is
// a *MadeError (STAT_LIMIT: the relay has too many groups).
func (c *Conn) Make(ctx context.Context) (uint32, error) {
	ev, err := c.makeOrJoin(ctx, c.core.Make)
	return ev.GID, err
}

// Join joins group gid with its password. A refusal is a *MadeError.
func (c *Conn) Join(ctx context.Context, gid, password uint32) error {
	_, err := c.makeOrJoin(ctx, func() error { return c.core.Join(gid, password) })
	return err
}

func (c *Conn) makeOrJoin(ctx context.Context, do func() error) (urp.ClientEvent, error) {
	err := c.request(ctx, func() error {
		if err := do(); err != nil {
			return err
		}
		// An answer left by a call that gave up is not this one's: the
		// core takes no second request before the first is answered.
		c.made = nil
		return nil
	})
	if err != nil {
		return urp.ClientEvent{}, err
	}
	var ev urp.ClientEvent
	err = c.wait(ctx, func() (bool, error) {
		if c.made == nil {
			return false, nil
		}
		ev, c.made = *c.made, nil
		return true, nil
	})
	if err == nil && !ev.Status.OK() {
		err = &MadeError{Status: ev.Status, GID: ev.GID}
	}
	return ev, err
}

// Quit leaves the group and waits until the relay says so. A host's group
// closes.
func (c *Conn) Quit(ctx context.Context) error {
	if err := c.request(ctx, c.core.Quit); err != nil {
		return err
	}
	return c.wait(ctx, func() (bool, error) { return c.core.Role() == urp.Connected, nil })
}

// Broadcast sends data to every user of the group but exclude (0: every
// user, this one included, U7). It returns once the message is queued.
func (c *Conn) Broadcast(ctx context.Context, exclude uint32, data []byte) error {
	return c.request(ctx, func() error { return c.core.Broadcast(exclude, data) })
}

// Send sends data to the user to of the group. It returns once the
// message is queued.
func (c *Conn) Send(ctx context.Context, to uint32, data []byte) error {
	return c.request(ctx, func() error { return c.core.Send(to, data) })
}

// Queue queues a message to the user to without waiting for room in the
// write queue: for a transport that applies its own backpressure with
// Queued and Config.OnWritten.
func (c *Conn) Queue(to uint32, data []byte) error {
	c.mu.Lock()
	err := c.err
	if err == nil {
		err = c.core.Send(to, data)
	}
	c.mu.Unlock()
	if err == nil {
		c.kick()
	}
	return err
}

// Queued returns the bytes waiting to be written to the relay.
func (c *Conn) Queued() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.core.Buffered() + c.inflight
}

// eventPlace is what an event's place in the receive queue costs beside
// its data: a urp.ClientEvent.
const eventPlace = int(unsafe.Sizeof(urp.ClientEvent{}))

// eventCharge is what ev takes from Config.ReceiveQueue.
func eventCharge(ev *urp.ClientEvent) int { return len(ev.Data) + eventPlace }

// Unread returns the bytes of the events waiting for Receive, with what
// each one's place in the queue costs (Config.ReceiveQueue).
func (c *Conn) Unread() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.qbytes
}

// Get returns a setting of the group.
func (c *Conn) Get(ctx context.Context, k urp.Key) (uint32, error) {
	return c.value(ctx, k, func() error { return c.core.Get(k) })
}

// Set sets a setting of the host's group. ctl says who hears the new
// value: with urp.Respond, Set waits for the relay's answer and returns
// it; with urp.Notify, the group's other users hear it (U8).
func (c *Conn) Set(ctx context.Context, ctl urp.Control, k urp.Key, v uint32) (uint32, error) {
	if ctl&urp.Respond == 0 {
		return 0, c.request(ctx, func() error { return c.core.Set(ctl, k, v) })
	}
	return c.value(ctx, k, func() error { return c.core.Set(ctl, k, v) })
}

// value queues a request the relay answers with R2U_VALS of key k, and
// waits for that answer (U19).
func (c *Conn) value(ctx context.Context, k urp.Key, do func() error) (uint32, error) {
	ch := make(chan uint32, 1)
	err := c.request(ctx, func() error {
		if err := do(); err != nil {
			return err
		}
		c.values[k] = append(c.values[k], ch)
		return nil
	})
	if err != nil {
		return 0, err
	}
	select {
	case v, ok := <-ch:
		if !ok {
			return 0, ErrLeft
		}
		return v, nil
	case <-c.done:
		select {
		case v, ok := <-ch:
			if ok {
				return v, nil
			}
		default:
		}
		return 0, c.Err()
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// Kick removes member uid from the host's group, and returns once the
// request is queued; the host then receives GotLeft. A host that kicks
// itself quits, and Kick waits as Quit does (U17).
func (c *Conn) Kick(ctx context.Context, uid uint32) error {
	self := false
	err := c.request(ctx, func() error {
		self = uid == c.core.UID()
		return c.core.Kick(uid)
	})
	if err != nil || !self {
		return err
	}
	return c.wait(ctx, func() (bool, error) { return c.core.Role() == urp.Connected, nil })
}

// Receive returns the next event that is not an answer: GotText,
// GotJoined, GotLeft, GotValue (a notification) or GotRole (back to
// CONNECTED). A GotText's Data is the caller's. Once the connection has
// ended and its events are taken, it returns the reason.
func (c *Conn) Receive(ctx context.Context) (urp.ClientEvent, error) {
	var ev urp.ClientEvent
	err := c.wait(ctx, func() (bool, error) {
		var ok bool
		if ev, ok = c.queue.Take(); !ok {
			if c.err != nil {
				return false, c.err
			}
			return false, nil
		}
		full := c.qbytes >= c.cfg.ReceiveQueue
		c.qbytes -= eventCharge(&ev)
		if full && c.qbytes < c.cfg.ReceiveQueue {
			c.changeLocked() // the reader goes on
		}
		return true, nil
	})
	return ev, err
}

// Done is closed when the connection has ended.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err returns why the connection ended, or nil while it is open.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// closeWait bounds how long Close waits for the bytes queued to be
// written.
const closeWait = 2 * time.Second

// Close writes what is queued (for up to two seconds) and closes the
// connection; the relay takes the user out of its group (a host's group
// closes). It returns once the client's goroutines have.
func (c *Conn) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), closeWait)
	c.wait(ctx, func() (bool, error) { return c.core.Buffered()+c.inflight == 0, nil })
	cancel()
	c.fail(urp.ErrClosed)
	c.wg.Wait()
	return nil
}

// Abort closes the connection at once, dropping what is queued.
func (c *Conn) Abort() error {
	c.fail(urp.ErrClosed)
	c.wg.Wait()
	return nil
}

// fail ends the connection with err, unless it has ended.
func (c *Conn) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failLocked(err)
}

func (c *Conn) failLocked(err error) {
	if c.err != nil {
		return
	}
	c.err = err
	c.nc.Close()
	for k, chs := range c.values {
		for _, ch := range chs {
			close(ch)
		}
		delete(c.values, k)
	}
	close(c.done)
	c.changeLocked()
}

// readLoop reads the relay's stream into the client until it ends.
func (c *Conn) readLoop() {
	defer c.wg.Done()
	buf := make([]byte, readBuffer)
	for {
		// While Receive is behind, the stream is not read (a bounded
		// queue); the relay's output limit holds the rest (U11).
		if err := c.wait(context.Background(), func() (bool, error) {
			return c.qbytes < c.cfg.ReceiveQueue, nil
		}); err != nil {
			return
		}
		n, err := c.nc.Read(buf)
		c.mu.Lock()
		if n > 0 {
			if herr := c.core.HandleBytes(buf[:n]); herr != nil {
				c.dispatchLocked()
				c.failLocked(fmt.Errorf("urpclient: relay broke the protocol: %w", herr))
				c.mu.Unlock()
				return
			}
			c.dispatchLocked()
		}
		if err != nil {
			if herr := c.core.HandleEnd(); herr != nil && err == io.EOF {
				err = herr
			}
			if c.err == nil {
				err = fmt.Errorf("urpclient: connection to the relay lost: %w", err)
			}
			c.failLocked(err)
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
	}
}

// dispatchLocked hands the core's events to those waiting for them.
func (c *Conn) dispatchLocked() {
	changed := false
	for {
		ev, ok := c.core.PollEvent()
		if !ok {
			break
		}
		changed = true
		switch {
		case ev.Kind == urp.GotWelcome:
			continue // Dial's answer
		case ev.Kind == urp.GotMade:
			c.made = &ev
			continue
		case ev.Kind == urp.GotValue && ev.Answer:
			if chs := c.values[ev.Key]; len(chs) > 0 {
				chs[0] <- ev.Value
				close(chs[0])
				c.values[ev.Key] = chs[1:]
			}
			continue
		case ev.Kind == urp.GotRole:
			// Requests still waiting for a value will not be
			// answered (U19).
			for k, chs := range c.values {
				for _, ch := range chs {
					close(ch)
				}
				delete(c.values, k)
			}
		}
		c.queue.Push(ev)
		c.qbytes += eventCharge(&ev)
	}
	if changed {
		c.changeLocked()
	}
}

// writeLoop writes what the core queues until the connection ends.
func (c *Conn) writeLoop() {
	defer c.wg.Done()
	var spare []byte
	for {
		select {
		case <-c.wake:
		case <-c.done:
			return
		}
		c.mu.Lock()
		out := c.core.TakeOutput(spare)
		c.inflight = len(out)
		c.mu.Unlock()
		if len(out) == 0 {
			spare = out // the core has spare now
			continue
		}
		_, err := c.nc.Write(out)
		c.mu.Lock()
		c.inflight = 0
		if err != nil {
			c.failLocked(fmt.Errorf("urpclient: connection to the relay lost: %w", err))
			c.mu.Unlock()
			return
		}
		c.changeLocked()
		c.mu.Unlock()
		if c.cfg.OnWritten != nil {
			c.cfg.OnWritten()
		}
		if cap(out) <= keepSpare {
			spare = out[:0]
		} else {
			spare = nil
		}
	}
}
