package udpio

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/internal/netnstest"
)

// sockOpts reads the don't-fragment options of uc back from the kernel.
func sockOpts(t *testing.T, uc *net.UDPConn) (v4, v6 int) {
	t.Helper()
	rc, err := uc.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	rc.Control(func(fd uintptr) { v4, v6 = dontFragmentOpts(fd) })
	return v4, v6
}

// TestDontFragmentOption checks D29 on real sockets: New sets
// IP_MTU_DISCOVER and IPV6_MTU_DISCOVER to *_PMTUDISC_PROBE (N42), as the
// kernel reads them back, for IPv4, IPv6 and dual-stack sockets, and
// DontFragment says so for the peers each can reach. A socket New has not
// seen keeps the kernel's default, so the test can tell the difference.
func TestDontFragmentOption(t *testing.T) {
	tests := []struct {
		network, address string
		want4, want6     bool // the option is set for IPv4, IPv6 peers
	}{
		{"udp4", "127.0.0.1:0", true, false},
		{"udp6", "[::1]:0", false, true},
		{"udp", "[::]:0", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.network, func(t *testing.T) {
			c := listen(t, tt.network, tt.address, Options{})
			v4, v6 := sockOpts(t, c.uc)
			if tt.want4 && v4 != syscall.IP_PMTUDISC_PROBE {
				t.Errorf("IP_MTU_DISCOVER = %d, want IP_PMTUDISC_PROBE (%d)", v4, syscall.IP_PMTUDISC_PROBE)
			}
			if tt.want6 && v6 != syscall.IPV6_PMTUDISC_PROBE {
				t.Errorf("IPV6_MTU_DISCOVER = %d, want IPV6_PMTUDISC_PROBE (%d)", v6, syscall.IPV6_PMTUDISC_PROBE)
			}
			err4 := c.DontFragment(netip.MustParseAddrPort("127.0.0.1:1"))
			err6 := c.DontFragment(netip.MustParseAddrPort("[::1]:1"))
			if (err4 == nil) != tt.want4 || (err6 == nil) != tt.want6 {
				t.Errorf("DontFragment: IPv4 %v, IPv6 %v; want set: %v, %v", err4, err6, tt.want4, tt.want6)
			}
			if !tt.want4 && !errors.Is(err4, ErrNotFamily) || !tt.want6 && !errors.Is(err6, ErrNotFamily) {
				t.Errorf("DontFragment: IPv4 %v, IPv6 %v; the family the socket cannot reach should be ErrNotFamily", err4, err6)
			}
		})
	}
	t.Run("without New", func(t *testing.T) {
		uc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		defer uc.Close()
		if v4, _ := sockOpts(t, uc); v4 == syscall.IP_PMTUDISC_PROBE {
			t.Fatalf("a plain socket already has IP_PMTUDISC_PROBE: the test cannot tell")
		}
	})
}

// loopbackMTU returns the loopback interface's MTU.
func loopbackMTU(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/sys/class/net/lo/mtu")
	if err != nil {
		t.Skipf("loopback MTU unknown: %v", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPathMTU checks that PathMTU reports the kernel's path MTU toward a
// loopback peer, the loopback interface's MTU, with the header size of the
// family (N43). IPv4 caps it at 65535, the largest IPv4 packet.
func TestPathMTU(t *testing.T) {
	mtu := loopbackMTU(t)
	for _, tt := range []struct {
		network, address string
		hdr              int
	}{
		{"udp4", "127.0.0.1:0", 20},
		{"udp6", "[::1]:0", 40},
	} {
		c := listen(t, tt.network, tt.address, Options{})
		peer := listen(t, tt.network, tt.address, Options{})
		want := mtu
		if tt.hdr == 20 {
			want = min(mtu, 65535)
		}
		got, hdr, err := c.PathMTU(peer.LocalAddr())
		if err != nil || got != want || hdr != tt.hdr {
			t.Errorf("%s: PathMTU = %d, %d, %v; want %d, %d", tt.network, got, hdr, err, want, tt.hdr)
		}
	}
	c := listen(t, "udp", "[::]:0", Options{})
	if got, hdr, err := c.PathMTU(netip.MustParseAddrPort("[::ffff:127.0.0.1]:9")); err != nil || got != min(mtu, 65535) || hdr != 20 {
		t.Errorf("dual stack, mapped IPv4 peer: PathMTU = %d, %d, %v; want %d, 20", got, hdr, err, min(mtu, 65535))
	}
	if _, _, err := c.PathMTU(netip.AddrPort{}); err == nil {
		t.Error("PathMTU of the zero address: no error")
	}
}

// BenchmarkPathMTU measures the temporary socket PathMTU makes (N43).
func BenchmarkPathMTU(b *testing.B) {
	c, err := Listen(b.Context(), "udp4", "127.0.0.1:0", Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	peer := netip.MustParseAddrPort("127.0.0.1:9")
	for b.Loop() {
		if _, _, err := c.PathMTU(peer); err != nil {
			b.Fatal(err)
		}
	}
}

// writeAll writes msgs as the UDP driver does: a datagram that fails is
// dropped and the rest go on. It returns the errors.
func writeAll(c *Conn, msgs []Message) []error {
	var errs []error
	for len(msgs) > 0 {
		n, err := c.WriteBatch(msgs)
		if err == nil {
			break
		}
		errs = append(errs, err)
		msgs = msgs[n+1:]
	}
	return errs
}

// readAll reads datagrams from c until none comes for a while and returns
// their lengths.
func readAll(t *testing.T, c *Conn) []int {
	t.Helper()
	var got []int
	for {
		c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		msgs := []Message{{Buf: GetBuffer()}}
		n, err := c.ReadBatch(msgs)
		if err != nil {
			PutBuffer(msgs[0].Buf)
			return got
		}
		for i := range n {
			for d := range msgs[i].Datagrams() {
				got = append(got, len(d))
			}
		}
		PutBuffer(msgs[0].Buf)
	}
}

// TestTooBig checks D29's write path without privileges, on IPv6
// loopback: a datagram larger than the loopback MTU allows is refused by
// the kernel (EMSGSIZE) because the don't-fragment bit is set, where
// without it the kernel would have sent it in fragments; the refusal is
// counted (TooBig), and the datagrams after it are still sent, in every
// write mode.
func TestTooBig(t *testing.T) {
	mtu := loopbackMTU(t)
	big := mtu - 40 - 8 + 1
	if big > 65527 {
		t.Skipf("loopback MTU %d: no UDP datagram is too big for it", mtu)
	}
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			rx := listen(t, "udp6", "[::1]:0", mode.opts)
			tx := listen(t, "udp6", "[::1]:0", mode.opts)
			to := rx.LocalAddr()
			msgs := []Message{
				{Buf: bytes.Repeat([]byte{1}, 100), Addr: to},
				{Buf: bytes.Repeat([]byte{2}, big), Addr: to},
				{Buf: bytes.Repeat([]byte{3}, big-1), Addr: to},
				{Buf: bytes.Repeat([]byte{4}, 100), Addr: to},
			}
			errs := writeAll(tx, msgs)
			if len(errs) != 1 || !errors.Is(errs[0], syscall.EMSGSIZE) {
				t.Fatalf("write errors %v, want one EMSGSIZE", errs)
			}
			if n := tx.TooBig(); n != 1 {
				t.Errorf("TooBig = %d, want 1", n)
			}
			if got := readAll(t, rx); len(got) != 3 || got[0] != 100 || got[1] != big-1 || got[2] != 100 {
				t.Errorf("received datagrams of %v bytes, want [100 %d 100]", got, big-1)
			}
		})
	}
}

// TestDontFragmentNamespace checks D29 where it matters, in a network
// namespace whose loopback MTU is 1500 (it needs privileges, and skips
// without them): with the bit, the largest datagram that fits arrives and
// one byte more is refused with EMSGSIZE and counted, over IPv4 and IPv6;
// a socket without the bit sends the larger one in fragments, and it
// arrives (what the estimator saw before D29, N42). PathMTU says 1500.
func TestDontFragmentNamespace(t *testing.T) {
	if !netnstest.Enter(t, 1500) {
		return
	}
	for _, tt := range []struct {
		network, address string
		hdr              int
	}{
		{"udp4", "127.0.0.1:0", 20},
		{"udp6", "[::1]:0", 40},
	} {
		t.Run(tt.network, func(t *testing.T) {
			fit := 1500 - tt.hdr - 8
			rx := listen(t, tt.network, tt.address, Options{})
			tx := listen(t, tt.network, tt.address, Options{})
			if mtu, hdr, err := tx.PathMTU(rx.LocalAddr()); mtu != 1500 || hdr != tt.hdr || err != nil {
				t.Errorf("PathMTU = %d, %d, %v; want 1500, %d", mtu, hdr, err, tt.hdr)
			}
			to := rx.LocalAddr()
			errs := writeAll(tx, []Message{
				{Buf: make([]byte, fit), Addr: to},
				{Buf: make([]byte, fit+1), Addr: to},
			})
			if len(errs) != 1 || !errors.Is(errs[0], syscall.EMSGSIZE) || tx.TooBig() != 1 {
				t.Errorf("with the bit: write errors %v, TooBig %d; want one EMSGSIZE, 1", errs, tx.TooBig())
			}
			if got := readAll(t, rx); len(got) != 1 || got[0] != fit {
				t.Errorf("with the bit: received %v, want [%d]", got, fit)
			}
			// Without the bit, the kernel fragments.
			uc, err := net.ListenUDP(tt.network, net.UDPAddrFromAddrPort(netip.MustParseAddrPort(tt.address)))
			if err != nil {
				t.Fatal(err)
			}
			defer uc.Close()
			if _, err := uc.WriteToUDPAddrPort(make([]byte, fit+1), to); err != nil {
				t.Fatalf("without the bit: %v", err)
			}
			if got := readAll(t, rx); len(got) != 1 || got[0] != fit+1 {
				t.Errorf("without the bit: received %v, want [%d] (fragmented and reassembled)", got, fit+1)
			}
		})
	}
}
