package tcpdriver

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/fastnet"
)

func TestEcho(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := echo(t, ctx, fastnet.Config{MaxMessageSize: 4 << 20})
	big := bytes.Repeat([]byte("fastnet "), 400000)
	for _, msg := range [][]byte{[]byte("hello"), big} {
		if err := c.Send(ctx, 3, msg, true); err != nil {
			t.Fatal(err)
		}
		m, err := c.Receive(ctx)
		if err != nil || !bytes.Equal(m.Data, msg) || m.Channel != 3 {
			t.Fatalf("got %d bytes, %v", len(m.Data), err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestCloseAfterSlowHandshakeRead closes a server whose connection's
// reader is held back just after the packet that completed the handshake,
// as a loaded machine's scheduler can: meanwhile the server accepts the
// connection, queues messages on it and closes. The messages must reach
// the client, then the server's reason; when the reader learnt of the
// handshake only by asking after it, the connection was gone by then, its
// end took it for one still in its handshake and reset it, and the client
// lost the stream.
func TestCloseAfterSlowHandshakeRead(t *testing.T) {
	cfg := Config{}
	cfg.Engine.Linger = 5 * time.Second
	ctx, l := listenSlowHandshakes(t, cfg)
	const n = 100
	served := make(chan error, 1)
	go func() {
		sc, err := l.Accept(ctx)
		if err != nil {
			served <- err
			return
		}
		msg := bytes.Repeat([]byte("x"), 1000)
		for range n {
			if err := sc.Send(ctx, 1, msg, true); err != nil {
				served <- err
				return
			}
		}
		served <- l.Close()
	}()
	c, err := Dial(ctx, l.Addr().String(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range n {
		if _, err := c.Receive(ctx); err != nil {
			t.Fatalf("after %d of %d messages: %v", i, n, err)
		}
	}
	if _, err := c.Receive(ctx); err == nil || !strings.Contains(err.Error(), "server shutting down") {
		t.Errorf("after the messages: %v, want the server's reason", err)
	}
	if err := <-served; err != nil {
		t.Errorf("server: %v", err)
	}
}

// TestSlowHandshakeReadNotEvicted holds a server connection's reader back
// after the packet that completed its handshake, as in
// TestCloseAfterSlowHandshakeRead, while the server accepts it and, with
// MaxHandshakes 1, a new TCP connection arrives: the accepted connection
// is out of the handshakes already and is not evicted as their oldest
// (N46, N99); a message sent on it arrives.
func TestSlowHandshakeReadNotEvicted(t *testing.T) {
	cfg := Config{MaxHandshakes: 1}
	ctx, l := listenSlowHandshakes(t, cfg)
	accepted := make(chan *Conn, 1)
	go func() {
		sc, err := l.Accept(ctx)
		if err != nil {
			t.Error(err)
			accepted <- nil
			return
		}
		// A second client opens a TCP connection while the first's
		// reader is still held after its last handshake packet.
		nc, err := net.Dial("tcp", l.Addr().String())
		if err == nil {
			defer nc.Close()
		}
		accepted <- sc
		time.Sleep(500 * time.Millisecond)
	}()
	c, err := Dial(ctx, l.Addr().String(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc := <-accepted
	if sc == nil {
		return
	}
	time.Sleep(300 * time.Millisecond)
	if err := sc.Send(ctx, 1, []byte("hi"), true); err != nil {
		t.Fatalf("send on the accepted connection: %v (stats %+v)", err, l.DriverStats())
	}
	rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
	defer rcancel()
	if _, err := c.Receive(rctx); err != nil {
		t.Fatalf("receive: %v (stats %+v)", err, l.DriverStats())
	}
}

// listenSlowHandshakes listens with cfg, and until the test ends holds
// every reader goroutine back 100 ms after each packet of a connection
// still in its handshake (testHookHandshakeInput), as a loaded machine's
// scheduler can.
func listenSlowHandshakes(t *testing.T, cfg Config) (context.Context, *Listener) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	l, err := Listen(ctx, "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	hold := func() { time.Sleep(100 * time.Millisecond) }
	testHookHandshakeInput.Store(&hold)
	t.Cleanup(func() { testHookHandshakeInput.Store(nil) })
	return ctx, l
}

// TestConfigRefused: Listen and Dial refuse a negative limit, with an
// error that names it, before anything is opened; zero means the default.
// A negative WriteQueue was taken for the default.
func TestConfigRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	server, err := Listen(ctx, "127.0.0.1:0", Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	tests := []struct {
		name string
		cfg  Config
		want string // in the error, "" for none
	}{
		{"zero", Config{}, ""},
		{"negative WriteQueue", Config{WriteQueue: -1}, "WriteQueue"},
		{"negative ReceiveQueue", Config{ReceiveQueue: -1}, "ReceiveQueue"},
		{"negative Backlog", Config{Backlog: -1}, "Backlog"},
		{"negative MaxHandshakes", Config{MaxHandshakes: -1}, "MaxHandshakes"},
		{"negative HandshakeTimeout", Config{HandshakeTimeout: -time.Second}, "HandshakeTimeout"},
		{"negative LongPacketMemory", Config{LongPacketMemory: -1}, "LongPacketMemory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, lerr := Listen(ctx, "127.0.0.1:0", tt.cfg)
			if lerr == nil {
				l.Close()
			}
			c, derr := Dial(ctx, server.Addr().String(), tt.cfg)
			if derr == nil {
				c.Abort("")
			}
			for _, err := range []error{lerr, derr} {
				switch {
				case tt.want == "" && err != nil:
					t.Errorf("%v", err)
				case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
					t.Errorf("%v, want an error about %s", err, tt.want)
				}
			}
		})
	}
}
