package usernat

import (
	"net"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/fastnet-engine/fastnet/fastnet/fastnettest"
)

// Host is one internal host behind a NAT of its own, in the same process:
// a net.PacketConn whose datagrams leave through the NAT and whose reads
// return what the NAT let in. Its own address is private and never
// reaches the wire.
type Host struct {
	nat    *NAT
	inside netip.AddrPort

	mu       sync.Mutex
	queue    []hostDatagram // inbound, for ReadFrom
	ready    chan struct{}  // closed and replaced when queue grows or the deadline moves
	deadline time.Time
	closed   bool
}

type hostDatagram struct {
	b    []byte
	from netip.AddrPort
}

// hostQueue bounds the datagrams a Host holds for ReadFrom; more are
// dropped.
const hostQueue = 1024

// NewHost starts a NAT of behaviour cfg whose public address is public, a
// local address of this host, with one internal host behind it at the
// private address 10.0.0.1:5000.
func NewHost(public netip.Addr, cfg fastnettest.NATConfig) *Host {
	h := &Host{inside: netip.MustParseAddrPort("10.0.0.1:5000"), ready: make(chan struct{})}
	h.nat = New(Config{Public: public, NAT: cfg, Deliver: h.deliver})
	return h
}

// NAT returns the host's NAT.
func (h *Host) NAT() *NAT { return h.nat }

func (h *Host) notifyLocked() {
	close(h.ready)
	h.ready = make(chan struct{})
}

func (h *Host) deliver(_, from netip.AddrPort, b []byte) {
	h.mu.Lock()
	if !h.closed && len(h.queue) < hostQueue {
		h.queue = append(h.queue, hostDatagram{b: append([]byte(nil), b...), from: from})
		h.notifyLocked()
	}
	h.mu.Unlock()
}

// WriteTo sends b from the external address the NAT maps the host to for
// addr.
func (h *Host) WriteTo(b []byte, addr net.Addr) (int, error) {
	ua, ok := addr.(*net.UDPAddr)
	if !ok {
		return 0, &net.OpError{Op: "write", Net: "udp", Addr: addr, Err: net.UnknownNetworkError(addr.Network())}
	}
	if err := h.nat.Send(h.inside, ua.AddrPort(), b); err != nil {
		return 0, err
	}
	return len(b), nil
}

// ReadFrom returns the next datagram the NAT let in.
func (h *Host) ReadFrom(b []byte) (int, net.Addr, error) {
	for {
		h.mu.Lock()
		switch {
		case len(h.queue) > 0:
			d := h.queue[0]
			h.queue = h.queue[1:]
			h.mu.Unlock()
			return copy(b, d.b), net.UDPAddrFromAddrPort(d.from), nil
		case h.closed:
			h.mu.Unlock()
			return 0, nil, net.ErrClosed
		}
		wait, dl := h.ready, h.deadline
		h.mu.Unlock()
		var expire <-chan time.Time
		if !dl.IsZero() {
			d := time.Until(dl)
			if d <= 0 {
				return 0, nil, os.ErrDeadlineExceeded
			}
			t := time.NewTimer(d)
			expire = t.C
			defer t.Stop()
		}
		select {
		case <-wait:
		case <-expire:
			return 0, nil, os.ErrDeadlineExceeded
		}
	}
}

// Close closes the host and its NAT.
func (h *Host) Close() error {
	h.mu.Lock()
	if !h.closed {
		h.closed = true
		h.notifyLocked()
	}
	h.mu.Unlock()
	return h.nat.Close()
}

// LocalAddr returns the host's private address.
func (h *Host) LocalAddr() net.Addr { return net.UDPAddrFromAddrPort(h.inside) }

func (h *Host) SetReadDeadline(t time.Time) error {
	h.mu.Lock()
	h.deadline = t
	h.notifyLocked()
	h.mu.Unlock()
	return nil
}

func (h *Host) SetDeadline(t time.Time) error      { return h.SetReadDeadline(t) }
func (h *Host) SetWriteDeadline(t time.Time) error { return nil }
