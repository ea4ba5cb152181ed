// Package udpdriver runs Fastnet over UDP: one socket per endpoint, read and
// written in batches where the platform allows (recvmmsg/sendmmsg through
// golang.org/x/net), IPv4 and IPv6. A server serves every connection from
// one socket. On Linux, datagrams for one peer written together cross the
// kernel's network stack as one buffer (UDP_SEGMENT), and datagrams that
// arrive together are read as one (UDP_GRO); the datagrams on the wire are
// the same (Config.NoOffload turns this off).
//
//	l, err := udpdriver.Listen(ctx, ":7000", udpdriver.Config{})
//	c, err := l.Accept(ctx)
//	m, err := c.Receive(ctx)
//	err = c.Send(ctx, m.Channel, m.Data, m.Reliable)
//
//	c, err := udpdriver.Dial(ctx, "server:7000", udpdriver.Config{})
//
// The connection and listener types, and the errors, are those of package
// driver, where their methods are documented; errors wrap the fastnet
// package's sentinels: errors.Is(err, fastnet.ErrRefused),
// fastnet.ErrTimeout, fastnet.ErrClosed, fastnet.ErrIncompatible,
// fastnet.ErrMessageTooLarge. ListenPacket and DialPacket run over a
// socket of the caller's own.
package udpdriver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"syscall"
	"time"

	"github.com/fastnet-engine/fastnet/driver"
	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/internal/udpio"
)

// Conn is one Fastnet connection over UDP: a [driver.Conn], where its
// methods are documented.
type Conn = driver.Conn

// Listener is a Fastnet server on one UDP socket: a [driver.Listener].
type Listener = driver.Listener

// Message is a received message: a [driver.Message].
type Message = driver.Message

// CloseError is the error of a connection that has ended: a
// [driver.CloseError]. It matches fastnet.ErrClosed and unwraps to the
// reason.
type CloseError = driver.CloseError

// DriverStats are the driver's own counters of an endpoint
// (Listener.DriverStats, Conn.DriverStats): socket write errors and the
// listener's backlog.
type DriverStats = driver.Stats

// Config configures a UDP endpoint. The zero value works.
type Config struct {
	// Engine is the protocol configuration; Role and Transport are set by
	// Listen and Dial.
	Engine fastnet.Config
	// ReceiveQueue bounds the bytes of received messages waiting for
	// Receive, per connection, each counting its data and its place in
	// the queue (40 bytes on 64-bit platforms). When they reach it the
	// connection stops taking the peer's messages until Receive has
	// taken half: their packets are dropped unacked and the peer resends
	// the reliable ones (D22), so nothing reliable is lost and the
	// connection stays up.
	// Unreliable messages that do not fit are dropped (Conn.DroppedUnread).
	// The connections waiting for Accept share one (N152).
	// Default (0): 4*MaxMessageSize, at least 16 MiB; negative is refused.
	ReceiveQueue int
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
	// SocketBuffer is the size asked for the socket's buffers (default
	// 8 MiB, halved until the system accepts); negative keeps the system's.
	SocketBuffer int
	// NoBatch turns batched system calls off.
	NoBatch bool
	// NoOffload turns segmentation offload off: where the kernel has it
	// (Linux UDP_SEGMENT and UDP_GRO), datagrams for one peer written
	// together cross the network stack as one buffer, and datagrams
	// arriving together are read as one (N28).
	NoOffload bool

	// intro is a Peer's hook for the events of introductions (Open).
	intro func(ev fastnet.Event, c *Conn)
}

// Listen starts a Fastnet server on the UDP address addr ("host:port").
func Listen(ctx context.Context, addr string, cfg Config) (*Listener, error) {
	uc, err := udpio.Listen(ctx, "udp", addr, listenOptions(cfg))
	if err != nil {
		return nil, fmt.Errorf("udpdriver: listen %s: %w", addr, err)
	}
	return listenOn(uc, nil, cfg)
}

// Dial connects to the Fastnet server at addr ("host:port"; an empty host
// is the local host, and so is an unspecified address, "0.0.0.0" or "::",
// as a wildcard listener's Addr reports it) and returns the established
// connection. A failure to
// connect is a *net.OpError (Op "dial") that names the address, if it was
// resolved, and wraps the reason (a Config the engine refuses is an error
// of its own),
// which errors.Is matches against fastnet.ErrRefused (a
// *fastnet.RefusedError with the server's reason, or a
// *driver.UnreachableError when the system reported at once that nothing
// listens at that port), fastnet.ErrTimeout, fastnet.ErrIncompatible, or
// ctx.Err().
func Dial(ctx context.Context, addr string, cfg Config) (*Conn, error) {
	raddr, err := resolve(ctx, addr)
	if err != nil {
		return nil, err
	}
	network, local := "udp4", "0.0.0.0:0"
	if raddr.Addr().Is6() {
		network, local = "udp6", "[::]:0"
	}
	uc, err := udpio.Listen(ctx, network, local, socketOptions(cfg))
	if err != nil {
		return nil, dialError(raddr, err)
	}
	// A connected socket hears the ICMP port unreachable of a server that
	// is not there, and fails the dial at once (N65).
	if err := uc.Connect(raddr); err != nil {
		uc.Close()
		return nil, dialError(raddr, err)
	}
	return dialOn(ctx, uc, nil, raddr, cfg)
}

// listenOn starts a server on uc, the socket layer's, or else on pc.
func listenOn(uc *udpio.Conn, pc net.PacketConn, cfg Config) (*Listener, error) {
	cfg.Engine.Role = fastnet.Server
	_, l, err := startOn(uc, pc, cfg)
	return l, err
}

// dialOn connects a client on uc, the socket layer's, or else on pc, to
// raddr.
func dialOn(ctx context.Context, uc *udpio.Conn, pc net.PacketConn, raddr netip.AddrPort, cfg Config) (*Conn, error) {
	cfg.Engine.Role = fastnet.Client
	e, _, err := startOn(uc, pc, cfg)
	if err != nil {
		return nil, err
	}
	c, err := e.Dial(ctx, raddr)
	if err != nil {
		return nil, dialError(raddr, err)
	}
	return c, nil
}

// startOn makes the engine of cfg, and a server's listener, and starts it
// on uc, with the system's path MTU (D29), or else on pc. On failure it
// closes the socket.
func startOn(uc *udpio.Conn, pc net.PacketConn, cfg Config) (*driver.Engine, *Listener, error) {
	var path socketPath
	if uc != nil {
		cfg.Engine.MTU.Path = path.hook(cfg.Engine.MTU.Path)
	}
	e, err := newEngine(cfg)
	if err != nil {
		if uc != nil {
			uc.Close()
		} else {
			pc.Close()
		}
		return nil, nil, err
	}
	var l *Listener
	if cfg.Engine.Role != fastnet.Client { // a Server, or a Peer (X19)
		l = e.NewListener(localAddr(uc, pc)) // before the socket is read
	}
	if uc != nil {
		path.uc = uc
		e.Start(&transport{uc: uc, e: e})
	} else {
		e.Start(&packetTransport{pc: pc, e: e})
	}
	return e, l, nil
}

func socketOptions(cfg Config) udpio.Options {
	return udpio.Options{NoBatch: cfg.NoBatch, NoOffload: cfg.NoOffload, SocketBuffer: cfg.SocketBuffer}
}

// listenOptions are socketOptions for a socket that peers dial: bound to
// an unspecified address, it answers each peer from the address the peer
// sent to (N149).
func listenOptions(cfg Config) udpio.Options {
	o := socketOptions(cfg)
	o.ReportLocal = true
	return o
}

func localAddr(uc *udpio.Conn, pc net.PacketConn) net.Addr {
	if uc != nil {
		return net.UDPAddrFromAddrPort(uc.LocalAddr())
	}
	return pc.LocalAddr()
}

func dialError(raddr netip.AddrPort, err error) error {
	return &net.OpError{Op: "dial", Net: "udp", Addr: net.UDPAddrFromAddrPort(raddr), Err: err}
}

func newEngine(cfg Config) (*driver.Engine, error) {
	cfg.Engine.Transport = fastnet.Datagram
	return driver.NewEngine(cfg.Engine, driver.Options{Network: "udp", ReceiveQueue: cfg.ReceiveQueue, Backlog: cfg.Backlog, Events: cfg.Events, Logger: cfg.Logger, CombineWrites: true, Intro: cfg.intro})
}

// resolve turns "host:port" into one address, IPv4 unmapped, for a dial:
// a failure is a *net.OpError (Op "dial"), as every failure of a dial is
// (N144).
func resolve(ctx context.Context, addr string) (netip.AddrPort, error) {
	if err := ctx.Err(); err != nil {
		// Done already: nothing is looked up, even in the hosts file,
		// which the resolver reads whatever the context says.
		return netip.AddrPort{}, &net.OpError{Op: "dial", Net: "udp", Err: err}
	}
	ap, err := lookup(ctx, addr)
	if err != nil {
		return ap, &net.OpError{Op: "dial", Net: "udp", Err: err}
	}
	return ap, nil
}

// lookup is resolve, its errors as they come.
func lookup(ctx context.Context, addr string) (netip.AddrPort, error) {
	ap, err := lookupAny(ctx, addr)
	if err != nil {
		return ap, err
	}
	return netip.AddrPortFrom(canonical(ap.Addr()), ap.Port()), nil
}

// canonical returns a, IPv4 unmapped, as the socket reports the peer's
// address of the datagrams it receives, so that the server's answers are
// taken for the server's: the unspecified address of a family is that
// family's loopback (as net.Dial reads "0.0.0.0:port" and "[::]:port",
// the local system, which answers from its loopback address), and a zone
// given as an interface's number is that interface's name.
func canonical(a netip.Addr) netip.Addr {
	a = a.Unmap()
	switch {
	case a == netip.IPv4Unspecified():
		return netip.AddrFrom4([4]byte{127, 0, 0, 1})
	case a == netip.IPv6Unspecified():
		return netip.IPv6Loopback()
	}
	if z := a.Zone(); z != "" {
		if i, err := strconv.Atoi(z); err == nil {
			if ifi, err := net.InterfaceByIndex(i); err == nil && ifi.Name != "" {
				return a.WithZone(ifi.Name)
			}
		}
	}
	return a
}

// lookupAny is lookup before canonical.
func lookupAny(ctx context.Context, addr string) (netip.AddrPort, error) {
	if ap, err := netip.ParseAddrPort(addr); err == nil {
		return ap, nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("udpdriver: bad address %q: %w", addr, err)
	}
	if host == "" {
		host = "localhost" // as net.Dial reads ":port"
	}
	pn, err := net.DefaultResolver.LookupPort(ctx, "udp", port)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("udpdriver: bad port in %q: %w", addr, err)
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("udpdriver: resolve %q: %w", host, err)
	}
	if len(ips) == 0 {
		return netip.AddrPort{}, fmt.Errorf("udpdriver: resolve %q: no addresses", host)
	}
	ip := ips[0]
	for _, a := range ips { // prefer IPv4, as most game servers listen there
		if a.Unmap().Is4() {
			ip = a
			break
		}
	}
	return netip.AddrPortFrom(ip.Unmap(), uint16(pn)), nil
}

// transport writes the engine's datagrams to the socket.
type transport struct {
	uc *udpio.Conn
	e  *driver.Engine
}

func (t *transport) WriteBatch(msgs []udpio.Message) {
	for len(msgs) > 0 {
		n, err := t.uc.WriteBatch(msgs)
		if err == nil || errors.Is(err, net.ErrClosed) {
			return
		}
		// msgs[n] failed: a lost datagram, as UDP allows. Go on, and
		// count it (N48). A datagram too large for the path (EMSGSIZE)
		// is MTU estimation's business, not a failure of the socket.
		// A client's connected socket may report the server's port
		// unreachable here rather than to the reader (N65); the
		// datagram refused so is lost too, and counted.
		if errors.Is(err, syscall.ECONNREFUSED) {
			t.e.Go(func() { t.e.Unreachable(err) })
		}
		if !errors.Is(err, errMsgSize) {
			t.e.CountWriteError()
		}
		msgs = msgs[n+1:]
	}
}

func (t *transport) Close() error { return t.uc.Close() }

// ReadBatch and SetReadDeadline make the transport a driver.Reader: the
// engine reads the socket itself, from the goroutine waiting for input.
func (t *transport) ReadBatch(msgs []udpio.Message) (int, error) { return t.uc.ReadBatch(msgs) }

func (t *transport) SetReadDeadline(tm time.Time) error { return t.uc.SetReadDeadline(tm) }

// ReadWaited makes the transport a driver.WaitReporter.
func (t *transport) ReadWaited() (waited, known bool) { return t.uc.ReadWaited() }

// InputWaiting implements driver.InputWaiter.
func (t *transport) InputWaiting() (waiting, known bool) { return t.uc.InputWaiting() }
