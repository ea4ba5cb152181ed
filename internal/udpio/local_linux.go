package udpio

import (
	"encoding/binary"
	"net"
	"net/netip"
	"strconv"
	"syscall"
	"unsafe"
)

// Local addresses (Options.ReportLocal): a socket bound to an unspecified
// address receives datagrams sent to any of the host's addresses, and
// without more the kernel picks the source of each answer by its route,
// which on a host of several addresses need not be the one the peer sent
// to. Linux reports the local address of each datagram read (IP_PKTINFO,
// IPV6_RECVPKTINFO) and sends a datagram from the address its control
// message gives (the same messages, on a write).

// localSupported says whether the platform reports and sets local
// addresses.
const localSupported = true

// enableLocal asks the kernel to report the local address of each
// datagram uc reads, and reports whether it will, and whether uc is an
// IPv6 socket (whose control messages are IPv6's, for IPv4 peers too).
//
// An IPv6 socket asks for IP_PKTINFO as well: for an IPv4 datagram,
// IPV6_PKTINFO gives the header's destination mapped, which for a
// broadcast is the broadcast address, not one to send from (the kernel
// refuses it, ENETUNREACH); IP_PKTINFO gives ipi_spec_dst, the
// interface's own address, as on an IPv4 socket (control prefers it).
func enableLocal(uc *net.UDPConn) (ok, v6 bool) {
	rc, err := uc.SyscallConn()
	if err != nil {
		return false, false
	}
	rc.Control(func(fd uintptr) {
		sa, err := syscall.Getsockname(int(fd))
		if err != nil {
			return
		}
		switch sa.(type) {
		case *syscall.SockaddrInet4:
			ok = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IP, syscall.IP_PKTINFO, 1) == nil
		case *syscall.SockaddrInet6:
			v6 = true
			ok = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IPV6, syscall.IPV6_RECVPKTINFO, 1) == nil
			if ok {
				syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IP, syscall.IP_PKTINFO, 1) // IPv4 peers, if any
			}
		}
	})
	return ok, v6
}

// localCmsgLen is the most room putLocalCmsg takes.
var localCmsgLen = syscall.CmsgSpace(syscall.SizeofInet6Pktinfo)

// putLocalCmsg writes into b (localCmsgLen bytes at least) the control
// message that sends a datagram from local address a, on an IPv6 socket
// if v6, and returns its length: 0, writing nothing, if a is not an
// address the socket can send from (an IPv6 address on an IPv4 socket).
func putLocalCmsg(b []byte, a netip.Addr, v6 bool) int {
	if !v6 {
		if !a.Is4() {
			return 0
		}
		n := syscall.CmsgSpace(syscall.SizeofInet4Pktinfo)
		clear(b[:n])
		putCmsghdr(b, syscall.CmsgLen(syscall.SizeofInet4Pktinfo), syscall.IPPROTO_IP, syscall.IP_PKTINFO)
		p := (*syscall.Inet4Pktinfo)(unsafe.Pointer(&b[syscall.CmsgLen(0)]))
		p.Spec_dst = a.As4() // the source; Ifindex 0: any interface
		return n
	}
	n := syscall.CmsgSpace(syscall.SizeofInet6Pktinfo)
	clear(b[:n])
	putCmsghdr(b, syscall.CmsgLen(syscall.SizeofInet6Pktinfo), syscall.IPPROTO_IPV6, syscall.IPV6_PKTINFO)
	p := (*syscall.Inet6Pktinfo)(unsafe.Pointer(&b[syscall.CmsgLen(0)]))
	p.Addr = a.As16() // an IPv4 address mapped, which Linux takes for an IPv4 peer
	if z := a.Zone(); z != "" {
		p.Ifindex = zoneID(z) // a link-local address is the interface's
	}
	return n
}

// control returns what a read's control messages say: the segment size of
// a read of several datagrams (UDP_GRO), 0 for one; and the local address
// the datagrams were sent to (IP_PKTINFO, IPV6_PKTINFO), IPv4 unmapped, or
// the zero Addr if they do not give it or it is a multicast address, not
// one to answer from. Where both are given (an IPv4 datagram on an IPv6
// socket), IP_PKTINFO's ipi_spec_dst is the one.
func control(oob []byte) (seg int, local netip.Addr) {
	var local4 netip.Addr
	for len(oob) >= syscall.SizeofCmsghdr {
		n, level, typ := cmsghdr(oob)
		if n < syscall.SizeofCmsghdr || n > len(oob) {
			break
		}
		data := oob[syscall.CmsgLen(0):n]
		switch {
		case level == solUDP && typ == udpGRO && len(data) >= 4:
			seg = int(int32(binary.NativeEndian.Uint32(data)))
		case level == syscall.IPPROTO_IP && typ == syscall.IP_PKTINFO && len(data) >= syscall.SizeofInet4Pktinfo:
			// ipi_spec_dst, the local address the kernel answers
			// from (for a datagram sent to a broadcast address, the
			// interface's own), not ipi_addr, the header's.
			var a [4]byte
			copy(a[:], data[4:8])
			local4 = netip.AddrFrom4(a)
		case level == syscall.IPPROTO_IPV6 && typ == syscall.IPV6_PKTINFO && len(data) >= syscall.SizeofInet6Pktinfo:
			var a [16]byte
			copy(a[:], data[:16])
			local = netip.AddrFrom16(a).Unmap()
			if local.Is6() && (local.IsLinkLocalUnicast() || local.IsLinkLocalMulticast()) {
				if i := binary.NativeEndian.Uint32(data[16:20]); i != 0 {
					local = local.WithZone(strconv.FormatUint(uint64(i), 10))
				}
			}
		}
		oob = oob[min(syscall.CmsgSpace(n-syscall.CmsgLen(0)), len(oob)):]
	}
	if local4.IsValid() {
		local = local4
	}
	if local.IsMulticast() || local.IsUnspecified() {
		local = netip.Addr{}
	}
	return seg, local
}
