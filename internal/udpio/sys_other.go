//go:build !linux

package udpio

import "net"

// batchSupported says whether the platform has recvmmsg and sendmmsg. On
// other systems x/net reads and writes one datagram per call anyway, so the
// Conn uses the standard library's calls directly.
const batchSupported = false

func unsupported(error) bool { return false }

// bufferSize returns 0: the size is not queried on this platform.
func bufferSize(*net.UDPConn, bool) int { return 0 }

func forceBuffer(*net.UDPConn, int, bool) {}
