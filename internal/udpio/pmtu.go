package udpio

import (
	"errors"
	"net"
	"net/netip"
	"strconv"
)

// Path MTU (D29 of the project's decisions; notes N42 and N43). New sets
// the don't-fragment bit on the socket's datagrams, IPv4 and IPv6, wherever
// the system has a way: a datagram larger than the path is then lost (or
// refused by the local kernel with EMSGSIZE), never cut into IP fragments,
// so a probe of the MTU estimator that arrives proves its size. On Linux the
// option is IP_MTU_DISCOVER and IPV6_MTU_DISCOVER at *_PMTUDISC_PROBE: the
// bit is set and the kernel's own path MTU is not enforced on sends, so the
// estimator, not a cached or forged ICMP message, decides what is sent
// (N42); a datagram above the outgoing interface's MTU still fails at once
// with EMSGSIZE. On the BSDs, macOS, Solaris and AIX it is IP_DONTFRAG and
// IPV6_DONTFRAG; on Windows IP_DONTFRAGMENT and IPV6_DONTFRAG.

// ErrNoDontFragment is wrapped by the errors of [Conn.DontFragment] when the
// system has no way to set the don't-fragment bit for the peer's family.
var ErrNoDontFragment = errors.New("the system cannot set the don't-fragment bit")

// ErrNotFamily is returned by [Conn.DontFragment] for a peer the socket
// cannot send to (an IPv6 peer of an IPv4 socket, or an IPv4 peer of an
// IPv6-only socket).
var ErrNotFamily = errors.New("udpio: the socket does not send to that address family")

// dfState is what New found out about the don't-fragment bit of one
// address family: nil if set, or why not.
type dfState struct {
	v4, v6 error
}

// setDontFragment sets the don't-fragment bit for the families uc sends to.
// An AF_INET6 socket that is not IPv6-only also sends to IPv4 peers, as
// mapped addresses, with the IPv4 options.
func setDontFragment(uc *net.UDPConn) dfState {
	rc, err := uc.SyscallConn()
	if err != nil {
		return dfState{err, err}
	}
	var st dfState
	cerr := rc.Control(func(fd uintptr) {
		v6, v4too, err := socketFamily(fd)
		if err != nil {
			st = dfState{err, err}
			return
		}
		st.v4, st.v6 = ErrNotFamily, ErrNotFamily
		if v6 {
			st.v6 = dontFragment6(fd)
		}
		if !v6 || v4too {
			st.v4 = dontFragment4(fd, v6)
		}
	})
	if cerr != nil {
		return dfState{cerr, cerr}
	}
	return st
}

// DontFragment reports whether the socket's datagrams to peer carry the
// don't-fragment bit: nil if they do, otherwise why not (an error wrapping
// ErrNoDontFragment where the system has no way, the system's refusal, or
// ErrNotFamily).
func (c *Conn) DontFragment(peer netip.AddrPort) error {
	if peer.Addr().Unmap().Is4() {
		return c.df.v4
	}
	return c.df.v6
}

// PathMTU returns the path MTU toward peer as the system knows it: the
// largest IP packet, headers included, it would send there (on Linux the
// route's or outgoing interface's MTU, or a smaller one learned from ICMP),
// and the IP header size for that path (20 for IPv4, 40 for IPv6). Where
// the system cannot tell, it returns an error wrapping
// errors.ErrUnsupported. On Linux it asks with a temporary UDP socket
// connected to peer (no datagram is sent), bound to the Conn's local
// address if that is not a wildcard; the socket costs a few microseconds
// (N43).
func (c *Conn) PathMTU(peer netip.AddrPort) (mtu, ipHeader int, err error) {
	a := peer.Addr().Unmap()
	if !a.IsValid() {
		return 0, 0, ErrInvalidAddr
	}
	local := c.LocalAddr().Addr().Unmap()
	if local.IsUnspecified() || local.Is4() != a.Is4() {
		local = netip.Addr{}
	}
	hdr := 40
	if a.Is4() {
		hdr = 20
	}
	mtu, err = pathMTU(local, netip.AddrPortFrom(a, peer.Port()))
	if err != nil {
		return 0, 0, err
	}
	return mtu, hdr, nil
}

// TooBig returns how many datagrams WriteBatch could not send because the
// system refused them as larger than the path it knows (EMSGSIZE): with the
// don't-fragment bit set, a datagram above the outgoing interface's MTU.
// Such a datagram is lost like any other (an MTU probe above the path, say);
// the write goes on with the next one.
func (c *Conn) TooBig() uint64 { return c.tooBig.Load() }

// countTooBig counts err if it says a datagram was too big.
func (c *Conn) countTooBig(err error) {
	if err != nil && isTooBig(err) {
		c.tooBig.Add(1)
	}
}

// isTooBig reports whether err is the system's refusal of a datagram
// larger than the path MTU it knows.
func isTooBig(err error) bool {
	return errors.Is(err, errMsgSize)
}

// zoneID returns the interface index of an IPv6 zone: a number, or an
// interface name; 0 if neither.
func zoneID(z string) uint32 {
	if n, err := strconv.ParseUint(z, 10, 32); err == nil {
		return uint32(n)
	}
	if ifi, err := net.InterfaceByName(z); err == nil {
		return uint32(ifi.Index)
	}
	return 0
}
