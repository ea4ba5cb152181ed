//go:build netbsd || openbsd || dragonfly

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

// dontFragment4 reports that these systems have no socket option that sets
// the don't-fragment bit of IPv4 datagrams.
func dontFragment4(uintptr, bool) error {
	return fmt.Errorf("udpio: IPv4: %w", ErrNoDontFragment)
}

// dontFragment6 sets IPV6_DONTFRAG.
func dontFragment6(fd uintptr) error {
	if err := unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_DONTFRAG, 1); err != nil {
		return fmt.Errorf("udpio: IPV6_DONTFRAG: %w", err)
	}
	return nil
}

// dontFragmentOpts returns -1 for IPv4 and IPV6_DONTFRAG as the system
// reports it, -1 if it cannot be read (tests).
func dontFragmentOpts(fd uintptr) (v4, v6 int) {
	v4, v6 = -1, -1
	if v, err := unix.GetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_DONTFRAG); err == nil {
		v6 = v
	}
	return v4, v6
}

// pathMTU is not asked on these systems.
func pathMTU(netip.Addr, netip.AddrPort) (int, error) {
	return 0, fmt.Errorf("udpio: path MTU: %w", errors.ErrUnsupported)
}
