//go:build linux && !386

package udpio

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// rawSocket makes the Conn's single reads and writes with its own recvmsg
// and sendmsg, and its batched reads with its own recvmmsg, on the
// socket's descriptor through the runtime's poller (syscall.RawConn), with
// headers built once and reused. Against the standard library's
// ReadMsgUDPAddrPort and WriteMsgUDPAddrPort, and x/net's ReadBatch, it
// saves the conversions of each call, and it lets a read that expects to
// wait begin with a cheaper check (rawSocket.read). A round trip of W1
// makes four such calls on each side.
type rawSocket struct {
	rc    syscall.RawConn
	v6    bool     // the socket is AF_INET6 (IPv4 peers as mapped addresses)
	local bool     // reads report local addresses (Options.ReportLocal)
	laddr net.Addr // for errors, as the standard library reports them
	rd    rawRead
	rm    rawMany
	wr    rawWrite
	zmu   sync.Mutex
	// Interface names by index and back, for IPv6 zones, as the
	// standard library and x/net name them; an entry is looked up again
	// after zoneTTL, and a failed lookup is not kept.
	names   map[uint32]zoneEntry[string]
	indexes map[string]zoneEntry[uint32]
}

// zoneEntry is a cached interface name or index, and when it was looked up.
type zoneEntry[T any] struct {
	v  T
	at time.Time
}

// zoneTTL is how long a zone lookup is trusted: interfaces come and go,
// and one made again gets a new index (the standard library's cache
// refreshes as often).
const zoneTTL = time.Minute

// rawRead is the state of one read: ReadBatch runs on one goroutine at a
// time, so one is enough.
type rawRead struct {
	hdr  syscall.Msghdr
	iov  syscall.Iovec
	name syscall.RawSockaddrAny
	oob  [readOOBLen]byte
	peek [1]byte
	none byte // storage for a read into an empty buffer
	// probe says that the last read waited for its datagram: the next
	// starts with a peek, which costs less than a recvmsg finding
	// nothing (no message header to copy in).
	probe bool
	tries int // calls of try in this read
	// fail, if set, is what every system call of the socket returns
	// (tests: a kernel without them).
	fail  syscall.Errno
	n     int
	flags int
	err   error
	try   func(fd uintptr) bool
}

// rawMany is the state of one batched read (recvmmsg), with a header,
// address and control buffer per place, built as the batch first needs
// them; ReadBatch runs on one goroutine at a time.
type rawMany struct {
	hdrs  []mmsghdr
	iovs  []syscall.Iovec
	names []syscall.RawSockaddrAny
	oob   [][readOOBLen]byte
	k     int // places this read offers
	n     int // datagrams it read
	err   syscall.Errno
	try   func(fd uintptr) bool
}

// mmsghdr is struct mmsghdr: a message header and the length received.
// Go pads it as C does (to 64 bytes on 64-bit systems, 32 on others).
type mmsghdr struct {
	hdr syscall.Msghdr
	len uint32
}

// rawWrite is the state of one write; writes are serialised by the
// Conn's caller (one writing goroutine at a time).
type rawWrite struct {
	hdr  syscall.Msghdr
	iov  syscall.Iovec
	sa4  syscall.RawSockaddrInet4
	sa6  syscall.RawSockaddrInet6
	none byte
	err  error
	fail syscall.Errno // as rawRead.fail
	try  func(fd uintptr) bool
}

// newRawSocket returns the raw calls of uc, or nil if the socket does not
// offer them.
func newRawSocket(uc *net.UDPConn) *rawSocket {
	rc, err := uc.SyscallConn()
	if err != nil {
		return nil
	}
	var sa syscall.Sockaddr
	var serr error
	if err := rc.Control(func(fd uintptr) { sa, serr = syscall.Getsockname(int(fd)) }); err != nil || serr != nil {
		return nil
	}
	s := &rawSocket{rc: rc, laddr: uc.LocalAddr()}
	switch sa.(type) {
	case *syscall.SockaddrInet4:
	case *syscall.SockaddrInet6:
		s.v6 = true
	default:
		return nil
	}
	r := &s.rd
	r.hdr.Name = (*byte)(unsafe.Pointer(&r.name))
	r.hdr.Iov = &r.iov
	r.hdr.Iovlen = 1
	r.hdr.Control = &r.oob[0]
	r.try = r.attempt
	s.rm.try = s.rm.attempt
	w := &s.wr
	w.hdr.Iov = &w.iov
	w.hdr.Iovlen = 1
	w.try = w.attempt
	return s
}

// attempt is one try of a read, called by the poller until it returns
// true: at once, and again each time the socket becomes readable.
func (r *rawRead) attempt(fd uintptr) bool {
	r.tries++
	if r.fail != 0 {
		r.n, r.err = 0, r.fail
		return true
	}
	if r.tries == 1 && r.probe {
		// The pointer is converted in the call expression itself,
		// which keeps its object alive and in place during the call.
		var e syscall.Errno
		_, _, e = syscall.Syscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&r.peek[0])), 1,
			syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
		switch e {
		case syscall.EAGAIN:
			return false
		case 0, syscall.EINTR:
		default:
			// A pending socket error (an ICMP error from an
			// earlier write), which the peek consumed: report it as
			// the read that follows would have.
			r.n, r.err = 0, e
			return true
		}
	}
	for {
		r.hdr.Namelen = uint32(syscall.SizeofSockaddrAny)
		r.hdr.SetControllen(len(r.oob))
		r.hdr.Flags = 0
		var n uintptr
		var e syscall.Errno
		n, _, e = syscall.Syscall(syscall.SYS_RECVMSG, fd, uintptr(unsafe.Pointer(&r.hdr)), 0)
		switch e {
		case 0:
			r.n, r.flags, r.err = int(n), int(r.hdr.Flags), nil
			return true
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		}
		r.n, r.err = 0, e
		return true
	}
}

// read reads one datagram, or one offloaded run of them, into m, and
// reports whether it had to wait for it.
func (s *rawSocket) read(m *Message) (waited bool, err error) {
	r := &s.rd
	if len(m.Buf) > 0 {
		r.iov.Base = &m.Buf[0]
	} else {
		r.iov.Base = &r.none
	}
	r.iov.SetLen(len(m.Buf))
	r.tries = 0
	perr := s.rc.Read(r.try)
	waited = r.tries > 1
	r.probe = waited
	r.iov.Base = nil
	switch {
	case perr != nil:
		return waited, &net.OpError{Op: "read", Net: "udp", Source: s.laddr, Err: pollError(perr)}
	case r.err != nil:
		return waited, &net.OpError{Op: "read", Net: "udp", Source: s.laddr, Err: os.NewSyscallError("recvmsg", r.err)}
	}
	m.Seg, m.Local = 0, netip.Addr{}
	if oobn := int(r.hdr.Controllen); oobn > 0 {
		m.Seg, m.Local = s.control(r.oob[:min(oobn, len(r.oob))])
	}
	m.N = whole(r.n, m.Seg, r.flags)
	m.Addr = s.from()
	return waited, nil
}

// control returns what a read's control messages oob say: the segment
// size, and the local address if the socket reports local addresses.
func (s *rawSocket) control(oob []byte) (seg int, local netip.Addr) {
	return readControl(oob, s.local)
}

// from returns the sender of the last read, unmapped.
func (s *rawSocket) from() netip.AddrPort {
	return s.addr(&s.rd.name, s.rd.hdr.Namelen)
}

// addr returns the address a read stored in name, namelen bytes long,
// unmapped.
func (s *rawSocket) addr(name *syscall.RawSockaddrAny, namelen uint32) netip.AddrPort {
	if namelen == 0 {
		return netip.AddrPort{}
	}
	switch name.Addr.Family {
	case syscall.AF_INET:
		sa := (*syscall.RawSockaddrInet4)(unsafe.Pointer(name))
		return netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), port(sa.Port))
	case syscall.AF_INET6:
		sa := (*syscall.RawSockaddrInet6)(unsafe.Pointer(name))
		a := netip.AddrFrom16(sa.Addr)
		if a.Is4In6() {
			return netip.AddrPortFrom(a.Unmap(), port(sa.Port))
		}
		if sa.Scope_id != 0 {
			a = a.WithZone(s.zoneName(sa.Scope_id))
		}
		return netip.AddrPortFrom(a, port(sa.Port))
	}
	return netip.AddrPort{}
}

// readMany reads up to len(msgs) datagrams, or offloaded runs of them, in
// one recvmmsg, waiting for the first; it is the batched read's own call,
// as read is the single one's.
func (s *rawSocket) readMany(msgs []Message) (int, error) {
	r := &s.rm
	if s.rd.fail != 0 {
		return 0, &net.OpError{Op: "read", Net: "udp", Source: s.laddr, Err: os.NewSyscallError("recvmmsg", s.rd.fail)}
	}
	k := len(msgs)
	if k > len(r.hdrs) {
		r.hdrs = make([]mmsghdr, k)
		r.iovs = make([]syscall.Iovec, k)
		r.names = make([]syscall.RawSockaddrAny, k)
		r.oob = make([][readOOBLen]byte, k)
		for i := range k {
			h := &r.hdrs[i].hdr
			h.Iov = &r.iovs[i]
			h.Iovlen = 1
			h.Name = (*byte)(unsafe.Pointer(&r.names[i]))
			h.Control = &r.oob[i][0]
		}
	}
	for i := range k {
		h := &r.hdrs[i].hdr
		if len(msgs[i].Buf) > 0 {
			r.iovs[i].Base = &msgs[i].Buf[0]
		} else {
			r.iovs[i].Base = &s.rd.none
		}
		r.iovs[i].SetLen(len(msgs[i].Buf))
		// What the kernel wrote back last time.
		h.Namelen = uint32(syscall.SizeofSockaddrAny)
		h.SetControllen(len(r.oob[i]))
		h.Flags = 0
		r.hdrs[i].len = 0
	}
	r.k = k
	perr := s.rc.Read(r.try)
	for i := range k {
		r.iovs[i].Base = nil // keep no buffer of the caller's
	}
	switch {
	case perr != nil:
		return 0, &net.OpError{Op: "read", Net: "udp", Source: s.laddr, Err: pollError(perr)}
	case r.err != 0:
		return 0, &net.OpError{Op: "read", Net: "udp", Source: s.laddr, Err: os.NewSyscallError("recvmmsg", r.err)}
	}
	for i := range r.n {
		h := &r.hdrs[i].hdr
		m := &msgs[i]
		m.Seg, m.Local = 0, netip.Addr{}
		if oobn := int(h.Controllen); oobn > 0 {
			m.Seg, m.Local = s.control(r.oob[i][:min(oobn, len(r.oob[i]))])
		}
		m.N = whole(int(r.hdrs[i].len), m.Seg, int(h.Flags))
		m.Addr = s.addr(&r.names[i], h.Namelen)
	}
	return r.n, nil
}

// attempt is one try of a batched read, as rawRead.attempt is of a
// single one.
func (r *rawMany) attempt(fd uintptr) bool {
	r.n, r.err = 0, 0
	for {
		var n uintptr
		var e syscall.Errno
		// The pointer is converted in the call expression itself,
		// which keeps its object alive and in place during the call.
		n, _, e = syscall.Syscall6(syscall.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&r.hdrs[0])), uintptr(r.k), 0, 0, 0)
		switch e {
		case 0:
			r.n = int(n)
			return true
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		}
		r.err = e
		return true
	}
}

// port reads a port the kernel stored in network byte order.
func port(p uint16) uint16 {
	b := (*[2]byte)(unsafe.Pointer(&p))
	return uint16(b[0])<<8 | uint16(b[1])
}

// putPort stores p in network byte order.
func putPort(dst *uint16, p uint16) {
	b := (*[2]byte)(unsafe.Pointer(dst))
	b[0], b[1] = byte(p>>8), byte(p)
}

// attempt is one try of a write.
func (w *rawWrite) attempt(fd uintptr) bool {
	if w.fail != 0 {
		w.err = w.fail
		return true
	}
	for {
		var e syscall.Errno
		_, _, e = syscall.Syscall(syscall.SYS_SENDMSG, fd, uintptr(unsafe.Pointer(&w.hdr)), 0)
		switch e {
		case 0:
			w.err = nil
			return true
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		}
		w.err = e
		return true
	}
}

// write sends b, with the control messages oob, to ap (unmapped).
func (s *rawSocket) write(b, oob []byte, ap netip.AddrPort) error {
	w := &s.wr
	a := ap.Addr()
	switch {
	case a.Is4() && !s.v6:
		w.sa4 = syscall.RawSockaddrInet4{Family: syscall.AF_INET, Addr: a.As4()}
		putPort(&w.sa4.Port, ap.Port())
		w.hdr.Name = (*byte)(unsafe.Pointer(&w.sa4))
		w.hdr.Namelen = syscall.SizeofSockaddrInet4
	case s.v6:
		w.sa6 = syscall.RawSockaddrInet6{Family: syscall.AF_INET6, Addr: a.As16()}
		putPort(&w.sa6.Port, ap.Port())
		if z := a.Zone(); z != "" {
			w.sa6.Scope_id = s.zoneIndex(z)
		}
		w.hdr.Name = (*byte)(unsafe.Pointer(&w.sa6))
		w.hdr.Namelen = syscall.SizeofSockaddrInet6
	default:
		// An IPv6 destination on an IPv4 socket, refused as the
		// standard library refuses it.
		return &net.OpError{Op: "write", Net: "udp", Source: s.laddr, Addr: net.UDPAddrFromAddrPort(ap),
			Err: &net.AddrError{Err: "non-IPv4 address", Addr: a.String()}}
	}
	if len(b) > 0 {
		w.iov.Base = &b[0]
	} else {
		w.iov.Base = &w.none
	}
	w.iov.SetLen(len(b))
	w.hdr.Control = nil
	w.hdr.SetControllen(0)
	if len(oob) > 0 {
		w.hdr.Control = &oob[0]
		w.hdr.SetControllen(len(oob))
	}
	perr := s.rc.Write(w.try)
	w.iov.Base, w.hdr.Control = nil, nil
	switch {
	case perr != nil:
		return &net.OpError{Op: "write", Net: "udp", Source: s.laddr, Addr: net.UDPAddrFromAddrPort(ap), Err: pollError(perr)}
	case w.err != nil:
		return &net.OpError{Op: "write", Net: "udp", Source: s.laddr, Addr: net.UDPAddrFromAddrPort(ap), Err: os.NewSyscallError("sendmsg", w.err)}
	}
	return nil
}

// pollError is the poller's own error (net.ErrClosed, a deadline), out of
// the *net.OpError of the raw call that carries it.
func pollError(err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) {
		return oe.Err
	}
	return err
}

// zoneName names interface index i as net and x/net do: its name, or the
// number if it has none.
func (s *rawSocket) zoneName(i uint32) string {
	s.zmu.Lock()
	defer s.zmu.Unlock()
	now := time.Now()
	if e, ok := s.names[i]; ok && now.Sub(e.at) < zoneTTL {
		return e.v
	}
	ifi, err := net.InterfaceByIndex(int(i))
	if err != nil {
		return strconv.FormatUint(uint64(i), 10)
	}
	if s.names == nil {
		s.names = make(map[uint32]zoneEntry[string])
	}
	s.names[i] = zoneEntry[string]{ifi.Name, now}
	return ifi.Name
}

// zoneIndex is the interface index of zone z: a name, or a number; 0 if
// it is neither.
func (s *rawSocket) zoneIndex(z string) uint32 {
	if n, err := strconv.ParseUint(z, 10, 32); err == nil {
		return uint32(n)
	}
	s.zmu.Lock()
	defer s.zmu.Unlock()
	now := time.Now()
	if e, ok := s.indexes[z]; ok && now.Sub(e.at) < zoneTTL {
		return e.v
	}
	ifi, err := net.InterfaceByName(z)
	if err != nil {
		return 0
	}
	if s.indexes == nil {
		s.indexes = make(map[string]zoneEntry[uint32])
	}
	s.indexes[z] = zoneEntry[uint32]{uint32(ifi.Index), now}
	return uint32(ifi.Index)
}
