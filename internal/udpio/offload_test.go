package udpio

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
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
		name   string
		msgs   []Message
		gso    bool
		gsoMax int
		want   []entry
	}{
		{"equal sizes share an entry", msgs(a, 100, 100, 100), true, 0, []entry{{3, 100}}},
		{"the last may be shorter", msgs(a, 100, 100, 40), true, 0, []entry{{3, 100}}},
		{"a shorter one ends the entry", msgs(a, 100, 40, 40), true, 0, []entry{{2, 100}, {1, 40}}},
		{"a longer one starts an entry", msgs(a, 40, 100, 100), true, 0, []entry{{1, 40}, {2, 100}}},
		{"destinations do not mix", append(msgs(a, 100, 100), msgs(b, 100, 100)...), true, 0, []entry{{2, 100}, {2, 100}}},
		{"empty datagrams go alone", msgs(a, 0, 0, 100), true, 0, []entry{{1, 0}, {1, 0}, {1, 100}}},
		{"at most maxSegments", msgs(a, repeat(10, 150)...), true, 0, []entry{{64, 10}, {64, 10}, {22, 10}}},
		{"at most maxGSOBytes", msgs(a, repeat(1000, 70)...), true, 0, []entry{{64, 1000}, {6, 1000}}},
		{"bytes bound before count", msgs(a, repeat(9000, 9)...), true, 0, []entry{{7, 9000}, {2, 9000}}},
		{"without offload one each", msgs(a, 100, 100), false, 0, []entry{{1, 100}, {1, 100}}},
		{"above gsoMax one each", msgs(a, 100, 100, 50, 50), true, 99, []entry{{1, 100}, {1, 100}, {2, 50}}},
		{"an invalid address ends the prefix", append(msgs(a, 100, 100), Message{Buf: make([]byte, 100)}), true, 0, []entry{{2, 100}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Conn{}
			c.gsoMax.Store(MaxDatagram)
			if tt.gsoMax > 0 {
				c.gsoMax.Store(int64(tt.gsoMax))
			}
			var got []entry
			for rest := tt.msgs; len(rest) > 0; {
				k := c.packWrite(rest, tt.gso)
				if k == 0 {
					break
				}
				used := 0
				for i := range k {
					got = append(got, entry{c.wn[i], c.wsize[i]})
					m := c.wms[i]
					if len(m.Buffers) != c.wn[i] {
						t.Fatalf("entry %d has %d buffers for %d messages", i, len(m.Buffers), c.wn[i])
					}
					if c.wn[i] > 1 {
						if len(m.OOB) != segmentCmsgLen {
							t.Fatalf("entry %d of %d messages has no segment size", i, c.wn[i])
						}
						if seg := segmentOf(m.OOB); seg != c.wsize[i] {
							t.Fatalf("entry %d asks for segments of %d, want %d", i, seg, c.wsize[i])
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
// a write into datagrams: it sends them one by one, and either stops asking
// for offload (EIO: the device cannot) or stops asking for datagrams that
// large (EINVAL: the path's MTU is smaller).
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
		wantMax     int
		wantRefused int
	}{
		{syscall.EIO, false, MaxDatagram, 1},
		{syscall.EINVAL, true, 399, 2}, // this fake refuses the 400-byte pair too
	}
	for _, tt := range tests {
		t.Run(tt.err.Error(), func(t *testing.T) {
			rc := &refusingConn{err: tt.err}
			c := &Conn{bc: rc}
			c.gso.Store(true)
			c.gsoMax.Store(MaxDatagram)
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
			if m := int(c.gsoMax.Load()); m != tt.wantMax {
				t.Errorf("gsoMax = %d, want %d", m, tt.wantMax)
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
