package tcpdriver

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/internal/drivertest"
)

// echo is drivertest.Echo over this driver: a client connected to a
// server on loopback that echoes every message.
func echo(tb testing.TB, ctx context.Context, engine fastnet.Config) *Conn {
	return drivertest.Echo(tb, ctx, drivertest.Driver{
		Name: "tcp",
		Listen: func(ctx context.Context, addr string, engine fastnet.Config, _ drivertest.ListenOptions) (*Listener, error) {
			return Listen(ctx, addr, Config{Engine: engine})
		},
		Dial: func(ctx context.Context, addr string, engine fastnet.Config) (*Conn, error) {
			return Dial(ctx, addr, Config{Engine: engine})
		},
	}, engine)
}

// BenchmarkEcho is W1 over the TCP driver in one process: a 64-byte
// reliable message and its echo per iteration, over loopback. Its time is
// a round trip; compare it with BenchmarkEchoRawTCP's, run beside it.
func BenchmarkEcho(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := echo(b, ctx, fastnet.Config{})
	defer c.Close()
	msg := make([]byte, 64)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := c.Send(ctx, 0, msg, true); err != nil {
			b.Fatal(err)
		}
		if _, err := c.Receive(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEchoRawTCP is BenchmarkEcho's baseline: the same round trip
// over one TCP connection (Nagle off), each message behind a 4-byte
// length, read through a buffer, as the bench command's raw-tcp does.
func BenchmarkEchoRawTCP(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		r := bufio.NewReader(nc)
		buf := make([]byte, 4+64)
		for {
			if _, err := io.ReadFull(r, buf[:4]); err != nil {
				return
			}
			n := binary.BigEndian.Uint32(buf)
			if _, err := io.ReadFull(r, buf[4:4+n]); err != nil {
				return
			}
			if _, err := nc.Write(buf[:4+n]); err != nil {
				return
			}
		}
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	r := bufio.NewReader(nc)
	msg := make([]byte, 4+64)
	binary.BigEndian.PutUint32(msg, 64)
	reply := make([]byte, 4+64)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := nc.Write(msg); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(r, reply); err != nil {
			b.Fatal(err)
		}
	}
}

// TestEchoAllocations: a round trip of the TCP driver allocates the two
// messages' buffers, one on each side, and nothing else: the inline write
// makes no closure, a Receive that takes the free read role no channel,
// and its read no function (N104). Before, a round trip made ten
// allocations.
func TestEchoAllocations(t *testing.T) {
	if raceOn {
		t.Skip("the race detector allocates")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := echo(t, ctx, fastnet.Config{})
	defer c.Close()
	msg := make([]byte, 64)
	roundTrip := func() {
		if err := c.Send(ctx, 0, msg, true); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Receive(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for range 100 {
		roundTrip()
	}
	// The idle timers and the runtime allocate now and then; a tenth
	// of an allocation a round trip leaves room for them.
	if n := testing.AllocsPerRun(2000, roundTrip); n > 2.1 {
		t.Errorf("%.2f allocations a round trip, want 2 (the messages' buffers)", n)
	}
}
