//go:build linux || darwin || freebsd || solaris || aix || netbsd || openbsd || dragonfly

package udpio

import "syscall"

// socketFamily reports whether fd is an AF_INET6 socket, and if so whether
// it also sends to IPv4 peers (not IPv6-only).
func socketFamily(fd uintptr) (v6, v4too bool, err error) {
	sa, err := syscall.Getsockname(int(fd))
	if err != nil {
		return false, false, err
	}
	if _, ok := sa.(*syscall.SockaddrInet6); !ok {
		return false, false, nil
	}
	only, err := syscall.GetsockoptInt(int(fd), syscall.IPPROTO_IPV6, syscall.IPV6_V6ONLY)
	return true, err == nil && only == 0, nil
}
