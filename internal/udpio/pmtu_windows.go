package udpio

import (
	"errors"
	"fmt"
	"net/netip"
	"syscall"
)

// The options of ws2ipdef.h.
const (
	ipDontFragment = 14 // IP_DONTFRAGMENT, level IPPROTO_IP
	ipv6DontFrag   = 14 // IPV6_DONTFRAG, level IPPROTO_IPV6
	wsaEMsgSize    = syscall.Errno(10040)
)

// errMsgSize is WSAEMSGSIZE.
var errMsgSize error = wsaEMsgSize

// socketFamily reports whether fd is an AF_INET6 socket, and if so whether
// it also sends to IPv4 peers (not IPv6-only).
func socketFamily(fd uintptr) (v6, v4too bool, err error) {
	sa, err := syscall.Getsockname(syscall.Handle(fd))
	if err != nil {
		return false, false, err
	}
	if _, ok := sa.(*syscall.SockaddrInet6); !ok {
		return false, false, nil
	}
	only, err := syscall.GetsockoptInt(syscall.Handle(fd), syscall.IPPROTO_IPV6, syscall.IPV6_V6ONLY)
	return true, err == nil && only == 0, nil
}

// dontFragment4 sets IP_DONTFRAGMENT.
func dontFragment4(fd uintptr, _ bool) error {
	if err := syscall.SetsockoptInt(syscall.Handle(fd), syscall.IPPROTO_IP, ipDontFragment, 1); err != nil {
		return fmt.Errorf("udpio: IP_DONTFRAGMENT: %w", err)
	}
	return nil
}

// dontFragment6 sets IPV6_DONTFRAG.
func dontFragment6(fd uintptr) error {
	if err := syscall.SetsockoptInt(syscall.Handle(fd), syscall.IPPROTO_IPV6, ipv6DontFrag, 1); err != nil {
		return fmt.Errorf("udpio: IPV6_DONTFRAG: %w", err)
	}
	return nil
}

// dontFragmentOpts returns the options as the system reports them, -1
// where they cannot be read (tests).
func dontFragmentOpts(fd uintptr) (v4, v6 int) {
	v4, v6 = -1, -1
	if v, err := syscall.GetsockoptInt(syscall.Handle(fd), syscall.IPPROTO_IP, ipDontFragment); err == nil {
		v4 = v
	}
	if v, err := syscall.GetsockoptInt(syscall.Handle(fd), syscall.IPPROTO_IPV6, ipv6DontFrag); err == nil {
		v6 = v
	}
	return v4, v6
}

// pathMTU is not asked on Windows.
func pathMTU(netip.Addr, netip.AddrPort) (int, error) {
	return 0, fmt.Errorf("udpio: path MTU: %w", errors.ErrUnsupported)
}
