package udpdriver

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"time"

	"github.com/fastnet-engine/fastnet/datagram"
	"github.com/fastnet-engine/fastnet/driver"
	"github.com/fastnet-engine/fastnet/internal/udpio"
)

// Bring your own socket. ListenPacket and DialPacket run Fastnet over a
// socket the caller opened: one bound to a chosen interface or port, one
// with options the driver does not set, one that is already known to a NAT
// or an introducer, or a net.PacketConn of the caller's own making (a
// tunnel, a simulated network).
//
// A *net.UDPConn gets everything Listen and Dial give theirs: batched
// reads and writes, segmentation offload, the don't-fragment bit and the
// kernel's path MTU (D29). Its socket buffers are sized as Config says.
// It is not connected to the server (the caller may use it for more than
// one peer), so a DialPacket to a port where nothing listens times out.
//
// Any other net.PacketConn is read and written one datagram at a time. Its
// addresses must be IP addresses and ports: the driver reads the peer of
// each datagram from its net.Addr (a *net.UDPAddr, or any address whose
// String is "host:port" with an IP host), drops and counts those it cannot
// read (DriverStats.BadAddr), and writes to *net.UDPAddr values. The
// driver cannot know whether such a connection fragments large datagrams:
// MTU estimation runs without the system's hint (so it takes a few
// seconds to reach a large MTU; Config.Engine.MTU.Path can give one), and
// it is the connection's business to drop what it cannot carry whole, as a
// UDP socket with the don't-fragment bit does.
//
// Either way the endpoint owns pc from then on: closing the listener
// closes pc, and so does the end of the dialed connection, however it
// ends (N142).

// ListenPacket starts a Fastnet server on pc, which it owns from then on.
func ListenPacket(ctx context.Context, pc net.PacketConn, cfg Config) (*Listener, error) {
	if pc == nil {
		return nil, errors.New("udpdriver: ListenPacket: nil net.PacketConn")
	}
	return listenOn(ownSocket(pc, listenOptions(cfg)), pc, cfg)
}

// DialPacket connects over pc, which it owns from then on, to the Fastnet
// server at addr ("host:port"), and returns the established connection. It
// fails as Dial does, except that nothing listening at addr is noticed by
// the handshake's timeout.
func DialPacket(ctx context.Context, pc net.PacketConn, addr string, cfg Config) (*Conn, error) {
	if pc == nil {
		return nil, errors.New("udpdriver: DialPacket: nil net.PacketConn")
	}
	raddr, err := resolve(ctx, addr)
	if err != nil {
		pc.Close() // it is the dial's, as it is when the handshake fails
		return nil, err
	}
	return dialOn(ctx, ownSocket(pc, socketOptions(cfg)), pc, raddr, cfg)
}

// ownSocket wraps pc for batched I/O, with options o, if it is a UDP
// socket, or returns nil.
func ownSocket(pc net.PacketConn, o udpio.Options) *udpio.Conn {
	if uc, ok := pc.(*net.UDPConn); ok {
		return udpio.New(uc, o)
	}
	return nil
}

// packetTransport carries the engine's datagrams over a net.PacketConn
// that is not a UDP socket, one datagram a call.
type packetTransport struct {
	pc      net.PacketConn
	e       *driver.Engine
	badAddr atomic.Uint64
	waited  bool // the last read had to wait
}

func (t *packetTransport) WriteBatch(msgs []datagram.Message) {
	for i := range msgs {
		m := &msgs[i]
		if _, err := t.pc.WriteTo(m.Buf, net.UDPAddrFromAddrPort(m.Addr)); err != nil && !errors.Is(err, net.ErrClosed) {
			t.e.CountWriteError()
		}
	}
}

func (t *packetTransport) Close() error { return t.pc.Close() }

// ReadBatch reads one datagram into msgs[0], skipping those whose sender
// is not an IP address and port.
func (t *packetTransport) ReadBatch(msgs []datagram.Message) (int, error) {
	if len(msgs) == 0 {
		return 0, nil
	}
	m := &msgs[0]
	for {
		n, from, err := t.pc.ReadFrom(m.Buf)
		if err != nil {
			return 0, err
		}
		ap, ok := udpio.AddrPort(from)
		if !ok {
			t.badAddr.Add(1)
			continue
		}
		m.N, m.Addr, m.Seg = n, ap, 0
		return 1, nil
	}
}

func (t *packetTransport) SetReadDeadline(tm time.Time) error { return t.pc.SetReadDeadline(tm) }

// AddStats makes the transport a driver.StatsReporter.
func (t *packetTransport) AddStats(s *driver.Stats) { s.BadAddr += t.badAddr.Load() }
