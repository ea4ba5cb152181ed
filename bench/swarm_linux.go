package main

import (
	"net"
	"syscall"

	"github.com/fastnet-engine/fastnet/fastnet"
)

// pathOf prepares uc, a client's IPv4 socket connected to the server, as
// udpdriver prepares its sockets (D29): the don't-fragment bit set, so
// that MTU probes larger than the path are lost instead of fragmented,
// and the kernel's path MTU toward the server read when the estimation
// starts, less the IP and UDP headers and the channel id, as the first
// size the estimator probes.
func pathOf(uc *net.UDPConn) (func() fastnet.PathInfo, error) {
	rc, err := uc.SyscallConn()
	if err != nil {
		return nil, err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IP, syscall.IP_MTU_DISCOVER, syscall.IP_PMTUDISC_PROBE)
	}); err != nil {
		return nil, err
	}
	if serr != nil {
		return nil, serr
	}
	return func() fastnet.PathInfo {
		mtu := 0
		rc.Control(func(fd uintptr) {
			mtu, serr = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_IP, syscall.IP_MTU)
		})
		if serr != nil {
			return fastnet.PathInfo{}
		}
		const headers = 20 + 8 + 2 // IPv4, UDP, channel id
		return fastnet.PathInfo{PayloadMTU: max(mtu-headers, 0)}
	}, nil
}
