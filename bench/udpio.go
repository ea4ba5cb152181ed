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
// -sockbuf says otherwise, batches of up to batch datagrams per system
// call, and segmentation offload where the kernel has it unless
// -no-offload. It shows what the layer under the UDP driver costs next to the
// bare socket.
//
// With acked set it runs W1 only, as raw-udp-acked does: each side writes,
// with every message, a 9-byte datagram standing for the ack of the message
// it received, in the same WriteBatch; with offload the two leave as one
// buffer, as an echo's reply and its acks do in fastnet-udp. The floor of
// Fastnet 1.0's four datagrams per round trip through this socket layer.
type udpioSystem struct {
	batch int
	acked bool
}

func (s udpioSystem) Name() string {
	if s.acked {
		return "udpio-acked"
	}
	return fmt.Sprintf("udpio-batch%d", s.batch)
}

func (s udpioSystem) Supports(w Workload) bool {
	return w.Name == "W1" || (!s.acked && isRate(w))
}

// readOne reads into b until a datagram that is not an ack (in acked mode)
// arrives, and returns it moved to the start of b.
func (s udpioSystem) readOne(c *udpio.Conn) func([]byte) (int, netip.AddrPort, error) {
	one := []udpio.Message{{}}
	return func(b []byte) (int, netip.AddrPort, error) {
		for {
			one[0].Buf = b
			if _, err := c.ReadBatch(one); err != nil {
				return 0, netip.AddrPort{}, err
			}
			for d := range one[0].Datagrams() {
				if !s.acked || len(d) != ackSize {
					return copy(b, d), one[0].Addr, nil
				}
			}
		}
	}
}

// writeOne writes b to to, followed in acked mode by an ack.
func (s udpioSystem) writeOne(c *udpio.Conn) func([]byte, netip.AddrPort) error {
	out := []udpio.Message{{}, {Buf: make([]byte, ackSize)}}
	if !s.acked {
		out = out[:1]
	}
	return func(b []byte, to netip.AddrPort) error {
		out[0].Buf = b
		for i := range out {
			out[i].Addr = to
		}
		_, err := c.WriteBatch(out)
		return err
	}
}

func (s udpioSystem) listen(ctx context.Context, o Options) (*udpio.Conn, error) {
	return udpio.Listen(ctx, "udp4", "127.0.0.1:0", udpio.Options{SocketBuffer: o.SocketBuffer, NoOffload: o.NoOffload})
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
		if s.acked && w.Size == ackSize {
			return nil, fmt.Errorf("%s: a message of %d bytes is taken for an ack", s.Name(), w.Size)
		}
		return echo(ctx, c, s.readOne(c), s.writeOne(c))
	}
	return countUntilSilence(ctx, w, c, func() (int, error) {
		n, err := c.ReadBatch(msgs)
		k := 0
		for i := range n {
			for range msgs[i].Datagrams() {
				k++
			}
		}
		return k, err
	})
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
		read, write := s.readOne(c), s.writeOne(c)
		return pingPong(ctx, w, c,
			func(b []byte) (int, error) { n, _, err := read(b); return n, err },
			func(b []byte) error { return write(b, to) })
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
