// Package urpdriver runs Fastnet over a URP relay group: the fallback for
// two peers that cannot reach each other directly. The relay carries the
// group's messages over TCP, reliably and in order, so the engine runs in
// its Stream mode (D4), and each Fastnet packet travels as one URP message
// (U20).
//
//	l, err := urpdriver.Listen(ctx, "relay:7100", urpdriver.Config{})
//	gid, password := l.Group()                  // tell the peers
//	c, err := l.Accept(ctx)                     // a *driver.Conn
//
//	c, err := urpdriver.Dial(ctx, "relay:7100", gid, password, urpdriver.Config{})
//
// The listener hosts a URP group, with a random password unless
// Config.Password sets one, and flags NOBROD and NOP2P, so that its
// members can reach only the host; it accepts one Fastnet connection from
// each member, all over its one connection to the relay. Listener.Lock
// closes the group to new members (LOCK). A member joins
// the group, waits for the host's greeting (an empty message: this is how
// it learns the host's UID) and connects to it.
//
// The connections are driver.Conn values, with the methods and errors
// documented in package driver. Each peer has an address of its own,
// UserAddr(uid), which names it in errors and statistics. Their
// statistics say fastnet.PathRelay (fastnet.Stats.Path): they reach the
// peer through the relay, whether or not an introduction made them
// (docs/nat.md, X13).
package urpdriver

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/fastnet-engine/fastnet/datagram"
	"github.com/fastnet-engine/fastnet/driver"
	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/urp"
	"github.com/fastnet-engine/fastnet/urp/urpclient"
)

// Config configures a Fastnet endpoint over a relay. The zero value works.
type Config struct {
	// Engine is the protocol configuration; Role and Transport are set by
	// Listen and Dial. Its MaxMessageSize must leave each packet within
	// the relay's longest message (urp.Config.MaxMessage, by default
	// enough for Fastnet's default 1 MiB, U18): a longer one makes the
	// relay close the connection. Its MaxPacketSize must be within
	// Relay.Client.MaxMessage, or Listen and Dial refuse the
	// configuration.
	Engine fastnet.Config
	// Relay configures the connection to the relay. Its OnWritten is the
	// driver's.
	Relay urpclient.Config
	// Password is the group's password (Listen). Zero draws one from
	// crypto/rand.
	Password uint32
	// WriteQueue bounds the bytes waiting to be written to the relay:
	// Send blocks while it is exceeded, and a host's greetings wait
	// (U25). Default (0): 4 MiB; negative is refused.
	WriteQueue int
	// ReceiveQueue, Backlog, Events and Logger are the driver's
	// (driver.Options).
	ReceiveQueue int
	Backlog      int
	Events       chan<- driver.Event
	Logger       *slog.Logger
}

const defaultWriteQueue = 4 << 20

// GroupFlags are the flags of a group a Listener hosts: its members can
// send only to the host (U20).
const GroupFlags = urp.FlagBinary | urp.FlagNoBrod | urp.FlagNoP2P

// ErrNotFastnetGroup is Dial's error for a group whose members may reach
// one another (no NOBROD and NOP2P): another member could pass itself off
// as the host (U20).
var ErrNotFastnetGroup = errors.New("urpdriver: the group lets members reach one another; not a Fastnet group")

// ErrHostLeft is Dial's error when the host leaves the group before it
// greeted this member.
var ErrHostLeft = errors.New("urpdriver: the host left the group")

// UserAddr is the address of URP user uid as a Fastnet peer: fd55:5250::
// (a unique local IPv6 prefix, "URP") then the UID, port 0.
func UserAddr(uid uint32) netip.AddrPort {
	a := [16]byte{0xfd, 0x55, 0x52, 0x50}
	binary.BigEndian.PutUint32(a[12:], uid)
	return netip.AddrPortFrom(netip.AddrFrom16(a), 0)
}

// UserOf returns the UID of an address UserAddr made.
func UserOf(addr netip.AddrPort) (uint32, bool) {
	a := addr.Addr().As16()
	if !addr.Addr().Is6() || a[0] != 0xfd || a[1] != 0x55 || a[2] != 0x52 || a[3] != 0x50 || addr.Port() != 0 {
		return 0, false
	}
	for _, b := range a[4:12] {
		if b != 0 {
			return 0, false
		}
	}
	return binary.BigEndian.Uint32(a[12:]), true
}

// GroupAddr is the address a Listener serves on: a group on a relay.
type GroupAddr struct {
	Relay string // the relay's address, as given to Listen
	GID   uint32 // the group's id on it
}

// Network returns "urp".
func (a GroupAddr) Network() string { return "urp" }

// String returns the relay's address and the GID: "relay:7100/123456".
func (a GroupAddr) String() string {
	return a.Relay + "/" + strconv.FormatUint(uint64(a.GID), 10)
}

// Listener accepts Fastnet connections from the members of a URP group it
// hosts: a driver.Listener, with the group's id and password.
type Listener struct {
	*driver.Listener
	t             *transport
	gid, password uint32
}

// Group returns the group's id and password, which members give Dial.
func (l *Listener) Group() (gid, password uint32) { return l.gid, l.password }

// Lock closes the group to new members: it sets the group's flag LOCK
// (GroupFlags|urp.FlagLock) and returns once the relay has, from then on
// refusing every join, with the right password too (STAT_LOCK, a
// *urpclient.MadeError for urpclient's and Dial's callers). The members
// already in the group stay, and their connections with them. It fails if
// ctx ends first or the relay connection has ended.
func (l *Listener) Lock(ctx context.Context) error {
	if _, err := l.t.c.Set(ctx, urp.Respond, urp.KeyGroupFlags, GroupFlags|urp.FlagLock); err != nil {
		return fmt.Errorf("urpdriver: locking group %d: %w", l.gid, err)
	}
	return nil
}

// Listen connects to the relay at relayAddr, makes a group with a
// password and the flags GroupFlags, and accepts Fastnet connections from
// its members. The steps on the relay take at most Engine.ConnectTimeout
// (5 s by default): a relay that does not answer within it fails Listen
// with an error that matches fastnet.ErrTimeout.
func Listen(ctx context.Context, relayAddr string, cfg Config) (*Listener, error) {
	cfg.Engine.Role = fastnet.Server
	rctx, cancel := relayContext(ctx, cfg)
	defer cancel()
	t, c, err := connect(rctx, relayAddr, cfg)
	if err != nil {
		return nil, relayTimedOut(ctx, rctx, relayAddr, err)
	}
	password := cfg.Password
	for password == 0 {
		var b [4]byte
		crand.Read(b[:])
		password = binary.LittleEndian.Uint32(b[:])
	}
	gid, err := c.Make(rctx)
	if err == nil {
		_, err = c.Set(rctx, urp.Respond, urp.KeyGroupPass, password)
	}
	if err == nil {
		_, err = c.Set(rctx, urp.Respond, urp.KeyGroupFlags, GroupFlags)
	}
	err = relayTimedOut(ctx, rctx, relayAddr, err)
	var e *driver.Engine
	if err == nil {
		e, err = t.engine(cfg)
	}
	if err != nil {
		c.Abort()
		return nil, fmt.Errorf("urpdriver: hosting a group on %s: %w", relayAddr, err)
	}
	l := &Listener{Listener: e.NewListener(GroupAddr{Relay: relayAddr, GID: gid}), t: t, gid: gid, password: password}
	t.listener = l.Listener
	e.Start(t)
	e.Go(t.receiveLoop)
	return l, nil
}

// Dial connects to the relay at relayAddr, joins group gid with password,
// and connects to the group's host. A failure to join is a
// *urpclient.MadeError (errors.Is urpclient.ErrRefused); the others are
// those of driver.Engine.Dial. The steps on the relay (connecting,
// joining, the host's greeting) take at most Engine.ConnectTimeout (5 s
// by default), as the handshake that follows does: a relay that does not
// answer within it fails Dial with an error that matches
// fastnet.ErrTimeout.
func Dial(ctx context.Context, relayAddr string, gid, password uint32, cfg Config) (*driver.Conn, error) {
	cfg.Engine.Role = fastnet.Client
	rctx, cancel := relayContext(ctx, cfg)
	defer cancel()
	t, c, err := connect(rctx, relayAddr, cfg)
	if err != nil {
		return nil, relayTimedOut(ctx, rctx, relayAddr, err)
	}
	host, err := join(rctx, c, gid, password)
	err = relayTimedOut(ctx, rctx, relayAddr, err)
	var e *driver.Engine
	if err == nil {
		e, err = t.engine(cfg)
	}
	if err != nil {
		c.Abort()
		return nil, err
	}
	t.host = host
	t.peers[host] = true
	e.Start(t)
	e.Go(t.receiveLoop)
	return e.Dial(ctx, UserAddr(host))
}

// relayContext bounds the steps on the relay (connecting, making or
// joining the group, the host's greeting) by the engine's ConnectTimeout,
// as the engine bounds the handshake that follows (N144): a relay address
// where something accepts and never speaks failed the call only when ctx
// did, and held it for good without a deadline.
func relayContext(ctx context.Context, cfg Config) (context.Context, context.CancelFunc) {
	d := cfg.Engine.ConnectTimeout
	if d <= 0 {
		d = fastnet.DefaultConnectTimeout
	}
	return context.WithTimeout(ctx, d)
}

// relayTimedOut returns err, or, if it is the end of rctx, the bound of
// the relay's steps (relayContext), while the caller's ctx is not done,
// an error that says so and matches fastnet.ErrTimeout.
func relayTimedOut(ctx, rctx context.Context, relayAddr string, err error) error {
	if err == nil || ctx.Err() != nil || rctx.Err() == nil {
		return err
	}
	return fmt.Errorf("urpdriver: relay %s: no answer within the connect timeout: %w (%w)", relayAddr, fastnet.ErrTimeout, err)
}

// connect checks cfg and connects to the relay for a new transport.
func connect(ctx context.Context, relayAddr string, cfg Config) (*transport, *urpclient.Conn, error) {
	t, err := newTransport(cfg)
	if err != nil {
		return nil, nil, err
	}
	rc := cfg.Relay
	rc.OnWritten = t.written
	c, err := urpclient.Dial(ctx, relayAddr, rc)
	if err != nil {
		return nil, nil, err
	}
	t.c = c
	return t, c, nil
}

// join joins the group, checks it is a Fastnet group and waits for the
// host's greeting, which gives its UID (U20).
func join(ctx context.Context, c *urpclient.Conn, gid, password uint32) (uint32, error) {
	if err := c.Join(ctx, gid, password); err != nil {
		return 0, err
	}
	flags, err := c.Get(ctx, urp.KeyGroupFlags)
	// The host may leave between the join and the Get: the Get is then
	// given up (ErrLeft), or refused before it is sent, the client already
	// knowing the user is in no group (ErrRole).
	if errors.Is(err, urpclient.ErrLeft) || errors.Is(err, urp.ErrRole) {
		return 0, ErrHostLeft
	}
	if err != nil {
		return 0, err
	}
	if flags&(urp.FlagNoBrod|urp.FlagNoP2P) != urp.FlagNoBrod|urp.FlagNoP2P {
		return 0, ErrNotFastnetGroup
	}
	for {
		ev, err := c.Receive(ctx)
		if err != nil {
			return 0, err
		}
		switch {
		case ev.Kind == urp.GotText && len(ev.Data) == 0:
			return ev.UID, nil
		case ev.Kind == urp.GotRole:
			return 0, ErrHostLeft
		}
	}
}

// transport carries an engine's packets as URP messages over one relay
// connection. It implements driver.Transport, driver.Backpressure,
// driver.Pauser and driver.Ender.
type transport struct {
	e          *driver.Engine
	c          *urpclient.Conn
	listener   *driver.Listener // a host's
	host       uint32           // a member's host
	writeQueue int
	blocked    atomic.Bool // Blocked said yes since the last write

	mu      sync.Mutex
	peers   map[uint32]bool // the users with a Fastnet connection, or about to have one
	members map[uint32]bool // a host's members: the only users it takes packets from (U25)
	greet   map[uint32]bool // a host's members not greeted yet, the write queue being full (U25)
	paused  int             // connections whose intake is paused
	resumed chan struct{}   // closed and replaced when paused drops to 0
	closed  bool
}

// newTransport checks the engine's configuration, so that a bad one fails
// before anything is asked of the relay, and returns the transport.
func newTransport(cfg Config) (*transport, error) {
	// The driver's limits, refused here as the driver would, but before
	// the relay is contacted and a group made for nothing.
	switch {
	case cfg.ReceiveQueue < 0:
		return nil, fmt.Errorf("urpdriver: ReceiveQueue %d is negative", cfg.ReceiveQueue)
	case cfg.Backlog < 0:
		return nil, fmt.Errorf("urpdriver: Backlog %d is negative", cfg.Backlog)
	}
	cfg.Engine.Transport = fastnet.Stream
	// An endpoint of the configuration, for its limits with their
	// defaults (it does nothing else).
	ep, err := fastnet.NewEndpoint(cfg.Engine)
	if err != nil {
		return nil, err
	}
	// Each packet is one relay message: one longer than the relay
	// client sends would be refused, and over a stream nothing is resent
	// (N109).
	longest := cfg.Relay.Client.MaxMessage
	if longest == 0 {
		longest = urp.DefaultMaxMessage
	}
	if p := ep.Config().MaxPacketSize; longest < p {
		return nil, fmt.Errorf("urpdriver: Relay.Client.MaxMessage %d is below the engine's MaxPacketSize %d: longer packets could not be sent", longest, p)
	}
	wq := cfg.WriteQueue
	if wq < 0 {
		return nil, fmt.Errorf("urpdriver: WriteQueue %d is negative", wq)
	}
	if wq == 0 {
		wq = defaultWriteQueue
	}
	return &transport{
		writeQueue: wq,
		peers:      make(map[uint32]bool),
		members:    make(map[uint32]bool),
		greet:      make(map[uint32]bool),
		resumed:    make(chan struct{}),
	}, nil
}

func (t *transport) engine(cfg Config) (*driver.Engine, error) {
	cfg.Engine.Transport = fastnet.Stream
	e, err := driver.NewEngine(cfg.Engine, driver.Options{Network: "urp", Path: fastnet.PathRelay, ReceiveQueue: cfg.ReceiveQueue, Backlog: cfg.Backlog, Events: cfg.Events, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	t.e = e
	return e, nil
}

// written follows each write to the relay: greetings that waited for room
// are queued, and Sends that waited go on.
func (t *transport) written() {
	t.mu.Lock()
	t.greetLocked()
	t.mu.Unlock()
	if !t.blocked.Swap(false) || t.e == nil {
		return
	}
	t.mu.Lock()
	peers := make([]uint32, 0, len(t.peers))
	for p := range t.peers {
		peers = append(peers, p)
	}
	t.mu.Unlock()
	for _, p := range peers {
		t.e.Wake(UserAddr(p))
	}
}

// WriteBatch queues each packet as a message to its peer (U20).
func (t *transport) WriteBatch(msgs []datagram.Message) {
	for _, m := range msgs {
		if uid, ok := UserOf(m.Addr); ok {
			t.c.Queue(uid, m.Buf) // an error: the relay connection ended, and the loop says so
		}
	}
}

// Blocked reports whether the relay connection has more than WriteQueue
// bytes waiting (driver.Backpressure).
func (t *transport) Blocked(netip.AddrPort) bool {
	if t.c.Queued() <= t.writeQueue {
		return false
	}
	t.blocked.Store(true)
	return true
}

// PauseRead stops or resumes the reading of the relay (driver.Pauser).
// All peers share the relay connection, so one connection whose
// application is behind holds them all, and the relay holds the group
// (U11).
func (t *transport) PauseRead(_ netip.AddrPort, paused bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if paused {
		t.paused++
		return
	}
	if t.paused > 0 {
		t.paused--
		if t.paused == 0 {
			close(t.resumed)
			t.resumed = make(chan struct{})
		}
	}
}

// Ended hears that the Fastnet connection with addr is over
// (driver.Ender): a member leaves the relay, and a host removes the
// member from its group (U20). It runs under the engine's lock, so the
// requests go from a goroutine of their own, which returns as soon as the
// relay connection is closed.
func (t *transport) Ended(addr netip.AddrPort) {
	uid, ok := UserOf(addr)
	if !ok {
		return
	}
	t.mu.Lock()
	delete(t.peers, uid)
	closing := t.closed
	t.mu.Unlock()
	switch {
	case closing:
	case t.listener == nil:
		go func() {
			t.flushed()
			t.c.Close()
		}()
	default:
		go func() {
			t.flushed()
			t.c.Kick(context.Background(), uid)
		}()
	}
}

// flushed returns once the engine's current round of output is queued on
// the relay connection: Ended runs while the engine dispatches the end,
// before it writes the "disconnect" that goes with it (D18), and a kick or
// a close queued first would reach the member before it. The engine writes
// under its lock (no driver.Options.CombineWrites), so taking the lock
// waits for that write.
func (t *transport) flushed() { t.e.Endpoint(func(*fastnet.Endpoint) {}) }

// Close closes the relay connection once what is queued is written.
func (t *transport) Close() error {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	return t.c.Close()
}

// receiveLoop hands the engine what the relay delivers, until the relay
// connection ends.
func (t *transport) receiveLoop() {
	over := false // the relay connection is over: what it holds is read, paused or not
	for {
		t.mu.Lock()
		paused, resumed := t.paused > 0, t.resumed
		t.mu.Unlock()
		if paused && !over {
			select {
			case <-resumed:
			case <-t.c.Done():
				// The relay connection ended while paused: the
				// events it had already taken in (the members'
				// last messages, a peer's close) are handed over,
				// then the loss (N144). Waiting again spun.
				over = true
			}
			continue
		}
		ev, err := t.c.Receive(context.Background())
		if err != nil {
			t.lost()
			return
		}
		t.handle(ev)
	}
}

func (t *transport) handle(ev urp.ClientEvent) {
	switch ev.Kind {
	case urp.GotText:
		if len(ev.Data) > 0 {
			// A host hears only its members: a relay that sends
			// messages from other UIDs gets no state for them (U25).
			t.mu.Lock()
			known := t.peers[ev.UID] || t.listener != nil && t.members[ev.UID]
			if known {
				t.peers[ev.UID] = true
			}
			t.mu.Unlock()
			if known {
				t.e.Input(UserAddr(ev.UID), ev.Data)
			}
		}
	case urp.GotJoined:
		t.mu.Lock()
		t.members[ev.UID] = true
		t.greet[ev.UID] = true
		t.greetLocked()
		t.mu.Unlock()
	case urp.GotLeft:
		t.mu.Lock()
		delete(t.members, ev.UID)
		delete(t.greet, ev.UID)
		t.mu.Unlock()
		t.peerGone(ev.UID)
	case urp.GotRole: // a member back to CONNECTED: kicked, or the host left
		if t.listener == nil {
			t.peerGone(t.host)
		}
	}
}

// greetLocked queues the greetings that wait (U20) while the relay
// connection has room for them (WriteQueue), and leaves the others for
// written. Greetings are not queued past WriteQueue, since Queue does not
// wait for room: a relay that announced members and read nothing would
// have had the host queue a greeting for each, without bound. Nor are
// they skipped: the greeting is the only way a member learns its host's
// UID, and one skipped would leave a member that joined while the relay
// held the group (U11) waiting for it until its Dial gave up. At most one
// waits for each member, and none for a member that left (U25).
func (t *transport) greetLocked() {
	for uid := range t.greet {
		if t.c.Queued() > t.writeQueue {
			return
		}
		t.c.Queue(uid, nil) // an error: the relay connection ended, and the loop says so
		delete(t.greet, uid)
	}
}

func (t *transport) peerGone(uid uint32) {
	t.mu.Lock()
	delete(t.peers, uid)
	t.mu.Unlock()
	t.e.TransportClosed(UserAddr(uid))
}

// lost ends every connection when the relay connection has ended; a
// host's listener closes, since nobody can reach it any more.
func (t *transport) lost() {
	t.mu.Lock()
	closing := t.closed
	peers := t.peers
	t.peers = make(map[uint32]bool)
	t.mu.Unlock()
	if closing {
		return
	}
	for p := range peers {
		t.e.TransportClosed(UserAddr(p))
	}
	if t.listener != nil {
		go t.listener.CloseWithReason("relay connection lost")
	}
}

var _ net.Addr = GroupAddr{}
