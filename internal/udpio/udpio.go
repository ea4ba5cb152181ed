// Package udpio is the socket layer of the UDP driver: it moves datagrams
// between a *net.UDPConn and pooled buffers, many per system call where the
// platform allows.
//
// On Linux a [Conn] reads with recvmmsg and writes with sendmmsg (through
// golang.org/x/net/ipv4 and ipv6 ReadBatch and WriteBatch); elsewhere, when
// the kernel refuses those calls (ENOSYS), or when [Options].NoBatch is set,
// it makes one system call per datagram.
// Addresses are netip.AddrPort values; IPv4 peers of a dual-stack socket are
// reported unmapped (1.2.3.4, not ::ffff:1.2.3.4).
//
// On Linux a read of one datagram and a write of one buffer are the Conn's
// own recvmsg and sendmsg on the socket, through the runtime's poller, with
// headers built once; a read that follows one that had to wait starts with
// a peek, cheaper than a recvmsg that finds nothing, so that a request and
// its reply (where each read waits) spend less on the read that comes
// first. [Conn.ReadWaited] reports whether a read waited.
//
// Where the kernel offers segmentation offload (Linux: UDP_SEGMENT and
// UDP_GRO), a batched write hands consecutive datagrams for one
// destination, all of one size but the last, to the kernel as one buffer,
// which crosses the network stack once; and a read may return several
// datagrams from one sender in one buffer, which [Message.Datagrams] cuts
// apart. The datagrams on the wire are the same as without offload.
//
// A Conn serves one reading goroutine and one writing goroutine at the same
// time (ReadBatch may run concurrently with WriteBatch, but not with another
// ReadBatch); Close and SetReadDeadline may be called from any goroutine and
// unblock a pending read.
package udpio

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/fastnet-engine/fastnet/datagram"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// DefaultSocketBuffer is the size a Conn asks for its socket's receive and
// send buffers unless told otherwise. Kernels cap it (on Linux at
// net.core.rmem_max and wmem_max, unless the process may override them).
const DefaultSocketBuffer = 8 << 20

// minSocketBuffer is the smallest size tried when the platform refuses a
// larger one.
const minSocketBuffer = 64 << 10

// maxBatch is the most datagrams one recvmmsg or sendmmsg call handles
// (Linux caps the count at UIO_MAXIOV, 1024). Longer slices take several
// calls.
const maxBatch = 1024

// ErrInvalidAddr is returned by WriteBatch for a message whose Addr is not
// a valid address and port.
var ErrInvalidAddr = errors.New("udpio: invalid destination address")

// Message is one datagram, or after ReadBatch with receive offload several
// from one sender (see datagram.Message.Seg). ReadBatch reads into Buf from
// its start (a datagram longer than len(Buf) is truncated, and with receive
// offload so are the datagrams that do not fit: buffers of BufferSize
// bytes hold any datagram and anything the kernel coalesces); WriteBatch
// sends all of Buf.
type Message = datagram.Message

// Options configures a Conn. The zero value is the default.
type Options struct {
	// NoBatch makes the Conn use one system call per datagram even where
	// batched calls are available.
	NoBatch bool
	// SocketBuffer is the size asked for the socket's receive and send
	// buffers: 0 means DefaultSocketBuffer, a negative value keeps the
	// operating system's defaults. If the platform refuses the size, smaller
	// ones are tried down to 64 KiB.
	SocketBuffer int
	// NoOffload turns segmentation offload off (see the package
	// documentation); it is on where the kernel has it.
	NoOffload bool
	// ReportLocal makes reads report the local address each datagram
	// was sent to (Message.Local), and writes send each datagram from
	// the local address its Message gives, where the system allows
	// (Linux; see Conn.ReportsLocal): for a socket bound to an
	// unspecified address on a host of several addresses, whose answers
	// must come from the address each peer sent to. A socket bound to
	// one address has no other to send from: there it does nothing.
	ReportLocal bool

	// noRaw makes single reads and writes go through the standard
	// library's calls, as on other systems (tests).
	noRaw bool
}

// batchConn is what *ipv4.PacketConn and *ipv6.PacketConn have in common
// (ipv6.Message is the same type as ipv4.Message).
type batchConn interface {
	ReadBatch(ms []ipv4.Message, flags int) (int, error)
	WriteBatch(ms []ipv4.Message, flags int) (int, error)
}

// Conn is a UDP socket that reads and writes batches of datagrams.
type Conn struct {
	uc *net.UDPConn
	bc batchConn // nil when batching was never available

	// readBatched and writeBatched say whether each direction still uses
	// bc; each drops to plain calls on its own if the kernel refuses.
	readBatched  atomic.Bool
	writeBatched atomic.Bool

	// gso says whether writes still ask for segmentation offload, gro
	// whether reads may return several datagrams in one buffer.
	gso atomic.Bool
	gro bool

	// Scratch of ReadBatch, reused so that steady-state calls allocate
	// nothing of their own.
	rms  []ipv4.Message
	rbuf [][]byte
	roob []byte

	// Scratch of WriteBatch.
	wms   []ipv4.Message
	wbuf  [][]byte
	waddr []net.UDPAddr
	wip   [][net.IPv6len]byte
	woob  []byte
	wn    []int    // how many of the caller's messages each entry of wms carries
	wone  []byte   // the datagrams of a lone offloaded entry, end to end (writeOne)
	loob  [64]byte // lone's control messages: a segment size, a local address
	// sendOne is writeOne's system call; tests replace it to see it
	// used and to make it fail.
	sendOne func(b, oob []byte, to netip.AddrPort) error

	readBufSize, writeBufSize int

	// raw makes single reads and writes, and batched reads, with the
	// Conn's own system calls (Linux; nil elsewhere); rawReads, rawBatch
	// and rawWrites say whether each still uses them: each drops to the
	// standard library's or x/net's calls on its own if the kernel
	// refuses them. waited says whether the last read had to wait for its
	// datagram, if it was one of raw's (waitKnown).
	raw       *rawSocket
	rawReads  atomic.Bool
	rawBatch  atomic.Bool
	rawWrites atomic.Bool
	waited    bool
	waitKnown bool

	// df is what New found out about the don't-fragment bit; tooBig
	// counts datagrams the kernel refused as too big (pmtu.go).
	df     dfState
	tooBig atomic.Uint64

	// local says that reads report local addresses and writes honour
	// them (Options.ReportLocal); local6 that the socket is IPv6, whose
	// control messages say so for IPv4 peers too.
	local, local6 bool
}

// Listen opens a UDP socket on address ("host:port"; network is "udp",
// "udp4" or "udp6", as for net.ListenUDP) and wraps it with New.
func Listen(ctx context.Context, network, address string, o Options) (*Conn, error) {
	var lc net.ListenConfig
	pc, err := lc.ListenPacket(ctx, network, address)
	if err != nil {
		return nil, err
	}
	uc, ok := pc.(*net.UDPConn)
	if !ok {
		pc.Close()
		return nil, &net.OpError{Op: "listen", Net: network, Err: net.UnknownNetworkError(network)}
	}
	return New(uc, o), nil
}

// New wraps uc, which the Conn then owns (Close closes it), sizes its
// socket buffers as o says, and sets the don't-fragment bit of its
// datagrams wherever the system allows (D29; see Conn.DontFragment).
func New(uc *net.UDPConn, o Options) *Conn {
	c := &Conn{uc: uc}
	c.df = setDontFragment(uc)
	if o.ReportLocal && localSupported && c.LocalAddr().Addr().IsUnspecified() {
		c.local, c.local6 = enableLocal(uc)
	}
	if !o.noRaw {
		c.raw = newRawSocket(uc)
		c.rawReads.Store(c.raw != nil)
		c.rawBatch.Store(c.raw != nil)
		c.rawWrites.Store(c.raw != nil)
		if c.raw != nil {
			c.raw.local = c.local
		}
	}
	c.sendOne = func(b, oob []byte, to netip.AddrPort) error {
		if c.rawWrites.Load() {
			err := c.raw.write(b, oob, to)
			if err == nil || !unsupported(err) {
				return err
			}
			c.rawWrites.Store(false)
		}
		_, _, err := uc.WriteMsgUDPAddrPort(b, oob, to)
		return err
	}
	if o.SocketBuffer >= 0 {
		want := o.SocketBuffer
		if want == 0 {
			want = DefaultSocketBuffer
		}
		c.readBufSize = sizeBuffer(uc, want, true)
		c.writeBufSize = sizeBuffer(uc, want, false)
	} else {
		c.readBufSize = bufferSize(uc, true)
		c.writeBufSize = bufferSize(uc, false)
	}
	if batchSupported && !o.NoBatch {
		if la, ok := uc.LocalAddr().(*net.UDPAddr); ok && la.IP.To4() != nil {
			c.bc = ipv4.NewPacketConn(uc)
		} else {
			c.bc = ipv6.NewPacketConn(uc)
		}
		c.readBatched.Store(true)
		c.writeBatched.Store(true)
		if offloadSupported && !o.NoOffload {
			gso, gro := enableOffload(uc)
			c.gso.Store(gso)
			c.gro = gro
		}
	}
	return c
}

// Offload reports whether writes use segmentation offload, and whether
// reads may return several datagrams in one buffer.
func (c *Conn) Offload() (write, read bool) {
	return c.gso.Load(), c.gro
}

// ReportsLocal reports whether reads give the local address of each
// datagram and writes send from the one they are given (Options.ReportLocal,
// where the system allows it).
func (c *Conn) ReportsLocal() bool { return c.local }

// LocalAddr returns the address the socket is bound to.
func (c *Conn) LocalAddr() netip.AddrPort {
	if la, ok := c.uc.LocalAddr().(*net.UDPAddr); ok {
		return la.AddrPort()
	}
	return netip.AddrPort{}
}

// Batching reports whether reads and writes currently use batched system
// calls.
func (c *Conn) Batching() (read, write bool) {
	return c.readBatched.Load(), c.writeBatched.Load()
}

// BufferSizes returns the sizes of the socket's receive and send buffers as
// the kernel reported them after New set them (Linux reports twice the
// usable size), or 0 where the platform does not say.
func (c *Conn) BufferSizes() (read, write int) {
	return c.readBufSize, c.writeBufSize
}

// SetReadDeadline sets the deadline of pending and future reads; a read
// past it fails with an error for which errors.Is(err,
// os.ErrDeadlineExceeded) holds. A time in the past unblocks a pending read
// without closing the socket; the zero time removes the deadline.
func (c *Conn) SetReadDeadline(t time.Time) error {
	return c.uc.SetReadDeadline(t)
}

// Close closes the socket. A read or write pending on it returns an error
// for which errors.Is(err, net.ErrClosed) holds, as does every later call.
func (c *Conn) Close() error {
	return c.uc.Close()
}

// ReadBatch blocks until at least one datagram arrives, then reads as many
// datagrams as are waiting, up to len(msgs), into msgs[i].Buf, setting
// msgs[i].N, msgs[i].Addr, msgs[i].Seg and msgs[i].Local (the zero Addr
// unless the Conn reports local addresses). It returns how many messages it
// filled; with receive offload a message may hold several datagrams (range
// over Message.Datagrams). Without batched calls it reads one message per
// call.
//
// ReadBatch keeps no reference to msgs or their buffers after it returns.
// Plain reads allocate nothing, and neither do batched reads on Linux
// (the Conn's own recvmmsg); elsewhere batched reads allocate the two
// small objects per datagram that x/net makes for the sender's
// *net.UDPAddr.
func (c *Conn) ReadBatch(msgs []Message) (int, error) {
	if len(msgs) == 0 {
		return 0, nil
	}
	c.waitKnown = false
	if c.readBatched.Load() && len(msgs) > 1 {
		n, err := c.readBatch(msgs)
		if n > 0 || err == nil || !unsupported(err) {
			return n, err
		}
		c.readBatched.Store(false)
	}
	if c.rawReads.Load() {
		waited, err := c.raw.read(&msgs[0])
		switch {
		case err == nil:
			c.waited, c.waitKnown = waited, true
			return 1, nil
		case !unsupported(err):
			return 0, err
		}
		c.rawReads.Store(false)
	}
	if c.gro || c.local {
		var oob [readOOBLen]byte
		n, oobn, flags, ap, err := c.uc.ReadMsgUDPAddrPort(msgs[0].Buf, oob[:])
		if err != nil {
			return 0, err
		}
		msgs[0].Seg, msgs[0].Local = c.control(oob[:oobn])
		msgs[0].N = whole(n, msgs[0].Seg, flags)
		msgs[0].Addr = unmap(ap)
		return 1, nil
	}
	n, ap, err := c.uc.ReadFromUDPAddrPort(msgs[0].Buf)
	if err != nil {
		return 0, err
	}
	msgs[0].N, msgs[0].Seg, msgs[0].Local = n, 0, netip.Addr{}
	msgs[0].Addr = unmap(ap)
	return 1, nil
}

// ReadWaited reports whether the last ReadBatch had to wait for its
// datagram (the socket had nothing when the read began), and whether the
// Conn can tell: it can for a read of one message on Linux, where such
// reads are its own system calls. Like ReadBatch, it is for the reading
// goroutine.
func (c *Conn) ReadWaited() (waited, known bool) {
	return c.waited, c.waitKnown
}

func (c *Conn) readBatch(msgs []Message) (int, error) {
	if len(msgs) > maxBatch {
		msgs = msgs[:maxBatch]
	}
	if c.rawBatch.Load() {
		n, err := c.raw.readMany(msgs)
		if n > 0 || err == nil || !unsupported(err) {
			return n, err
		}
		c.rawBatch.Store(false)
	}
	k := len(msgs)
	oobLen := 0
	if c.gro || c.local {
		oobLen = readOOBLen
	}
	if k > len(c.rms) || len(c.roob) < k*oobLen {
		c.rms = make([]ipv4.Message, k)
		c.rbuf = make([][]byte, k)
		c.roob = make([]byte, k*oobLen)
	}
	ms := c.rms[:k]
	for i := range ms {
		c.rbuf[i] = msgs[i].Buf
		ms[i].Buffers = c.rbuf[i : i+1]
		ms[i].N = 0
		ms[i].Addr = nil
		if oobLen > 0 {
			ms[i].OOB = c.roob[i*oobLen : (i+1)*oobLen]
			ms[i].NN = 0
		}
	}
	n, err := c.bc.ReadBatch(ms, 0)
	n = max(n, 0) // x/net passes on the -1 of a failed recvmmsg
	for i := 0; i < n; i++ {
		msgs[i].N = ms[i].N
		msgs[i].Addr, _ = AddrPort(ms[i].Addr)
		msgs[i].Seg, msgs[i].Local = 0, netip.Addr{}
		if oobLen > 0 && ms[i].NN > 0 {
			msgs[i].Seg, msgs[i].Local = c.control(ms[i].OOB[:ms[i].NN])
			msgs[i].N = whole(ms[i].N, msgs[i].Seg, ms[i].Flags)
		}
	}
	for i := range ms {
		c.rbuf[i] = nil
		ms[i].Addr = nil
	}
	return n, err
}

// WriteBatch sends each msgs[i].Buf to msgs[i].Addr, in order, and returns
// how many it sent. If err is not nil, msgs[n] is the message that failed;
// the caller may drop it and go on with msgs[n+1:] (a UDP send that fails
// is a lost datagram), unless errors.Is(err, net.ErrClosed). A datagram
// the system refuses as larger than the path (EMSGSIZE, with the
// don't-fragment bit) is such a failure, and is counted (Conn.TooBig).
//
// WriteBatch keeps no reference to msgs or their buffers after it returns.
func (c *Conn) WriteBatch(msgs []Message) (int, error) {
	n, err := c.writeAll(msgs)
	c.countTooBig(err)
	return n, err
}

func (c *Conn) writeAll(msgs []Message) (int, error) {
	if c.writeBatched.Load() {
		n, err := c.writeBatch(msgs)
		if n > 0 || err == nil || !unsupported(err) {
			return n, err
		}
		c.writeBatched.Store(false)
	}
	for i := range msgs {
		if !msgs[i].Addr.IsValid() {
			return i, ErrInvalidAddr
		}
		if local := c.localOf(&msgs[i]); local.IsValid() {
			oob := c.loob[:putLocalCmsg(c.loob[:], local, c.local6)]
			if _, _, err := c.uc.WriteMsgUDPAddrPort(msgs[i].Buf, oob, unmap(msgs[i].Addr)); err != nil {
				return i, err
			}
			continue
		}
		if _, err := c.uc.WriteToUDPAddrPort(msgs[i].Buf, unmap(msgs[i].Addr)); err != nil {
			return i, err
		}
	}
	return len(msgs), nil
}

// whole returns the bytes of a read of n bytes with segment size seg that
// hold whole datagrams: a coalesced read cut short by its buffer (flags
// has MSG_TRUNC) ends with part of a datagram, which is dropped, as the
// datagrams that did not fit are.
func whole(n, seg, flags int) int {
	if seg > 0 && flags&msgTrunc != 0 && n > seg {
		return n - n%seg
	}
	return n
}

// Limits of one offloaded write: Linux cuts at most UDP_MAX_SEGMENTS
// segments from one buffer (64 in older kernels, more in recent ones), and
// the buffer must fit one IP packet (65,507 bytes of UDP payload over IPv4).
const (
	maxSegments = 64
	maxGSOBytes = 65000
)

func (c *Conn) writeBatch(msgs []Message) (int, error) {
	sent := 0
	plainEnd := 0 // msgs[:plainEnd] go one per entry: their offloaded write failed
	for sent < len(msgs) {
		if cnt, b, oob := c.lone(msgs[sent:], sent >= plainEnd && c.gso.Load()); cnt > 0 {
			err := c.sendOne(b, oob, unmap(msgs[sent].Addr))
			switch {
			case err == nil:
				sent += cnt
			case cnt > 1:
				// As below: the datagrams go one by one.
				if gsoDisabled(err) {
					c.gso.Store(false)
				}
				plainEnd = sent + cnt
			default:
				return sent, err
			}
			continue
		}
		var k int
		if sent < plainEnd {
			k = c.packWrite(msgs[sent:plainEnd], false)
		} else {
			k = c.packWrite(msgs[sent:], c.gso.Load())
		}
		if k == 0 {
			return sent, ErrInvalidAddr
		}
		var n int
		var err error
		if k == 1 && c.oneWrite(&c.wms[0]) {
			n, err = c.writeOne(&c.wms[0], msgs[sent].Addr)
		} else {
			n, err = c.bc.WriteBatch(c.wms[:k], 0)
		}
		n = max(n, 0) // x/net passes on the -1 of a failed sendmmsg
		for i := range k {
			ms := &c.wms[i]
			clear(ms.Buffers)
			ms.Buffers, ms.Addr, ms.OOB = nil, nil, nil
		}
		for i := range n {
			sent += c.wn[i]
		}
		if err != nil {
			if n < k && c.wn[n] > 1 {
				// The kernel refused to cut this write into datagrams
				// (a segment too large for the path, or an address it
				// refuses anyway): send them one by one, which reports
				// a datagram's own error, and stop asking if it never
				// will (a device without checksum offload).
				if gsoDisabled(err) {
					c.gso.Store(false)
				}
				plainEnd = sent + c.wn[n]
				continue
			}
			return sent, err
		}
		if n == 0 {
			// sendmmsg never returns 0 without an error on a blocking
			// write; refuse to spin if it ever does.
			return sent, errNoProgress
		}
	}
	return sent, nil
}

var errNoProgress = errors.New("udpio: sendmmsg sent nothing")

// maxOneWrite bounds the bytes of a lone entry that writeOne copies end to
// end.
const maxOneWrite = 4096

// oneWrite reports whether the lone entry m goes through writeOne: a
// batch of one costs sendmmsg's batching without its gain (in W1, the
// echo's reply and its ack, about 0.2 µs of a round trip on these
// machines).
func (c *Conn) oneWrite(m *ipv4.Message) bool {
	if c.sendOne == nil {
		return false // a test's fake batchConn
	}
	if len(m.Buffers) == 1 {
		return true
	}
	total := 0
	for _, b := range m.Buffers {
		total += len(b)
	}
	return total <= maxOneWrite
}

// writeOne sends the lone entry m to ap with a plain sendmsg, its
// segmentation request (if any) included: it returns 1 once sent.
func (c *Conn) writeOne(m *ipv4.Message, ap netip.AddrPort) (int, error) {
	b := m.Buffers[0]
	if len(m.Buffers) > 1 {
		b = c.wone[:0]
		for _, x := range m.Buffers {
			b = append(b, x...)
		}
		c.wone = b
	}
	if err := c.sendOne(b, m.OOB, unmap(ap)); err != nil {
		return 0, err
	}
	return 1, nil
}

// lone reports whether msgs, all of them, make the one entry that writeOne
// sends (an echo's reply and its ack; a lone message), in which case it
// returns how many they are and the buffer and control message to send,
// with none of the scratch of a batched write built.
func (c *Conn) lone(msgs []Message, gso bool) (int, []byte, []byte) {
	if c.sendOne == nil || len(msgs) == 0 || !msgs[0].Addr.IsValid() {
		return 0, nil, nil
	}
	local := c.localOf(&msgs[0])
	if len(msgs) == 1 {
		return 1, msgs[0].Buf, c.loob[:c.putLocal(c.loob[:], local)]
	}
	ap, size := msgs[0].Addr, len(msgs[0].Buf)
	if !gso || size == 0 || ap.Port() == 0 || len(msgs) > maxSegments {
		return 0, nil, nil
	}
	total := size
	for i, m := range msgs[1:] {
		n := len(m.Buf)
		if m.Addr != ap || n == 0 || n > size || (n < size && i+2 < len(msgs)) || c.local && m.Local != msgs[0].Local {
			return 0, nil, nil
		}
		total += n
	}
	if total > maxOneWrite {
		return 0, nil, nil
	}
	b := c.wone[:0]
	for _, m := range msgs {
		b = append(b, m.Buf...)
	}
	c.wone = b
	putSegmentCmsg(c.loob[:segmentCmsgLen], size)
	n := segmentCmsgLen + c.putLocal(c.loob[segmentCmsgLen:], local)
	return len(msgs), b, c.loob[:n]
}

// localOf returns the local address to send m from: its Local, if the
// Conn honours local addresses and Local is of the family of m's
// destination, else the zero Addr, the system's choice (an IPv6 socket
// refuses a source of the other family, EINVAL).
func (c *Conn) localOf(m *Message) netip.Addr {
	if !c.local {
		return netip.Addr{} // inlined: the common case costs a test
	}
	return sameFamily(m.Local, m.Addr.Addr())
}

// sameFamily returns local if it is of the family of to, else the zero
// Addr.
func sameFamily(local, to netip.Addr) netip.Addr {
	if local.Unmap().Is4() != to.Unmap().Is4() {
		return netip.Addr{}
	}
	return local
}

// putLocal writes into b the control message that sends a datagram from
// a, if a is valid, and returns its length (0 if none).
func (c *Conn) putLocal(b []byte, a netip.Addr) int {
	if !a.IsValid() {
		return 0
	}
	return putLocalCmsg(b, a, c.local6)
}

// control returns what a read's control messages oob say: the segment
// size, and the local address if the Conn reports local addresses.
func (c *Conn) control(oob []byte) (seg int, local netip.Addr) {
	return readControl(oob, c.local)
}

// readControl returns the segment size that a read's control messages oob
// give, and, if local is set, the local address they give.
func readControl(oob []byte, local bool) (int, netip.Addr) {
	if !local {
		return groSegment(oob), netip.Addr{}
	}
	return control(oob)
}

// readOOBLen is the room a read gives the kernel's control messages: a
// segment size (UDP_GRO) and a local address, which for an IPv4 datagram
// on an IPv6 socket comes twice (IPV6_PKTINFO and IP_PKTINFO: 24, 40 and
// 32 bytes on a 64-bit system), with room to spare.
const readOOBLen = 128

// packWrite fills the write scratch with entries for the longest prefix of
// msgs (at most maxBatch messages) whose addresses are valid, and returns
// how many entries it made. With gso, consecutive messages for one
// destination, all of one size but the last, which may be shorter, share
// an entry that the kernel cuts into datagrams (c.wn says how many
// messages each entry carries).
func (c *Conn) packWrite(msgs []Message, gso bool) int {
	if len(msgs) > maxBatch {
		msgs = msgs[:maxBatch]
	}
	if len(msgs) > len(c.wms) {
		k := len(msgs)
		c.wms = make([]ipv4.Message, k)
		c.wbuf = make([][]byte, k)
		c.waddr = make([]net.UDPAddr, k)
		c.wip = make([][net.IPv6len]byte, k)
		c.wn = make([]int, k)
		c.woob = make([]byte, k*(segmentCmsgLen+localCmsgLen))
	}
	k := 0
	for i := 0; i < len(msgs); k++ {
		ap := msgs[i].Addr
		if !ap.IsValid() {
			break
		}
		size := len(msgs[i].Buf)
		local := c.localOf(&msgs[i])
		j := i + 1
		if gso && size > 0 && ap.Port() != 0 {
			// Only datagrams from one local address share an entry;
			// the test costs nothing more without them (c.local).
			byLocal := c.local
			total := size
			for j < len(msgs) && j-i < maxSegments && msgs[j].Addr == ap && (!byLocal || msgs[j].Local == msgs[i].Local) {
				n := len(msgs[j].Buf)
				if n == 0 || n > size || total+n > maxGSOBytes {
					break
				}
				total += n
				j++
				if n < size {
					break // only the last may be shorter
				}
			}
		}
		a := ap.Addr().Unmap()
		ua := &c.waddr[k]
		if a.Is4() {
			ip := a.As4()
			ua.IP = append(c.wip[k][:0], ip[:]...)
		} else {
			ip := a.As16()
			ua.IP = append(c.wip[k][:0], ip[:]...)
		}
		ua.Port = int(ap.Port())
		ua.Zone = a.Zone()
		for x := i; x < j; x++ {
			c.wbuf[x] = msgs[x].Buf
		}
		m := &c.wms[k]
		m.Buffers = c.wbuf[i:j]
		m.Addr = ua
		m.OOB = nil
		if j-i > 1 || local.IsValid() {
			// The entry's room for its control messages.
			oob := c.woob[k*(segmentCmsgLen+localCmsgLen) : (k+1)*(segmentCmsgLen+localCmsgLen)]
			n := 0
			if j-i > 1 {
				putSegmentCmsg(oob, size)
				n = segmentCmsgLen
			}
			n += c.putLocal(oob[n:], local)
			m.OOB = oob[:n]
		}
		c.wn[k] = j - i
		i = j
	}
	return k
}

// AddrPort returns the IP address and port of a, IPv4 unmapped: a
// *net.UDPAddr's (what x/net reports for a received datagram), or that of
// any other address whose String is "host:port" with an IP host (a
// net.PacketConn of a caller's own). ok is false for anything else.
func AddrPort(a net.Addr) (ap netip.AddrPort, ok bool) {
	switch a := a.(type) {
	case *net.UDPAddr:
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok {
			return netip.AddrPort{}, false
		}
		if a.Zone != "" {
			ip = ip.WithZone(a.Zone)
		}
		return netip.AddrPortFrom(ip.Unmap(), uint16(a.Port)), true
	case nil:
		return netip.AddrPort{}, false
	}
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.AddrPort{}, false
	}
	return unmap(ap), true
}

// unmap turns ::ffff:1.2.3.4 into 1.2.3.4; other addresses are unchanged.
func unmap(ap netip.AddrPort) netip.AddrPort {
	if a := ap.Addr(); a.Is4In6() {
		return netip.AddrPortFrom(a.Unmap(), ap.Port())
	}
	return ap
}
