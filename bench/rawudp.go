package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"golang.org/x/net/ipv4"
)

// rawUDP is the baseline: the standard library's UDP socket, one datagram
// per message, with one system call per datagram (batch 1) or batches of
// datagrams per recvmmsg and sendmmsg call (x/net ipv4 ReadBatch and
// WriteBatch). It does W1 (plain calls only: a round trip is one datagram
// each way), W4 and W4K.
type rawUDP struct{ batch int }

func (s rawUDP) Name() string {
	if s.batch <= 1 {
		return "raw-udp-plain"
	}
	return fmt.Sprintf("raw-udp-batch%d", s.batch)
}

func (s rawUDP) Supports(w Workload) bool {
	return isRate(w) || (w.Name == "W1" && s.batch <= 1)
}

func (s rawUDP) Server(ctx context.Context, w Workload, o Options, ready func(string)) (Metrics, error) {
	uc, err := listenUDP(o)
	if err != nil {
		return nil, err
	}
	defer uc.Close()
	ready(uc.LocalAddr().String())
	if w.Name == "W1" {
		return echo(ctx, uc, func(b []byte) (int, netip.AddrPort, error) { return uc.ReadFromUDPAddrPort(b) },
			func(b []byte, to netip.AddrPort) error { _, err := uc.WriteToUDPAddrPort(b, to); return err })
	}
	if s.batch <= 1 {
		buf := make([]byte, 2048)
		return countUntilSilence(ctx, w, uc, func() (int, error) {
			_, _, err := uc.ReadFromUDPAddrPort(buf)
			if err != nil {
				return 0, err
			}
			return 1, nil
		})
	}
	pc := ipv4.NewPacketConn(uc)
	ms := make([]ipv4.Message, s.batch)
	for i := range ms {
		ms[i].Buffers = [][]byte{make([]byte, 2048)}
	}
	return countUntilSilence(ctx, w, uc, func() (int, error) { return pc.ReadBatch(ms, 0) })
}

func (s rawUDP) Client(ctx context.Context, w Workload, o Options, addr string) (Metrics, error) {
	uc, to, err := clientUDP(o, addr)
	if err != nil {
		return nil, err
	}
	defer uc.Close()
	if w.Name == "W1" {
		return pingPong(ctx, w, uc,
			func(b []byte) (int, error) { n, _, err := uc.ReadFromUDPAddrPort(b); return n, err },
			func(b []byte) error { _, err := uc.WriteToUDPAddrPort(b, to); return err })
	}
	payload := make([]byte, w.Size)
	start := time.Now()
	if s.batch <= 1 {
		for i := range w.Messages {
			putSeq(payload, i)
			if _, err := uc.WriteToUDPAddrPort(payload, to); err != nil {
				return nil, err
			}
		}
	} else {
		dst := net.UDPAddrFromAddrPort(to)
		ms := make([]ipv4.Message, s.batch)
		for i := range ms {
			ms[i].Buffers = [][]byte{make([]byte, w.Size)}
			ms[i].Addr = dst
		}
		pc := ipv4.NewPacketConn(uc)
		for sent := 0; sent < w.Messages; {
			k := min(s.batch, w.Messages-sent)
			for i := range k {
				putSeq(ms[i].Buffers[0], sent+i)
			}
			for done := 0; done < k; {
				n, err := pc.WriteBatch(ms[done:k], 0)
				if err != nil {
					return nil, err
				}
				done += n
			}
			sent += k
		}
	}
	return Metrics{Sent: float64(w.Messages), SendSeconds: time.Since(start).Seconds()}, nil
}

// listenUDP opens a UDP socket on 127.0.0.1 with the buffers o asks for.
func listenUDP(o Options) (*net.UDPConn, error) {
	uc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, err
	}
	if o.SocketBuffer > 0 {
		uc.SetReadBuffer(o.SocketBuffer)
		uc.SetWriteBuffer(o.SocketBuffer)
	}
	return uc, nil
}

// clientUDP opens a client's socket (listenUDP) and parses the server's
// address.
func clientUDP(o Options, addr string) (*net.UDPConn, netip.AddrPort, error) {
	to, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil, to, err
	}
	uc, err := listenUDP(o)
	return uc, to, err
}

// deadliner is the part of a socket the helpers below use to stop a read.
type deadliner interface{ SetReadDeadline(time.Time) error }

// echo sends every datagram back to its sender until ctx is done (W1
// server).
func echo(ctx context.Context, d deadliner, read func([]byte) (int, netip.AddrPort, error), write func([]byte, netip.AddrPort) error) (Metrics, error) {
	stop := context.AfterFunc(ctx, func() { d.SetReadDeadline(time.Now()) })
	defer stop()
	buf := make([]byte, 2048)
	echoed := 0
	for {
		n, from, err := read(buf)
		if err != nil {
			if ctx.Err() != nil && errors.Is(err, os.ErrDeadlineExceeded) {
				return Metrics{"echoed": float64(echoed)}, nil
			}
			return nil, err
		}
		if err := write(buf[:n], from); err != nil {
			return nil, err
		}
		echoed++
	}
}

// pingPong is the W1 client: Warmup then Messages round trips of one
// datagram of w.Size bytes, each numbered so that a late echo of a round
// trip given up on is not mistaken for the current one. A round trip whose
// echo has not come back after a second is sent again (as a new one).
func pingPong(ctx context.Context, w Workload, d deadliner, read func([]byte) (int, error), write func([]byte) error) (Metrics, error) {
	out := make([]byte, w.Size)
	in := make([]byte, 2048)
	rtts := make([]time.Duration, 0, w.Messages)
	lost := 0
	for seq := uint64(1); len(rtts) < w.Messages; seq++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		binary.BigEndian.PutUint64(out, seq)
		d.SetReadDeadline(time.Now().Add(time.Second))
		start := time.Now()
		if err := write(out); err != nil {
			return nil, err
		}
		for {
			n, err := read(in)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				lost++
				break
			}
			if err != nil {
				return nil, err
			}
			if n == w.Size && binary.BigEndian.Uint64(in) == seq {
				if seq > uint64(w.Warmup) {
					rtts = append(rtts, time.Since(start))
				}
				break
			}
		}
	}
	slices.Sort(rtts)
	us := func(p float64) float64 { return float64(percentile(rtts, p)) / float64(time.Microsecond) }
	return Metrics{P50: us(50), P99: us(99), "lost": float64(lost)}, nil
}

// percentile returns the nearest-rank p-th percentile of sorted d.
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := int(float64(len(d))*p/100+0.999999) - 1
	return d[min(max(i, 0), len(d)-1)]
}

// countUntilSilence is the W4 server: it counts datagrams, read by read
// (which returns how many it read), from the first one until none has come
// for w.Silence, and reports the count and the time from the first receipt
// to the last. If ctx ends before any datagram arrives, it reports none.
func countUntilSilence(ctx context.Context, w Workload, d deadliner, read func() (int, error)) (Metrics, error) {
	var (
		count atomic.Int64
		first time.Time
		last  atomic.Int64 // time of the last receipt, ns since first
	)
	watchDone := make(chan struct{})
	defer close(watchDone)
	go func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-watchDone:
				return
			case <-tick.C:
			}
			if n := count.Load(); n == 0 {
				if ctx.Err() != nil {
					// The client finished and nothing came: give up after
					// the silence.
					time.Sleep(w.Silence)
					if count.Load() == 0 {
						d.SetReadDeadline(time.Now())
						return
					}
				}
				continue
			}
			if time.Since(first.Add(time.Duration(last.Load()))) >= w.Silence {
				d.SetReadDeadline(time.Now())
				return
			}
		}
	}()
	for {
		n, err := read()
		now := time.Now()
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				break
			}
			return nil, err
		}
		if count.Load() == 0 {
			first = now
		}
		last.Store(int64(now.Sub(first)))
		count.Add(int64(n))
	}
	return Metrics{
		Received:       float64(count.Load()),
		ReceiveSeconds: time.Duration(last.Load()).Seconds(),
	}, nil
}

// putSeq numbers a W4 datagram, as a real sender would have to.
func putSeq(b []byte, i int) {
	if len(b) >= 8 {
		binary.BigEndian.PutUint64(b, uint64(i))
	}
}
