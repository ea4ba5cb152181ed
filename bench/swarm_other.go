//go:build !linux

package main

import (
	"net"

	"github.com/fastnet-engine/fastnet/fastnet"
)

// pathOf reports that the don't-fragment bit is not set on this system's
// sockets by the swarm, so the clients do not estimate (D29), as
// udpdriver does where it cannot set it.
func pathOf(uc *net.UDPConn) (func() fastnet.PathInfo, error) {
	return func() fastnet.PathInfo {
		return fastnet.PathInfo{NoDontFragment: "not set by the benchmark's clients on this system"}
	}, nil
}
