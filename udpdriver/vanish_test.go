package udpdriver_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/udpdriver"
)

// forwarder carries datagrams between one client and a server through a
// socket of its own (front), which it can close: the client's datagrams
// then meet a port where nothing listens, and the system answers them
// with ICMP port unreachable.
type forwarder struct {
	front, back *net.UDPConn
	mu          sync.Mutex
	client      netip.AddrPort
	wg          sync.WaitGroup
}

func newForwarder(t *testing.T, server string) *forwarder {
	t.Helper()
	front, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	sa, err := net.ResolveUDPAddr("udp4", server)
	if err != nil {
		t.Fatal(err)
	}
	back, err := net.DialUDP("udp4", nil, sa)
	if err != nil {
		t.Fatal(err)
	}
	f := &forwarder{front: front, back: back}
	f.wg.Go(func() {
		b := make([]byte, 65536)
		for {
			n, from, err := front.ReadFromUDPAddrPort(b)
			if err != nil {
				return
			}
			f.mu.Lock()
			f.client = from
			f.mu.Unlock()
			back.Write(b[:n])
		}
	})
	f.wg.Go(func() {
		b := make([]byte, 65536)
		for {
			n, err := back.Read(b)
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				continue
			}
			f.mu.Lock()
			to := f.client
			f.mu.Unlock()
			front.WriteToUDPAddrPort(b[:n], to)
		}
	})
	t.Cleanup(func() { f.front.Close(); f.back.Close(); f.wg.Wait() })
	return f
}

func (f *forwarder) Addr() string { return f.front.LocalAddr().String() }

// TestServerPortVanishes: an established client whose server's port
// stops existing hears ICMP port unreachable for every datagram it sends
// (its socket is connected, so the system reports them), and ends by its
// timeout, as N65 says: neither at once, nor never, and with the error of
// a peer that went away.
func TestServerPortVanishes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := udpdriver.Listen(ctx, "127.0.0.1:0", udpdriver.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	f := newForwarder(t, l.Addr().String())
	const timeout = 2 * time.Second
	cfg := udpdriver.Config{Engine: fastnet.Config{Timeout: timeout}}
	c, err := udpdriver.Dial(ctx, f.Addr(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc, err := l.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Send(ctx, 1, []byte("ping"), true); err != nil {
		t.Fatal(err)
	}
	if m, err := sc.Receive(ctx); err != nil || string(m.Data) != "ping" {
		t.Fatalf("server's Receive: %q, %v", m.Data, err)
	}
	f.front.Close()
	start := time.Now()
	// Keep sending, reliably and not, so that refusals come at writes and
	// at reads.
	sent := 0
	for c.Err() == nil && time.Since(start) < 3*timeout {
		c.TrySend(2, []byte("state"), false)
		c.TrySend(3, []byte("event"), true)
		sent++
		time.Sleep(5 * time.Millisecond)
	}
	<-c.Done()
	elapsed := time.Since(start)
	err = c.Err()
	if !errors.Is(err, fastnet.ErrTimeout) || !errors.Is(err, fastnet.ErrClosed) {
		t.Errorf("the connection ended with %v, want fastnet.ErrTimeout", err)
	}
	if elapsed < timeout/2 || elapsed > timeout+2*time.Second {
		t.Errorf("the connection ended %v after its server's port vanished, with a timeout of %v", elapsed, timeout)
	}
	if err := c.Send(ctx, 1, []byte("x"), true); !errors.Is(err, fastnet.ErrTimeout) {
		t.Errorf("Send after the end = %v, want fastnet.ErrTimeout", err)
	}
	t.Logf("ended after %v: %v; driver stats %+v", elapsed, err, c.DriverStats())
}

// TestSendBlockedPeerVanishes: a Send blocked on a full send queue to a
// peer that went silent returns when the connection times out, with the
// timeout's error, not when its context ends.
func TestSendBlockedPeerVanishes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := udpdriver.Listen(ctx, "127.0.0.1:0", udpdriver.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	f := newForwarder(t, l.Addr().String())
	const timeout = 2 * time.Second
	cfg := udpdriver.Config{Engine: fastnet.Config{Timeout: timeout, SendQueueSize: 16 << 10, MaxMessageSize: 4 << 10}}
	c, err := udpdriver.Dial(ctx, f.Addr(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := l.Accept(ctx); err != nil {
		t.Fatal(err)
	}
	f.back.Close() // the server's answers stop; the client's datagrams go nowhere
	start := time.Now()
	msg := make([]byte, 1000)
	for {
		if err = c.Send(ctx, 1, msg, true); err != nil {
			break
		}
	}
	elapsed := time.Since(start)
	if !errors.Is(err, fastnet.ErrTimeout) || !errors.Is(err, fastnet.ErrClosed) {
		t.Errorf("Send = %v, want the connection's timeout", err)
	}
	if elapsed > timeout+2*time.Second {
		t.Errorf("Send returned %v after the peer went silent, with a timeout of %v", elapsed, timeout)
	}
	t.Logf("Send returned after %v: %v", elapsed, err)
}
