package udpdriver

import (
	"context"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/internal/drivertest"
)

// echo is drivertest.Echo over this driver: a client connected to a
// server on loopback that echoes every message.
func echo(tb testing.TB, ctx context.Context, engine fastnet.Config) *Conn {
	return drivertest.Echo(tb, ctx, drivertest.Driver{
		Name: "udp",
		Listen: func(ctx context.Context, addr string, engine fastnet.Config, _ drivertest.ListenOptions) (*Listener, error) {
			return Listen(ctx, addr, Config{Engine: engine})
		},
		Dial: func(ctx context.Context, addr string, engine fastnet.Config) (*Conn, error) {
			return Dial(ctx, addr, Config{Engine: engine})
		},
	}, engine)
}

func TestEcho(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := echo(t, ctx, fastnet.Config{})
	if err := c.Send(ctx, 3, []byte("hello"), true); err != nil {
		t.Fatal(err)
	}
	m, err := c.Receive(ctx)
	if err != nil || string(m.Data) != "hello" || m.Channel != 3 {
		t.Fatalf("got %+v, %v", m, err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkEcho is W1 in one process: a 64-byte reliable message and its
// echo per iteration, over loopback. Its time is a round trip. Both sides
// start at a payload MTU of 1200 bytes with estimation off, as W1 runs
// once estimation is over: a connection starts at 32 bytes (D19), where
// a 64-byte message takes three packets.
func BenchmarkEcho(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := echo(b, ctx, fastnet.Config{InitialPayloadMTU: 1200, MTU: fastnet.MTUConfig{Disabled: true}})
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
