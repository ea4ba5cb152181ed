// Package urpserver runs a URP 1.0 relay (package urp) over TCP: one
// process serving thousands of users.
//
//	s, err := urpserver.Listen(ctx, ":7100", urpserver.Config{})
//	defer s.Close()
//
// Every user has a reader and a writer goroutine; one lock guards the
// relay's state machine, which each read feeds. The writer takes what the
// relay queued for its user and writes it; while it writes, more queues
// up. Memory stays bounded with slow readers (U11): while a user has more
// than urp.Config.HighWater bytes waiting, the users of its group are not
// read, so a slow reader slows its group down to its pace; a user whose
// socket takes nothing for Config.WriteTimeout is closed, which releases
// its group; and a user with more than urp.Config.MaxOutput waiting is
// closed at once. A connection beyond urp.Config.MaxUsers is closed at
// once (U13). A user whose bytes break the protocol is closed, and nobody
// else (U5, U6). The joins that fail, guesses of a group's GID and
// password, are bounded by the address they come from: a user whose
// address has failed too many lately is closed (U26).
//
// The U-numbers are the project's URP decisions, in docs/urp.md.
package urpserver

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fastnet-engine/fastnet/urp"
)

// Config configures a relay server. The zero value works.
type Config struct {
	// Relay holds the protocol's limits (users, groups, group size,
	// message length, output per user) and the brand. Its Rand, when
	// nil, is seeded from crypto/rand, so that UIDs and GIDs cannot be
	// guessed (U3).
	Relay urp.Config
	// WriteTimeout closes a user whose socket takes nothing for this
	// long while the relay has bytes for it: a peer that vanished without
	// closing, or stopped reading, and holds its group meanwhile (U11).
	// Default 30s; negative: no timeout (the output limit still holds).
	WriteTimeout time.Duration
	// PacketTimeout closes a user that sent part of a packet and none
	// of the rest for this long (U23): the relay holds what came of it
	// (up to a message of urp.Config.MaxMessage), against its budget
	// of urp.Config.MaxPartial for all users. Counted from the last
	// byte that came, so a long message on a slow link is not cut off,
	// and not while the relay holds the user (U11). Default 30s;
	// negative: no timeout.
	PacketTimeout time.Duration
	// JoinFailures and JoinFailureEvery bound the joins that the users
	// of one address may fail, all together (U26): JoinFailures at
	// once, and one more every JoinFailureEvery once they are spent; the
	// users of one network, four times as many, as fast. A user whose
	// join finds its address's or its network's budget spent is closed
	// (urp.ErrGuessing, Stats.Guessing) before the join is checked, so
	// that guessing a group's GID and password (a group whose host set
	// no password has only its GID to guess) goes no faster than that.
	// An address is an IPv4 address or an IPv6 /64, a network an IPv4
	// /24 or an IPv6 /48; connections with no IP address (a listener of
	// the caller's, Serve) share one budget. At most JoinFailureAddrs
	// budgets are counted apart; those that find the table full of
	// budgets not whole again share one. Defaults DefaultJoinFailures,
	// DefaultJoinFailureEvery and DefaultJoinFailureAddrs; JoinFailures
	// times JoinFailureEvery must fit a time.Duration; JoinFailures
	// negative: no bound. A Relay.JoinGuard of the caller's replaces
	// the three.
	JoinFailures     int
	JoinFailureEvery time.Duration
	JoinFailureAddrs int
	// ReadBuffer is the most a read of a user's socket takes at once.
	// Default 16 KiB; at least 512.
	ReadBuffer int
	// Events, if not nil, receives what happens to users and groups, for
	// logging. The server never waits for it: an event that finds it
	// full is dropped and counted (Stats.EventsDropped).
	Events chan<- Event
}

const (
	defaultWriteTimeout  = 30 * time.Second
	defaultPacketTimeout = 30 * time.Second
	defaultReadBuffer    = 16 << 10
	// keepSpare is the largest write buffer a writer keeps for reuse.
	keepSpare = 256 << 10
	// writeChunk is the most one write takes: WriteTimeout counts from
	// the last progress, not from the start of a long output.
	writeChunk = 64 << 10
)

// Event is an event of the relay (urp.Event) with the address of the
// user's connection, when it is known: always for EventConnected,
// EventDisconnected and EventRefused.
type Event struct {
	urp.Event
	Addr netip.AddrPort // the user's address, as the server's socket sees it
}

// Stats are the relay's counters and the server's own.
type Stats struct {
	urp.Stats
	// WriteTimeouts counts users closed by Config.WriteTimeout,
	// PacketTimeouts those closed by Config.PacketTimeout.
	WriteTimeouts, PacketTimeouts uint64
	// EventsDropped counts events Config.Events had no room for.
	EventsDropped uint64
}

// Server is a URP relay serving TCP connections.
type Server struct {
	ln            net.Listener
	writeTimeout  time.Duration
	packetTimeout time.Duration
	readBuffer    int
	events        chan<- Event

	mu      sync.Mutex
	relay   *urp.Relay
	guard   *joinGuard // the relay's JoinGuard, nil if not the server's
	seeded  bool       // the relay's Rand is the server's
	users   map[uint32]*user
	closed  bool
	closing chan struct{} // closed by Close

	wg             sync.WaitGroup
	writeTimeouts  atomic.Uint64
	packetTimeouts atomic.Uint64
	eventsDropped  atomic.Uint64
}

// user is one user's connection.
type user struct {
	uid    uint32
	nc     net.Conn
	addr   netip.AddrPort
	wake   chan struct{} // the writer has output to take
	resume chan struct{} // the reader may no longer be held
	done   chan struct{} // closed when the user is gone
}

// Listen starts a relay on the TCP address addr ("host:port").
func Listen(ctx context.Context, addr string, cfg Config) (*Server, error) {
	s, err := newServer(cfg)
	if err != nil {
		return nil, err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("urpserver: listen %s: %w", addr, err)
	}
	s.start(ln)
	return s, nil
}

// Serve starts a relay on a listener of the caller's, which the server
// closes when it closes.
func Serve(ln net.Listener, cfg Config) (*Server, error) {
	s, err := newServer(cfg)
	if err != nil {
		return nil, err
	}
	s.start(ln)
	return s, nil
}

func newServer(cfg Config) (*Server, error) {
	switch {
	case cfg.ReadBuffer != 0 && cfg.ReadBuffer < 512:
		return nil, fmt.Errorf("urpserver: ReadBuffer %d is below 512", cfg.ReadBuffer)
	case cfg.ReadBuffer == 0:
		cfg.ReadBuffer = defaultReadBuffer
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = defaultWriteTimeout
	}
	if cfg.PacketTimeout == 0 {
		cfg.PacketTimeout = defaultPacketTimeout
	}
	switch {
	case cfg.JoinFailureEvery < 0:
		return nil, fmt.Errorf("urpserver: JoinFailureEvery %v is negative", cfg.JoinFailureEvery)
	case cfg.JoinFailureAddrs < 0:
		return nil, fmt.Errorf("urpserver: JoinFailureAddrs %d is negative", cfg.JoinFailureAddrs)
	}
	var guard *joinGuard
	if cfg.JoinFailures >= 0 && cfg.Relay.JoinGuard == nil {
		burst, every, addrs := cfg.JoinFailures, cfg.JoinFailureEvery, cfg.JoinFailureAddrs
		if burst == 0 {
			burst = DefaultJoinFailures
		}
		if every == 0 {
			every = DefaultJoinFailureEvery
		}
		if addrs == 0 {
			addrs = DefaultJoinFailureAddrs
		}
		var err error
		if guard, err = newJoinGuard(burst, every, addrs); err != nil {
			return nil, err
		}
		cfg.Relay.JoinGuard = guard
	}
	seeded := cfg.Relay.Rand == nil
	if seeded {
		var seed [32]byte
		crand.Read(seed[:])
		cfg.Relay.Rand = rand.New(rand.NewChaCha8(seed))
	}
	r, err := urp.NewRelay(cfg.Relay)
	if err != nil {
		return nil, err
	}
	s := &Server{
		writeTimeout:  cfg.WriteTimeout,
		packetTimeout: cfg.PacketTimeout,
		readBuffer:    cfg.ReadBuffer,
		events:        cfg.Events,
		relay:         r,
		guard:         guard,
		seeded:        seeded,
		users:         make(map[uint32]*user),
		closing:       make(chan struct{}),
	}
	if guard != nil {
		guard.s = s
	}
	return s, nil
}

func (s *Server) start(ln net.Listener) {
	s.ln = ln
	s.wg.Add(1)
	go s.acceptLoop()
}

// Addr returns the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Config returns the relay's configuration with its defaults filled in,
// less what the server made for itself (the Rand it seeded, the
// JoinGuard of its users' addresses), which is nobody else's to use: a
// server made with it makes its own.
func (s *Server) Config() urp.Config {
	s.mu.Lock()
	defer s.mu.Unlock()
	cfg := s.relay.Config()
	if s.seeded {
		cfg.Rand = nil
	}
	if s.guard != nil {
		cfg.JoinGuard = nil
	}
	return cfg
}

// Stats returns the relay's counters and the server's.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	st := s.relay.Stats()
	s.mu.Unlock()
	return Stats{Stats: st, WriteTimeouts: s.writeTimeouts.Load(), PacketTimeouts: s.packetTimeouts.Load(), EventsDropped: s.eventsDropped.Load()}
}

// Group describes an open group (see urp.Relay.Group).
func (s *Server) Group(gid uint32) (urp.GroupInfo, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.relay.Group(gid)
}

// User describes a connected user (see urp.Relay.User).
func (s *Server) User(uid uint32) (urp.UserInfo, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.relay.User(uid)
}

// Close stops accepting, closes every user's connection and returns once
// every goroutine of the server has.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.wg.Wait()
		return nil
	}
	s.closed = true
	close(s.closing)
	for _, u := range s.users {
		u.nc.Close()
	}
	s.mu.Unlock()
	err := s.ln.Close()
	s.wg.Wait()
	return err
}

func (s *Server) acceptLoop() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return
			}
			time.Sleep(10 * time.Millisecond) // EMFILE and the like
			continue
		}
		s.add(nc)
	}
}

// add makes a user of a new connection, or closes it when the relay is
// full (U13).
func (s *Server) add(nc net.Conn) {
	var addr netip.AddrPort
	if ta, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		ap := ta.AddrPort()
		addr = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		nc.Close()
		return
	}
	uid, err := s.relay.Connect()
	if err != nil {
		s.flushLocked(addr)
		s.mu.Unlock()
		nc.Close()
		return
	}
	u := &user{uid: uid, nc: nc, addr: addr, wake: make(chan struct{}, 1), resume: make(chan struct{}, 1), done: make(chan struct{})}
	s.users[uid] = u
	s.flushLocked(netip.AddrPort{})
	s.mu.Unlock()
	s.wg.Add(2)
	go s.readLoop(u)
	go s.writeLoop(u)
}

// flushLocked wakes the writers of users with output and handles the
// relay's events: a user the relay closed has its connection closed.
// refused is the address of a connection Connect refused, if any.
func (s *Server) flushLocked(refused netip.AddrPort) {
	for {
		uid, ok := s.relay.PollWrite()
		if !ok {
			break
		}
		if u := s.users[uid]; u != nil {
			signal(u.wake)
		}
	}
	s.resumeLocked()
	for {
		ev, ok := s.relay.PollEvent()
		if !ok {
			return
		}
		var addr netip.AddrPort
		switch ev.Kind {
		case urp.EventRefused:
			addr = refused
		case urp.EventConnected:
			addr = s.users[ev.UID].addr
		case urp.EventDisconnected:
			if u := s.users[ev.UID]; u != nil {
				addr = u.addr
				delete(s.users, ev.UID)
				close(u.done)
				u.nc.Close()
			}
		}
		s.notify(Event{Event: ev, Addr: addr})
	}
}

// resumeLocked wakes the readers the relay no longer holds (U11).
func (s *Server) resumeLocked() {
	for {
		uid, ok := s.relay.PollResume()
		if !ok {
			return
		}
		if u := s.users[uid]; u != nil {
			signal(u.resume)
		}
	}
}

// signal makes a value wait in ch, a channel of one, if none does.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (s *Server) notify(ev Event) {
	if s.events == nil {
		return
	}
	select {
	case s.events <- ev:
	default:
		s.eventsDropped.Add(1)
	}
}

// readLoop reads u's stream into the relay until it ends, pausing while
// the relay holds u (U11).
func (s *Server) readLoop(u *user) {
	defer s.wg.Done()
	buf := make([]byte, min(4<<10, s.readBuffer))
	held := false
	// inPacket: the relay holds part of a packet of u's, and the read
	// has a deadline of PacketTimeout (U23).
	inPacket := false
	for {
		for held {
			select {
			case <-u.resume:
			case <-u.done:
				return
			case <-s.closing:
				s.gone(u, ErrServerClosed)
				return
			}
			s.mu.Lock()
			held = s.relay.Held(u.uid)
			s.mu.Unlock()
		}
		if inPacket {
			// From now: a hold's time is not the user's.
			u.nc.SetReadDeadline(time.Now().Add(s.packetTimeout))
		}
		n, err := u.nc.Read(buf)
		if n > 0 {
			s.mu.Lock()
			s.relay.HandleBytes(u.uid, buf[:n])
			s.flushLocked(netip.AddrPort{})
			// Asked with the same lock: a resume that comes after
			// this answer finds u.resume to signal.
			held = s.relay.Held(u.uid)
			now := s.packetTimeout > 0 && s.relay.InPacket(u.uid)
			s.mu.Unlock()
			if inPacket && !now {
				u.nc.SetReadDeadline(time.Time{})
			}
			inPacket = now
			if n == len(buf) && len(buf) < s.readBuffer {
				// A busy user reads in larger pieces.
				buf = make([]byte, min(2*len(buf), s.readBuffer))
			}
		}
		if err != nil {
			if inPacket && isTimeout(err) {
				s.packetTimeouts.Add(1)
				err = ErrPacketTimeout
			}
			s.gone(u, err)
			return
		}
	}
}

// Why the server ends a user's connection, beside the relay's reasons
// (urp.ErrUnknownPacket, ...), in the Err of EventDisconnected.
var (
	// ErrWriteTimeout: the user's socket took none of a write for
	// Config.WriteTimeout.
	ErrWriteTimeout = errors.New("urpserver: write timed out")
	// ErrPacketTimeout: the user sent part of a packet and nothing more
	// for Config.PacketTimeout (U23).
	ErrPacketTimeout = errors.New("urpserver: packet left unfinished")
	// ErrServerClosed: the server is closing.
	ErrServerClosed = errors.New("urpserver: relay closed")
)

// gone tells the relay that u's connection ended (err: io.EOF) or failed,
// unless the relay closed it first.
func (s *Server) gone(u *user, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.users[u.uid] != u {
		return
	}
	switch {
	case s.closed:
		err = ErrServerClosed
	case err == io.EOF:
		err = nil
	}
	u.nc.Close()
	s.relay.Disconnect(u.uid, err)
	s.flushLocked(netip.AddrPort{})
}

// writeLoop writes what the relay queues for u until u is gone.
func (s *Server) writeLoop(u *user) {
	defer s.wg.Done()
	var spare []byte
	for {
		select {
		case <-u.wake:
		case <-u.done:
			return
		}
		s.mu.Lock()
		out := s.relay.TakeOutput(u.uid, spare)
		s.resumeLocked()
		s.mu.Unlock()
		if len(out) == 0 {
			spare = out // the relay has spare now
			continue
		}
		for b := out; len(b) > 0; {
			n := min(len(b), writeChunk)
			if s.writeTimeout > 0 {
				u.nc.SetWriteDeadline(time.Now().Add(s.writeTimeout))
			}
			if _, err := u.nc.Write(b[:n]); err != nil {
				if isTimeout(err) {
					s.writeTimeouts.Add(1)
					err = ErrWriteTimeout
				}
				s.gone(u, err) // and the reader fails
				return
			}
			b = b[n:]
		}
		if cap(out) <= keepSpare {
			spare = out[:0]
		} else {
			spare = nil
		}
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
