package udpio

import (
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"
)

// TestLocalBroadcast: a datagram sent to a broadcast address is reported
// with the local address of the interface it came in on (the kernel's
// ipi_spec_dst), one to answer from, on an IPv6 socket too, whose
// IPV6_PKTINFO gives the broadcast address itself (from which the kernel
// refuses to send).
func TestLocalBroadcast(t *testing.T) {
	bcast := netip.MustParseAddr("127.255.255.255")
	for _, bind := range []struct{ network, addr string }{{"udp4", "0.0.0.0:0"}, {"udp", "[::]:0"}} {
		for _, mode := range modes {
			t.Run(bind.addr+"/"+mode.name, func(t *testing.T) {
				o := mode.opts
				o.ReportLocal = true
				srv := listen(t, bind.network, bind.addr, o)
				pc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
				if err != nil {
					t.Fatal(err)
				}
				defer pc.Close()
				rc, _ := pc.SyscallConn()
				rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_BROADCAST, 1) })
				if _, err := pc.WriteToUDPAddrPort([]byte("hello"), netip.AddrPortFrom(bcast, srv.LocalAddr().Port())); err != nil {
					t.Skipf("no broadcast to %v here: %v", bcast, err)
				}
				in := []Message{{Buf: make([]byte, BufferSize)}, {Buf: make([]byte, BufferSize)}}
				srv.SetReadDeadline(time.Now().Add(5 * time.Second))
				if _, err := srv.ReadBatch(in); err != nil {
					t.Fatal(err)
				}
				if want := netip.MustParseAddr("127.0.0.1"); in[0].Local != want {
					t.Fatalf("a datagram sent to %v read with Local %v, want %v", bcast, in[0].Local, want)
				}
				if _, err := srv.WriteBatch([]Message{{Buf: []byte("back"), Addr: in[0].Addr, Local: in[0].Local}}); err != nil {
					t.Fatalf("the answer: %v", err)
				}
			})
		}
	}
}
