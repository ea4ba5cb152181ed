package usernat

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// A gateway carries a NAT's inside over one UDP socket, so that programs
// that are processes of their own can be its internal hosts without a
// network of their own: each internal host is the address of a UDP socket
// that sends to the gateway, and the internal address the NAT maps. Every
// datagram between an internal host and the gateway starts with the
// address of the other end of its way through the NAT, and carries the
// datagram itself after it:
//
//	family  1 byte, 4 or 6
//	address 4 or 16 bytes
//	port    2 bytes, big-endian
//	payload the rest
//
// From an internal host, the address is where the datagram is going;
// from the gateway, where it came from.

// maxHeader is the longest header of a datagram to or from a gateway.
const maxHeader = 1 + 16 + 2

// errHeader is a datagram to or from a gateway too short for its header,
// or of an unknown family.
var errHeader = errors.New("usernat: not a gateway datagram")

// appendHeader appends the header naming ap to b.
func appendHeader(b []byte, ap netip.AddrPort) []byte {
	a := ap.Addr().Unmap()
	if a.Is4() {
		v := a.As4()
		b = append(b, 4)
		b = append(b, v[:]...)
	} else {
		v := a.As16()
		b = append(b, 6)
		b = append(b, v[:]...)
	}
	return binary.BigEndian.AppendUint16(b, ap.Port())
}

// parseHeader returns the address a gateway datagram names and its
// payload.
func parseHeader(b []byte) (netip.AddrPort, []byte, error) {
	if len(b) < 1 {
		return netip.AddrPort{}, nil, errHeader
	}
	var a netip.Addr
	switch {
	case b[0] == 4 && len(b) >= 1+4+2:
		a = netip.AddrFrom4([4]byte(b[1:5]))
		b = b[5:]
	case b[0] == 6 && len(b) >= 1+16+2:
		a = netip.AddrFrom16([16]byte(b[1:17])).Unmap()
		b = b[17:]
	default:
		return netip.AddrPort{}, nil, errHeader
	}
	return netip.AddrPortFrom(a, binary.BigEndian.Uint16(b)), b[2:], nil
}

// Gateway is a NAT whose inside is a UDP socket (see above).
type Gateway struct {
	nat    *NAT
	inside *net.UDPConn
	bad    atomic.Uint64
}

// NewGateway starts a NAT of setting cfg whose inside is the socket
// inside, which it owns from then on; cfg.Deliver is its own. Serve
// carries the internal hosts' datagrams out.
func NewGateway(inside *net.UDPConn, cfg Config) *Gateway {
	g := &Gateway{inside: inside}
	pool := sync.Pool{New: func() any { b := make([]byte, 0, maxHeader+65536); return &b }}
	cfg.Deliver = func(to, from netip.AddrPort, b []byte) {
		p := pool.Get().(*[]byte)
		buf := append(appendHeader((*p)[:0], from), b...)
		inside.WriteToUDPAddrPort(buf, to)
		*p = buf
		pool.Put(p)
	}
	g.nat = New(cfg)
	return g
}

// NAT returns the gateway's NAT.
func (g *Gateway) NAT() *NAT { return g.nat }

// Addr returns the address of the inside socket.
func (g *Gateway) Addr() netip.AddrPort {
	return g.inside.LocalAddr().(*net.UDPAddr).AddrPort()
}

// Malformed returns how many datagrams reached the inside socket without
// a header of the gateway's.
func (g *Gateway) Malformed() uint64 { return g.bad.Load() }

// Serve sends each datagram an internal host gives the inside socket
// through the NAT, until Close; then it returns nil. It returns the
// socket's error if reading fails otherwise.
func (g *Gateway) Serve() error {
	buf := make([]byte, maxHeader+65536)
	for {
		n, from, err := g.inside.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		to, b, err := parseHeader(buf[:n])
		if err != nil {
			g.bad.Add(1)
			continue
		}
		from = netip.AddrPortFrom(from.Addr().Unmap(), from.Port())
		g.nat.Send(from, to, b)
	}
}

// Close closes the inside socket and the NAT.
func (g *Gateway) Close() error {
	err := g.inside.Close()
	g.nat.Close()
	return err
}

// Client is an internal host of a Gateway: a net.PacketConn on a UDP
// socket of its own whose datagrams go out through the gateway's NAT, and
// whose reads return what the NAT let in, from where it came from. What
// reaches the socket from elsewhere than the gateway is dropped.
type Client struct {
	conn *net.UDPConn
	gw   netip.AddrPort
	pool sync.Pool
}

// NewClient returns a Client on conn, which it owns from then on, of the
// gateway at gw.
func NewClient(conn *net.UDPConn, gw netip.AddrPort) *Client {
	c := &Client{conn: conn, gw: netip.AddrPortFrom(gw.Addr().Unmap(), gw.Port())}
	c.pool.New = func() any { b := make([]byte, maxHeader+65536); return &b }
	return c
}

// WriteTo sends b to addr through the gateway.
func (c *Client) WriteTo(b []byte, addr net.Addr) (int, error) {
	ua, ok := addr.(*net.UDPAddr)
	if !ok {
		return 0, &net.OpError{Op: "write", Net: "udp", Addr: addr, Err: net.UnknownNetworkError(addr.Network())}
	}
	p := c.pool.Get().(*[]byte)
	defer c.pool.Put(p)
	buf := append(appendHeader((*p)[:0], ua.AddrPort()), b...)
	if _, err := c.conn.WriteToUDPAddrPort(buf, c.gw); err != nil {
		return 0, err
	}
	return len(b), nil
}

// ReadFrom returns the next datagram the gateway passed in, and where it
// came from.
func (c *Client) ReadFrom(b []byte) (int, net.Addr, error) {
	p := c.pool.Get().(*[]byte)
	defer c.pool.Put(p)
	buf := (*p)[:cap(*p)]
	for {
		n, from, err := c.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			return 0, nil, err
		}
		if netip.AddrPortFrom(from.Addr().Unmap(), from.Port()) != c.gw {
			continue
		}
		src, payload, err := parseHeader(buf[:n])
		if err != nil {
			continue
		}
		return copy(b, payload), net.UDPAddrFromAddrPort(src), nil
	}
}

// Close closes the socket.
func (c *Client) Close() error { return c.conn.Close() }

// LocalAddr returns the address of the socket, the one the gateway's NAT
// maps.
func (c *Client) LocalAddr() net.Addr { return c.conn.LocalAddr() }

func (c *Client) SetDeadline(t time.Time) error      { return c.conn.SetDeadline(t) }
func (c *Client) SetReadDeadline(t time.Time) error  { return c.conn.SetReadDeadline(t) }
func (c *Client) SetWriteDeadline(t time.Time) error { return c.conn.SetWriteDeadline(t) }
