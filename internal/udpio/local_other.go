//go:build !linux

package udpio

import (
	"net"
	"net/netip"
)

// localSupported says whether the platform reports and sets local
// addresses: not on this one, where a socket bound to an unspecified
// address answers from the address the system picks.
const localSupported = false

func enableLocal(*net.UDPConn) (ok, v6 bool) { return false, false }

var localCmsgLen = 0

func putLocalCmsg([]byte, netip.Addr, bool) int { return 0 }

func control([]byte) (seg int, local netip.Addr) { return 0, netip.Addr{} }
