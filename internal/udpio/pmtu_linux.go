package udpio

import (
	"fmt"
	"net/netip"
	"syscall"
)

// errMsgSize is EMSGSIZE; other systems may name it differently.
var errMsgSize error = syscall.EMSGSIZE

// dontFragment4 sets IP_PMTUDISC_PROBE: the bit is set, and the kernel's
// cached path MTU is not enforced (N42).
func dontFragment4(fd uintptr, _ bool) error {
	if err := syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IP, syscall.IP_MTU_DISCOVER, syscall.IP_PMTUDISC_PROBE); err != nil {
		return fmt.Errorf("udpio: IP_MTU_DISCOVER: %w", err)
	}
	return nil
}

// dontFragment6 sets IPV6_PMTUDISC_PROBE, as dontFragment4 does.
func dontFragment6(fd uintptr) error {
	if err := syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IPV6, syscall.IPV6_MTU_DISCOVER, syscall.IPV6_PMTUDISC_PROBE); err != nil {
		return fmt.Errorf("udpio: IPV6_MTU_DISCOVER: %w", err)
	}
	return nil
}

// dontFragmentOpts returns the options as the kernel reports them
// (IP_MTU_DISCOVER, IPV6_MTU_DISCOVER; -1 where they cannot be read), for
// tests.
func dontFragmentOpts(fd uintptr) (v4, v6 int) {
	v4, v6 = -1, -1
	if v, err := syscall.GetsockoptInt(int(fd), syscall.IPPROTO_IP, syscall.IP_MTU_DISCOVER); err == nil {
		v4 = v
	}
	if v, err := syscall.GetsockoptInt(int(fd), syscall.IPPROTO_IPV6, syscall.IPV6_MTU_DISCOVER); err == nil {
		v6 = v
	}
	return v4, v6
}

// pathMTU asks the kernel for its path MTU toward peer: IP_MTU or IPV6_MTU
// of a UDP socket connected there, bound to local if it is valid.
func pathMTU(local netip.Addr, peer netip.AddrPort) (int, error) {
	family, level, opt := syscall.AF_INET, syscall.IPPROTO_IP, syscall.IP_MTU
	if peer.Addr().Is6() {
		family, level, opt = syscall.AF_INET6, syscall.IPPROTO_IPV6, syscall.IPV6_MTU
	}
	fd, err := syscall.Socket(family, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, syscall.IPPROTO_UDP)
	if err != nil {
		return 0, fmt.Errorf("udpio: path MTU: socket: %w", err)
	}
	defer syscall.Close(fd)
	if local.IsValid() {
		if err := syscall.Bind(fd, sockaddr(netip.AddrPortFrom(local, 0))); err != nil {
			return 0, fmt.Errorf("udpio: path MTU: bind: %w", err)
		}
	}
	if err := syscall.Connect(fd, sockaddr(peer)); err != nil {
		return 0, fmt.Errorf("udpio: path MTU: connect: %w", err)
	}
	mtu, err := syscall.GetsockoptInt(fd, level, opt)
	if err != nil {
		return 0, fmt.Errorf("udpio: path MTU: getsockopt: %w", err)
	}
	return mtu, nil
}

// sockaddr converts ap (IPv4 unmapped) to a socket address of its family.
func sockaddr(ap netip.AddrPort) syscall.Sockaddr {
	a := ap.Addr()
	if a.Is4() {
		return &syscall.SockaddrInet4{Port: int(ap.Port()), Addr: a.As4()}
	}
	sa := &syscall.SockaddrInet6{Port: int(ap.Port()), Addr: a.As16()}
	if z := a.Zone(); z != "" {
		sa.ZoneId = zoneID(z)
	}
	return sa
}
