//go:build !linux

package udpio

import (
	"net"
	"net/netip"
)

// batchSupported says whether the platform has recvmmsg and sendmmsg. On
// other systems x/net reads and writes one datagram per call anyway, so the
// Conn uses the standard library's calls directly.
const batchSupported = false

func unsupported(error) bool { return false }

// bufferSize returns 0: the size is not queried on this platform.
func bufferSize(*net.UDPConn, bool) int { return 0 }

func forceBuffer(*net.UDPConn, int, bool) {}

// offloadSupported says whether the platform may have segmentation offload.
const offloadSupported = false

const msgTrunc = 0

func enableOffload(*net.UDPConn) (gso, gro bool) { return false, false }

var segmentCmsgLen, groCmsgLen = 0, 0

func putSegmentCmsg([]byte, int) {}

func groSegment([]byte) int { return 0 }

func gsoDisabled(error) bool { return false }

func kernelAtLeast(int, int) bool { return false }

// Connect does nothing on this system: writes that name their destination
// may fail on a connected socket here, so the socket stays unconnected and
// an ICMP port unreachable goes unheard, as before.
func (c *Conn) Connect(netip.AddrPort) error { return nil }

// InputWaiting reports that it cannot tell whether a datagram waits: on
// this platform it is not asked.
func (c *Conn) InputWaiting() (waiting, known bool) { return false, false }
