package udpdriver_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/udpdriver"
)

// TestJunkDatagrams sends a connected pair's server, and the client's
// port, datagrams that are no Fastnet packets (empty ones, one byte, a
// channel id alone, random bytes up to the largest UDP payload) from the
// client's address family, while the pair exchanges messages: they are
// dropped, and the connection carries on.
func TestJunkDatagrams(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l := echoServer(t, ctx, "127.0.0.1:0")
	c, err := udpdriver.Dial(ctx, l.Addr().String(), udpdriver.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	junk := net.ListenUDP
	uc, err := junk("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	big := make([]byte, 65507)
	for i := range big {
		big[i] = byte(i * 7)
	}
	payloads := [][]byte{{}, {0}, {0xff, 0xff}, {0, 1}, big[:3], big[:1400], big, {}}
	server := l.Addr().(*net.UDPAddr)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			uc.WriteToUDP(payloads[i%len(payloads)], server)
			if i%64 == 0 {
				time.Sleep(time.Millisecond)
			}
		}
	}()
	for i := range 200 {
		msg := []byte{byte(i), byte(i >> 8)}
		if err := c.Send(ctx, 1, msg, true); err != nil {
			t.Fatal(err)
		}
		m, err := c.Receive(ctx)
		if err != nil || string(m.Data) != string(msg) {
			t.Fatalf("echo %d: %q, %v", i, m.Data, err)
		}
	}
}

// TestListenSamePortAfterClose: a listener's port is free for a new one
// as soon as Close returns.
func TestListenSamePortAfterClose(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	addr := "127.0.0.1:0"
	for i := range 5 {
		l := echoServer(t, ctx, addr)
		addr = l.Addr().String()
		if err := dialEcho(ctx, addr); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		if err := l.Close(); err != nil {
			t.Fatalf("round %d: Close: %v", i, err)
		}
	}
}
