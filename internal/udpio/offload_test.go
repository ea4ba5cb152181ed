package udpio

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/ipv4"
)

func TestDatagrams(t *testing.T) {
	buf := make([]byte, 10)
	for i := range buf {
		buf[i] = byte(i)
	}
	tests := []struct {
		n, seg int
		want   []int // lengths
	}{
		{0, 0, []int{0}},
		{10, 0, []int{10}},
		{10, 10, []int{10}},
		{10, 12, []int{10}},
		{10, 5, []int{5, 5}},
		{10, 3, []int{3, 3, 3, 1}},
		{7, 1, []int{1, 1, 1, 1, 1, 1, 1}},
		{10, -1, []int{10}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("n%d/seg%d", tt.n, tt.seg), func(t *testing.T) {
			m := Message{Buf: buf, N: tt.n, Seg: tt.seg}
			var got []int
			off := 0
			for d := range m.Datagrams() {
				if !bytes.Equal(d, buf[off:off+len(d)]) {
					t.Fatalf("datagram at %d holds %v", off, d)
				}
				if cap(d) != len(d) {
					t.Errorf("datagram at %d has room beyond it (cap %d, len %d)", off, cap(d), len(d))
				}
				off += len(d)
				got = append(got, len(d))
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("lengths %v, want %v", got, tt.want)
			}
		})
	}
	// Stopping early stops the iteration.
	m := Message{Buf: buf, N: 10, Seg: 2}
	k := 0
	for range m.Datagrams() {
		k++
		if k == 2 {
			break
		}
	}
	if k != 2 {
		t.Errorf("break after 2 datagrams: %d", k)
	}
}

// entry is one entry packWrite made: how many messages it carries and the
// size of its first.
type entry struct{ n, size int }

func TestPackWrite(t *testing.T) {
	a := netip.MustParseAddrPort("127.0.0.1:1000")
	b := netip.MustParseAddrPort("127.0.0.1:2000")
	msgs := func(to netip.AddrPort, sizes ...int) []Message {
		var m []Message
		for _, n := range sizes {
			m = append(m, Message{Buf: make([]byte, n), Addr: to})
		}
		return m
	}
	repeat := func(n, k int) []int { return slices.Repeat([]int{n}, k) }
	tests := []struct {
		name string
		msgs []Message
		gso  bool
		want []entry
	}{
		{"equal sizes share an entry", msgs(a, 100, 100, 100), true, []entry{{3, 100}}},
		{"the last may be shorter", msgs(a, 100, 100, 40), true, []entry{{3, 100}}},
		{"a shorter one ends the entry", msgs(a, 100, 40, 40), true, []entry{{2, 100}, {1, 40}}},
		{"a longer one starts an entry", msgs(a, 40, 100, 100), true, []entry{{1, 40}, {2, 100}}},
		{"destinations do not mix", append(msgs(a, 100, 100), msgs(b, 100, 100)...), true, []entry{{2, 100}, {2, 100}}},
		{"empty datagrams go alone", msgs(a, 0, 0, 100), true, []entry{{1, 0}, {1, 0}, {1, 100}}},
		{"at most maxSegments", msgs(a, repeat(10, 150)...), true, []entry{{64, 10}, {64, 10}, {22, 10}}},
		{"at most maxGSOBytes", msgs(a, repeat(1000, 70)...), true, []entry{{64, 1000}, {6, 1000}}},
		{"bytes bound before count", msgs(a, repeat(9000, 9)...), true, []entry{{7, 9000}, {2, 9000}}},
		{"without offload one each", msgs(a, 100, 100), false, []entry{{1, 100}, {1, 100}}},
		{"port 0 one each", msgs(netip.MustParseAddrPort("127.0.0.1:0"), 100, 100), true, []entry{{1, 100}, {1, 100}}},
		{"an invalid address ends the prefix", append(msgs(a, 100, 100), Message{Buf: make([]byte, 100)}), true, []entry{{2, 100}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for i := range tt.msgs {
				if len(tt.msgs[i].Buf) > 0 {
					tt.msgs[i].Buf[0] = byte(i)
				}
			}
			c := &Conn{}
			var got []entry
			next := 0 // the message the next buffer must be
			for rest := tt.msgs; len(rest) > 0; {
				k := c.packWrite(rest, tt.gso)
				if k == 0 {
					break
				}
				used := 0
				for i := range k {
					m := c.wms[i]
					got = append(got, entry{c.wn[i], len(m.Buffers[0])})
					if len(m.Buffers) != c.wn[i] {
						t.Fatalf("entry %d has %d buffers for %d messages", i, len(m.Buffers), c.wn[i])
					}
					for _, b := range m.Buffers {
						if len(b) > 0 && b[0] != byte(next) || len(b) != len(tt.msgs[next].Buf) {
							t.Fatalf("entry %d carries a buffer that is not message %d", i, next)
						}
						next++
					}
					if ua := m.Addr.(*net.UDPAddr); ua.AddrPort() != tt.msgs[next-1].Addr {
						t.Fatalf("entry %d goes to %v, want %v", i, ua.AddrPort(), tt.msgs[next-1].Addr)
					}
					if !offloadSupported {
						continue
					}
					if c.wn[i] > 1 {
						if len(m.OOB) != segmentCmsgLen {
							t.Fatalf("entry %d of %d messages has no segment size", i, c.wn[i])
						}
						if seg := segmentOf(m.OOB); seg != len(m.Buffers[0]) {
							t.Fatalf("entry %d asks for segments of %d, want %d", i, seg, len(m.Buffers[0]))
						}
					} else if m.OOB != nil {
						t.Fatalf("single datagram %d has a control message", i)
					}
					used += c.wn[i]
				}
				rest = rest[used:]
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("entries %v, want %v", got, tt.want)
			}
		})
	}
}

// refusingConn is a batchConn whose kernel refuses offloaded writes with
// err, and records what it sends.
type refusingConn struct {
	err     error
	entries [][]int // sizes of the buffers of each entry sent
	refused int
}

func (r *refusingConn) ReadBatch([]ipv4.Message, int) (int, error) { return 0, syscall.ENOSYS }

func (r *refusingConn) WriteBatch(ms []ipv4.Message, _ int) (int, error) {
	for i, m := range ms {
		if len(m.OOB) > 0 {
			if i == 0 {
				r.refused++
				return -1, r.err
			}
			return i, nil
		}
		var sizes []int
		for _, b := range m.Buffers {
			sizes = append(sizes, len(b))
		}
		r.entries = append(r.entries, sizes)
	}
	return len(ms), nil
}

// TestOffloadRefused checks what a Conn does when the kernel refuses to cut
// a write into datagrams: it sends them one by one, and stops asking for
// offload if the kernel never will (EIO: the device cannot), not for a
// refusal that may concern one peer or size (EINVAL).
// large (EINVAL: the path's MTU is smaller). The datagrams go out one by
// one either way.
func TestOffloadRefused(t *testing.T) {
	if !offloadSupported {
		t.Skip("no segmentation offload on this platform")
	}
	to := netip.MustParseAddrPort("127.0.0.1:1000")
	send := []Message{
		{Buf: make([]byte, 1500), Addr: to},
		{Buf: make([]byte, 1500), Addr: to},
		{Buf: make([]byte, 700), Addr: to},
		{Buf: make([]byte, 400), Addr: to},
		{Buf: make([]byte, 400), Addr: to},
	}
	tests := []struct {
		err         error
		wantGSO     bool
		wantRefused int
	}{
		{syscall.EIO, false, 1},
		{syscall.EINVAL, true, 2}, // this fake refuses the 400-byte pair too
	}
	for _, tt := range tests {
		t.Run(tt.err.Error(), func(t *testing.T) {
			rc := &refusingConn{err: tt.err}
			c := &Conn{bc: rc}
			c.gso.Store(true)
			n, err := c.writeBatch(send)
			if err != nil || n != len(send) {
				t.Fatalf("writeBatch = %d, %v; want %d, nil", n, err, len(send))
			}
			var got []int
			for _, e := range rc.entries {
				if len(e) != 1 {
					t.Fatalf("an entry of %d datagrams went out after a refusal: %v", len(e), rc.entries)
				}
				got = append(got, e[0])
			}
			if want := []int{1500, 1500, 700, 400, 400}; !slices.Equal(got, want) {
				t.Errorf("sent %v, want %v", got, want)
			}
			if g, _ := c.Offload(); g != tt.wantGSO {
				t.Errorf("offload on = %v, want %v", g, tt.wantGSO)
			}
			if rc.refused != tt.wantRefused {
				t.Errorf("%d refusals, want %d", rc.refused, tt.wantRefused)
			}
		})
	}
}

// TestOffloadLoopback sends runs of datagrams through a Conn with
// segmentation offload to a receiver with receive offload and to one
// without: both get every datagram, intact and in order, and where the
// kernel has offload the first reads some of them in one buffer.
func TestOffloadLoopback(t *testing.T) {
	for _, fam := range families {
		t.Run(fam.name, func(t *testing.T) {
			checkGoroutines(t)
			tx := listen(t, fam.dialNetwork, fam.dial, Options{})
			rxs := []*Conn{
				listen(t, fam.network, fam.listen, Options{}),
				listen(t, fam.network, fam.listen, Options{NoOffload: true}),
			}
			gso, _ := tx.Offload()
			if _, gro := rxs[1].Offload(); gro {
				t.Fatal("NoOffload receiver reads with offload")
			}
			if _, gro := rxs[0].Offload(); offloadSupported && kernelAtLeast(5, 10) && (!gso || !gro) {
				t.Errorf("Offload() = %v, %v on Linux 5.10 or later; want both on", gso, gro)
			}
			// Runs of equal sizes with shorter tails, to both receivers
			// in turn.
			sizes := []int{}
			for _, run := range []struct{ n, size, tail int }{{100, 1000, 0}, {3, 1200, 700}, {70, 64, 10}, {1, 9000, 0}, {5, 9000, 8999}} {
				for range run.n {
					sizes = append(sizes, run.size)
				}
				if run.tail > 0 {
					sizes = append(sizes, run.tail)
				}
			}
			var send []Message
			for k, rx := range rxs {
				to := netip.AddrPortFrom(netip.MustParseAddr(fam.peer), rx.LocalAddr().Port())
				for i, n := range sizes {
					b := make([]byte, n)
					for j := range b {
						b[j] = byte(i*7 + j + k)
					}
					if n >= 4 {
						binary.BigEndian.PutUint32(b, uint32(i))
					}
					send = append(send, Message{Buf: b, Addr: to})
				}
			}
			// Interleave the two destinations in blocks of 10.
			var mixed []Message
			half := len(send) / 2
			for i := 0; i < half; i += 10 {
				mixed = append(mixed, send[i:min(i+10, half)]...)
				mixed = append(mixed, send[half+i:half+min(i+10, half)]...)
			}
			if n, err := tx.WriteBatch(mixed); err != nil || n != len(mixed) {
				t.Fatalf("WriteBatch = %d, %v", n, err)
			}
			if g, _ := tx.Offload(); g != gso {
				t.Errorf("offload changed from %v to %v on loopback", gso, g)
			}
			for k, rx := range rxs {
				want := send[k*half : (k+1)*half]
				recv := make([]Message, 64)
				for i := range recv {
					recv[i].Buf = GetBuffer()
					defer PutBuffer(recv[i].Buf)
				}
				rx.SetReadDeadline(time.Now().Add(5 * time.Second))
				got, coalesced := 0, 0
				for got < len(want) {
					n, err := rx.ReadBatch(recv)
					if err != nil {
						t.Fatalf("receiver %d: ReadBatch after %d datagrams: %v", k, got, err)
					}
					for _, m := range recv[:n] {
						if m.Seg > 0 && m.Seg < m.N {
							coalesced++
						}
						for d := range m.Datagrams() {
							if got == len(want) {
								t.Fatalf("receiver %d: more datagrams than sent", k)
							}
							if !bytes.Equal(d, want[got].Buf) {
								t.Fatalf("receiver %d: datagram %d is %d bytes, want %d, or differs", k, got, len(d), len(want[got].Buf))
							}
							got++
						}
					}
				}
				_, gro := rx.Offload()
				t.Logf("receiver %d: offload write %v, read %v; %d coalesced buffers", k, gso, gro, coalesced)
				switch {
				case !gro && coalesced > 0:
					t.Errorf("receiver %d without offload read %d coalesced buffers", k, coalesced)
				case gro && gso && coalesced == 0:
					t.Errorf("receiver %d with offload read no coalesced buffer from an offloading sender", k)
				}
			}
		})
	}
}

// TestOffloadTruncated reads datagrams coalesced by receive offload into a
// buffer too small for them all: the read keeps the whole datagrams that
// fit and no piece of the next.
func TestOffloadTruncated(t *testing.T) {
	if n := whole(2048, 500, msgTrunc); msgTrunc != 0 && n != 2000 {
		t.Errorf("whole(2048, 500, MSG_TRUNC) = %d, want 2000", n)
	}
	for _, tt := range []struct{ n, seg, flags, want int }{
		{2048, 500, 0, 2048}, // not cut short: the last datagram is short
		{300, 500, msgTrunc, 300},
		{2048, 0, msgTrunc, 2048}, // one datagram, truncated as ever
	} {
		if got := whole(tt.n, tt.seg, tt.flags); got != tt.want {
			t.Errorf("whole(%d, %d, %d) = %d, want %d", tt.n, tt.seg, tt.flags, got, tt.want)
		}
	}
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			tx := listen(t, "udp4", "127.0.0.1:0", Options{})
			rx := listen(t, "udp4", "127.0.0.1:0", mode.opts)
			to := rx.LocalAddr()
			var send []Message
			for i := range 20 {
				send = append(send, Message{Buf: bytes.Repeat([]byte{byte(i)}, 500), Addr: to})
			}
			if _, err := tx.WriteBatch(send); err != nil {
				t.Fatal(err)
			}
			rx.SetReadDeadline(time.Now().Add(5 * time.Second))
			recv := []Message{{Buf: make([]byte, 2048)}}
			if _, err := rx.ReadBatch(recv); err != nil {
				t.Fatal(err)
			}
			k := 0
			for d := range recv[0].Datagrams() {
				if !bytes.Equal(d, send[k].Buf) {
					t.Fatalf("datagram %d: %d bytes of %d, want 500 of %d", k, len(d), d[0], k)
				}
				k++
			}
			if k == 0 {
				t.Fatal("no datagram read")
			}
		})
	}
}

// TestLoneWrite sends writes that make one entry, which go through a
// plain sendmsg when they are at most maxOneWrite bytes (writeOne): one
// datagram, a run of equal datagrams with a shorter tail that offload
// sends as one buffer, and a run too large for writeOne. Each is read back
// with reads of one message, which take the plain path too, and arrives
// whole and in order, from every family of socket. The lone writes and
// reads allocate nothing.
func TestLoneWrite(t *testing.T) {
	runs := [][]int{
		{64},
		{80, 9},                        // an echo's reply and its ack
		{1000, 1000, 700},              // 2,700 bytes
		{1000, 1000, 1000, 1000, 1000}, // over maxOneWrite
	}
	for _, fam := range families {
		t.Run(fam.name, func(t *testing.T) {
			tx := listen(t, fam.dialNetwork, fam.dial, Options{})
			rx := listen(t, fam.network, fam.listen, Options{})
			to := netip.AddrPortFrom(netip.MustParseAddr(fam.peer), rx.LocalAddr().Port())
			send1 := tx.sendOne
			ones := 0
			tx.sendOne = func(b, oob []byte, to netip.AddrPort) error {
				ones++
				return send1(b, oob, to)
			}
			recv := make([]Message, 1)
			recv[0].Buf = GetBuffer()
			defer PutBuffer(recv[0].Buf)
			rx.SetReadDeadline(time.Now().Add(5 * time.Second))
			for r, sizes := range runs {
				send := make([]Message, len(sizes))
				for i, n := range sizes {
					b := make([]byte, n)
					for j := range b {
						b[j] = byte(r*31 + i*7 + j)
					}
					send[i] = Message{Buf: b, Addr: to}
				}
				before := ones
				if n, err := tx.WriteBatch(send); err != nil || n != len(send) {
					t.Fatalf("run %d: WriteBatch = %d, %v", r, n, err)
				}
				gso, _ := tx.Offload()
				total := 0
				for _, n := range sizes {
					total += n
				}
				// With offload a run is one entry; without, only a
				// lone datagram is.
				lone := (gso || len(sizes) == 1) && total <= maxOneWrite
				if used := ones > before; used != lone {
					t.Errorf("run %d (%d bytes, offload %v): plain sendmsg used %v, want %v", r, total, gso, used, lone)
				}
				for got := 0; got < len(send); {
					n, err := rx.ReadBatch(recv)
					if err != nil || n != 1 {
						t.Fatalf("run %d: ReadBatch after %d datagrams = %d, %v", r, got, n, err)
					}
					for d := range recv[0].Datagrams() {
						if got == len(send) || !bytes.Equal(d, send[got].Buf) {
							t.Fatalf("run %d: datagram %d (%d bytes) differs from what was sent", r, got, len(d))
						}
						got++
					}
				}
			}
			if raceEnabled {
				return // the race detector's sync.Pool allocates
			}
			one := []Message{{Buf: make([]byte, 80), Addr: to}, {Buf: make([]byte, 9), Addr: to}}
			var ioErr error
			allocs := testing.AllocsPerRun(50, func() {
				if _, err := tx.WriteBatch(one); err != nil {
					ioErr = err
				}
				for got := 0; got < len(one) && ioErr == nil; {
					if _, err := rx.ReadBatch(recv); err != nil {
						ioErr = err
					}
					for range recv[0].Datagrams() {
						got++
					}
				}
			})
			if ioErr != nil {
				t.Fatal(ioErr)
			}
			if allocs != 0 {
				t.Errorf("a lone write of 2 datagrams and its reads allocate %v times", allocs)
			}
		})
	}
}

// TestLoneWriteRefused makes the kernel refuse a lone offloaded write
// (writeOne), as it does for a segment larger than the path allows
// (EINVAL) or on a device that cannot checksum (EIO): its datagrams go
// out one by one, and EIO turns offload off for the socket.
func TestLoneWriteRefused(t *testing.T) {
	if !offloadSupported {
		t.Skip("no segmentation offload on this platform")
	}
	for _, refusal := range []error{syscall.EINVAL, syscall.EIO} {
		t.Run(refusal.Error(), func(t *testing.T) {
			tx := listen(t, "udp4", "127.0.0.1:0", Options{})
			rx := listen(t, "udp4", "127.0.0.1:0", Options{})
			if gso, _ := tx.Offload(); !gso {
				t.Skip("no segmentation offload on this kernel")
			}
			send1 := tx.sendOne
			refused := 0
			tx.sendOne = func(b, oob []byte, to netip.AddrPort) error {
				if len(oob) > 0 {
					refused++
					return &net.OpError{Op: "write", Net: "udp", Err: os.NewSyscallError("sendmsg", refusal)}
				}
				return send1(b, oob, to)
			}
			send := []Message{
				{Buf: bytes.Repeat([]byte{1}, 80), Addr: rx.LocalAddr()},
				{Buf: bytes.Repeat([]byte{2}, 9), Addr: rx.LocalAddr()},
			}
			if n, err := tx.WriteBatch(send); err != nil || n != len(send) {
				t.Fatalf("WriteBatch = %d, %v; want %d, nil", n, err, len(send))
			}
			if refused != 1 {
				t.Fatalf("%d offloaded writes refused, want 1", refused)
			}
			recv := []Message{{Buf: make([]byte, 2048)}}
			rx.SetReadDeadline(time.Now().Add(5 * time.Second))
			for i, want := range send {
				if _, err := rx.ReadBatch(recv); err != nil {
					t.Fatalf("datagram %d: %v", i, err)
				}
				if got := recv[0].Buf[:recv[0].N]; !bytes.Equal(got, want.Buf) {
					t.Fatalf("datagram %d is %d bytes, want %d", i, len(got), len(want.Buf))
				}
			}
			if gso, _ := tx.Offload(); gso != (refusal != syscall.EIO) {
				t.Errorf("after %v, offload %v", refusal, gso)
			}
		})
	}
}
