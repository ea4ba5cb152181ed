package udpio

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"runtime"
	"testing"
	"time"
)

// TestLocalAddresses: a Conn bound to an unspecified address with
// ReportLocal reports the local address each datagram was sent to, and
// sends each datagram from the local address its Message gives, alone and
// in runs that segmentation offload groups, in every mode (N149). The
// peer sends to 127.0.0.2, which is the host's but not the address its
// route to the peer prefers (127.0.0.1): without the control messages,
// the answers come from 127.0.0.1.
func TestLocalAddresses(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("local addresses are reported on Linux only")
	}
	second := netip.MustParseAddr("127.0.0.2")
	if probe, err := net.ListenUDP("udp4", &net.UDPAddr{IP: second.AsSlice()}); err != nil {
		t.Skipf("no loopback address %v here: %v", second, err)
	} else {
		probe.Close()
	}
	const count = 40 // datagrams each way: equal sizes, which offload groups
	for _, bind := range []struct{ network, addr string }{{"udp4", "0.0.0.0:0"}, {"udp", "[::]:0"}} {
		for _, mode := range modes {
			t.Run(bind.addr+"/"+mode.name, func(t *testing.T) {
				checkGoroutines(t)
				o := mode.opts
				o.ReportLocal = true
				srv := listen(t, bind.network, bind.addr, o)
				if !srv.ReportsLocal() {
					t.Fatal("ReportsLocal() = false on a socket bound to an unspecified address")
				}
				peer := listen(t, "udp4", "127.0.0.1:0", mode.opts)
				to := netip.AddrPortFrom(second, srv.LocalAddr().Port())
				for i, from := range exchange(t, srv, peer, to, count) {
					if from != to {
						t.Fatalf("answer %d came from %v, want %v", i, from, to)
					}
				}
			})
		}
	}
}

// TestReportLocalBoundAddress: on a socket bound to one address there is
// no other to send from, and ReportLocal does nothing.
func TestReportLocalBoundAddress(t *testing.T) {
	c := listen(t, "udp4", "127.0.0.1:0", Options{ReportLocal: true})
	if c.ReportsLocal() {
		t.Error("ReportsLocal() = true on a socket bound to 127.0.0.1")
	}
}

// hostIPv6 returns a global or unique-local IPv6 address of this host's
// interfaces other than loopback, whose route back to ::1 prefers ::1: a
// datagram sent there from ::1 is answered from ::1 unless the answer
// names its source.
func hostIPv6(t *testing.T) netip.Addr {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Skipf("no interface addresses: %v", err)
	}
	for _, a := range addrs {
		p, err := netip.ParsePrefix(a.String())
		if err != nil {
			continue
		}
		if ip := p.Addr(); ip.Is6() && !ip.Is4In6() && ip.IsGlobalUnicast() && !ip.IsLinkLocalUnicast() {
			if c, err := net.ListenUDP("udp6", &net.UDPAddr{IP: ip.AsSlice()}); err == nil {
				c.Close()
				return ip
			}
		}
	}
	t.Skip("no IPv6 address other than loopback and link-local here")
	return netip.Addr{}
}

// exchange has peer send count datagrams of 200 bytes to to, srv answer
// each from the local address it was sent to, alone and in one batch,
// and returns the addresses the peer heard the answers from.
func exchange(t *testing.T, srv, peer *Conn, to netip.AddrPort, count int) []netip.AddrPort {
	t.Helper()
	var out []Message
	for i := range count {
		b := make([]byte, 200)
		binary.BigEndian.PutUint32(b, uint32(i))
		out = append(out, Message{Buf: b, Addr: to})
	}
	if n, err := peer.WriteBatch(out); err != nil || n != count {
		t.Fatalf("the peer's WriteBatch: %d, %v", n, err)
	}
	in := make([]Message, 16)
	for i := range in {
		in[i].Buf = make([]byte, BufferSize)
	}
	srv.SetReadDeadline(time.Now().Add(5 * time.Second))
	var back []Message
	for len(back) < count {
		n, err := srv.ReadBatch(in)
		if err != nil {
			t.Fatalf("ReadBatch after %d datagrams: %v", len(back), err)
		}
		for _, m := range in[:n] {
			if m.Local != to.Addr() {
				t.Fatalf("datagram sent to %v read with Local %v", to, m.Local)
			}
			for d := range m.Datagrams() {
				back = append(back, Message{Buf: bytes.Clone(d), Addr: m.Addr, Local: m.Local})
			}
		}
	}
	if n, err := srv.WriteBatch(back[:count-1]); err != nil || n != count-1 {
		t.Fatalf("WriteBatch: %d, %v", n, err)
	}
	if n, err := srv.WriteBatch(back[count-1:]); err != nil || n != 1 {
		t.Fatalf("WriteBatch of one: %d, %v", n, err)
	}
	return readFrom(t, peer, count)
}

// readFrom reads count datagrams at c and returns the sender of each, by
// the index its first four bytes hold.
func readFrom(t *testing.T, c *Conn, count int) []netip.AddrPort {
	t.Helper()
	in := make([]Message, 16)
	for i := range in {
		in[i].Buf = make([]byte, BufferSize)
	}
	from := make([]netip.AddrPort, count)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for got := 0; got < count; {
		n, err := c.ReadBatch(in)
		if err != nil {
			t.Fatalf("ReadBatch after %d datagrams: %v", got, err)
		}
		for _, m := range in[:n] {
			if m.Local.IsValid() && !c.ReportsLocal() {
				t.Fatalf("a Conn that does not report local addresses read Local %v", m.Local)
			}
			for d := range m.Datagrams() {
				i := int(binary.BigEndian.Uint32(d))
				if i >= count || from[i].IsValid() {
					t.Fatalf("datagram %d read again or out of range", i)
				}
				from[i] = m.Addr
				got++
			}
		}
	}
	return from
}

// TestLocalAddressesIPv6: as TestLocalAddresses, for an IPv6 peer of a
// socket bound to [::], which sends from ::1 to another of the host's
// IPv6 addresses (::1 alone would not tell: the route back prefers it).
func TestLocalAddressesIPv6(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("local addresses are reported on Linux only")
	}
	ip := hostIPv6(t)
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			o := mode.opts
			o.ReportLocal = true
			srv := listen(t, "udp6", "[::]:0", o)
			peer := listen(t, "udp6", "[::1]:0", mode.opts)
			to := netip.AddrPortFrom(ip, srv.LocalAddr().Port())
			for i, from := range exchange(t, srv, peer, to, 40) {
				if from != to {
					t.Fatalf("answer %d came from %v, want %v", i, from, to)
				}
			}
		})
	}
}

// TestLocalAddressesMixed: a batch to one peer whose datagrams go from two
// local addresses, alternately or in runs, sends each from its own:
// segmentation offload groups only datagrams from one address, in a
// batched write and in the lone write of a short batch.
func TestLocalAddressesMixed(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("local addresses are reported on Linux only")
	}
	first, second := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")
	if probe, err := net.ListenUDP("udp4", &net.UDPAddr{IP: second.AsSlice()}); err != nil {
		t.Skipf("no loopback address %v here: %v", second, err)
	} else {
		probe.Close()
	}
	for _, bind := range []struct{ network, addr string }{{"udp4", "0.0.0.0:0"}, {"udp", "[::]:0"}} {
		for _, mode := range modes {
			t.Run(bind.addr+"/"+mode.name, func(t *testing.T) {
				o := mode.opts
				o.ReportLocal = true
				srv := listen(t, bind.network, bind.addr, o)
				peer := listen(t, "udp4", "127.0.0.1:0", mode.opts)
				for _, tt := range []struct {
					name  string
					count int
					local func(i int) netip.Addr
				}{
					{"alternate", 40, func(i int) netip.Addr { return []netip.Addr{first, second}[i%2] }},
					{"runs", 40, func(i int) netip.Addr { return []netip.Addr{first, second}[i/10%2] }},
					{"lone", 2, func(i int) netip.Addr { return []netip.Addr{second, first}[i] }},
				} {
					var out []Message
					for i := range tt.count {
						b := make([]byte, 200)
						binary.BigEndian.PutUint32(b, uint32(i))
						out = append(out, Message{Buf: b, Addr: peer.LocalAddr(), Local: tt.local(i)})
					}
					if n, err := srv.WriteBatch(out); err != nil || n != tt.count {
						t.Fatalf("%s: WriteBatch: %d, %v", tt.name, n, err)
					}
					for i, from := range readFrom(t, peer, tt.count) {
						if want := netip.AddrPortFrom(tt.local(i), srv.LocalAddr().Port()); from != want {
							t.Fatalf("%s: datagram %d came from %v, want %v", tt.name, i, from, want)
						}
					}
				}
			})
		}
	}
}

// TestLocalOtherFamily: a local address of the other family than the
// destination's is not one to send from; the datagram goes from the
// system's choice, where the kernel would refuse it (EINVAL on an IPv6
// socket).
func TestLocalOtherFamily(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("local addresses are reported on Linux only")
	}
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			o := mode.opts
			o.ReportLocal = true
			srv := listen(t, "udp", "[::]:0", o)
			p4 := listen(t, "udp4", "127.0.0.1:0", mode.opts)
			p6 := listen(t, "udp6", "[::1]:0", mode.opts)
			for _, m := range []Message{
				{Buf: []byte{0, 0, 0, 0}, Addr: p4.LocalAddr(), Local: netip.IPv6Loopback()},
				{Buf: []byte{0, 0, 0, 0}, Addr: p6.LocalAddr(), Local: netip.MustParseAddr("127.0.0.1")},
			} {
				if _, err := srv.WriteBatch([]Message{m}); err != nil {
					t.Fatalf("WriteBatch to %v from %v: %v", m.Addr, m.Local, err)
				}
			}
			readFrom(t, p4, 1)
			readFrom(t, p6, 1)
		})
	}
}
