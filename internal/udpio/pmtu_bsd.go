//go:build darwin || freebsd || solaris || aix

package udpio

import (
	"errors"
	"fmt"
	"net/netip"
	"syscall"

	"golang.org/x/sys/unix"
)

// errMsgSize is EMSGSIZE.
var errMsgSize error = syscall.EMSGSIZE

// dontFragment4 sets IP_DONTFRAG. On an AF_INET6 socket some of these
// systems refuse the IPv4 option; the refusal is reported.
func dontFragment4(fd uintptr, _ bool) error {
	if err := unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_DONTFRAG, 1); err != nil {
		return fmt.Errorf("udpio: IP_DONTFRAG: %w", err)
	}
	return nil
}

// dontFragment6 sets IPV6_DONTFRAG.
func dontFragment6(fd uintptr) error {
	if err := unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_DONTFRAG, 1); err != nil {
		return fmt.Errorf("udpio: IPV6_DONTFRAG: %w", err)
	}
	return nil
}

// dontFragmentOpts returns IP_DONTFRAG and IPV6_DONTFRAG as the system
// reports them, -1 where they cannot be read (tests).
func dontFragmentOpts(fd uintptr) (v4, v6 int) {
	v4, v6 = -1, -1
	if v, err := unix.GetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_DONTFRAG); err == nil {
		v4 = v
	}
	if v, err := unix.GetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_DONTFRAG); err == nil {
		v6 = v
	}
	return v4, v6
}

// pathMTU is not asked on these systems: they have no IP_MTU option on a
// connected UDP socket.
func pathMTU(netip.Addr, netip.AddrPort) (int, error) {
	return 0, fmt.Errorf("udpio: path MTU: %w", errors.ErrUnsupported)
}
