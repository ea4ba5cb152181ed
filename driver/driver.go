package driver

import (
	crand "crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/datagram"
	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/internal/timer"
)

// A Transport carries the endpoint's datagrams. WriteBatch is called with
// the engine's lock held, in the order the endpoint produced the datagrams,
// so it must not block for long; it keeps no reference to msgs.
type Transport interface {
	WriteBatch(msgs []datagram.Message)
	Close() error
}

// Backpressure is implemented by a transport that queues writes per peer
// (TCP): Send waits while Blocked, and the transport calls Engine.Wake when
// the queue drains.
type Backpressure interface {
	Blocked(addr netip.AddrPort) bool
}

// Ender is implemented by a transport with a connection per peer (TCP): it
// hears when the Fastnet connection to addr is over, to close its own once
// what is queued is written.
type Ender interface {
	Ended(addr netip.AddrPort)
}

// Pauser is implemented by a transport with a stream per peer (TCP), which
// must not drop packets: PauseRead stops or resumes reading the stream
// from addr, and the stream's own flow control holds the peer (N13). It
// runs under the engine's lock and must not block.
type Pauser interface {
	PauseRead(addr netip.AddrPort, paused bool)
}

// Options are the driver settings beyond the endpoint's.
type Options struct {
	// ReceiveQueue bounds the bytes of delivered messages a connection
	// holds until Receive takes them (N13), each message counting its
	// data and its place in the queue (40 bytes on 64-bit platforms,
	// N107), so that empty messages fill it too. When they reach it the
	// connection's intake pauses until Receive has taken half: the peer's
	// packets are dropped unacked and resent later, or its stream is not
	// read. Unreliable messages that do not fit are dropped (counted in
	// DroppedUnread); reliable ones are never lost. The connections of a
	// listener's backlog, which the application has not accepted yet,
	// share one ReceiveQueue (N152); an accepted connection has one of
	// its own, so that an application that reads slowly holds up to
	// MaxConnections of them. Default: 4*MaxMessageSize, at least 16 MiB.
	ReceiveQueue int
	// Batch is how many datagrams one batched write carries. Default 64.
	Batch int
	// CombineWrites suits a transport whose writes are system calls (UDP).
	// Datagrams are written outside the engine's lock by one goroutine at a
	// time, the one that produced them, while others queue theirs for it:
	// the socket's reader does not wait for a Send's system call, nor a
	// Send for the reader's, and what several goroutines queue meanwhile
	// goes out in one batched write. A Send that follows another within
	// sendBurst leaves its write to the timer goroutine, so that an
	// application sending in a loop gets batched writes too; an isolated
	// Send writes before it returns, for the lowest latency.
	//
	// Without it, WriteBatch is called with the lock held, and Send writes
	// before it returns; that suits a transport whose WriteBatch only
	// queues (TCP), whose order with Ender.Ended must hold.
	CombineWrites bool
	// Network names the transport in errors ("udp", "tcp"): see
	// CloseError.
	Network string
	// Events, if not nil, receives the connections' events (connected,
	// ended with the final statistics, MTU changes and, with
	// fastnet.Config.QualityInterval set, quality reports) and a server's
	// refused clients. The engine
	// never waits for it: an event that finds the channel full is
	// dropped and counted in Stats.EventsDropped, so give it a buffer.
	Events chan<- Event
	// Logger, if not nil, logs the same events: connections that start
	// and end and refused clients at Info, MTU and quality reports at
	// Debug. It is called
	// from a goroutine of its own, never with the engine's lock held.
	Logger *slog.Logger
	// Backlog bounds a server's established connections waiting for
	// Accept (N47). While it is reached, a new client is refused with the
	// reason "server busy" (counted in Stats.BacklogRefused); a
	// connection that ends before Accept takes it leaves the backlog at
	// once, with the messages it received (Stats.BacklogEnded). Default
	// DefaultBacklog; negative is refused.
	Backlog int
	// Intro, if not nil, hears the events of introductions (docs/nat.md,
	// X19): a Peer's EventIntroduced, EventIntroFailed, EventRelayHost
	// and EventRelayJoin, and the EventConnected, EventRefused and
	// EventConnectFailed of a connection an introduction made. c is the
	// connection the event is about, if the driver has one: the
	// introducer's for the first four, the introduced one for
	// EventConnected. It runs under the engine's lock and must not block
	// or call the engine; an initiator's introduced connection is handed
	// to it rather than to the listener.
	Intro func(ev fastnet.Event, c *Conn)
	// Path, if not 0, is how every connection of a transport of this kind
	// reaches its peer, reported in fastnet.Stats.Path (Conn.Stats, the
	// final statistics of EventEnded) wherever the engine reports none:
	// urpdriver's connections, each through a group on a URP relay, say
	// fastnet.PathRelay (docs/nat.md, X13).
	Path fastnet.IntroPath
}

// DefaultBacklog is the default of Options.Backlog.
const DefaultBacklog = 128

// errServerBusy is the reason a client is refused with while the
// listener's backlog is full (Options.Backlog).
var errServerBusy = errors.New("server busy")

// sendBurst is how soon after the previous one a Send counts as part of a
// burst (Options.CombineWrites), unless a Receive returned a message in
// between: a Send that answers one (an echo, a reply) is never part of a
// burst, however short the round trip. After Sends that read no clock
// (sendTimeLocked), it is sendBurst for each since the last that did.
const sendBurst = 20 * time.Microsecond

// burstYield is how many Sends of a burst go by before one yields its
// processor (Conn.send). A goroutine woken by a Send, the timer goroutine
// kicked to write the burst or a reader waiting for the lock with acks,
// is queued on the sender's processor, and an application sending in a
// loop keeps it: on loopback the first 78 packets of a 64-byte stream
// went unacknowledged for 17 ms while the send queue filled, and slow
// start ended on those late acks (N87).
const burstYield = 64

// CloseError is the error of a connection that has ended: Local says whether
// this side closed it, and Err is why (fastnet.ErrTimeout, a
// *fastnet.PeerClosedError, a *fastnet.ProtocolError, ...). It matches
// fastnet.ErrClosed with errors.Is, and unwraps to Err. Its text names the
// transport and the peer:
//
//	fastnet: udp 192.0.2.1:7000: connection lost: closed by peer: bye
type CloseError struct {
	Local bool
	Err   error
	// Net ("udp", "tcp", or a transport's own name) and Addr say which
	// connection ended.
	Net  string
	Addr netip.AddrPort
}

func (e *CloseError) Error() string {
	where := "fastnet: "
	if e.Net != "" {
		where += e.Net + " "
	}
	if e.Addr.IsValid() {
		where += e.Addr.String() + ": "
	} else if e.Net != "" {
		where = where[:len(where)-1] + ": "
	}
	inner := "<nil>"
	if e.Err != nil {
		inner = strings.TrimPrefix(e.Err.Error(), "fastnet: ")
	}
	var lc *fastnet.LocalCloseError
	switch {
	case errors.As(e.Err, &lc), e.Err == fastnet.ErrClosed:
		return where + inner // "connection closed: ...", "connection closed"
	case e.Local:
		return where + "connection closed: " + inner
	}
	return where + "connection lost: " + inner
}

// Is reports whether target is fastnet.ErrClosed.
func (e *CloseError) Is(target error) bool { return target == fastnet.ErrClosed }

// Unwrap returns the reason.
func (e *CloseError) Unwrap() error { return e.Err }

// Engine runs one fastnet.Endpoint for a driver: it is where a transport
// (the UDP and TCP drivers', or one of your own implementing Transport)
// plugs into the blocking API. Applications use the Conn and Listener it
// makes, not the Engine.
type Engine struct {
	mu  sync.Mutex
	ep  *fastnet.Endpoint
	clk *clock.Real
	tr  Transport
	// The transport's abilities (Start): nil where it lacks one.
	sr       StreamReader
	bp       Backpressure
	pauser   Pauser
	ender    Ender
	reporter StatsReporter
	cfg      fastnet.Config
	opts     Options
	conns    map[fastnet.Handle]*Conn
	lastConn *Conn // the connection of the latest event, saving a lookup a message; nil when it ends
	byAddr   map[netip.AddrPort]*Conn

	scratch []byte
	in      []fastnet.Incoming // the datagrams feedLocked hands over together
	out     []datagram.Message // datagrams polled and not yet written
	bufs    [][]byte           // buffers of out, by index
	// The batch being written outside the lock (Options.CombineWrites):
	// the writer swaps it with out.
	wout     []datagram.Message
	wbufs    [][]byte
	writing  bool       // a goroutine is writing outside the lock
	written  *sync.Cond // signalled when writing ends (Close) and when a writer takes a batch (answerLocked)
	lastSend clock.Time // the last Send that read the clock, for sendBurst
	unread   int        // Sends since lastSend that read none (sendTimeLocked)
	burstN   int        // Sends of the burst since the last yield (burstYield)
	answered bool       // a Receive returned a message since lastSend
	wakes    []*Conn    // connections to signal at unlock
	// streamInput is the peer whose packet InputEstablished is handling:
	// a Receive reading that peer's stream reads it (Conn.interruptLocked).
	streamInput netip.AddrPort

	timer    *timer.Alarm
	deadline clock.Time // when timer fires; 0: not armed
	overdue  overdue    // a deadline that fired overdue, put off for input
	// resendsHeld: the endpoint holds its resends back (N130), as the
	// last flush told it.
	resendsHeld bool
	// fed: the flush under way follows the read role's holder's input
	// (handleBatchLocked, inputFor), with nothing read and not yet fed.
	fed bool
	iw  InputWaiter // the transport, if it is one
	// inHand: the read role's holder read datagrams not yet fed.
	inHand atomic.Bool
	// idle hands a read role left free to the background reader; its
	// delay is maxIdleDelay, or MinResendRTT/2 if shorter (read.go).
	idle *timer.IdleTimer
	// idleTimers fires idle and the transport's (NewIdleTimer).
	idleTimers *timer.IdleTimers
	kick       chan struct{} // a Send left its transmits to the timer goroutine
	unsent     bool          // a Send queued data no flush has polled yet
	// held: unsent was left by a Receive for the reply that may follow
	// (N75), and no goroutine is about to poll it: the idle timer bounds
	// its wait.
	held   bool
	done   chan struct{}
	wg     sync.WaitGroup
	closed bool
	// gone holds the addresses of a client's transport connections that
	// closed before a dial on them reached the endpoint (TransportClosed,
	// dial), one for each dial at most.
	gone map[netip.AddrPort]bool
	// shut is closed once Close has shut the engine down, with the
	// transport's closing error closeErr.
	shut     chan struct{}
	closeErr error

	writeErrors atomic.Uint64 // Stats.WriteErrors

	// Guarded by mu: what the application asked to hear (notify.go).
	eventsDropped uint64                         // Stats.EventsDropped
	sendsDropped  uint64                         // Stats.SendsDropped
	logs          []Event                        // events for Options.Logger
	logKick       chan struct{}                  // logs has events
	receipts      map[fastnet.MessageID]*Receipt // SendTracked's, until settled

	// Server side.
	listener *Listener

	// Reading the socket (Reader, see read.go).
	rd Reader
	wr WaitReporter // rd, if it is one
	// waitsUnknown: wr said it cannot tell whether a read waited; reads
	// of one are timed with the clock instead.
	waitsUnknown bool
	rmsgs        []datagram.Message // the role holder's read buffers
	delivered    uint64             // messages queued for Receive, ever (N98)
	nbufs        int                // how many of rmsgs have their buffer (read)
	rsize        int                // how many of them the next read asks for
	early        int                // reads of one in a row that found their datagram waiting
	token        chan struct{}      // holds the read role while it is free
	turn         chan struct{}      // tells the background reader to take it
	role         readRole
	freeSince    clock.Time // when the role was left free
	wanted       bool       // turn was sent and the role not yet taken
	receivers    int        // Receive calls waiting that would take the role
	pending      int        // datagrams a Receive left unwritten at the head of out
	reading      *Conn      // the Receive holding the role is in a read for it
	interrupted  bool       // that read's deadline was set to end it
}

// NewEngine creates the endpoint. The transport is attached with Start.
// It refuses cfg.ReuseMessageBuffers: Receive hands over messages that
// waited in a queue while other datagrams arrived.
func NewEngine(cfg fastnet.Config, opts Options) (*Engine, error) {
	if cfg.Rand == nil {
		var seed [32]byte
		crand.Read(seed[:])
		cfg.Rand = rand.New(rand.NewChaCha8(seed))
	}
	if cfg.ReuseMessageBuffers {
		// Its Receive hands messages over long after the next datagram.
		return nil, errors.New("fastnet: a driver's messages are kept in its queues: ReuseMessageBuffers must be off")
	}
	if opts.ReceiveQueue < 0 {
		return nil, fmt.Errorf("fastnet: ReceiveQueue %d is negative", opts.ReceiveQueue)
	}
	if opts.Backlog < 0 {
		return nil, fmt.Errorf("fastnet: Backlog %d is negative", opts.Backlog)
	}
	if opts.Backlog == 0 {
		opts.Backlog = DefaultBacklog
	}
	var e *Engine
	if cfg.Role != fastnet.Client { // a Server, or a Peer's server-role connections (X19)
		// A full backlog refuses a client before the application's hook
		// is asked (N47). The hook runs inside the endpoint's inputs,
		// under the engine's lock.
		hook := cfg.Accept
		cfg.Accept = func(addr netip.AddrPort) error {
			if err := e.admitLocked(); err != nil {
				return err
			}
			if hook != nil {
				return hook(addr)
			}
			return nil
		}
	}
	ep, err := fastnet.NewEndpoint(cfg)
	if err != nil {
		return nil, err
	}
	cfg = ep.Config()
	if opts.ReceiveQueue == 0 {
		opts.ReceiveQueue = max(4*cfg.MaxMessageSize, 16<<20)
	}
	if opts.Batch <= 0 {
		opts.Batch = 64
	}
	e = &Engine{
		ep:      ep,
		clk:     clock.NewReal(),
		cfg:     cfg,
		opts:    opts,
		conns:   make(map[fastnet.Handle]*Conn),
		byAddr:  make(map[netip.AddrPort]*Conn),
		scratch: make([]byte, cfg.MaxPacketSize),
		kick:    make(chan struct{}, 1),
		logKick: make(chan struct{}, 1),
		done:    make(chan struct{}),
		shut:    make(chan struct{}),
	}
	e.written = sync.NewCond(&e.mu)
	return e, nil
}

// Config returns the endpoint's configuration with defaults filled in.
func (e *Engine) Config() fastnet.Config { return e.cfg }

// Start attaches the transport and starts the timer goroutine. If tr is a
// Reader, the engine reads it (see Reader); otherwise reader goroutines
// are the transport's, registered with Go.
func (e *Engine) Start(tr Transport) {
	e.tr = tr
	// What the transport can do, declared by the interfaces it
	// implements, is read here once.
	e.sr, _ = tr.(StreamReader)
	e.bp, _ = tr.(Backpressure)
	e.pauser, _ = tr.(Pauser)
	e.ender, _ = tr.(Ender)
	e.reporter, _ = tr.(StatsReporter)
	e.iw, _ = tr.(InputWaiter)
	e.timer = timer.NewAlarm(true)
	e.idleTimers = timer.NewIdleTimers(true)
	e.idle = e.idleTimers.NewTimer(max(min(maxIdleDelay, e.cfg.MinResendRTT/2), minIdleDelay))
	if rd, ok := tr.(Reader); ok {
		e.startReader(rd)
	}
	e.Go(e.timerLoop)
	if e.opts.Logger != nil {
		e.Go(e.logLoop)
	}
}

// NewIdleTimer returns a stopped idle timer of the given delay for the
// transport, one of the engine's set (IdleTimers). Start makes the set;
// Close stops it once every goroutine of Go has returned.
func (e *Engine) NewIdleTimer(delay time.Duration) *timer.IdleTimer {
	return e.idleTimers.NewTimer(delay)
}

// Go runs f on a goroutine that Close waits for.
func (e *Engine) Go(f func()) {
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		f()
	}()
}

// Done is closed when the engine shuts down.
func (e *Engine) Done() <-chan struct{} { return e.done }

func (e *Engine) timerLoop() {
	for {
		select {
		case <-e.done:
			return
		case <-e.kick:
			e.mu.Lock()
			if !e.closed && e.unsent {
				e.flushLocked()
			}
			e.unlock()
		case <-e.timer.C:
			e.mu.Lock()
			if !e.closed && !e.overdueLocked() {
				e.deadline = 0
				now := e.clk.Now()
				e.ep.HandleTimeout(now)
				e.flushAtLocked(now)
			}
			e.unlock()
		case <-e.idle.C:
			e.mu.Lock()
			e.idle.Fired()
			if !e.closed {
				now := e.clk.Now()
				if e.unsent {
					// What a Receive left unpolled (N75).
					e.flushAtLocked(now)
				}
				e.checkReadLocked(now)
			}
			e.unlock() // writes what a Receive left (e.pending)
		}
	}
}

// Input feeds one datagram (or deframed packet) from addr.
func (e *Engine) Input(from netip.AddrPort, b []byte) { e.InputEstablished(from, b, nil) }

// InputEstablished is Input for a transport that must know when the
// handshake of the connection with from completes: once b is handled, if
// that connection is established, it calls established (unless nil)
// under the engine's lock, before anything else can use or end the
// connection. Asking Established after Input could find the connection
// accepted, used and closed by others meanwhile, and take it for one
// whose handshake never completed.
func (e *Engine) InputEstablished(from netip.AddrPort, b []byte, established func()) {
	e.mu.Lock()
	defer e.unlockInput()
	if e.closed {
		return
	}
	now := e.clk.Now()
	e.streamInput = from
	e.ep.HandleDatagram(now, from, b)
	e.flushAtLocked(now)
	e.streamInput = netip.AddrPort{}
	if established == nil {
		return
	}
	if c := e.byAddr[from]; c != nil && c.established {
		established()
	}
}

// ReceiveRoom returns how many more bytes of messages, counted as
// PacketCharge counts them, the connection with addr may take into its
// Receive queue before its intake pauses (N13): 0 if it is paused or
// unknown. Only Receive changes it meanwhile, and only upwards, for a
// stream read by one goroutine at a time.
func (e *Engine) ReceiveRoom(addr netip.AddrPort) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.byAddr[addr]
	if c == nil || c.paused {
		return 0
	}
	return max(e.opts.ReceiveQueue-c.queueBytes, 0)
}

// PacketCharge is the most that a packet of n bytes can take from a
// Receive queue: a message's data, never longer than its packet, and its
// place in the queue (queueCharge).
func PacketCharge(n int) int { return n + messagePlace }

// InputPackets feeds packets deframed together from addr's stream, as
// Input feeds each, under one lock and in one HandleDatagrams call, which
// computes their messages' checksums together (N121). The packets may
// alias the reader's buffer: they are not kept.
func (e *Engine) InputPackets(from netip.AddrPort, packets [][]byte) {
	e.mu.Lock()
	defer e.unlockInput()
	if e.closed {
		return
	}
	now := e.clk.Now()
	e.streamInput = from
	in := e.in[:0]
	e.in = nil
	for _, p := range packets {
		in = append(in, fastnet.Incoming{From: from, Data: p})
	}
	e.ep.HandleDatagrams(now, in)
	clear(in)
	e.in = in[:0]
	e.flushAtLocked(now)
	e.streamInput = netip.AddrPort{}
}

// InputBatch feeds datagrams read together, under one lock, which a
// large batch lets go every 256 KiB to write what the endpoint has to
// send (N100).
func (e *Engine) InputBatch(msgs []datagram.Message) {
	e.mu.Lock()
	defer e.unlockInput()
	if e.closed {
		return
	}
	e.handleBatchLocked(msgs, e.clk.Now())
}

// handleBatchLocked hands the endpoint every datagram of msgs, then
// flushes.
func (e *Engine) handleBatchLocked(msgs []datagram.Message, now clock.Time) {
	if now = e.feedLocked(msgs, now); !e.closed {
		e.fedFlushLocked(now)
	}
}

// fedFlushLocked is flushAtLocked for the read role's holder once it has
// fed what it read: it may let held resends go (N132).
func (e *Engine) fedFlushLocked(now clock.Time) {
	e.fed = true
	e.flushAtLocked(now)
	e.fed = false
}

// feedLocked hands the endpoint every datagram of msgs. Every
// answerBytes of them, if more follow, it writes what the endpoint has to
// send (answerLocked), and reads the clock again if it let the lock go; it
// returns the time it fed the last datagrams at.
//
// The datagrams between two such writes go to the endpoint in one call
// (HandleDatagrams), which computes the checksums of the messages of
// their bundles together (N102).
func (e *Engine) feedLocked(msgs []datagram.Message, now clock.Time) clock.Time {
	fed := 0
	// Taken from e, since answerLocked may let the lock go and another
	// input come in meanwhile.
	in := e.in[:0]
	e.in = nil
	for i := range msgs {
		for d := range msgs[i].Datagrams() {
			in = append(in, fastnet.Incoming{From: msgs[i].Addr, Local: msgs[i].Local, Data: d})
			fed += len(d)
		}
		if fed >= answerBytes && i < len(msgs)-1 {
			e.ep.HandleDatagrams(now, in)
			clear(in)
			in, fed = in[:0], 0
			if now = e.answerLocked(now); e.closed {
				return now // closed while the lock was let go
			}
		}
	}
	e.ep.HandleDatagrams(now, in)
	clear(in)
	e.in = in[:0]
	e.inHand.Store(false)
	return now
}

// answerLocked writes, in the middle of a large input, what the endpoint
// has to send: the acks of what came so far (N100). Without it a batched
// read (up to readBatch datagrams, each up to 64 KiB with receive
// offload) is acknowledged only once all of it is handled, a millisecond
// or more after its first datagrams came, and the peer's window runs dry
// meanwhile. With Options.CombineWrites the writes are made outside the
// lock, as release makes them; the clock is then read again, since another
// goroutine may have fed the endpoint a later time meanwhile. It returns
// the time to go on with.
func (e *Engine) answerLocked(now clock.Time) clock.Time {
	e.flushAtLocked(now)
	switch {
	case !e.opts.CombineWrites || len(e.out) == 0:
		return now // written under the lock, or nothing to write
	case e.writing:
		// Another goroutine is writing outside the lock, and will
		// take what was just polled once it has the lock again: let
		// it, or the rest of the input would be handled first. It
		// signals written at each batch it takes.
		for e.writing && len(e.out) > 0 && !e.closed {
			e.written.Wait()
		}
		return max(now, e.clk.Now())
	}
	e.writing = true
	for len(e.out) > 0 && !e.closed {
		e.writeOutLocked()
	}
	e.writing = false
	e.written.Broadcast()
	return max(now, e.clk.Now())
}

// writeOutLocked writes e.out outside the lock, for the goroutine that set
// e.writing (Options.CombineWrites): it takes the batch and says so to an
// input waiting for that (answerLocked), unlocks, writes, locks again, and
// polls what a Send queued meanwhile, leaving it to this writer.
func (e *Engine) writeOutLocked() {
	e.pending = 0
	batch, bufs := e.out, e.bufs
	e.out, e.bufs = e.wout[:0], e.wbufs
	e.written.Broadcast()
	e.mu.Unlock()
	for b := batch; len(b) > 0; {
		n := min(len(b), e.opts.Batch)
		e.tr.WriteBatch(b[:n])
		b = b[n:]
	}
	clear(batch)
	e.mu.Lock()
	e.wout, e.wbufs = batch[:0], bufs
	if e.unsent && !e.closed {
		e.flushLocked()
	}
	e.wakeLocked()
}

// dispatchAllLocked hands the endpoint's events to the connections.
func (e *Engine) dispatchAllLocked() {
	var ev fastnet.Event
	for e.ep.NextEvent(&ev) {
		e.dispatchLocked(&ev)
	}
}

// TransportClosed reports that the transport connection to addr is gone.
func (e *Engine) TransportClosed(addr netip.AddrPort) {
	e.mu.Lock()
	defer e.unlock()
	if e.closed {
		return
	}
	if e.cfg.Role == fastnet.Client && e.byAddr[addr] == nil {
		// A client's transport connection, opened for a dial that has
		// not reached the endpoint yet, closed before it did (a server
		// that closes at once): the dial hears of it then (N145),
		// rather than waiting its whole ConnectTimeout for an answer
		// that cannot come. Only a client's: a server hears of every
		// stream that ends before its handshake, and keeps nothing of
		// them.
		if e.gone == nil {
			e.gone = make(map[netip.AddrPort]bool)
		}
		e.gone[addr] = true
		return
	}
	e.ep.HandleTransportClosed(e.clk.Now(), addr)
	e.flushLocked()
}

// flushLocked drains events into the connections, then transmits into the
// transport, then re-arms the timer. Events go first so that an
// application goroutine waiting in Receive wakes while this one is still
// writing the acks: the ack's system call is off the echo path.
func (e *Engine) flushLocked() { e.flushAtLocked(e.clk.Now()) }

// flushAtLocked is flushLocked with the clock already read for the input
// it follows.
func (e *Engine) flushAtLocked(now clock.Time) {
	var ev fastnet.Event
	if e.cfg.Transport == fastnet.Datagram {
		// While a deadline is, or now is, put off for the input
		// waiting (N129), the resends due wait for that input too:
		// the acks that free their packets may be in it (N130). A
		// flush that finds none waiting lets them go, put-off or not:
		// every ack that came is in. Everything else goes at once.
		hold := (e.overdue.last != 0 || e.deadline != 0 && now.Sub(e.deadline) >= overdueAfter) && e.inputWaitingLocked()
		if !hold && e.resendsHeld && e.overdue.last != 0 && !e.fed {
			// A flush of another goroutine (a Send's) cannot see a
			// read that has taken datagrams and not yet said so
			// (inHand): resends held stay held, for the reader's
			// flush after its input, or the put-off's end, to let go
			// (N132).
			hold = true
		}
		if hold && e.overdue.last == 0 {
			e.overdueLocked()
		}
		if hold != e.resendsHeld {
			e.resendsHeld = hold
			e.ep.HoldResends(now, hold)
		}
	}
	e.unsent, e.held = false, false
	for e.ep.NextEvent(&ev) {
		e.dispatchLocked(&ev)
	}
	for {
		if e.opts.CombineWrites && len(e.out) >= e.opts.Batch {
			// Leave the rest for the writer's next round, so that
			// memory stays bounded and those waiting wake early.
			e.unsent = true
			break
		}
		t, ok := e.ep.PollTransmit(now, e.scratch)
		if !ok {
			break
		}
		i := len(e.out)
		if i == len(e.bufs) {
			e.bufs = append(e.bufs, nil)
		}
		if cap(e.bufs[i]) < t.N {
			e.bufs[i] = make([]byte, max(t.N, 2048))
		}
		b := e.bufs[i][:t.N]
		copy(b, e.scratch[:t.N])
		e.out = append(e.out, datagram.Message{Buf: b, N: t.N, Addr: t.To, Local: t.Local})
		if !e.opts.CombineWrites && len(e.out) == e.opts.Batch {
			e.tr.WriteBatch(e.out)
			e.out = e.out[:0]
		}
	}
	if !e.opts.CombineWrites && len(e.out) > 0 {
		e.tr.WriteBatch(e.out)
		clear(e.out)
		e.out = e.out[:0]
	}
	// Transmitting can produce events (a connection closing once its last
	// ack went out, EventWritable); hand those over too.
	for e.ep.NextEvent(&ev) {
		e.dispatchLocked(&ev)
	}
	if d, ok := e.ep.NextDeadline(); ok {
		e.armLocked(d, now)
	}
}

// Overdue deadlines (N129). A deadline overdueAfter or more past, when
// its timer fires or a flush finds it so first, was held up, most often
// because the whole process was (stopped, swapped out, its virtual
// machine descheduled, starved by other work), and what arrived meanwhile
// waits to be read: heartbeats that keep the connection alive, acks of
// the packets it would resend. Handled at once, such a deadline would end
// a connection whose peer never went silent, or resend, and count as
// lost, packets acked long ago. So it is put off by overdueGrace, while
// the goroutines that read, woken in the same instant, hand over what
// waits; then again by overdueGrace for as long as input still waits
// unread (until two checks in a row find none), within a budget of
// running time: a quarter of how late it was, overdueMax at most. A
// put-off that is itself held up overdueAfter or more (the process
// stalled again) gets the budget of that delay if it is more than what
// is left, up to overdueAgain times; past that, the delay spends the
// budget. A flush that finds a deadline overdue, or put off, while
// input waits has the endpoint hold its resends back
// (fastnet.Endpoint.HoldResends), and sends the rest: the resends that
// came due go once the input that may ack them is in, with the
// reader's first flush that finds none waiting (N132), or once the
// deadline is handled (N130: N129 held every flush until the put-off
// ended, which held the acks and replies of a process starved of
// processor time, late at every turn, and its peers resent what they
// had not heard acked). The input
// so comes before the deadline, as it would have had the process run,
// and on a busy socket, never empty, a deadline waits its budget at
// most, given anew at most overdueAgain times. That input waits is
// known of datagrams read and not yet handed over (a Reader's), and of
// input still in a transport that can tell (InputWaiter: the UDP
// driver's socket, the TCP driver's streams, N131); a transport that is
// neither gets the first put-off only.
const (
	overdueAfter = 20 * time.Millisecond
	overdueGrace = 2 * time.Millisecond
	overdueMax   = 200 * time.Millisecond
	// overdueAgain bounds the times one put-off held up again gets a
	// budget anew: a process stopped once more within a put-off is, a
	// process starved of processor time is late at every step, and
	// with a budget anew at each, its put-off never ended while input
	// kept coming (N130).
	overdueAgain = 2
)

// overdueLocked reports whether the deadline, its timer just fired or a
// flush found it overdue, is to wait for the input that may be waiting
// (see overdueAfter), and if so arms the timer to fire again in
// overdueGrace. The deadline stays set (armLocked leaves an
// earlier one as it is), so input handled meanwhile does not move it.
func (e *Engine) overdueLocked() bool {
	now := e.clk.Now()
	wait, held := e.overdue.step(now, e.deadline, e.inputWaitingLocked)
	if !wait {
		return false
	}
	if held {
		// A read role left free goes to the background reader now,
		// not when the idle timer, as overdue, gets to it.
		e.checkReadLocked(now)
	}
	e.timer.Reset(overdueGrace)
	return true
}

// overdue is the state of a deadline put off for input (overdueAfter).
type overdue struct {
	last clock.Time    // when it was last put off; 0 if it is not
	left time.Duration // how much more running time it may be put off
	// quiet: no input was known to wait at the last step. A put-off
	// ends at the second such step in a row: a read that has taken
	// datagrams from the socket and not yet said so (inHand) is seen
	// at the next.
	quiet bool
	again int // times it was held up again, and given a budget anew
}

// step decides, for the timer fired at now with deadline set (0 if none),
// whether the deadline waits overdueGrace more (wait), and whether the
// timer was held up, first or again (held). waiting reports whether
// input is known to wait; it is asked only within a put-off's budget,
// and the put-off ends once it says no twice in a row.
func (o *overdue) step(now, deadline clock.Time, waiting func() bool) (wait, held bool) {
	putOff := o.last != 0
	late := now.Sub(deadline)
	if putOff {
		late = now.Sub(o.last) // the wait since the last put-off
	}
	switch {
	case deadline == 0 || !putOff && late < overdueAfter:
		*o = overdue{}
		return false, false
	case late >= overdueAfter && (!putOff || o.again < overdueAgain):
		// Held up, first or again: a budget for that delay, or what
		// is left of the one before if more (at least overdueAfter/4,
		// over 2 put-offs).
		if putOff {
			o.again++
		}
		o.left = min(max(o.left, late/4), overdueMax)
		o.quiet = false
		held = true
	default:
		// On time, or held up again past overdueAgain: the process is
		// starved, not stopped, and the delay spends the budget.
		if o.left -= late; o.left <= 0 {
			*o = overdue{}
			return false, false
		}
		if waiting() {
			o.quiet = false
		} else if o.quiet {
			*o = overdue{}
			return false, false
		} else {
			o.quiet = true
		}
	}
	o.last = now
	return true, held
}

// inputWaitingLocked reports whether input is known to wait: datagrams
// read and not yet handed over, or in the transport (InputWaiter).
func (e *Engine) inputWaitingLocked() bool {
	if e.inHand.Load() {
		return true
	}
	if e.iw != nil {
		waiting, _ := e.iw.InputWaiting()
		return waiting
	}
	return false
}

// armLocked makes the timer fire by d. A timer armed earlier is left as it
// is: it fires, finds nothing due, and is armed again for what is. Moving
// it only ever earlier keeps the runtime's timer work off the path of a
// round trip, whose resend deadline comes and goes with each message.
func (e *Engine) armLocked(d, now clock.Time) {
	if e.deadline != 0 && e.deadline <= d {
		return
	}
	e.deadline = d
	e.timer.Reset(max(d.Sub(now), 0))
}

// clockEvery bounds how many Sends in a row read no clock
// (sendTimeLocked): the one after them reads it.
const clockEvery = 16

// sendTimeLocked returns the time a Send queues its message at, and
// whether it read the clock for it. A reliable message sent while a write
// is pending that will poll it (writePendingLocked: the timer goroutine
// kicked by an earlier Send of the burst, or a goroutine writing outside
// the lock; not what a Receive left for its reply, N75) reads none:
// the time of a reliable message is not used once queued, and the
// endpoint queues it at the later of the time given and the latest it
// knows (Endpoint.Send), here the last input's or poll's. Over a stream
// of small messages the clock was about a tenth of the sender's processor
// time (N97). An unreliable message reads it, since its time is when it
// expires (fastnet.Config.UnreliableMaxDelay), and so do a Send that
// answers a Receive (sendBurst) and every clockEvery-th Send.
func (e *Engine) sendTimeLocked(reliable bool) (now clock.Time, read bool) {
	if reliable && e.opts.CombineWrites && e.writePendingLocked() && !e.answered &&
		e.lastSend != 0 && e.unread < clockEvery-1 {
		return e.lastSend, false // counted in unread once queued (sentLocked)
	}
	return e.clk.Now(), true
}

// sentLocked follows a Send that queued data at now; read says whether
// the Send read the clock for it (sendTimeLocked). Without
// Options.CombineWrites it writes now. With it, the data is left to the
// goroutine writing outside the lock, if there is one, or to the timer
// goroutine if this Send is part of a burst (sendBurst); otherwise it is
// queued for the caller's unlock to write. It reports whether the caller
// should yield its processor once unlocked (burstYield).
func (e *Engine) sentLocked(now clock.Time, read bool) (yield bool) {
	if !e.opts.CombineWrites {
		e.flushAtLocked(now)
		return false
	}
	burst := true // one that read no clock follows a pending write
	if read {
		burst = e.burstLocked(now)
		e.lastSend, e.unread = now, 0
	} else {
		e.unread++
	}
	e.answered = false
	if burst {
		e.burstN++
		if e.burstN >= burstYield {
			e.burstN, yield = 0, true
		}
	} else {
		e.burstN = 0
	}
	switch {
	case e.writing:
		e.unsent = true
	case burst:
		if !e.writePendingLocked() {
			// What a Receive left for its reply (held) goes with it.
			e.unsent, e.held = true, false
			select {
			case e.kick <- struct{}{}:
			default:
			}
		}
	default:
		e.flushAtLocked(now)
	}
	return yield
}

// writePendingLocked reports whether a goroutine is about to poll the
// endpoint and write what it has: one writing outside the lock, which
// polls again before it stops, or the timer goroutine, kicked by a Send.
func (e *Engine) writePendingLocked() bool { return e.writing || e.unsent && !e.held }

// burstLocked reports whether a Send at now is part of a burst: it
// follows the last Send that read the clock by less than sendBurst for
// each Send since, and answers no Receive.
func (e *Engine) burstLocked(now clock.Time) bool {
	return e.lastSend != 0 && now.Sub(e.lastSend) < sendBurst*time.Duration(1+e.unread) && !e.answered
}

// unlock releases the lock taken to feed the endpoint. With
// Options.CombineWrites it first writes what is queued, outside the lock,
// unless another goroutine is writing (which then writes it too): it swaps
// the queue (at most one batch, see flushLocked) for an empty one, unlocks,
// writes, and locks again to poll what was queued meanwhile, until nothing
// is left.
func (e *Engine) unlock() { e.release(false) }

// unlockInput is unlock after a socket input. If the input woke goroutines
// waiting in Receive, the reader first yields its processor to them, still
// holding the writer's role: an application that answers at once (an echo,
// a request and its reply) then has its Send queued behind the acks of the
// input, and both leave in one batched write. The acks wait for no more
// than that yield (D13 asks them flushed by the end of the input; the
// endpoint has flushed them, the socket write follows).
func (e *Engine) unlockInput() { e.release(true) }

func (e *Engine) release(yield bool) {
	if !e.opts.CombineWrites || e.writing || len(e.out) == 0 {
		e.wakeLocked()
		e.mu.Unlock()
		return
	}
	e.writing = true
	if yield && len(e.wakes) > 0 {
		e.wakeLocked()
		e.mu.Unlock()
		runtime.Gosched()
		e.mu.Lock()
		if e.unsent && !e.closed {
			e.flushLocked()
		}
	}
	for len(e.out) > 0 && !e.closed {
		if p := e.pending; p > 0 && p < len(e.out) {
			// A Receive left its acks at the head, and a Send
			// queued more since (an echo's reply): the reply goes
			// first, so that it is what wakes the peer.
			slices.Reverse(e.out[:p])
			slices.Reverse(e.out[p:])
			slices.Reverse(e.out)
		}
		e.writeOutLocked()
	}
	e.writing = false
	e.written.Broadcast()
	e.wakeLocked()
	e.mu.Unlock()
}

// wakeLocked signals the connections whose signals waited for the writes
// (Conn.signalLocked): the goroutines they wake then find the datagrams
// they answer already written, and the writer's processor free.
func (e *Engine) wakeLocked() {
	for i, c := range e.wakes {
		c.wakeLocked()
		e.wakes[i] = nil
	}
	e.wakes = e.wakes[:0]
}

// dispatchLocked hands the endpoint's event ev to its connection. ev is
// read, not kept: it is a pointer only so that an event, large, is not
// copied once more for each message.
func (e *Engine) dispatchLocked(ev *fastnet.Event) {
	c := e.lastConn
	if c == nil || c.h != ev.Conn {
		c = e.conns[ev.Conn]
		e.lastConn = c
	}
	switch ev.Kind {
	case fastnet.EventConnected:
		if c == nil && ev.Intro != nil && ev.Intro.Initiator && e.opts.Intro != nil {
			// A Peer's handshake over a punched path (X12): the
			// connection is the introduction's, not the listener's.
			c = e.newConnLocked(ev.Conn, ev.Addr)
			c.id = ev.ID
			c.established = true
			e.notifyLocked(Event{Kind: EventConnected, Conn: c, Addr: c.remote})
			e.opts.Intro(*ev, c)
			return
		}
		if c == nil { // a server's new connection
			c = e.newConnLocked(ev.Conn, ev.Addr)
			c.id = ev.ID
			c.established = true
			if ev.Intro != nil && e.opts.Intro != nil {
				e.opts.Intro(*ev, c)
			}
			if l := e.listener; l != nil && !l.pushLocked(c) {
				// The backlog filled after the accept hook let the
				// client in: it is refused now (N47).
				e.ep.Abort(e.clk.Now(), ev.Conn, errServerBusy.Error())
				return
			}
			e.notifyLocked(Event{Kind: EventConnected, Conn: c, Addr: c.remote})
			return
		}
		c.id = ev.ID
		c.established = true
		c.signalLocked()
		e.notifyLocked(Event{Kind: EventConnected, Conn: c, Addr: c.remote})
	case fastnet.EventRefused, fastnet.EventConnectFailed:
		if c != nil {
			c.endLocked(ev.Err, false)
		} else if ev.Intro != nil && e.opts.Intro != nil {
			e.opts.Intro(*ev, nil)
		}
	case fastnet.EventIntroduced, fastnet.EventIntroFailed, fastnet.EventRelayHost, fastnet.EventRelayJoin:
		if e.opts.Intro != nil {
			e.opts.Intro(*ev, c)
		}
	case fastnet.EventDisconnected:
		if c != nil {
			c.final = e.pathed(ev.Stats)
			var lc *fastnet.LocalCloseError
			c.endLocked(ev.Err, errors.As(ev.Err, &lc))
			e.notifyLocked(Event{Kind: EventEnded, Conn: c, Addr: c.remote, Stats: c.final, Err: c.err})
		}
	case fastnet.EventMessage:
		if c != nil {
			c.deliverLocked(ev)
		}
	case fastnet.EventWritable:
		if c != nil {
			c.signalLocked()
		}
	case fastnet.EventOutcome:
		e.settleLocked(ev.Message, ev.Outcome)
	case fastnet.EventMTUChanged:
		if c != nil {
			e.notifyLocked(Event{Kind: EventMTU, Conn: c, Addr: c.remote, MTU: ev.MTU})
		}
	case fastnet.EventRejected:
		e.notifyLocked(Event{Kind: EventRefused, Addr: ev.Addr, Err: ev.Err})
	case fastnet.EventIntroduction:
		e.notifyLocked(Event{Kind: EventIntroduction, Conn: c, Addr: ev.Addr, Target: ev.ID, Err: ev.Err})
	case fastnet.EventQuality:
		if c != nil {
			c.quality = *ev.Quality
			e.notifyLocked(Event{Kind: EventQuality, Conn: c, Addr: c.remote, Quality: *ev.Quality})
		}
	}
}

func (e *Engine) newConnLocked(h fastnet.Handle, addr netip.AddrPort) *Conn {
	c := &Conn{e: e, h: h, remote: addr, notify: make(chan struct{}), done: make(chan struct{})}
	e.conns[h] = c
	e.byAddr[addr] = c
	return c
}

// Established reports whether the Fastnet connection with addr is
// established. Asked after Input, it may find the connection ended
// already; a transport that must know when the handshake completes uses
// InputEstablished.
func (e *Engine) Established(addr netip.AddrPort) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.byAddr[addr]
	return c != nil && c.established
}

// Wake wakes the goroutines waiting on the connection with addr (a
// transport's write queue drained).
func (e *Engine) Wake(addr netip.AddrPort) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if c := e.byAddr[addr]; c != nil {
		c.signalLocked()
	}
}

// Close shuts the engine down at once: the transport is closed, every
// connection still open ends with ErrClosed, and every goroutine the engine
// started has returned when Close returns.
func (e *Engine) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		// Another call closes it, or has (a dialed connection that
		// ended, N142): this one returns when that one has done, as if
		// it had closed it itself.
		<-e.shut
		return e.closeErr
	}
	e.closed = true
	defer close(e.shut)
	// What the endpoint produced last (a "disconnect" after a graceful
	// close) goes out before the socket closes: wait for a write in
	// progress, then write what is left.
	for e.writing {
		e.written.Wait()
	}
	if len(e.out) > 0 {
		e.tr.WriteBatch(e.out)
		clear(e.out)
		e.out = e.out[:0]
	}
	e.pending = 0
	for _, c := range e.conns {
		if st, ok := e.ep.Stats(c.h); ok {
			c.final = e.pathed(&st)
		}
		c.endLocked(&fastnet.LocalCloseError{Reason: "endpoint closed"}, true)
		e.notifyLocked(Event{Kind: EventEnded, Conn: c, Addr: c.remote, Stats: c.final, Err: c.err})
	}
	for id, r := range e.receipts { // their connections ended with the engine
		o := fastnet.OutcomeDropped
		if r.reliable {
			o = fastnet.OutcomeLost
		}
		e.settleLocked(id, o)
	}
	if e.listener != nil {
		e.listener.closeLocked()
	}
	close(e.done)
	e.timer.Close()
	e.idle.Stop()
	e.wakeLocked()
	e.mu.Unlock()
	e.closeErr = e.tr.Close()
	e.wg.Wait()
	e.idleTimers.Close()
	return e.closeErr
}

// pathed returns s with Options.Path as its Path if the engine reported
// none: a copy when it changes, so that the engine's own is left alone.
func (e *Engine) pathed(s *fastnet.Stats) *fastnet.Stats {
	if s == nil || s.Path != 0 || e.opts.Path == 0 {
		return s
	}
	c := *s
	c.Path = e.opts.Path
	return &c
}
