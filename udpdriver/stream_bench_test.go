package udpdriver

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/fastnet-engine/fastnet/fastnet"
)

// BenchmarkStream64 is W2 in one process: b.N reliable 64-byte messages
// on one channel over loopback, as fast as Send takes them, and the
// server checks their order. Its time is a message's, both sides' work
// and the system calls included; its allocations are mostly the
// delivered messages' bytes, which the application owns. Both sides
// start at a payload MTU of 9000 bytes with estimation off, as W2 runs
// once estimation is over on loopback.
func BenchmarkStream64(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := Config{Engine: fastnet.Config{InitialPayloadMTU: 9000, MTU: fastnet.MTUConfig{Disabled: true}}}
	l, err := Listen(ctx, "127.0.0.1:0", cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	done := make(chan error, 1)
	n := b.N
	go func() {
		c, err := l.Accept(ctx)
		if err != nil {
			done <- err
			return
		}
		for i := range n {
			m, err := c.Receive(ctx)
			if err != nil {
				done <- err
				return
			}
			if len(m.Data) != 64 || binary.BigEndian.Uint64(m.Data) != uint64(i) {
				done <- errOrder
				return
			}
		}
		done <- nil
	}()
	c, err := Dial(ctx, l.Addr().String(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	msg := make([]byte, 64)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		binary.BigEndian.PutUint64(msg, uint64(i))
		if err := c.Send(ctx, 0, msg, true); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

// errOrder is BenchmarkStream64's server finding a message out of order.
var errOrder = errors.New("a message out of order or damaged")
