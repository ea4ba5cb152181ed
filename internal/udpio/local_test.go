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
						if m.Local != second {
							t.Fatalf("datagram sent to %v read with Local %v", to, m.Local)
						}
						for d := range m.Datagrams() {
							back = append(back, Message{Buf: bytes.Clone(d), Addr: m.Addr, Local: m.Local})
						}
					}
				}
				// Answered in one batch (offload groups them), then one
				// alone (lone's path).
				if n, err := srv.WriteBatch(back[:count-1]); err != nil || n != count-1 {
					t.Fatalf("WriteBatch: %d, %v", n, err)
				}
				if n, err := srv.WriteBatch(back[count-1:]); err != nil || n != 1 {
					t.Fatalf("WriteBatch of one: %d, %v", n, err)
				}
				peer.SetReadDeadline(time.Now().Add(5 * time.Second))
				for got := 0; got < count; {
					n, err := peer.ReadBatch(in)
					if err != nil {
						t.Fatalf("the peer's ReadBatch after %d datagrams: %v", got, err)
					}
					for _, m := range in[:n] {
						if m.Addr != to {
							t.Fatalf("an answer came from %v, want %v", m.Addr, to)
						}
						if m.Local.IsValid() {
							t.Fatalf("a Conn without ReportLocal read Local %v", m.Local)
						}
						for range m.Datagrams() {
							got++
						}
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
