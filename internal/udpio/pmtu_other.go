//go:build !linux && !darwin && !freebsd && !solaris && !aix && !netbsd && !openbsd && !dragonfly && !windows

package udpio

import (
	"errors"
	"fmt"
	"net/netip"
)

// errMsgSize never matches here: the system has no don't-fragment option,
// so the refusal cannot come.
var errMsgSize = errors.New("udpio: EMSGSIZE")

func socketFamily(uintptr) (v6, v4too bool, err error) { return true, true, nil }

// dontFragment4 and dontFragment6 report that the system has no
// don't-fragment option this package knows.
func dontFragment4(uintptr, bool) error { return fmt.Errorf("udpio: IPv4: %w", ErrNoDontFragment) }
func dontFragment6(uintptr) error       { return fmt.Errorf("udpio: IPv6: %w", ErrNoDontFragment) }

func dontFragmentOpts(uintptr) (v4, v6 int) { return -1, -1 }

// pathMTU is not asked on this system.
func pathMTU(netip.Addr, netip.AddrPort) (int, error) {
	return 0, fmt.Errorf("udpio: path MTU: %w", errors.ErrUnsupported)
}
