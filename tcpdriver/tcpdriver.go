package tcpdriver

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fastnet-engine/fastnet/datagram"
	"github.com/fastnet-engine/fastnet/driver"
	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/internal/frame"
	"github.com/fastnet-engine/fastnet/internal/timer"
)

// Conn is one Fastnet connection over TCP: a [driver.Conn], where its
// methods are documented.
type Conn = driver.Conn

// Listener is a Fastnet server accepting TCP connections: a
// [driver.Listener].
type Listener = driver.Listener

// Message is a received message: a [driver.Message].
type Message = driver.Message

// CloseError is the error of a connection that has ended: a
// [driver.CloseError]. It matches fastnet.ErrClosed and unwraps to the
// reason.
type CloseError = driver.CloseError

// DriverStats are the driver's own counters of an endpoint
// (Listener.DriverStats, Conn.DriverStats): socket write errors, the
// listener's backlog, and the TCP connections still in their handshake.
type DriverStats = driver.Stats

// Config configures a TCP endpoint. The zero value works.
type Config struct {
	// Engine is the protocol configuration; Role and Transport are set by
	// Listen and Dial. Its MaxPacketSize (default: MaxMessageSize plus the
	// overhead, D20) bounds the frames accepted from the peer.
	Engine fastnet.Config
	// ReceiveQueue bounds the bytes of received messages waiting for
	// Receive, per connection, each counting its data and its place in
	// the queue (40 bytes on 64-bit platforms). When they reach it the
	// connection's TCP stream is no longer read until Receive has taken
	// half, and TCP's flow control holds the sender. The connections
	// waiting for Accept share one (N152). Default (0): 4*MaxMessageSize,
	// at least 16 MiB; negative is refused.
	ReceiveQueue int
	// WriteQueue bounds the bytes waiting to be written to one TCP
	// connection: Send blocks while it is exceeded. Default (0): 4 MiB;
	// negative is refused. What the endpoint answers the peer on its own
	// (queries, heartbeats) is queued past it, but a connection whose
	// queue reaches twice WriteQueue plus Engine.SendQueueSize, a peer
	// that asks for more than it reads, is closed (Stats.WriteOverflows,
	// N107).
	WriteQueue int
	// Backlog bounds a server's established connections waiting for
	// Accept. While it is reached, new clients are refused with the
	// reason "server busy"; a connection that ends before Accept takes it
	// is dropped from the backlog with the messages it received (N47).
	// Default (0): 128; negative is refused.
	Backlog int
	// Events, if not nil, receives the connections' events: connected,
	// ended (with the final statistics), MTU changes, quality reports
	// when Engine.QualityInterval is set, and a server's refused clients. It is never waited for: an event
	// that finds it full is dropped and counted (DriverStats.EventsDropped).
	Events chan<- driver.Event
	// Logger, if not nil, logs the same events (start and end at Info,
	// MTU and quality at Debug).
	Logger *slog.Logger
	// MaxHandshakes bounds a server's TCP connections accepted whose
	// Fastnet handshake has not completed (N46). When one more arrives,
	// the oldest of them is closed to make room (counted in
	// DriverStats.HandshakesDropped), so that connections that never
	// speak cannot keep real clients out. Until its handshake completes a
	// connection has small buffers. Default (0): 128; negative is
	// refused.
	MaxHandshakes int
	// LongPacketMemory bounds the memory that all the endpoint's TCP
	// connections hold together for packets longer than their read
	// buffers (64 KiB; 512 bytes in the handshake): those partly
	// received, and the buffer each keeps for the next while long
	// packets come back to back and it is read (a paused connection
	// lets its go, N140). A connection whose long packet would take more
	// than is left is closed (DriverStats.LongPacketsRefused). Without
	// the bound, a peer on each connection could make it hold up to
	// Engine.MaxPacketSize (1 MiB by default) for as long as it liked,
	// uncounted by Engine.EndpointReceiveMemory: 1 GiB over the default
	// MaxConnections. Default (0): Engine.EndpointReceiveMemory (256 MiB
	// by default); a value below Engine.MaxPacketSize is taken as that,
	// so that a packet of the largest size fits when no other
	// connection holds any; negative is refused.
	LongPacketMemory int
	// HandshakeTimeout closes a server's TCP connection whose Fastnet
	// handshake has not completed this long after it was accepted
	// (counted in DriverStats.HandshakeTimeouts, N46). Default (0):
	// Engine.ConnectTimeout; negative is refused.
	HandshakeTimeout time.Duration
}

const (
	defaultWriteQueue    = 4 << 20
	defaultMaxHandshakes = 128
)

// Listen starts a Fastnet server on the TCP address addr ("host:port").
func Listen(ctx context.Context, addr string, cfg Config) (*Listener, error) {
	cfg.Engine.Role = fastnet.Server
	e, err := newEngine(cfg)
	if err != nil {
		return nil, err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("tcpdriver: listen %s: %w", addr, err)
	}
	t := newTransport(e, cfg)
	t.ln = ln
	l := e.NewListener(ln.Addr())
	e.Start(t)
	e.Go(t.acceptLoop)
	return l, nil
}

// Dial connects to the Fastnet server at the TCP address addr and returns
// the established connection. A failure to connect is a *net.OpError (Op
// "dial") that names the address and wraps the reason (a Config the engine
// refuses is an error of its own), which errors.Is matches
// against fastnet.ErrRefused (a *fastnet.RefusedError with the server's
// reason), fastnet.ErrTimeout, fastnet.ErrIncompatible,
// fastnet.ErrTransportClosed (the server closed the TCP connection before
// the handshake completed: not a Fastnet server, or one that dropped it
// among too many handshakes, N46), ctx.Err(), or the system's error. When
// nothing listens at addr, the reason is a *driver.UnreachableError, as
// over UDP: it matches fastnet.ErrRefused and unwraps to
// syscall.ECONNREFUSED (N148).
func Dial(ctx context.Context, addr string, cfg Config) (*Conn, error) {
	cfg.Engine.Role = fastnet.Client
	e, err := newEngine(cfg)
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		// A *net.OpError that names the address; a refusal reads as
		// the UDP driver's does.
		var oe *net.OpError
		if errors.As(err, &oe) && errors.Is(oe.Err, syscall.ECONNREFUSED) {
			oe.Err = &driver.UnreachableError{Err: oe.Err}
		}
		return nil, err
	}
	t := newTransport(e, cfg)
	e.Start(t)
	remote := t.add(nc, false)
	c, err := e.Dial(ctx, remote)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Addr: net.TCPAddrFromAddrPort(remote), Err: err}
	}
	return c, nil
}

func newEngine(cfg Config) (*driver.Engine, error) {
	switch {
	case cfg.WriteQueue < 0:
		return nil, fmt.Errorf("tcpdriver: WriteQueue %d is negative", cfg.WriteQueue)
	case cfg.MaxHandshakes < 0:
		return nil, fmt.Errorf("tcpdriver: MaxHandshakes %d is negative", cfg.MaxHandshakes)
	case cfg.HandshakeTimeout < 0:
		return nil, fmt.Errorf("tcpdriver: HandshakeTimeout %v is negative", cfg.HandshakeTimeout)
	case cfg.LongPacketMemory < 0:
		return nil, fmt.Errorf("tcpdriver: LongPacketMemory %d is negative", cfg.LongPacketMemory)
	}
	cfg.Engine.Transport = fastnet.Stream
	return driver.NewEngine(cfg.Engine, driver.Options{Network: "tcp", ReceiveQueue: cfg.ReceiveQueue, Backlog: cfg.Backlog, Events: cfg.Events, Logger: cfg.Logger})
}

// transport carries one endpoint's packets over its TCP connections, one
// per peer address, each with a reader and a writer goroutine. Neither is
// on the path of a request and its reply (N27): a goroutine waiting in
// Receive reads the stream itself while it holds the stream's read role,
// and a Send writes its packet itself when the socket takes it at once;
// the goroutines read while nobody receives, and write bursts, long
// packets and what the socket could not take.
//
// A connection ends in one of two ways. The peer ends it (EOF, reset, a
// frame above the maximum packet size (D20)): the reader stops, reports it
// to the endpoint, and the writer closes the socket. This side ends it (the
// Fastnet connection is over, or the endpoint shuts down): the writer writes
// what is queued, half-closes the connection, and lets the reader drain what
// the peer still sends until the peer closes in turn, so that the last
// packets (a "disconnect", D18) are never lost to a reset; closeWait bounds
// both steps.
//
// A server's connection that has not completed its Fastnet handshake is
// cheap and bounded (N46): it has small buffers, it is closed when
// handshakeTO has passed, and at most maxHandshakes of them are open, the
// oldest closed to make room for a new one.
type transport struct {
	e          *driver.Engine
	ln         net.Listener
	long       *frame.Budget // what the connections' readers hold for long packets (N140)
	maxPacket  int
	writeQueue int
	// maxQueue is the most a connection's write queue may hold: past
	// it the peer reads less than it asks for, and is closed (N107).
	maxQueue      int
	handshakeTO   time.Duration
	maxHandshakes int
	closeWait     time.Duration

	mu    sync.Mutex
	conns map[netip.AddrPort]*tcpConn
	// last is the connection conn found last, while it is in conns
	// (written with mu held): a client's only one, a server's busiest.
	last   atomic.Pointer[tcpConn]
	closed bool
	// handshakes holds a server's connections still in their handshake,
	// oldest first (N46).
	handshakes list.List

	// Counters of DriverStats.
	handshakesDropped  atomic.Uint64
	handshakeTimeouts  atomic.Uint64
	writeOverflows     atomic.Uint64
	longPacketsRefused atomic.Uint64
}

// minCloseWait is the least time an ending connection gets to write what is
// queued, whatever Config.Linger says.
const minCloseWait = 100 * time.Millisecond

// tcpConn is one TCP connection.
type tcpConn struct {
	nc         net.Conn
	remote     netip.AddrPort
	server     bool          // accepted by a listener
	readerDone chan struct{} // closed when the reader returns
	// hs is c's place in transport.handshakes while a server's
	// connection is in its handshake (transport.mu).
	hs *list.Element

	// The stream's read role (driver.StreamReader): the reader goroutine
	// holds it, or a goroutine in Receive. fr is the holder's.
	fr    *frame.Reader
	token chan struct{}    // holds the role while it is free
	wake  chan struct{}    // the reader goroutine looks at its state again
	idle  *timer.IdleTimer // hands a role left free to the reader goroutine (c.mu)
	// held says the role's holder has input not yet handed to the
	// engine: a packet read, or one whole in fr's buffer (setHeld,
	// InputWaiting).
	// heldSet is the holder's own copy: held is stored only when it
	// changes (setHeld).
	held    atomic.Bool
	heldSet bool
	inq     *inputQuery // asks what waits in the socket (InputWaiting)
	// pausedNow is paused, read without mu (InputWaiting): what waits
	// in a paused connection is not read until Receive catches up.
	pausedNow atomic.Bool

	iw *inlineWriter // for writes by the goroutine that sends (nil: none)
	// answer says a packet was read from the stream since the last
	// write: the next packet may be its reply (writeNowLocked).
	answer atomic.Bool
	// queued is len(pending), written with mu held, read without
	// (Blocked, before each Send).
	queued atomic.Int64

	mu          sync.Mutex
	pending     []byte // packets waiting for the writer, each behind its length
	overflowed  bool   // the queue passed maxQueue, and the socket was closed (N107)
	partial     []byte // the end of a packet written in part by a Send
	writing     bool   // the writer goroutine is writing
	lastWrite   time.Time
	wbuf        []byte // the framing of a packet written by a Send
	ready       chan struct{}
	ending      bool      // this side ends the connection: write pending, then close
	established bool      // the Fastnet handshake completed; written by the reader goroutine only, with mu held
	paused      bool      // Receive is behind: the reader waits (driver.Pauser)
	deadline    time.Time // the read deadline of the connection's state (setDeadlineLocked)
	// Read role state.
	role      role
	receivers int       // Receive calls waiting for the role
	freeSince time.Time // when the role was left free
	reading   bool      // a Receive holding the role is in a read
	interrupt bool      // Interrupt was called: ReadFor asks done again
	past      bool      // the read deadline is in the past to end that read
	rerr      error     // the stream failed: nobody reads it again
}

// role says who holds a stream's read role.
type role uint8

const (
	roleReader  role = iota // the reader goroutine (readLoop)
	roleFree                // nobody: the token is in tcpConn.token
	roleReceive             // a goroutine in Receive (ReadFor)
)

// idleDelay is how long a stream's read role may stay free before the
// reader goroutine takes it: the heartbeats of an application busy between
// two Receive calls wait no longer (N26).
const idleDelay = 5 * time.Millisecond

// handshakeQueue bounds the write queue of a connection in its handshake
// (N136): the handshake's answers are a few dozen bytes each.
const handshakeQueue = 64 << 10

// handshakeBuffer is the size of a connection's read and write buffers
// while it is a server's in its handshake (N46): the handshake's packets
// are a few bytes each, and a longer one is still read whole (frame.Reader
// grows for it).
const handshakeBuffer = 512

// hardQueue is the most a connection's write queue may hold (N107):
// twice WriteQueue plus the endpoint's send queue, saturating, so that a
// limit given as "no limit" (any size up to math.MaxInt) stays one.
func hardQueue(writeQueue, sendQueue int) int {
	if sendQueue > math.MaxInt/2 || writeQueue > math.MaxInt/2-sendQueue {
		return math.MaxInt
	}
	return 2 * (writeQueue + sendQueue)
}

func newTransport(e *driver.Engine, cfg Config) *transport {
	wq := cfg.WriteQueue
	if wq == 0 {
		wq = defaultWriteQueue
	}
	ec := e.Config()
	hto := cfg.HandshakeTimeout
	if hto == 0 {
		hto = ec.ConnectTimeout
	}
	mh := cfg.MaxHandshakes
	if mh == 0 {
		mh = defaultMaxHandshakes
	}
	long := cfg.LongPacketMemory
	if long == 0 {
		long = ec.EndpointReceiveMemory
	}
	return &transport{
		e:             e,
		long:          frame.NewBudget(max(long, ec.MaxPacketSize)),
		maxPacket:     ec.MaxPacketSize,
		writeQueue:    wq,
		maxQueue:      hardQueue(wq, ec.SendQueueSize),
		handshakeTO:   hto,
		maxHandshakes: mh,
		closeWait:     max(ec.Linger, minCloseWait),
		conns:         make(map[netip.AddrPort]*tcpConn),
	}
}

func (t *transport) acceptLoop() {
	for {
		nc, err := t.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			select {
			case <-t.e.Done():
				return
			case <-time.After(10 * time.Millisecond): // EMFILE and the like
			}
			continue
		}
		t.add(nc, true)
	}
}

// add starts the reader and writer of a new TCP connection. A server's
// connection must complete the Fastnet handshake within handshakeTO, and
// closes the oldest still in its handshake if maxHandshakes are (N46).
func (t *transport) add(nc net.Conn, server bool) netip.AddrPort {
	ap := nc.RemoteAddr().(*net.TCPAddr).AddrPort()
	remote := netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	var iw *inlineWriter
	var inq *inputQuery
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
		if rc, err := tc.SyscallConn(); err == nil {
			if inlineWrites {
				iw = newInlineWriter(rc)
			}
			inq = newInputQuery(rc)
		}
	}
	bufSize := 0 // frame.DefaultBuffer
	if server {
		bufSize = handshakeBuffer
	}
	c := &tcpConn{
		nc: nc, remote: remote, server: server, iw: iw, inq: inq, readerDone: make(chan struct{}),
		fr:    frame.NewReader(nc, t.maxPacket, bufSize),
		ready: make(chan struct{}, 1), token: make(chan struct{}, 1), wake: make(chan struct{}, 1),
		idle: t.e.NewIdleTimer(idleDelay),
	}
	c.fr.SetBudget(t.long)
	if server {
		c.deadline = time.Now().Add(t.handshakeTO)
		nc.SetReadDeadline(c.deadline)
	}
	var oldest *tcpConn
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		nc.Close()
		return remote
	}
	if old := t.last.Load(); old != nil && old.remote == remote {
		t.last.Store(nil) // replaced
	}
	t.conns[remote] = c
	if server {
		if t.handshakes.Len() >= t.maxHandshakes {
			oldest = t.handshakes.Remove(t.handshakes.Front()).(*tcpConn)
			oldest.hs = nil
		}
		c.hs = t.handshakes.PushBack(c)
	}
	t.mu.Unlock()
	if oldest != nil {
		// Its reader fails at once and its writer closes it (see
		// failed): nothing of it is kept.
		t.handshakesDropped.Add(1)
		oldest.nc.Close()
	}
	t.e.Go(func() { t.readLoop(c) })
	t.e.Go(func() { t.writeLoop(c) })
	return remote
}

// settled takes c out of the connections in their handshake (N46).
func (t *transport) settled(c *tcpConn) {
	t.mu.Lock()
	if c.hs != nil {
		t.handshakes.Remove(c.hs)
		c.hs = nil
	}
	t.mu.Unlock()
}

// AddStats adds the transport's counters to s (driver.StatsReporter).
func (t *transport) AddStats(s *driver.Stats) {
	t.mu.Lock()
	s.Handshakes = t.handshakes.Len()
	t.mu.Unlock()
	s.HandshakesDropped = t.handshakesDropped.Load()
	s.HandshakeTimeouts = t.handshakeTimeouts.Load()
	s.WriteOverflows = t.writeOverflows.Load()
	s.LongPacketsRefused = t.longPacketsRefused.Load()
}

// writeFailed counts a failed write (DriverStats.WriteErrors), unless it
// failed because this side had closed the socket.
func (t *transport) writeFailed(err error) {
	if err != nil && !errors.Is(err, net.ErrClosed) {
		t.e.CountWriteError()
	}
}

// readLoop is the connection's reader goroutine. It reads the stream
// while it holds the read role, gives the role to a Receive that waits for
// it (after the packet it is reading), and takes it again when the role
// has been free for idleDelay or the connection ends from this side (to
// drain the stream). It returns once the stream has ended or failed.
func (t *transport) readLoop(c *tcpConn) {
	defer close(c.readerDone)
	defer func() {
		c.mu.Lock()
		c.idle.Stop()
		c.mu.Unlock()
		// The reader goroutine holds the read role as it returns: nobody
		// reads through c.fr any more, and what it held for long
		// packets goes back to the budget (N140).
		c.fr.Release()
	}()
	for t.readBackground(c) {
		t.releaseRole(c)
		if !t.takeRole(c) {
			return
		}
	}
}

// readBackground reads the stream for the reader goroutine until a Receive
// waits for the role (true) or the stream ends or fails (false).
func (t *transport) readBackground(c *tcpConn) bool {
	for {
		c.mu.Lock()
		// An overflowed connection (N107) is read, paused or not: its
		// closed socket's error ends it.
		for c.paused && !c.ending && c.rerr == nil && !c.overflowed {
			// Paused for as long as Receive takes to catch up: the
			// buffer of the long packet read last goes back to the
			// budget meanwhile (N140). This goroutine holds the role.
			c.fr.ReleaseKept()
			c.mu.Unlock()
			select {
			case <-c.wake:
			case <-t.e.Done():
				// The endpoint is closing: Close sets ending.
				<-c.wake
			}
			c.mu.Lock()
		}
		rerr, handOver := c.rerr, c.receivers > 0 && !c.ending
		c.mu.Unlock()
		switch {
		case rerr != nil:
			return false
		case handOver:
			return true
		}
		p, err := c.fr.Next()
		if err != nil {
			c.setHeld(false)
			c.mu.Lock()
			late := c.server && !c.established && !c.ending
			c.mu.Unlock()
			if late && errors.Is(err, os.ErrDeadlineExceeded) {
				t.handshakeTimeouts.Add(1) // N46
			}
			t.failed(c, err)
			return false
		}
		c.answer.Store(true)
		c.setHeld(true)
		if hook := testHookInput.Load(); hook != nil {
			(*hook)(c)
		}
		if c.established { // written by this goroutine only
			t.e.Input(c.remote, p)
			c.setHeld(c.fr.Buffered())
			continue
		}
		// Marked with the packet that completes the handshake, under
		// the engine's lock (N99): asked afterwards, the connection
		// could be accepted, used and closed by then, and its end
		// (finish) would take it for one still in its handshake and
		// reset it rather than drain what it had queued; and until it
		// leaves the handshakes, a new connection could evict it as
		// the oldest of them (N46).
		now := false
		t.e.InputEstablished(c.remote, p, func() {
			now = true
			t.settled(c)
			c.mu.Lock()
			c.established = true
			if !c.ending { // an ending connection keeps its deadline
				c.deadline = time.Time{}
				c.nc.SetReadDeadline(c.deadline)
			}
			c.mu.Unlock()
		})
		if hook := testHookHandshakeInput.Load(); hook != nil {
			(*hook)()
		}
		if now {
			// The reader goroutine holds the role: nobody else
			// reads through c.fr now.
			c.fr.Grow(frame.DefaultBuffer)
		}
		// What Grow moved out of the old buffer is read before the
		// stream, and the next read takes it at once: not counted.
		c.setHeld(c.fr.Buffered())
	}
}

// testHookHandshakeInput, if set by a test, runs in a reader goroutine
// after each packet of a connection still in its handshake is handled:
// there, a reader that the scheduler holds back lets others accept, use
// and close the connection.
var testHookHandshakeInput atomic.Pointer[func()]

// failed records that the stream ended or broke, from a read or a write.
// If the peer did it (this side is not ending the connection), the engine
// hears it, and the writer then closes the socket.
func (t *transport) failed(c *tcpConn, err error) {
	if errors.Is(err, frame.ErrBudget) {
		t.longPacketsRefused.Add(1)
	}
	c.mu.Lock()
	first := c.rerr == nil
	if first {
		c.rerr = err
	}
	ending := c.ending
	c.wakeLocked() // a paused reader goroutine returns
	c.mu.Unlock()
	if first && !ending {
		t.e.TransportClosed(c.remote)
	}
}

// releaseRole leaves c's read role free for a waiting Receive. The reader
// goroutine takes it back after idleDelay, or at once when the connection
// ends or its stream failed.
func (t *transport) releaseRole(c *tcpConn) {
	c.mu.Lock()
	c.role = roleFree
	c.freeSince = time.Now()
	if c.ending || c.rerr != nil {
		c.wakeLocked()
	} else {
		c.idle.Arm()
	}
	c.mu.Unlock()
	c.token <- struct{}{}
}

// takeRole waits until the reader goroutine is to read again, takes the
// role, and reports whether the stream is still to be read.
func (t *transport) takeRole(c *tcpConn) bool {
	for {
		select {
		case <-c.wake:
		case <-c.idle.C:
			c.mu.Lock()
			c.idle.Fired()
			c.mu.Unlock()
		}
		c.mu.Lock()
		ending := c.ending || c.rerr != nil
		due := c.role == roleFree && c.receivers == 0 && !c.paused
		if due && !ending {
			if left := time.Until(c.freeSince.Add(idleDelay)); left > 0 {
				c.idle.ArmIn(left)
				due = false
			}
		}
		c.mu.Unlock()
		if !ending && !due {
			continue
		}
		// A Receive holding the role gives it up when the connection
		// ends (it is interrupted) or when its message has come.
		<-c.token
		c.mu.Lock()
		c.role = roleReader
		rerr := c.rerr
		c.mu.Unlock()
		return rerr == nil
	}
}

// WaitRole registers a Receive waiting for the read role of the stream
// from addr (driver.StreamReader). The role's value is the *tcpConn.
func (t *transport) WaitRole(addr netip.AddrPort) (<-chan struct{}, driver.StreamRole) {
	c := t.conn(addr)
	if c == nil {
		return nil, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ending || c.rerr != nil {
		return nil, nil
	}
	c.receivers++
	return c.token, c
}

// TakeRole takes the read role of the stream from addr for a Receive if
// it is free (driver.StreamReader).
func (t *transport) TakeRole(addr netip.AddrPort) (driver.StreamRole, bool) {
	c := t.conn(addr)
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ending || c.rerr != nil {
		return nil, false
	}
	select {
	case <-c.token:
		c.role = roleReceive
		c.interrupt = false
		return c, true
	default:
		return nil, false
	}
}

// UnwaitRole undoes WaitRole for the connection it returned, which
// another from the same address may have replaced since
// (driver.StreamReader, N110).
func (t *transport) UnwaitRole(r driver.StreamRole, took bool) {
	c, _ := r.(*tcpConn)
	if c == nil {
		return
	}
	c.mu.Lock()
	c.receivers--
	if took {
		c.role = roleReceive
		c.interrupt = false
	} else if c.receivers == 0 && c.role == roleFree && !c.idle.Armed() && !c.readerGone() {
		// The idle timer may have fired while this Receive waited, and
		// left the role to it: it goes without, so the timer hands the
		// role to the reader goroutine instead.
		c.idle.Arm()
	}
	c.mu.Unlock()
}

// ReadFor reads the stream of the connection whose read role a Receive
// took (TakeRole, WaitRole), until done (driver.StreamReader): that one,
// even if another from the same address replaced it since (N110).
func (t *transport) ReadFor(ctx context.Context, r driver.StreamRole, done func() bool) error {
	c, _ := r.(*tcpConn)
	if c == nil {
		return nil
	}
	defer t.releaseRole(c)
	for !done() {
		if err := ctx.Err(); err != nil {
			return err
		}
		c.mu.Lock()
		if c.ending || c.rerr != nil || c.paused {
			c.mu.Unlock()
			// Whoever reads next, the buffer of the long packet read
			// last is not kept meanwhile (N140): this Receive holds
			// the role.
			c.fr.ReleaseKept()
			return nil
		}
		if c.interrupt {
			c.interrupt = false
			c.mu.Unlock()
			continue
		}
		c.reading = true
		c.mu.Unlock()
		p, err := c.fr.Next()
		c.mu.Lock()
		c.reading = false
		if c.past {
			c.past = false
			c.nc.SetReadDeadline(c.deadline)
		}
		c.mu.Unlock()
		if errors.Is(err, os.ErrDeadlineExceeded) {
			continue // interrupted, or the connection is ending: look again
		}
		if err != nil {
			c.setHeld(false)
			t.failed(c, err)
			return nil
		}
		c.answer.Store(true)
		c.setHeld(true)
		// The packets that came with it cost no system call: they go
		// to the queue now, with it, in one input whose messages'
		// checksums are computed together (N121), and the Receive
		// calls that follow take them without the role. Each is read
		// from the buffer whole (BufferedLen), which Next then neither
		// refills nor moves: every packet handed over stays valid.
		// Only as many as the Receive queue takes without reaching its
		// limit, each counted at the most it may take: none but the
		// first can pause the connection (N13), and what would come
		// after a pause stays unread, as it did one packet at a time.
		var arr [readAhead][]byte
		batch := append(arr[:0], p)
		if n, ok := c.fr.BufferedLen(); ok {
			room := t.e.ReceiveRoom(c.remote) - driver.PacketCharge(len(p))
			for ok && len(batch) < readAhead {
				if room -= driver.PacketCharge(n); room <= 0 {
					break
				}
				q, err := c.fr.Next()
				if err != nil {
					c.setHeld(false)
					t.failed(c, err)
					return nil
				}
				batch = append(batch, q)
				n, ok = c.fr.BufferedLen()
			}
		}
		if len(batch) == 1 {
			t.e.Input(c.remote, p)
		} else {
			t.e.InputPackets(c.remote, batch)
		}
		c.setHeld(c.fr.Buffered())
	}
	return nil
}

// testHookInput, if set by a test, runs in a reader goroutine after each
// packet it reads, before the packet is handed to the engine.
var testHookInput atomic.Pointer[func(*tcpConn)]

// setHeld records, for the holder of c's read role, whether it holds
// input not yet handed to the engine (held): a packet read, or one
// whole in fr's buffer. Part of a packet buffered is not: the rest is
// still to come, in the socket (where InputWaiting sees it) or not yet
// sent, and a peer that stops in the middle of a packet would otherwise
// have every put-off last its whole budget.
func (c *tcpConn) setHeld(v bool) {
	if c.heldSet != v {
		c.heldSet = v
		c.held.Store(v)
	}
}

// InputWaiting reports whether input waits to be handed to the engine
// (driver.InputWaiter): a connection's read role holds some, or bytes
// wait in its socket. An overdue deadline is put off while some does
// (N129), as in the UDP driver: after the process stopped for longer
// than Timeout, the heartbeats in the sockets are read before the
// deadline that would end their connections (N131). A paused
// connection (driver.Pauser) is not asked: it is read only once
// Receive catches up. known is false where a socket cannot be asked
// (systems other than Linux) and none was found with input.
func (t *transport) InputWaiting() (waiting, known bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	// The read roles first: an atomic load each, and no socket need
	// be asked if one holds input.
	for _, c := range t.conns {
		if c.held.Load() && !c.pausedNow.Load() {
			return true, true
		}
	}
	known = true
	for _, c := range t.conns {
		if c.pausedNow.Load() {
			continue
		}
		w, k := c.inq.waiting()
		if w {
			return true, true
		}
		known = known && k
	}
	return false, known
}

// readAhead bounds the packets one read of ReadFor hands to the engine,
// together (N121).
const readAhead = 64

// Interrupt makes ReadFor look at its state again (driver.StreamReader).
func (t *transport) Interrupt(addr netip.AddrPort) {
	c := t.conn(addr)
	if c == nil {
		return
	}
	c.mu.Lock()
	c.interruptLocked()
	c.mu.Unlock()
}

// interruptLocked ends the read of a Receive holding the role, if it is in
// one, through a deadline in the past.
func (c *tcpConn) interruptLocked() {
	c.interrupt = true
	if c.reading && !c.past {
		c.past = true
		c.nc.SetReadDeadline(time.Unix(1, 0))
	}
}

// readerGone reports whether c's reader goroutine has returned: the
// connection is over, and nothing takes its role again.
func (c *tcpConn) readerGone() bool {
	select {
	case <-c.readerDone:
		return true
	default:
		return false
	}
}

// kickWriter makes the writer goroutine look for packets to write.
func (c *tcpConn) kickWriter() {
	select {
	case c.ready <- struct{}{}:
	default:
	}
}

// wakeLocked makes the reader goroutine, and a Receive reading, look at
// the connection's state again: it ends, or it pauses or resumes.
func (c *tcpConn) wakeLocked() {
	c.interruptLocked()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// setDeadlineLocked sets the read deadline the connection's state asks for
// (an interrupted read restores it).
func (c *tcpConn) setDeadlineLocked(d time.Time) {
	c.deadline = d
	if !c.past {
		c.nc.SetReadDeadline(d)
	}
}

// conn returns the connection to addr, or nil.
func (t *transport) conn(addr netip.AddrPort) *tcpConn {
	if c := t.last.Load(); c != nil && c.remote == addr {
		return c
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.conns[addr]
	if c != nil {
		t.last.Store(c)
	}
	return c
}

// PauseRead stops or resumes the reading of the connection to addr
// (driver.Pauser): while it is paused, TCP's flow control holds the peer.
func (t *transport) PauseRead(addr netip.AddrPort, paused bool) {
	c := t.conn(addr)
	if c == nil {
		return
	}
	c.mu.Lock()
	c.paused = paused
	c.pausedNow.Store(paused)
	c.wakeLocked()
	c.mu.Unlock()
}

func (t *transport) writeLoop(c *tcpConn) {
	var fw *frame.Writer
	var batch []byte
	for {
		select {
		case <-c.ready:
		case <-c.readerDone:
			t.finish(c, fw)
			return
		case <-t.e.Done():
			t.finish(c, fw)
			return
		}
		c.mu.Lock()
		batch, c.pending = c.pending, batch[:0]
		c.queued.Store(0)
		partial := c.partial
		c.partial = nil
		ending := c.ending
		c.writing = true
		fw = t.frameWriter(c, fw)
		c.mu.Unlock()
		t.e.Wake(c.remote) // Send may go on
		err := writeRaw(c.nc, partial)
		if err == nil {
			err = writeFrames(fw, batch)
		}
		c.mu.Lock()
		c.writing = false
		c.mu.Unlock()
		if err != nil {
			// The connection is broken: the reader, which may be
			// paused, stops too.
			t.writeFailed(err)
			c.nc.Close()
			t.failed(c, err)
			<-c.readerDone
			t.forget(c)
			return
		}
		batch = batch[:0]
		if ending {
			t.finish(c, fw)
			return
		}
	}
}

// frameWriter returns the writer of c's next frames, fw or a new one: a
// small one while c is a server's connection in its handshake, a full one
// after (N46). It is called with c.mu held, between batches, when fw has
// nothing buffered (writeFrames flushes).
func (t *transport) frameWriter(c *tcpConn, fw *frame.Writer) *frame.Writer {
	size := frame.DefaultBuffer
	if c.server && !c.established {
		size = handshakeBuffer
	}
	if fw == nil || fw.Size() < size {
		fw = frame.NewWriter(c.nc, t.maxPacket, size)
	}
	return fw
}

// writeRaw writes b, bytes already framed.
func writeRaw(nc net.Conn, b []byte) error {
	if len(b) == 0 {
		return nil
	}
	_, err := nc.Write(b)
	return err
}

// writeFrames writes the packets of batch, each behind its length, and
// flushes them.
func writeFrames(fw *frame.Writer, batch []byte) error {
	for p, rest, ok := frame.Cut(batch); ok; p, rest, ok = frame.Cut(rest) {
		if err := fw.Write(p); err != nil {
			return err
		}
	}
	return fw.Flush()
}

// finish ends c from this side: it writes what is still queued, half-closes
// the connection and waits for the reader to see the peer close, all within
// closeWait, then closes the socket. A connection whose handshake never
// completed has nothing worth draining and is closed at once.
func (t *transport) finish(c *tcpConn, fw *frame.Writer) {
	deadline := time.Now().Add(t.closeWait)
	c.mu.Lock()
	c.ending = true
	batch := c.pending
	c.pending = nil
	c.queued.Store(0)
	partial := c.partial
	c.partial = nil
	established := c.established
	if len(batch) > 0 {
		fw = t.frameWriter(c, fw)
	}
	c.nc.SetWriteDeadline(deadline)
	c.setDeadlineLocked(deadline)
	c.wakeLocked()
	c.mu.Unlock()
	err := writeRaw(c.nc, partial)
	if err == nil && len(batch) > 0 {
		err = writeFrames(fw, batch)
	}
	t.writeFailed(err)
	if tc, ok := c.nc.(*net.TCPConn); ok && err == nil && established {
		tc.CloseWrite()
	} else {
		c.nc.Close()
	}
	<-c.readerDone
	c.nc.Close()
	t.forget(c)
}

// forget removes c from the connections.
func (t *transport) forget(c *tcpConn) {
	t.mu.Lock()
	if t.conns[c.remote] == c {
		delete(t.conns, c.remote)
	}
	t.last.CompareAndSwap(c, nil)
	if c.hs != nil {
		t.handshakes.Remove(c.hs)
		c.hs = nil
	}
	t.mu.Unlock()
}

// WriteBatch writes each packet from the calling goroutine when that cannot
// block (writeNowLocked), or queues it for its connection's writer. It runs
// under the engine's lock and never blocks on the network.
func (t *transport) WriteBatch(msgs []datagram.Message) {
	for _, m := range msgs {
		c := t.conn(m.Addr)
		if c == nil {
			continue
		}
		c.mu.Lock()
		if c.overflowed {
			c.mu.Unlock()
			continue
		}
		if !c.writeNowLocked(m.Buf) {
			limit := t.maxQueue
			if !c.established {
				// In its handshake, a connection is sent only the
				// answers to its queries and "connect?": one that
				// asks for more than it reads is closed within
				// handshakeQueue, not maxQueue (N136).
				limit = handshakeQueue
			}
			if len(c.pending)+frame.HeaderLen+len(m.Buf) > limit {
				t.overflowLocked(c)
				c.mu.Unlock()
				continue
			}
			c.pending = frame.Append(c.pending, m.Buf)
			c.queued.Store(int64(len(c.pending)))
		}
		kick := len(c.pending) > 0 || c.partial != nil
		c.mu.Unlock()
		if kick {
			c.kickWriter()
		}
	}
}

// overflowLocked closes c, whose write queue would pass maxQueue. The
// application's own messages stay within WriteQueue and one send queue
// (Blocked), so only what the endpoint answers the peer on its own (its
// queries, its heartbeats' echoes) can get there: a peer that asks for
// more than it reads, and would otherwise make the queue grow without
// bound (N107). Nothing more is queued for it; its reader, woken if it
// was paused, then fails, and the connection ends as for any broken
// stream.
func (t *transport) overflowLocked(c *tcpConn) {
	c.overflowed = true
	t.writeOverflows.Add(1)
	c.pending, c.partial = nil, nil
	c.queued.Store(0)
	c.nc.Close()
	c.wakeLocked() // a paused reader reads the closed socket, and fails
}

// writeBurst is how soon after the previous one a packet counts as part of
// a burst, which the writer goroutine writes in batches.
const writeBurst = 20 * time.Microsecond

// maxInlineWrite is the largest packet a Send writes itself; the writer
// goroutine writes longer ones, which gain nothing from it.
const maxInlineWrite = 16 << 10

// writeNowLocked writes packet p to the socket from the goroutine that
// sends it, under the engine's lock, if that cannot block: nothing waits
// for the writer goroutine, the packet is not part of a burst, and the
// system takes it without waiting (what it does not take is left in
// partial for the writer). An echo then costs no hand-off to the writer
// goroutine, whose wake-up on two busy processors costs more than the
// write (N27). A packet is part of a burst when it follows another within
// writeBurst with nothing read from the stream in between: the first
// packet after a read may be its reply, however short the round trip, and
// so may the one after it (N104). It reports whether p was taken.
func (c *tcpConn) writeNowLocked(p []byte) bool {
	if c.iw == nil || len(p) > maxInlineWrite {
		return false
	}
	burst := false
	if c.answer.Swap(false) {
		// A reply: the clock is not read, so the packet after it is
		// no part of a burst either, and starts one at the most.
		c.lastWrite = time.Time{}
	} else {
		now := time.Now()
		burst = now.Sub(c.lastWrite) < writeBurst
		c.lastWrite = now
	}
	if burst || c.ending || c.writing || len(c.pending) > 0 || c.partial != nil {
		return false
	}
	b := frame.Append(c.wbuf[:0], p)
	c.wbuf = b[:0]
	if n := c.iw.tryWrite(b); n < len(b) {
		c.partial = append([]byte(nil), b[n:]...)
	}
	return true
}

// Blocked reports whether the connection to addr has more than the write
// queue's worth waiting (driver.Backpressure).
func (t *transport) Blocked(addr netip.AddrPort) bool {
	c := t.conn(addr)
	if c == nil {
		return false
	}
	return c.queued.Load() > int64(t.writeQueue)
}

// Ended closes the TCP connection to addr once what is queued for it is
// written (driver.Ender): the Fastnet connection is over.
func (t *transport) Ended(addr netip.AddrPort) {
	c := t.conn(addr)
	if c == nil {
		return
	}
	c.mu.Lock()
	if !c.ending {
		// A writer blocked on a peer that does not read gives up by
		// then, and the reader too: without it, such a connection
		// stayed open, its goroutines and queue held, until the
		// endpoint closed, and no longer counted against
		// MaxConnections (N136).
		deadline := time.Now().Add(t.closeWait)
		c.nc.SetWriteDeadline(deadline)
		c.setDeadlineLocked(deadline)
	}
	c.ending = true
	c.wakeLocked()
	c.mu.Unlock()
	c.kickWriter()
}

// Close closes the listener and ends every connection: each writer gets
// closeWait to write what is queued and see the peer close (see finish).
// The engine waits for the goroutines.
func (t *transport) Close() error {
	t.mu.Lock()
	t.closed = true
	conns := make([]*tcpConn, 0, len(t.conns))
	for _, c := range t.conns {
		conns = append(conns, c)
	}
	t.mu.Unlock()
	var err error
	if t.ln != nil {
		err = t.ln.Close()
	}
	// A writer blocked on a peer that does not read gives up by then.
	deadline := time.Now().Add(t.closeWait)
	for _, c := range conns {
		c.mu.Lock()
		c.ending = true
		c.nc.SetWriteDeadline(deadline)
		c.setDeadlineLocked(deadline)
		c.wakeLocked()
		c.mu.Unlock()
	}
	return err
}

// The abilities the engine finds in the transport (driver.Engine.Start).
var (
	_ driver.StreamReader  = (*transport)(nil)
	_ driver.Backpressure  = (*transport)(nil)
	_ driver.Pauser        = (*transport)(nil)
	_ driver.Ender         = (*transport)(nil)
	_ driver.StatsReporter = (*transport)(nil)
)

// ErrFrameTooLarge is the error of the framing layer for a packet longer
// than the maximum packet size, announced by the peer (D20). It is not
// what a Conn reports: the transport connection is closed, and the Conn
// ends with an error matching fastnet.ErrTransportClosed, as when the peer
// closes it.
var ErrFrameTooLarge = frame.ErrTooLarge
