package udpio

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// modes are the ways a Conn moves datagrams; every socket test runs in
// each.
var modes = []struct {
	name string
	opts Options
}{
	{"batch", Options{}},
	{"batch-nooffload", Options{NoOffload: true}},
	{"plain", Options{NoBatch: true}},
	// Single reads and writes through the standard library, as on
	// systems without the Conn's own calls (raw_linux.go).
	{"batch-stdlib", Options{noRaw: true}},
	{"plain-stdlib", Options{NoBatch: true, noRaw: true}},
}

// families are the socket families tested: IPv4, IPv6 and a dual-stack IPv6
// socket talking to an IPv4 peer.
var families = []struct {
	name        string
	network     string
	listen      string // receiver's address
	dialNetwork string
	dial        string // sender's address
	peer        string // address the receiver sees for the sender
}{
	{"ipv4", "udp4", "127.0.0.1:0", "udp4", "127.0.0.1:0", "127.0.0.1"},
	{"ipv6", "udp6", "[::1]:0", "udp6", "[::1]:0", "::1"},
	{"dualstack", "udp", "[::]:0", "udp4", "127.0.0.1:0", "127.0.0.1"},
}

// checkGoroutines fails the test if goroutines started during it are still
// running shortly after it ends.
func checkGoroutines(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(2 * time.Second)
		for runtime.NumGoroutine() > before {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<16)
				buf = buf[:runtime.Stack(buf, true)]
				t.Errorf("goroutines leaked: %d before, %d after\n%s", before, runtime.NumGoroutine(), buf)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// listen opens a Conn or skips the test when the family is unavailable.
func listen(t *testing.T, network, address string, o Options) *Conn {
	t.Helper()
	c, err := Listen(context.Background(), network, address, o)
	if err != nil {
		if strings.Contains(address, ":") && strings.Contains(address, "[") {
			t.Skipf("IPv6 unavailable: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// payload returns datagram i of a test: its index followed by a pattern,
// with lengths varying from 4 bytes up.
func payload(i int) []byte {
	n := 4 + (i*37)%1400
	b := make([]byte, n)
	binary.BigEndian.PutUint32(b, uint32(i))
	for j := 4; j < n; j++ {
		b[j] = byte(i + j)
	}
	return b
}

func TestBatchLoopback(t *testing.T) {
	const count = 500
	for _, fam := range families {
		for _, mode := range modes {
			t.Run(fam.name+"/"+mode.name, func(t *testing.T) {
				checkGoroutines(t)
				rx := listen(t, fam.network, fam.listen, mode.opts)
				tx := listen(t, fam.dialNetwork, fam.dial, mode.opts)
				to := netip.AddrPortFrom(netip.MustParseAddr(fam.peer), rx.LocalAddr().Port())
				from := netip.AddrPortFrom(netip.MustParseAddr(fam.peer), tx.LocalAddr().Port())

				// Send everything before reading, so that batched reads
				// find many datagrams waiting.
				var msgs []Message
				for i := range count {
					msgs = append(msgs, Message{Buf: payload(i), Addr: to})
				}
				for sent := 0; sent < count; {
					end := min(sent+64, count)
					n, err := tx.WriteBatch(msgs[sent:end])
					if err != nil {
						t.Fatalf("WriteBatch after %d: %v", sent+n, err)
					}
					if n != end-sent {
						t.Fatalf("WriteBatch sent %d of %d", n, end-sent)
					}
					sent = end
				}

				got := make([]bool, count)
				recv := make([]Message, 64)
				for i := range recv {
					recv[i].Buf = GetBuffer()
					defer PutBuffer(recv[i].Buf)
				}
				rx.SetReadDeadline(time.Now().Add(5 * time.Second))
				most := 0
				for received := 0; received < count; {
					n, err := rx.ReadBatch(recv)
					if err != nil {
						t.Fatalf("ReadBatch after %d datagrams: %v", received, err)
					}
					most = max(most, n)
					for _, m := range recv[:n] {
						if m.Addr != from {
							t.Fatalf("datagram from %v, want %v", m.Addr, from)
						}
						for d := range m.Datagrams() {
							if len(d) < 4 {
								t.Fatalf("datagram of %d bytes", len(d))
							}
							i := int(binary.BigEndian.Uint32(d))
							if i >= count || !bytes.Equal(d, payload(i)) {
								t.Fatalf("datagram %d corrupted or unknown (%d bytes)", i, len(d))
							}
							if got[i] {
								t.Fatalf("datagram %d received twice", i)
							}
							got[i] = true
							received++
						}
					}
				}
				rb, wb := rx.Batching()
				if want := !mode.opts.NoBatch && batchSupported; rb != want || wb != want {
					t.Errorf("Batching() = %v, %v; want %v", rb, wb, want)
				}
				switch {
				case rb && most < 2:
					t.Errorf("batched reads returned at most %d datagram per call with %d waiting", most, count)
				case !rb && most != 1:
					t.Errorf("plain reads returned %d datagrams in one call", most)
				}
			})
		}
	}
}

// TestLargestDatagram checks D21: a datagram of 65507 bytes, the largest
// over IPv4, arrives whole in a pooled buffer.
func TestLargestDatagram(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			rx := listen(t, "udp4", "127.0.0.1:0", mode.opts)
			tx := listen(t, "udp4", "127.0.0.1:0", mode.opts)
			big := bytes.Repeat([]byte("fastnet!"), MaxDatagram/8+1)[:MaxDatagram]
			if _, err := tx.WriteBatch([]Message{{Buf: big, Addr: rx.LocalAddr()}}); err != nil {
				t.Fatal(err)
			}
			recv := []Message{{Buf: GetBuffer()}}
			defer PutBuffer(recv[0].Buf)
			rx.SetReadDeadline(time.Now().Add(5 * time.Second))
			n, err := rx.ReadBatch(recv)
			if err != nil || n != 1 {
				t.Fatalf("ReadBatch = %d, %v", n, err)
			}
			if !bytes.Equal(recv[0].Buf[:recv[0].N], big) {
				t.Errorf("received %d bytes, want the %d sent", recv[0].N, len(big))
			}
		})
	}
}

func TestCloseUnblocksRead(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			checkGoroutines(t)
			c := listen(t, "udp4", "127.0.0.1:0", mode.opts)
			done := make(chan error, 1)
			go func() {
				msgs := []Message{{Buf: make([]byte, 100)}, {Buf: make([]byte, 100)}}
				_, err := c.ReadBatch(msgs)
				done <- err
			}()
			time.Sleep(20 * time.Millisecond) // let the read block
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				if !errors.Is(err, net.ErrClosed) {
					t.Errorf("ReadBatch after Close: %v, want net.ErrClosed", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Close did not unblock ReadBatch")
			}
			// Every later call fails the same way.
			if _, err := c.ReadBatch([]Message{{Buf: make([]byte, 10)}}); !errors.Is(err, net.ErrClosed) {
				t.Errorf("ReadBatch on a closed Conn: %v", err)
			}
			if _, err := c.WriteBatch([]Message{{Buf: []byte("x"), Addr: c.LocalAddr()}}); !errors.Is(err, net.ErrClosed) {
				t.Errorf("WriteBatch on a closed Conn: %v", err)
			}
		})
	}
}

func TestDeadlineUnblocksRead(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			checkGoroutines(t)
			c := listen(t, "udp4", "127.0.0.1:0", mode.opts)
			done := make(chan error, 1)
			go func() {
				_, err := c.ReadBatch([]Message{{Buf: make([]byte, 100)}})
				done <- err
			}()
			time.Sleep(20 * time.Millisecond)
			c.SetReadDeadline(time.Now())
			select {
			case err := <-done:
				if !errors.Is(err, os.ErrDeadlineExceeded) {
					t.Errorf("ReadBatch past its deadline: %v, want os.ErrDeadlineExceeded", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("SetReadDeadline did not unblock ReadBatch")
			}
			// The socket still works once the deadline is lifted.
			c.SetReadDeadline(time.Time{})
			if _, err := c.WriteBatch([]Message{{Buf: []byte("again"), Addr: c.LocalAddr()}}); err != nil {
				t.Fatal(err)
			}
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			recv := []Message{{Buf: make([]byte, 100)}}
			if n, err := c.ReadBatch(recv); err != nil || n != 1 || string(recv[0].Buf[:recv[0].N]) != "again" {
				t.Errorf("ReadBatch = %d, %v, %q", n, err, recv[0].Buf[:recv[0].N])
			}
		})
	}
}

// TestWriteBatchFailure checks that WriteBatch stops at the first message
// it cannot send and says which one it is, so that the caller can drop it
// and go on.
func TestWriteBatchFailure(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			rx := listen(t, "udp4", "127.0.0.1:0", mode.opts)
			tx := listen(t, "udp4", "127.0.0.1:0", mode.opts)
			good := rx.LocalAddr()
			tests := []struct {
				name string
				bad  netip.AddrPort
				want error // nil: any error
			}{
				{"invalid address", netip.AddrPort{}, ErrInvalidAddr},
				{"IPv6 from an IPv4 socket", netip.MustParseAddrPort("[::1]:9"), nil},
			}
			for _, tt := range tests {
				msgs := []Message{
					{Buf: []byte("0"), Addr: good},
					{Buf: []byte("1"), Addr: good},
					{Buf: []byte("2"), Addr: tt.bad},
					{Buf: []byte("3"), Addr: good},
				}
				n, err := tx.WriteBatch(msgs)
				if n != 2 || err == nil || (tt.want != nil && !errors.Is(err, tt.want)) {
					t.Errorf("%s: WriteBatch = %d, %v; want 2, %v", tt.name, n, err, tt.want)
				}
				if n, err := tx.WriteBatch(msgs[3:]); n != 1 || err != nil {
					t.Errorf("%s: WriteBatch of the rest = %d, %v", tt.name, n, err)
				}
			}
			// What was sent arrived: 0, 1, 3 for each case.
			want := strings.Repeat("013", len(tests))
			var got []byte
			recv := []Message{{Buf: make([]byte, 10)}, {Buf: make([]byte, 10)}}
			rx.SetReadDeadline(time.Now().Add(5 * time.Second))
			for len(got) < len(want) {
				n, err := rx.ReadBatch(recv)
				if err != nil {
					t.Fatalf("after %q: %v", got, err)
				}
				for _, m := range recv[:n] {
					got = append(got, m.Buf[:m.N]...)
				}
			}
			if string(got) != want {
				t.Errorf("received %q, want %q", got, want)
			}
		})
	}
}

func TestSocketBuffer(t *testing.T) {
	if !batchSupported {
		t.Skip("buffer sizes are reported on Linux only")
	}
	const want = 128 << 10 // below Linux's default cap of 208 KiB
	def := listen(t, "udp4", "127.0.0.1:0", Options{SocketBuffer: -1})
	asked := listen(t, "udp4", "127.0.0.1:0", Options{SocketBuffer: want})
	large := listen(t, "udp4", "127.0.0.1:0", Options{})
	dr, dw := def.BufferSizes()
	ar, aw := asked.BufferSizes()
	lr, lw := large.BufferSizes()
	t.Logf("OS default %d/%d, asked %d: %d/%d, default request %d/%d", dr, dw, want, ar, aw, lr, lw)
	if dr <= 0 || dw <= 0 {
		t.Fatalf("default sizes %d/%d not reported", dr, dw)
	}
	if ar < want || aw < want {
		t.Errorf("asked for %d, got %d/%d", want, ar, aw)
	}
	if lr < dr || lw < dw || lr < ar || lw < aw {
		t.Errorf("asking for %d gave %d/%d, less than the OS default %d/%d or %d/%d", DefaultSocketBuffer, lr, lw, dr, dw, ar, aw)
	}
}

func TestPool(t *testing.T) {
	b := GetBuffer()
	if len(b) != BufferSize || cap(b) != BufferSize {
		t.Fatalf("GetBuffer: len %d cap %d", len(b), cap(b))
	}
	PutBuffer(b[:10])            // resliced: accepted
	PutBuffer(make([]byte, 100)) // foreign: ignored
	for range 3 {
		if b := GetBuffer(); cap(b) != BufferSize || len(b) != BufferSize {
			t.Fatalf("GetBuffer after Put: len %d cap %d", len(b), cap(b))
		}
	}
	if raceEnabled {
		return
	}
	if a := testing.AllocsPerRun(100, func() { PutBuffer(GetBuffer()) }); a != 0 {
		t.Errorf("Get and Put allocate %v times", a)
	}
}

// TestAllocs pins the steady-state cost of the hot path: writes allocate
// nothing, plain reads nothing, and batched reads only the two allocations
// per datagram that x/net makes for the sender's *net.UDPAddr.
func TestAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's sync.Pool allocates")
	}
	const k = 16
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			rx := listen(t, "udp4", "127.0.0.1:0", mode.opts)
			tx := listen(t, "udp4", "127.0.0.1:0", mode.opts)
			send := make([]Message, k)
			recv := make([]Message, k)
			for i := range k {
				send[i] = Message{Buf: payload(i), Addr: rx.LocalAddr()}
				recv[i].Buf = make([]byte, 2048)
			}
			var ioErr error
			roundTrip := func() {
				if _, err := tx.WriteBatch(send); err != nil {
					ioErr = err
					return
				}
				for got := 0; got < k; {
					n, err := rx.ReadBatch(recv)
					if err != nil {
						ioErr = err
						return
					}
					got += n
				}
			}
			rx.SetReadDeadline(time.Now().Add(10 * time.Second))
			writes := testing.AllocsPerRun(50, func() {
				if _, err := tx.WriteBatch(send); err != nil {
					ioErr = err
				}
			})
			// Drain what the write count sent (51 runs).
			for got := 0; got < 51*k && ioErr == nil; {
				n, err := rx.ReadBatch(recv)
				if err != nil {
					ioErr = err
				}
				got += n
			}
			both := testing.AllocsPerRun(50, roundTrip)
			if ioErr != nil {
				t.Fatal(ioErr)
			}
			if writes != 0 {
				t.Errorf("WriteBatch of %d datagrams allocates %v times", k, writes)
			}
			readLimit := 0.0
			if rb, _ := rx.Batching(); rb && rx.raw == nil {
				readLimit = 2 * k // x/net's *net.UDPAddr
			}
			t.Logf("allocations: write %v, read %v per %d datagrams", writes, both-writes, k)
			if reads := both - writes; reads > readLimit {
				t.Errorf("reading %d datagrams allocates %v times, want at most %v", k, reads, readLimit)
			}
		})
	}
}

func BenchmarkLoopback(b *testing.B) {
	for _, k := range []int{1, 64} {
		for _, mode := range modes {
			b.Run(fmt.Sprintf("%s/batch=%d", mode.name, k), func(b *testing.B) {
				ctx := context.Background()
				rx, err := Listen(ctx, "udp4", "127.0.0.1:0", mode.opts)
				if err != nil {
					b.Fatal(err)
				}
				defer rx.Close()
				tx, err := Listen(ctx, "udp4", "127.0.0.1:0", mode.opts)
				if err != nil {
					b.Fatal(err)
				}
				defer tx.Close()
				send := make([]Message, k)
				recv := make([]Message, k)
				for i := range k {
					send[i] = Message{Buf: make([]byte, 64), Addr: rx.LocalAddr()}
					recv[i].Buf = GetBuffer()
				}
				rx.SetReadDeadline(time.Now().Add(time.Minute))
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					if _, err := tx.WriteBatch(send); err != nil {
						b.Fatal(err)
					}
					for got := 0; got < k; {
						n, err := rx.ReadBatch(recv)
						if err != nil {
							b.Fatal(err)
						}
						for i := range n {
							for range recv[i].Datagrams() {
								got++
							}
						}
					}
				}
				b.ReportMetric(float64(b.N*k)/b.Elapsed().Seconds(), "datagrams/s")
			})
		}
	}
}

// BenchmarkEchoFloor is the floor of the UDP driver's BenchmarkEcho
// (W1 in one process): the four datagrams of a Fastnet round trip through
// this layer with no protocol work. The client writes a 64-byte message
// and a 9-byte datagram standing for an ack in one batch; the server
// answers each message the same way; each side skips the acks it reads.
// Its time is a round trip.
func BenchmarkEchoFloor(b *testing.B) {
	const ackSize = 9
	ctx := context.Background()
	srv, err := Listen(ctx, "udp4", "127.0.0.1:0", Options{})
	if err != nil {
		b.Fatal(err)
	}
	cli, err := Listen(ctx, "udp4", "127.0.0.1:0", Options{})
	if err != nil {
		srv.Close()
		b.Fatal(err)
	}
	// read returns the next datagram of c that is not an ack.
	read := func(c *Conn, one []Message) ([]byte, error) {
		for {
			if _, err := c.ReadBatch(one); err != nil {
				return nil, err
			}
			for d := range one[0].Datagrams() {
				if len(d) != ackSize {
					return d, nil
				}
			}
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		one := []Message{{Buf: GetBuffer()}}
		out := []Message{{}, {Buf: make([]byte, ackSize)}}
		for {
			d, err := read(srv, one)
			if err != nil {
				return
			}
			out[0].Buf, out[0].Addr, out[1].Addr = d, one[0].Addr, one[0].Addr
			if _, err := srv.WriteBatch(out); err != nil {
				return
			}
		}
	}()
	defer func() {
		srv.Close()
		cli.Close()
		<-done
	}()
	one := []Message{{Buf: GetBuffer()}}
	out := []Message{{Buf: make([]byte, 64)}, {Buf: make([]byte, ackSize)}}
	out[0].Addr, out[1].Addr = srv.LocalAddr(), srv.LocalAddr()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := cli.WriteBatch(out); err != nil {
			b.Fatal(err)
		}
		if _, err := read(cli, one); err != nil {
			b.Fatal(err)
		}
	}
}

type textAddr string

func (a textAddr) Network() string { return "text" }
func (a textAddr) String() string  { return string(a) }

// TestAddrPort: the peer of a received datagram, from the addresses x/net
// and a caller's own net.PacketConn report.
func TestAddrPort(t *testing.T) {
	tests := []struct {
		a    net.Addr
		want string // "" for not an address
	}{
		{&net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7000}, "127.0.0.1:7000"},
		{&net.UDPAddr{IP: net.ParseIP("::1"), Port: 7}, "[::1]:7"},
		{&net.UDPAddr{IP: net.ParseIP("fe80::1"), Port: 7, Zone: "eth0"}, "[fe80::1%eth0]:7"},
		{&net.UDPAddr{Port: 7}, ""},
		{textAddr("[::ffff:10.0.0.1]:9"), "10.0.0.1:9"},
		{textAddr("somewhere"), ""},
		{nil, ""},
	}
	for _, tt := range tests {
		ap, ok := AddrPort(tt.a)
		got := ""
		if ok {
			got = ap.String()
		}
		if got != tt.want {
			t.Errorf("AddrPort(%v) = %q (ok %v), want %q", tt.a, got, ok, tt.want)
		}
	}
}
