package udpdriver

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/fastnet/fastnettest"
)

// userNAT is a userspace NAT over real loopback sockets: fastnettest's
// NAT state machine (X22) decides, and one UDP socket bound on the NAT's
// public address per external port carries the datagrams. The host
// behind it is the net.PacketConn it is, whose own address is private and
// never reaches the wire.
type userNAT struct {
	nat    *fastnettest.NAT
	clk    *clock.Real
	inside netip.AddrPort

	mu       sync.Mutex
	socks    map[uint16]*net.UDPConn // by external port
	queue    []natDatagram           // inbound, for ReadFrom
	ready    chan struct{}           // closed and replaced when queue grows or the deadline moves
	deadline time.Time
	closed   bool
	wg       sync.WaitGroup
}

type natDatagram struct {
	b    []byte
	from netip.AddrPort
}

// newUserNAT starts a NAT of type typ whose public address is public, a
// loopback address of its own.
func newUserNAT(public netip.Addr, typ fastnettest.NATType) *userNAT {
	return &userNAT{
		nat:    fastnettest.NewNAT(public, typ.Config()),
		clk:    clock.NewReal(),
		inside: netip.MustParseAddrPort("10.0.0.1:5000"),
		socks:  make(map[uint16]*net.UDPConn),
		ready:  make(chan struct{}),
	}
}

func (u *userNAT) notifyLocked() {
	close(u.ready)
	u.ready = make(chan struct{})
}

// WriteTo sends b from the external address the NAT maps the host to for
// addr.
func (u *userNAT) WriteTo(b []byte, addr net.Addr) (int, error) {
	remote := addr.(*net.UDPAddr).AddrPort()
	remote = netip.AddrPortFrom(remote.Addr().Unmap(), remote.Port())
	u.mu.Lock()
	if u.closed {
		u.mu.Unlock()
		return 0, net.ErrClosed
	}
	ext, err := u.nat.Outbound(u.clk.Now(), u.inside, remote)
	if err != nil {
		u.mu.Unlock()
		return 0, err
	}
	s := u.socks[ext.Port()]
	if s == nil {
		s, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(ext))
		if err != nil {
			u.mu.Unlock()
			return 0, err
		}
		u.socks[ext.Port()] = s
		u.wg.Add(1)
		go u.read(s, ext)
	}
	u.mu.Unlock()
	return s.WriteToUDPAddrPort(b, remote)
}

// read passes what reaches ext to the host if the NAT admits it.
func (u *userNAT) read(s *net.UDPConn, ext netip.AddrPort) {
	defer u.wg.Done()
	buf := make([]byte, 65536)
	for {
		n, from, err := s.ReadFromUDPAddrPort(buf)
		if err != nil {
			return
		}
		from = netip.AddrPortFrom(from.Addr().Unmap(), from.Port())
		u.mu.Lock()
		if _, err := u.nat.Inbound(u.clk.Now(), from, ext); err == nil && len(u.queue) < 1024 {
			u.queue = append(u.queue, natDatagram{b: append([]byte(nil), buf[:n]...), from: from})
			u.notifyLocked()
		}
		u.mu.Unlock()
	}
}

// ReadFrom returns the next datagram the NAT let in.
func (u *userNAT) ReadFrom(b []byte) (int, net.Addr, error) {
	for {
		u.mu.Lock()
		switch {
		case len(u.queue) > 0:
			d := u.queue[0]
			u.queue = u.queue[1:]
			u.mu.Unlock()
			return copy(b, d.b), net.UDPAddrFromAddrPort(d.from), nil
		case u.closed:
			u.mu.Unlock()
			return 0, nil, net.ErrClosed
		}
		wait, dl := u.ready, u.deadline
		u.mu.Unlock()
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

func (u *userNAT) Close() error {
	u.mu.Lock()
	if !u.closed {
		u.closed = true
		for _, s := range u.socks {
			s.Close()
		}
		u.notifyLocked()
	}
	u.mu.Unlock()
	u.wg.Wait()
	return nil
}

func (u *userNAT) LocalAddr() net.Addr { return net.UDPAddrFromAddrPort(u.inside) }

func (u *userNAT) SetReadDeadline(t time.Time) error {
	u.mu.Lock()
	u.deadline = t
	u.notifyLocked()
	u.mu.Unlock()
	return nil
}

func (u *userNAT) SetDeadline(t time.Time) error      { return u.SetReadDeadline(t) }
func (u *userNAT) SetWriteDeadline(t time.Time) error { return nil }

// TestPeerThroughNATs runs introductions between two Peers each behind a
// userspace NAT over real loopback sockets, through an introducer on
// loopback: a direct path exactly where X23's table opens one, otherwise
// the target's fallback with no relay (X13).
func TestPeerThroughNATs(t *testing.T) {
	probe, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 21)})
	if err != nil {
		t.Skipf("no loopback address 127.0.0.21 here: %v", err)
	}
	probe.Close()
	cases := []struct {
		a, b fastnettest.NATType
	}{
		{fastnettest.FullCone, fastnettest.FullCone},
		{fastnettest.PortRestricted, fastnettest.PortRestricted},
		{fastnettest.Symmetric, fastnettest.FullCone},
		{fastnettest.Symmetric, fastnettest.PortRestricted},
	}
	for i, tc := range cases {
		direct := fastnettest.OpensDirectPath(tc.a, tc.b)
		t.Run(tc.a.String()+"/"+tc.b.String(), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			s := introducer(t, ctx, true)
			punch := fastnet.PunchConfig{PunchTimeout: 500 * time.Millisecond, Candidates: []netip.AddrPort{}}
			peers := make([]*Peer, 2)
			toS := make([]*Conn, 2)
			nats := make([]*userNAT, 2)
			for j, typ := range []fastnettest.NATType{tc.a, tc.b} {
				nat := newUserNAT(netip.AddrFrom4([4]byte{127, 0, 0, byte(21 + 2*i + j)}), typ)
				nats[j] = nat
				p := punch
				p.Consent = consentAll
				peers[j], toS[j] = openPeer(t, ctx, s, nat, Config{Engine: fastnet.Config{Punch: p}})
			}
			var c *Conn
			for end := time.Now().Add(5 * time.Second); ; {
				c, _, err = peers[0].Introduce(ctx, toS[0], toS[1].ID())
				var ie *fastnet.IntroError
				if !errors.As(err, &ie) || ie.Code != fastnet.IntroUnknownTarget || time.Now().After(end) {
					break // (S knows B once B has answered its query, X2)
				}
				time.Sleep(20 * time.Millisecond)
			}
			if !direct {
				var ie *fastnet.IntroError
				if !errors.As(err, &ie) || ie.Code != fastnet.IntroNoPath {
					t.Fatalf("got %v, %v; want no path", c, err)
				}
				nats[1].mu.Lock()
				st := nats[1].nat.Stats()
				nats[1].mu.Unlock()
				if st.Filtered+st.NoMapping == 0 {
					t.Fatalf("B's NAT kept nothing out: %+v", st)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			bc, err := peers[1].Accept(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if pub := netip.AddrFrom4([4]byte{127, 0, 0, byte(22 + 2*i)}); c.RemoteAddr().Addr() != pub {
				t.Fatalf("A reaches B at %v, want B's NAT %v", c.RemoteAddr(), pub)
			}
			if err := c.Send(ctx, 0, []byte("through two NATs"), true); err != nil {
				t.Fatal(err)
			}
			if m, err := bc.Receive(ctx); err != nil || string(m.Data) != "through two NATs" {
				t.Fatalf("B got %q, %v", m.Data, err)
			}
		})
	}
}
