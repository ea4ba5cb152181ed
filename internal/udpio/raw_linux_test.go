//go:build linux && !386

package udpio

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// TestReadWaited checks ReadWaited on the Conn's own reads: a read that
// blocked until its datagram came says it waited, one that found its
// datagram queued says it did not, and a batched read cannot tell. Each
// read after one that waited starts with a peek (rawRead.probe); the
// datagrams it then finds queued are all read, whole and in order.
func TestReadWaited(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			rx := listen(t, f.network, f.listen, Options{})
			tx := listen(t, f.dialNetwork, f.dial, Options{})
			if rx.raw == nil {
				t.Fatal("no raw socket on Linux")
			}
			to := netip.AddrPortFrom(netip.MustParseAddr(f.peer), rx.LocalAddr().Port())
			rx.SetReadDeadline(time.Now().Add(10 * time.Second))
			one := []Message{{Buf: make([]byte, 2048)}}
			read := func() (string, bool) {
				t.Helper()
				n, err := rx.ReadBatch(one)
				if err != nil || n != 1 {
					t.Fatalf("ReadBatch = %d, %v", n, err)
				}
				if one[0].Addr != netip.AddrPortFrom(netip.MustParseAddr(f.peer), tx.LocalAddr().Port()) {
					t.Errorf("sender %v, want port %d of %s", one[0].Addr, tx.LocalAddr().Port(), f.peer)
				}
				waited, known := rx.ReadWaited()
				if !known {
					t.Fatal("ReadWaited: not known after a read of one")
				}
				return string(one[0].Buf[:one[0].N]), waited
			}
			write := func(s string) error {
				_, err := tx.WriteBatch([]Message{{Buf: []byte(s), Addr: to}})
				return err
			}
			send := func(s string) {
				t.Helper()
				if err := write(s); err != nil {
					t.Fatal(err)
				}
			}

			// A read that blocks. The writer is done before tx writes
			// again (one writing goroutine at a time).
			sent := make(chan error, 1)
			go func() {
				time.Sleep(50 * time.Millisecond)
				sent <- write("late")
			}()
			if got, waited := read(); got != "late" || !waited {
				t.Errorf("blocked read = %q, waited %v; want \"late\", true", got, waited)
			}
			if err := <-sent; err != nil {
				t.Fatal(err)
			}
			// The next starts with a peek, which finds three queued.
			for _, s := range []string{"a", "b", "c"} {
				send(s)
			}
			time.Sleep(20 * time.Millisecond) // loopback delivers at once; be sure
			for _, want := range []string{"a", "b", "c"} {
				if got, waited := read(); got != want || waited {
					t.Errorf("queued read = %q, waited %v; want %q, false", got, waited, want)
				}
			}
			// A batched read cannot tell.
			send("d")
			two := []Message{{Buf: make([]byte, 2048)}, {Buf: make([]byte, 2048)}}
			if n, err := rx.ReadBatch(two); err != nil || n != 1 {
				t.Fatalf("batched ReadBatch = %d, %v", n, err)
			}
			if _, known := rx.ReadWaited(); known {
				t.Error("ReadWaited: known after a batched read")
			}
		})
	}
}

// TestRawEmptyBuffer: reads into and writes from empty buffers behave as
// the standard library's: an empty datagram goes out, and a read with no
// room reports the datagram cut to nothing.
func TestRawEmptyBuffer(t *testing.T) {
	rx := listen(t, "udp4", "127.0.0.1:0", Options{})
	tx := listen(t, "udp4", "127.0.0.1:0", Options{})
	if err := tx.raw.write(nil, nil, rx.LocalAddr()); err != nil {
		t.Fatalf("empty write: %v", err)
	}
	if err := tx.raw.write([]byte("xyz"), nil, rx.LocalAddr()); err != nil {
		t.Fatalf("write: %v", err)
	}
	rx.SetReadDeadline(time.Now().Add(5 * time.Second))
	m := Message{}
	if _, err := rx.raw.read(&m); err != nil || m.N != 0 || m.Addr != tx.LocalAddr() {
		t.Errorf("read of the empty datagram: N %d, from %v, %v", m.N, m.Addr, err)
	}
	m = Message{Buf: []byte{}}
	if _, err := rx.raw.read(&m); err != nil || m.N != 0 {
		t.Errorf("read into no room: N %d, %v", m.N, err)
	}
}

// TestRawErrors: the Conn's own calls fail as the standard library's do:
// an IPv6 destination on an IPv4 socket, a closed socket, a deadline.
func TestRawErrors(t *testing.T) {
	c := listen(t, "udp4", "127.0.0.1:0", Options{})
	var ae *net.AddrError
	if err := c.raw.write([]byte("x"), nil, netip.MustParseAddrPort("[::1]:9")); !errors.As(err, &ae) {
		t.Errorf("write of IPv6 destination on an IPv4 socket: %v, want a *net.AddrError as the standard library's", err)
	}
	c.SetReadDeadline(time.Now().Add(-time.Second))
	m := Message{Buf: make([]byte, 10)}
	if _, err := c.raw.read(&m); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("read past the deadline: %v", err)
	} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Errorf("read past the deadline: %v is not a net.Error timeout", err)
	}
	c.Close()
	if _, err := c.raw.read(&m); !errors.Is(err, net.ErrClosed) {
		t.Errorf("read on a closed socket: %v", err)
	}
	if err := c.raw.write([]byte("x"), nil, c.LocalAddr()); !errors.Is(err, net.ErrClosed) {
		t.Errorf("write on a closed socket: %v", err)
	}
}

// TestZones: an IPv6 zone is an interface's name both ways, as net and
// x/net report it, or its number when the interface has no name.
func TestZones(t *testing.T) {
	ifs, err := net.Interfaces()
	if err != nil || len(ifs) == 0 {
		t.Skipf("no interfaces: %v", err)
	}
	c := listen(t, "udp4", "127.0.0.1:0", Options{})
	s := c.raw
	for _, ifi := range ifs {
		if got := s.zoneName(uint32(ifi.Index)); got != ifi.Name {
			t.Errorf("zoneName(%d) = %q, want %q", ifi.Index, got, ifi.Name)
		}
		if got := s.zoneIndex(ifi.Name); got != uint32(ifi.Index) {
			t.Errorf("zoneIndex(%q) = %d, want %d", ifi.Name, got, ifi.Index)
		}
	}
	if got := s.zoneName(1 << 30); got != "1073741824" {
		t.Errorf("zoneName of no interface = %q, want the number", got)
	}
	if got := s.zoneIndex("77"); got != 77 {
		t.Errorf("zoneIndex(\"77\") = %d, want 77", got)
	}
	if got := s.zoneIndex("no-such-interface"); got != 0 {
		t.Errorf("zoneIndex of no interface = %d, want 0", got)
	}
}

// TestRawRefused: a kernel that refuses the socket's own calls (ENOSYS,
// as s390x kernels before 4.3 do) turns each direction over to the
// standard library's calls at the first refusal, with nothing lost.
func TestRawRefused(t *testing.T) {
	rx := listen(t, "udp4", "127.0.0.1:0", Options{})
	tx := listen(t, "udp4", "127.0.0.1:0", Options{})
	rx.raw.rd.fail = syscall.ENOSYS
	tx.raw.wr.fail = syscall.ENOSYS
	rx.SetReadDeadline(time.Now().Add(5 * time.Second))
	one := []Message{{Buf: make([]byte, 100)}}
	for i, s := range []string{"first", "second"} {
		if n, err := tx.WriteBatch([]Message{{Buf: []byte(s), Addr: rx.LocalAddr()}}); n != 1 || err != nil {
			t.Fatalf("write %d: %d, %v", i, n, err)
		}
		if n, err := rx.ReadBatch(one); n != 1 || err != nil || string(one[0].Buf[:one[0].N]) != s || one[0].Addr != tx.LocalAddr() {
			t.Fatalf("read %d: %d, %v, %q from %v", i, n, err, one[0].Buf[:one[0].N], one[0].Addr)
		}
		if _, known := rx.ReadWaited(); known {
			t.Errorf("read %d: ReadWaited known through the standard library's call", i)
		}
	}
	if rx.rawReads.Load() || tx.rawWrites.Load() {
		t.Errorf("raw calls still on after ENOSYS: reads %v, writes %v", rx.rawReads.Load(), tx.rawWrites.Load())
	}
	// A batched read turns to x/net's calls the same way.
	if n, err := tx.WriteBatch([]Message{{Buf: []byte("third"), Addr: rx.LocalAddr()}}); n != 1 || err != nil {
		t.Fatalf("write 2: %d, %v", n, err)
	}
	batch := []Message{{Buf: make([]byte, 100)}, {Buf: make([]byte, 100)}}
	if n, err := rx.ReadBatch(batch); n != 1 || err != nil || string(batch[0].Buf[:batch[0].N]) != "third" || batch[0].Addr != tx.LocalAddr() {
		t.Fatalf("batched read: %d, %v, %q from %v", n, err, batch[0].Buf[:batch[0].N], batch[0].Addr)
	}
	if rx.rawBatch.Load() {
		t.Error("raw batched reads still on after ENOSYS")
	}
	// Another error is the read's or the write's own, and changes nothing.
	rx2 := listen(t, "udp4", "127.0.0.1:0", Options{})
	rx2.raw.rd.fail = syscall.ECONNREFUSED
	if _, err := rx2.ReadBatch(one); !errors.Is(err, syscall.ECONNREFUSED) || !rx2.rawReads.Load() {
		t.Errorf("read refused: %v, raw reads %v; want ECONNREFUSED, still on", err, rx2.rawReads.Load())
	}
}

// TestOneP runs the socket tests with GOMAXPROCS 1.
func TestOneP(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	t.Run("BatchLoopback", TestBatchLoopback)
	t.Run("ReadWaited", TestReadWaited)
	t.Run("CloseUnblocksRead", TestCloseUnblocksRead)
	t.Run("DeadlineUnblocksRead", TestDeadlineUnblocksRead)
	t.Run("RawErrors", TestRawErrors)
	t.Run("RawRefused", TestRawRefused)
}
