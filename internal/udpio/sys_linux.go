package udpio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"syscall"
	"unsafe"
)

// batchSupported says whether the platform has recvmmsg and sendmmsg.
const batchSupported = true

// unsupported reports whether err says the kernel lacks the batched calls,
// in which case the Conn falls back to one call per datagram.
func unsupported(err error) bool {
	return errors.Is(err, syscall.ENOSYS) || errors.Is(err, syscall.EOPNOTSUPP)
}

// bufferSize returns the socket's receive (read) or send buffer size as the
// kernel reports it, or 0 if it cannot be read.
func bufferSize(uc *net.UDPConn, read bool) int {
	opt := syscall.SO_SNDBUF
	if read {
		opt = syscall.SO_RCVBUF
	}
	return getsockopt(uc, opt)
}

// forceBuffer sets the buffer past net.core.rmem_max or wmem_max, which
// only a process with CAP_NET_ADMIN may do; failure is ignored.
func forceBuffer(uc *net.UDPConn, size int, read bool) {
	opt := syscall.SO_SNDBUFFORCE
	if read {
		opt = syscall.SO_RCVBUFFORCE
	}
	rc, err := uc.SyscallConn()
	if err != nil {
		return
	}
	rc.Control(func(fd uintptr) {
		syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, opt, size)
	})
}

func getsockopt(uc *net.UDPConn, opt int) int {
	rc, err := uc.SyscallConn()
	if err != nil {
		return 0
	}
	v := 0
	rc.Control(func(fd uintptr) {
		if n, err := syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, opt); err == nil {
			v = n
		}
	})
	return v
}

// Segmentation offload (Linux 4.18 for UDP_SEGMENT, 5.0 for UDP_GRO): a
// write hands the kernel several datagrams for one destination in one
// buffer, which crosses the stack once and is cut into datagrams at the
// last moment (by the device, or on loopback by the receiving socket if it
// does not take them whole); a socket with UDP_GRO receives datagrams from
// one sender that arrive together as one buffer and a segment size.
const (
	solUDP     = syscall.IPPROTO_UDP
	udpSegment = 103 // UDP_SEGMENT: the cmsg (uint16) or option giving the segment size
	udpGRO     = 104 // UDP_GRO: the option turning receive offload on, and its cmsg (int)
)

// offloadSupported says whether the platform may have segmentation offload.
const offloadSupported = true

// msgTrunc is the flag of a read cut short by its buffer.
const msgTrunc = syscall.MSG_TRUNC

// enableOffload turns receive offload on for uc and reports which
// directions the kernel supports.
func enableOffload(uc *net.UDPConn) (gso, gro bool) {
	rc, err := uc.SyscallConn()
	if err != nil {
		return false, false
	}
	groOK := kernelAtLeast(5, 10)
	rc.Control(func(fd uintptr) {
		_, err := syscall.GetsockoptInt(int(fd), solUDP, udpSegment)
		gso = err == nil
		gro = groOK && syscall.SetsockoptInt(int(fd), solUDP, udpGRO, 1) == nil
	})
	return gso, gro
}

// kernelAtLeast reports whether the running kernel's version is at least
// major.minor. Receive offload waits for 5.10: the first kernels that had
// it (5.0) mishandled some coalesced packets before later fixes.
func kernelAtLeast(major, minor int) bool {
	var u syscall.Utsname
	if syscall.Uname(&u) != nil {
		return false
	}
	var rel []byte
	for _, c := range u.Release {
		if c == 0 {
			break
		}
		rel = append(rel, byte(c))
	}
	var maj, min int
	if _, err := fmt.Sscanf(string(rel), "%d.%d", &maj, &min); err != nil {
		return false
	}
	return maj > major || maj == major && min >= minor
}

// segmentCmsgLen is the size of the control message putSegmentCmsg writes.
var segmentCmsgLen = syscall.CmsgSpace(2)

// groCmsgLen is the room a read needs for the UDP_GRO control message.
var groCmsgLen = syscall.CmsgSpace(4)

// putSegmentCmsg writes into b (segmentCmsgLen bytes) the control message
// that makes a write be cut into datagrams of size bytes.
func putSegmentCmsg(b []byte, size int) {
	putCmsghdr(b, syscall.CmsgLen(2), solUDP, udpSegment)
	binary.NativeEndian.PutUint16(b[syscall.CmsgLen(0):], uint16(size))
}

// A control message header is struct cmsghdr: a length as wide as a
// pointer (size_t), then level and type as 32-bit integers.
const cmsgLenWidth = syscall.SizeofCmsghdr - 8

func putCmsghdr(b []byte, n, level, typ int) {
	if cmsgLenWidth == 8 {
		binary.NativeEndian.PutUint64(b, uint64(n))
	} else {
		binary.NativeEndian.PutUint32(b, uint32(n))
	}
	binary.NativeEndian.PutUint32(b[cmsgLenWidth:], uint32(level))
	binary.NativeEndian.PutUint32(b[cmsgLenWidth+4:], uint32(typ))
}

func cmsghdr(b []byte) (n, level, typ int) {
	if cmsgLenWidth == 8 {
		n = int(min(binary.NativeEndian.Uint64(b), uint64(len(b))+1))
	} else {
		n = int(min(binary.NativeEndian.Uint32(b), uint32(len(b))+1))
	}
	return n, int(int32(binary.NativeEndian.Uint32(b[cmsgLenWidth:]))), int(int32(binary.NativeEndian.Uint32(b[cmsgLenWidth+4:])))
}

// groSegment returns the segment size a read's control messages give, or
// 0 if they give none.
func groSegment(oob []byte) int {
	for len(oob) >= syscall.SizeofCmsghdr {
		n, level, typ := cmsghdr(oob)
		if n < syscall.SizeofCmsghdr || n > len(oob) {
			return 0
		}
		if level == solUDP && typ == udpGRO && n >= syscall.CmsgLen(4) {
			return int(int32(binary.NativeEndian.Uint32(oob[syscall.CmsgLen(0):])))
		}
		oob = oob[min(syscall.CmsgSpace(n-syscall.CmsgLen(0)), len(oob)):]
	}
	return 0
}

// gsoDisabled reports whether err says the kernel cannot offload a write
// (a device without checksum offload answers EIO), in which case the Conn
// stops asking.
func gsoDisabled(err error) bool {
	return errors.Is(err, syscall.EIO) || errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOPROTOOPT)
}

// Connect connects the socket to ap: the kernel then passes up datagrams
// from ap alone, and reports an ICMP port unreachable from it as
// ECONNREFUSED on the next read, which an unconnected socket never hears.
// Writes may still name their destination (Linux allows it on a connected
// UDP socket). It suits a client, which talks to one server.
func (c *Conn) Connect(ap netip.AddrPort) error {
	rc, err := c.uc.SyscallConn()
	if err != nil {
		return err
	}
	var sa syscall.Sockaddr
	if la := c.LocalAddr(); la.Addr().Is4() && ap.Addr().Is4() {
		sa = &syscall.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}
	} else {
		// A link-local peer's zone names the interface the kernel
		// must use: without it connect refuses the address (EINVAL).
		sa6 := &syscall.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()}
		if z := ap.Addr().Zone(); z != "" {
			sa6.ZoneId = zoneID(z)
		}
		sa = sa6
	}
	var cerr error
	if err := rc.Control(func(fd uintptr) { cerr = syscall.Connect(int(fd), sa) }); err != nil {
		return err
	}
	if cerr != nil {
		return os.NewSyscallError("connect", cerr)
	}
	return nil
}

// InputWaiting reports whether a datagram waits in the socket's receive
// queue, and whether it could tell. It asks the kernel for the size of
// the next datagram (SIOCINQ), which, unlike a peek, leaves a pending
// socket error for the read that reports it; an empty datagram waiting
// is not seen.
func (c *Conn) InputWaiting() (waiting, known bool) {
	rc, err := c.uc.SyscallConn()
	if err != nil {
		return false, false
	}
	var n int32 // the kernel writes an int
	var errno syscall.Errno
	if err := rc.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&n)))
	}); err != nil || errno != 0 {
		return false, false
	}
	return n > 0, true
}
