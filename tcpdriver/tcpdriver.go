package tcpdriver

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/internal/driver"
	"github.com/fastnet-engine/fastnet/internal/udpio"
)

// Conn is one Fastnet connection over TCP. Its methods are safe for
// concurrent use.
type Conn = driver.Conn

// Listener is a Fastnet server accepting TCP connections.
type Listener = driver.Listener

// Message is a received message.
type Message = driver.Message

// CloseError is the error of a connection that has ended; it matches
// fastnet.ErrClosed and unwraps to the reason.
type CloseError = driver.CloseError

// Config configures a TCP endpoint. The zero value works.
type Config struct {
	// Engine is the protocol configuration; Role and Transport are set by
	// Listen and Dial. Its MaxPacketSize (default: MaxMessageSize plus the
	// overhead, D20) bounds the frames accepted from the peer.
	Engine fastnet.Config
	// ReceiveQueue bounds the bytes of received messages waiting for
	// Receive, per connection. When they reach it the connection's TCP
	// stream is no longer read until Receive has taken half, and TCP's
	// flow control holds the sender. Default: 4*MaxMessageSize, at least
	// 16 MiB.
	ReceiveQueue int
	// WriteQueue bounds the bytes waiting to be written to one TCP
	// connection: Send blocks while it is exceeded. Default 4 MiB.
	WriteQueue int
}

const defaultWriteQueue = 4 << 20

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
// the established connection. It fails with an error matching
// fastnet.ErrRefused (a *fastnet.RefusedError with the server's reason),
// fastnet.ErrTimeout, fastnet.ErrIncompatible, or a dial error.
func Dial(ctx context.Context, addr string, cfg Config) (*Conn, error) {
	cfg.Engine.Role = fastnet.Client
	e, err := newEngine(cfg)
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("tcpdriver: dial %s: %w", addr, err)
	}
	t := newTransport(e, cfg)
	e.Start(t)
	remote := t.add(nc, false)
	return e.Dial(ctx, remote)
}

func newEngine(cfg Config) (*driver.Engine, error) {
	cfg.Engine.Transport = fastnet.Stream
	return driver.NewEngine(cfg.Engine, driver.Options{ReceiveQueue: cfg.ReceiveQueue})
}

// transport carries one endpoint's packets over its TCP connections, one
// per peer address, each with a reader and a writer goroutine.
//
// A connection ends in one of two ways. The peer ends it (EOF, reset, a
// frame above the maximum packet size (D20)): the reader stops, reports it
// to the endpoint, and the writer closes the socket. This side ends it (the
// Fastnet connection is over, or the endpoint shuts down): the writer writes
// what is queued, half-closes the connection, and lets the reader drain what
// the peer still sends until the peer closes in turn, so that the last
// packets (a "disconnect", D18) are never lost to a reset; closeWait bounds
// both steps.
type transport struct {
	e          *driver.Engine
	ln         net.Listener
	maxPacket  int
	writeQueue int
	connectTO  time.Duration
	closeWait  time.Duration

	mu     sync.Mutex
	conns  map[netip.AddrPort]*tcpConn
	closed bool
}

// minCloseWait is the least time an ending connection gets to write what is
// queued, whatever Config.Linger says.
const minCloseWait = 100 * time.Millisecond

// tcpConn is one TCP connection.
type tcpConn struct {
	nc         net.Conn
	remote     netip.AddrPort
	readerDone chan struct{} // closed when the reader returns

	mu          sync.Mutex
	pending     []byte // packets waiting for the writer, each behind its length
	ready       chan struct{}
	ending      bool          // this side ends the connection: write pending, then close
	established bool          // the Fastnet handshake completed
	paused      bool          // Receive is behind: the reader waits (driver.Pauser)
	resume      chan struct{} // wakes the paused reader
}

func newTransport(e *driver.Engine, cfg Config) *transport {
	wq := cfg.WriteQueue
	if wq <= 0 {
		wq = defaultWriteQueue
	}
	ec := e.Config()
	return &transport{
		e:          e,
		maxPacket:  ec.MaxPacketSize,
		writeQueue: wq,
		connectTO:  ec.ConnectTimeout,
		closeWait:  max(ec.Linger, minCloseWait),
		conns:      make(map[netip.AddrPort]*tcpConn),
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
// connection must complete the Fastnet handshake within the connect
// timeout.
func (t *transport) add(nc net.Conn, server bool) netip.AddrPort {
	ap := nc.RemoteAddr().(*net.TCPAddr).AddrPort()
	remote := netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	c := &tcpConn{nc: nc, remote: remote, ready: make(chan struct{}, 1), resume: make(chan struct{}, 1), readerDone: make(chan struct{})}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		nc.Close()
		return remote
	}
	t.conns[remote] = c
	t.mu.Unlock()
	if server {
		nc.SetReadDeadline(time.Now().Add(t.connectTO))
	}
	t.e.Go(func() { t.readLoop(c) })
	t.e.Go(func() { t.writeLoop(c) })
	return remote
}

func (t *transport) readLoop(c *tcpConn) {
	defer close(c.readerDone)
	fr := newFrameReader(c.nc, t.maxPacket, 0)
	established := false
	for {
		if !t.waitResume(c) {
			return
		}
		p, err := fr.next()
		if err != nil {
			c.mu.Lock()
			ending := c.ending
			c.mu.Unlock()
			if !ending {
				// The peer closed or broke the connection: the writer
				// closes the socket.
				t.e.TransportClosed(c.remote)
			}
			return
		}
		t.e.Input(c.remote, p)
		if !established && t.e.Established(c.remote) {
			established = true
			c.mu.Lock()
			c.established = true
			if !c.ending { // an ending connection keeps its deadline
				c.nc.SetReadDeadline(time.Time{})
			}
			c.mu.Unlock()
		}
	}
}

// waitResume returns once c's reader may read: at once unless the
// application is behind (PauseRead), when the connection ends from this
// side (the reader then drains the stream), or false when the engine shuts
// down.
func (t *transport) waitResume(c *tcpConn) bool {
	for {
		c.mu.Lock()
		wait := c.paused && !c.ending
		c.mu.Unlock()
		if !wait {
			return true
		}
		select {
		case <-c.resume:
		case <-t.e.Done():
			return false
		}
	}
}

// conn returns the connection to addr, or nil.
func (t *transport) conn(addr netip.AddrPort) *tcpConn {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.conns[addr]
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
	c.mu.Unlock()
	c.wakeReader()
}

// wakeReader makes a paused reader look at its state again.
func (c *tcpConn) wakeReader() {
	select {
	case c.resume <- struct{}{}:
	default:
	}
}

func (t *transport) writeLoop(c *tcpConn) {
	fw := newFrameWriter(c.nc, t.maxPacket, 0)
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
		ending := c.ending
		c.mu.Unlock()
		t.e.Wake(c.remote) // Send may go on
		if err := writeFrames(fw, batch); err != nil {
			// The connection is broken: the reader fails too and
			// reports it.
			c.nc.Close()
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

// writeFrames writes the packets of batch, each behind its length, and
// flushes them.
func writeFrames(fw *frameWriter, batch []byte) error {
	for len(batch) >= frameHeaderLen {
		n := int(binary.BigEndian.Uint32(batch))
		if err := fw.write(batch[frameHeaderLen : frameHeaderLen+n]); err != nil {
			return err
		}
		batch = batch[frameHeaderLen+n:]
	}
	return fw.flush()
}

// finish ends c from this side: it writes what is still queued, half-closes
// the connection and waits for the reader to see the peer close, all within
// closeWait, then closes the socket. A connection whose handshake never
// completed has nothing worth draining and is closed at once.
func (t *transport) finish(c *tcpConn, fw *frameWriter) {
	deadline := time.Now().Add(t.closeWait)
	c.mu.Lock()
	c.ending = true
	batch := c.pending
	c.pending = nil
	established := c.established
	c.nc.SetWriteDeadline(deadline)
	c.nc.SetReadDeadline(deadline)
	c.mu.Unlock()
	c.wakeReader()
	err := writeFrames(fw, batch)
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
	t.mu.Unlock()
}

// WriteBatch queues packets for their connections' writers. It runs under
// the engine's lock and never blocks on the network.
func (t *transport) WriteBatch(msgs []udpio.Message) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, m := range msgs {
		c := t.conns[m.Addr]
		if c == nil {
			continue
		}
		c.mu.Lock()
		c.pending = binary.BigEndian.AppendUint32(c.pending, uint32(len(m.Buf)))
		c.pending = append(c.pending, m.Buf...)
		c.mu.Unlock()
		select {
		case c.ready <- struct{}{}:
		default:
		}
	}
}

// Blocked reports whether the connection to addr has more than the write
// queue's worth waiting (driver.Backpressure).
func (t *transport) Blocked(addr netip.AddrPort) bool {
	c := t.conn(addr)
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending) > t.writeQueue
}

// Ended closes the TCP connection to addr once what is queued for it is
// written (driver.Ender): the Fastnet connection is over.
func (t *transport) Ended(addr netip.AddrPort) {
	c := t.conn(addr)
	if c == nil {
		return
	}
	c.mu.Lock()
	c.ending = true
	c.mu.Unlock()
	c.wakeReader()
	select {
	case c.ready <- struct{}{}:
	default:
	}
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
		c.nc.SetReadDeadline(deadline)
		c.mu.Unlock()
		c.wakeReader()
	}
	return err
}
