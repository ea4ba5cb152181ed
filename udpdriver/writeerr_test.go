package udpdriver

import (
	"context"
	"net"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/internal/udpio"
)

// TestWriteErrorsCounted writes, through the transport over a real
// loopback socket, datagrams of which the system refuses one (to port 0,
// EINVAL) and one more for its size: the first is counted in
// DriverStats.WriteErrors, the second is not (EMSGSIZE is MTU estimation's
// business), and the datagrams around them still go out (N48).
func TestWriteErrorsCounted(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the refusals are Linux's")
	}
	for _, noBatch := range []bool{false, true} {
		e, err := newEngine(Config{Engine: fastnet.Config{Role: fastnet.Server}})
		if err != nil {
			t.Fatal(err)
		}
		uc, err := udpio.Listen(context.Background(), "udp4", "127.0.0.1:0", udpio.Options{NoBatch: noBatch})
		if err != nil {
			t.Fatal(err)
		}
		defer uc.Close()
		rc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		to := rc.LocalAddr().(*net.UDPAddr).AddrPort()
		msg := func(b []byte, to netip.AddrPort) udpio.Message { return udpio.Message{Buf: b, N: len(b), Addr: to} }
		tr := &transport{uc: uc, e: e}
		tr.WriteBatch([]udpio.Message{
			msg([]byte("a"), to),
			msg([]byte("b"), netip.MustParseAddrPort("127.0.0.1:0")),
			msg([]byte("c"), to),
			msg(make([]byte, fastnet.DefaultMaxDatagram+1), to),
			msg([]byte("d"), to),
		})
		if n := e.Stats().WriteErrors; n != 1 {
			t.Errorf("noBatch %v: %d write errors counted, want 1", noBatch, n)
		}
		var got []byte
		rc.SetReadDeadline(time.Now().Add(5 * time.Second))
		for len(got) < 3 {
			var b [16]byte
			n, err := rc.Read(b[:])
			if err != nil {
				t.Fatalf("noBatch %v: after %q: %v", noBatch, got, err)
			}
			got = append(got, b[:n]...)
		}
		if string(got) != "acd" {
			t.Errorf("noBatch %v: received %q, want \"acd\"", noBatch, got)
		}
	}
}

// TestRefusedWritesCounted: a write that the system refuses because the
// peer's port answered ICMP port unreachable (ECONNREFUSED, on a
// connected socket) sent nothing: it is a failed write, counted in
// DriverStats.WriteErrors as N48 says of every failed write but those
// too big for the path.
func TestRefusedWritesCounted(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the socket is connected on Linux alone")
	}
	e, err := newEngine(Config{Engine: fastnet.Config{Role: fastnet.Client}})
	if err != nil {
		t.Fatal(err)
	}
	uc, err := udpio.Listen(context.Background(), "udp4", "127.0.0.1:0", udpio.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	dead, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	to := dead.LocalAddr().(*net.UDPAddr).AddrPort()
	dead.Close()
	if err := uc.Connect(to); err != nil {
		t.Fatal(err)
	}
	tr := &transport{uc: uc, e: e}
	// Each datagram draws an ICMP port unreachable, which fails the
	// write after it: every other write is refused.
	for deadline := time.Now().Add(5 * time.Second); e.Stats().WriteErrors == 0 && time.Now().Before(deadline); {
		tr.WriteBatch([]udpio.Message{{Buf: []byte("x"), N: 1, Addr: to}})
		time.Sleep(5 * time.Millisecond)
	}
	if e.Stats().WriteErrors == 0 {
		t.Error("no refused write counted in 5 s")
	}
}
