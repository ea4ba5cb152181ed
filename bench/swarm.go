package main

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/fastnet"
)

// A swarm is many Fastnet clients of one server in this process, each with
// a UDP socket and an endpoint of its own, as many single-client programs
// would have: the server sees one address per client. Each client is the
// engine itself (fastnet.Endpoint), driven by a goroutine that reads its
// socket and a Go timer for its deadlines, so it does everything a client
// does (the handshake, heartbeats and their echoes, MTU estimation and its
// replies, acks), on sockets set up as udpdriver's are (pathOf). It is lighter than udpdriver.Dial, whose connections
// each hold a socket and two kernel timers (three file descriptors and
// four goroutines): 10,000 of those would pass this machine's limit of
// 20,000 descriptors a process, and their wake-ups would crowd the server
// off the two processors whose share of them the workload measures.
//
// The swarm counts the bytes of every datagram each client sends and
// receives, by the kind of channel (classOf).
type swarm struct {
	server netip.AddrPort
	cfg    fastnet.Config
	clk    *clock.Real
	bufs   sync.Pool // *[]byte of cfg.MaxPacketSize, for PollTransmit

	up atomic.Int64 // clients connected

	mu      sync.Mutex
	clients []*swarmClient
	retries int // handshakes tried again
	redials int // connections that ended and were made again
}

// Kinds of datagrams the swarm counts.
const (
	classHeartbeat = iota // channel -2
	classMTU              // channels -3 and -4: probes and their replies (D19)
	classOther            // channel -1, acks, messages
	numClasses
)

// classOf is the kind of datagram b, by its channel id.
func classOf(b []byte) int {
	if len(b) < 2 {
		return classOther
	}
	switch int16(binary.BigEndian.Uint16(b)) {
	case -2:
		return classHeartbeat
	case -3, -4:
		return classMTU
	}
	return classOther
}

// classNames name the classes in metrics.
var classNames = [numClasses]string{"heartbeat", "mtu", "other"}

// traffic counts datagrams and bytes (UDP payloads) by class.
type traffic struct {
	packets [numClasses]uint64
	bytes   [numClasses]uint64
}

func (t *traffic) add(b []byte) {
	k := classOf(b)
	t.packets[k]++
	t.bytes[k] += uint64(len(b))
}

// total is the datagrams and bytes of every class.
func (t *traffic) total() (packets, bytes uint64) {
	for k := range numClasses {
		packets += t.packets[k]
		bytes += t.bytes[k]
	}
	return packets, bytes
}

// swarmClient is one client of a swarm: its socket, its endpoint, and the
// one connection it makes. mu guards everything below it.
type swarmClient struct {
	s  *swarm
	uc *net.UDPConn

	mu       sync.Mutex
	ep       *fastnet.Endpoint
	h        fastnet.Handle
	timer    *time.Timer
	deadline clock.Time         // what timer is armed for; clock.Never: stopped
	outcome  chan error         // the handshake's: nil when connected
	lost     chan struct{}      // the connection ended (refused after its handshake, timed out)
	messages chan fastnet.Event // messages received, dropped when full
	closed   bool               // Close was called
	up       bool               // connected and not ended
	ended    error              // why the connection ended, once it has
	sent     traffic            // datagrams written
	received traffic            // datagrams read
	writeErr error              // the last failed write
	conns    int                // connections made (1, or more after a restart)
	since    time.Time          // when the last was made
}

// newSwarm prepares a swarm of clients of server, configured with cfg
// (Role is set here).
func newSwarm(server netip.AddrPort, cfg fastnet.Config) (*swarm, error) {
	cfg.Role = fastnet.Client
	cfg.Transport = fastnet.Datagram
	probe, err := fastnet.NewEndpoint(cfg)
	if err != nil {
		return nil, err
	}
	cfg = probe.Config()
	s := &swarm{server: server, cfg: cfg, clk: clock.NewReal()}
	s.bufs.New = func() any {
		b := make([]byte, cfg.MaxPacketSize)
		return &b
	}
	return s, nil
}

// add opens a client's socket and endpoint and starts its reader; dial
// then connects it.
func (s *swarm) add(seed uint64) (*swarmClient, error) {
	uc, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(s.server))
	if err != nil {
		return nil, err
	}
	path, err := pathOf(uc)
	if err != nil {
		uc.Close()
		return nil, err
	}
	cfg := s.cfg
	var key [16]byte
	crand.Read(key[:])
	cfg.Rand = rand.New(rand.NewPCG(binary.LittleEndian.Uint64(key[:8])^seed, binary.LittleEndian.Uint64(key[8:])))
	cfg.MTU.Path = func(netip.AddrPort) fastnet.PathInfo { return path() }
	ep, err := fastnet.NewEndpoint(cfg)
	if err != nil {
		uc.Close()
		return nil, err
	}
	c := &swarmClient{
		s:        s,
		uc:       uc,
		ep:       ep,
		deadline: clock.Never,
		lost:     make(chan struct{}, 1),
		messages: make(chan fastnet.Event, 16),
	}
	c.timer = time.AfterFunc(time.Hour, c.fire)
	c.timer.Stop()
	s.mu.Lock()
	s.clients = append(s.clients, c)
	s.mu.Unlock()
	go c.read()
	return c, nil
}

// keepConnected connects c to the server, holding a place in sem while
// it dials, and again whenever the connection ends, until ctx is done. A
// server refuses a client whose address it validates (D25) when its
// backlog or connection limit filled meanwhile; the client, connected
// since the server's "connected", learns it from the server's "abort"
// (N33). A connection may also time out while the machine is overloaded.
func (c *swarmClient) keepConnected(ctx context.Context, sem chan struct{}) error {
	for {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		err := c.dial(ctx)
		<-sem
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		select {
		case <-c.lost:
			c.s.mu.Lock()
			c.s.redials++
			c.s.mu.Unlock()
		case <-ctx.Done():
			return nil
		}
	}
}

// dial connects c to the server, trying again after a refusal ("server
// full", "server busy") or a timeout until ctx is done.
func (c *swarmClient) dial(ctx context.Context) error {
	for attempt := 0; ; attempt++ {
		err := c.connect(ctx)
		if err == nil || ctx.Err() != nil {
			return err
		}
		if !errors.Is(err, fastnet.ErrRefused) && !errors.Is(err, fastnet.ErrTimeout) {
			return err
		}
		c.s.mu.Lock()
		c.s.retries++
		c.s.mu.Unlock()
		// A busy server: back off a little, more after each failure.
		wait := time.Duration(min(attempt+1, 10)) * 20 * time.Millisecond
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

// connect makes one handshake and waits for its outcome.
func (c *swarmClient) connect(ctx context.Context) error {
	outcome := make(chan error, 1)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return net.ErrClosed
	}
	now := c.s.clk.Now()
	h, err := c.ep.Connect(now, c.s.server)
	if err != nil {
		c.mu.Unlock()
		return err
	}
	c.h, c.outcome = h, outcome
	c.flushLocked(now)
	c.mu.Unlock()
	select {
	case err := <-outcome:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// read feeds the endpoint every datagram the socket receives until the
// socket is closed.
func (c *swarmClient) read() {
	// Room for the largest packet of a server configured as the clients
	// are (MaxPacketSize), and a byte to tell a larger one, which is
	// dropped: 10,000 clients with buffers for any datagram (64 KiB)
	// would hold 640 MiB.
	buf := make([]byte, c.s.cfg.MaxPacketSize+1)
	for {
		n, err := c.uc.Read(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// ECONNREFUSED: an ICMP error from a server not (or no
			// longer) listening. The engine's timeouts deal with it.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if n == len(buf) {
			continue
		}
		c.mu.Lock()
		if !c.closed {
			now := c.s.clk.Now()
			c.received.add(buf[:n])
			c.ep.HandleDatagram(now, c.s.server, buf[:n])
			c.flushLocked(now)
		}
		c.mu.Unlock()
	}
}

// fire is the timer's function: it hands the endpoint the time once its
// deadline has come.
func (c *swarmClient) fire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.deadline == clock.Never {
		return
	}
	now := c.s.clk.Now()
	if now < c.deadline {
		c.timer.Reset(time.Duration(c.deadline - now))
		return
	}
	c.deadline = clock.Never
	c.ep.HandleTimeout(now)
	c.flushLocked(now)
}

// flushLocked writes what the endpoint has to send, acts on its events and
// arms the timer for its next deadline.
func (c *swarmClient) flushLocked(now clock.Time) {
	bp := c.s.bufs.Get().(*[]byte)
	buf := *bp
	for {
		t, ok := c.ep.PollTransmit(now, buf)
		if !ok {
			break
		}
		c.sent.add(buf[:t.N])
		if _, err := c.uc.Write(buf[:t.N]); err != nil {
			c.writeErr = err
		}
	}
	c.s.bufs.Put(bp)
	for {
		ev, ok := c.ep.PollEvent()
		if !ok {
			break
		}
		switch ev.Kind {
		case fastnet.EventConnected:
			c.up = true
			c.conns++
			c.since = time.Now()
			c.s.up.Add(1)
			c.report(nil)
		case fastnet.EventRefused, fastnet.EventConnectFailed:
			c.report(ev.Err)
		case fastnet.EventDisconnected:
			if c.up {
				c.s.up.Add(-1)
			}
			c.up = false
			c.ended = ev.Err
			select {
			case c.lost <- struct{}{}:
			default:
			}
		case fastnet.EventMessage:
			select {
			case c.messages <- ev:
			default:
			}
		}
	}
	d, ok := c.ep.NextDeadline()
	if !ok {
		d = clock.Never
	}
	if d != c.deadline {
		c.deadline = d
		if d == clock.Never {
			c.timer.Stop()
		} else {
			c.timer.Reset(max(time.Duration(d-now), 0))
		}
	}
}

// report tells connect the handshake's outcome.
func (c *swarmClient) report(err error) {
	if c.outcome != nil {
		c.outcome <- err
		c.outcome = nil
	}
}

// send sends msg reliably on channel 0.
func (c *swarmClient) send(msg []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.up {
		return fmt.Errorf("not connected: %v", c.ended)
	}
	now := c.s.clk.Now()
	if err := c.ep.Send(now, c.h, 0, msg, true); err != nil {
		return err
	}
	c.flushLocked(now)
	return nil
}

// stats returns the connection's statistics, whether it is up, and when
// it was made.
func (c *swarmClient) stats() (st fastnet.Stats, up bool, since time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.ep.Stats(c.h)
	return st, ok && c.up, c.since
}

// counts returns the traffic counters and the connection's state.
func (c *swarmClient) counts() (sent, received traffic, up bool, ended error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sent, c.received, c.up, c.ended
}

// close closes the connection gracefully (its disconnect goes out now if
// nothing reliable is unacknowledged), then the socket.
func (c *swarmClient) close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	if c.up {
		now := c.s.clk.Now()
		c.ep.Close(now, c.h, "")
		c.flushLocked(now)
	}
	c.closed = true
	c.timer.Stop()
	c.mu.Unlock()
	c.uc.Close()
}

// each calls f for every client.
func (s *swarm) each(f func(i int, c *swarmClient)) {
	s.mu.Lock()
	cs := s.clients
	s.mu.Unlock()
	for i, c := range cs {
		f(i, c)
	}
}

// traffic returns the datagrams and bytes every client has sent and
// received.
func (s *swarm) traffic() (sent, received traffic) {
	s.each(func(_ int, c *swarmClient) {
		cs, cr, _, _ := c.counts()
		for k := range numClasses {
			sent.packets[k] += cs.packets[k]
			sent.bytes[k] += cs.bytes[k]
			received.packets[k] += cr.packets[k]
			received.bytes[k] += cr.bytes[k]
		}
	})
	return sent, received
}

// close closes every client.
func (s *swarm) close() {
	s.each(func(_ int, c *swarmClient) { c.close() })
}
