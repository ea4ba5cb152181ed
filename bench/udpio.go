package main

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/fastnet-engine/fastnet/internal/udpio"
)

// udpioSystem is raw UDP through the project's socket layer
// (internal/udpio): pooled 64 KiB buffers, 8 MiB socket buffers unless
// -sockbuf says otherwise, and batches of up to batch datagrams per system
// call. It shows what the layer under the UDP driver costs next to the
// bare socket.
type udpioSystem struct{ batch int }

func (s udpioSystem) Name() string { return fmt.Sprintf("udpio-batch%d", s.batch) }

func (s udpioSystem) Supports(w Workload) bool { return w.Name == "W1" || isRate(w) }

func (s udpioSystem) listen(ctx context.Context, o Options) (*udpio.Conn, error) {
	return udpio.Listen(ctx, "udp4", "127.0.0.1:0", udpio.Options{SocketBuffer: o.SocketBuffer})
}

func (s udpioSystem) Server(ctx context.Context, w Workload, o Options, ready func(string)) (Metrics, error) {
	c, err := s.listen(ctx, o)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	ready(c.LocalAddr().String())
	msgs := make([]udpio.Message, s.batch)
	for i := range msgs {
		msgs[i].Buf = udpio.GetBuffer()
	}
	if w.Name == "W1" {
		one := msgs[:1]
		return echo(ctx, c,
			func(b []byte) (int, netip.AddrPort, error) {
				one[0].Buf = b
				_, err := c.ReadBatch(one)
				return one[0].N, one[0].Addr, err
			},
			func(b []byte, to netip.AddrPort) error {
				_, err := c.WriteBatch([]udpio.Message{{Buf: b, Addr: to}})
				return err
			})
	}
	return countUntilSilence(ctx, w, c, func() (int, error) { return c.ReadBatch(msgs) })
}

func (s udpioSystem) Client(ctx context.Context, w Workload, o Options, addr string) (Metrics, error) {
	to, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil, err
	}
	c, err := s.listen(ctx, o)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if w.Name == "W1" {
		in := []udpio.Message{{}}
		out := []udpio.Message{{Addr: to}}
		return pingPong(ctx, w, c,
			func(b []byte) (int, error) {
				in[0].Buf = b
				_, err := c.ReadBatch(in)
				return in[0].N, err
			},
			func(b []byte) error {
				out[0].Buf = b
				_, err := c.WriteBatch(out)
				return err
			})
	}
	msgs := make([]udpio.Message, s.batch)
	for i := range msgs {
		msgs[i] = udpio.Message{Buf: make([]byte, w.Size), Addr: to}
	}
	start := time.Now()
	for sent := 0; sent < w.Messages; {
		k := min(s.batch, w.Messages-sent)
		for i := range k {
			putSeq(msgs[i].Buf, sent+i)
		}
		if _, err := c.WriteBatch(msgs[:k]); err != nil {
			return nil, err
		}
		sent += k
	}
	return Metrics{Sent: float64(w.Messages), SendSeconds: time.Since(start).Seconds()}, nil
}
