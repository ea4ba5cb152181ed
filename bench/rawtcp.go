package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"time"
)

// rawTCP is the baseline of the TCP driver: one net.TCPConn (Nagle off, Go's
// default), each message a 4-byte big-endian length and its bytes, written
// through a 64 KiB buffer that is flushed after each W1 message and, in W2
// and W3, only when full and after the last message (the batching a
// stream allows and a careful application does). W1-W3.
type rawTCP struct{}

func (rawTCP) Name() string { return "raw-tcp" }

func (rawTCP) Supports(w Workload) bool {
	return w.Name == "W1" || w.Name == "W2" || w.Name == "W3"
}

// tcpStream frames messages over one TCP connection.
type tcpStream struct {
	c   *net.TCPConn
	r   *bufio.Reader
	w   *bufio.Writer
	hdr [4]byte
	buf []byte
}

func newTCPStream(c *net.TCPConn) *tcpStream {
	return &tcpStream{c: c, r: bufio.NewReaderSize(c, 64<<10), w: bufio.NewWriterSize(c, 64<<10)}
}

func (s *tcpStream) send(b []byte) error {
	binary.BigEndian.PutUint32(s.hdr[:], uint32(len(b)))
	if _, err := s.w.Write(s.hdr[:]); err != nil {
		return err
	}
	_, err := s.w.Write(b)
	return err
}

// maxTCPMessage bounds the length a received header may announce.
const maxTCPMessage = 1 << 20

// receive returns the next message, valid until the next call.
func (s *tcpStream) receive() ([]byte, error) {
	if _, err := io.ReadFull(s.r, s.hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(s.hdr[:])
	if n > maxTCPMessage {
		return nil, fmt.Errorf("a message of %d bytes announced (at most %d)", n, maxTCPMessage)
	}
	if cap(s.buf) < int(n) {
		s.buf = make([]byte, n)
	}
	s.buf = s.buf[:n]
	_, err := io.ReadFull(s.r, s.buf)
	return s.buf, err
}

func (rawTCP) Server(ctx context.Context, w Workload, o Options, ready func(string)) (Metrics, error) {
	l, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, err
	}
	defer l.Close()
	ready(l.Addr().String())
	stopAccept := context.AfterFunc(ctx, func() { l.SetDeadline(time.Now()) })
	c, err := l.AcceptTCP()
	stopAccept()
	if err != nil {
		return nil, fmt.Errorf("accept: %w", err)
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.SetReadDeadline(time.Now()) })
	defer stop()
	s := newTCPStream(c)
	// The client closes once it has its last echo, which may come before
	// ctx ends.
	finished := func(err error) bool {
		return errors.Is(err, io.EOF) || ctx.Err() != nil && errors.Is(err, os.ErrDeadlineExceeded)
	}
	if w.Name == "W1" {
		echoed := 0
		for {
			b, err := s.receive()
			if finished(err) {
				return Metrics{"echoed": float64(echoed)}, nil
			}
			if err != nil {
				return nil, err
			}
			if err := s.send(b); err != nil {
				return nil, err
			}
			if err := s.w.Flush(); err != nil {
				return nil, err
			}
			echoed++
		}
	}
	// W2, W3: every message, in order, then tell the client.
	var first time.Time
	for i := range w.Messages {
		b, err := s.receive()
		if err != nil {
			return nil, fmt.Errorf("after %d of %d messages: %w", i, w.Messages, err)
		}
		if i == 0 {
			first = time.Now()
		}
		if len(b) != w.Size || binary.BigEndian.Uint64(b) != uint64(i) {
			return nil, fmt.Errorf("message %d: %d bytes: out of order or damaged", i, len(b))
		}
	}
	took := time.Since(first)
	if err := s.send(doneMessage); err != nil {
		return nil, err
	}
	if err := s.w.Flush(); err != nil {
		return nil, err
	}
	<-ctx.Done()
	return Metrics{"server_rate": float64(w.Messages-1) / took.Seconds()}, nil
}

func (rawTCP) Client(ctx context.Context, w Workload, o Options, addr string) (Metrics, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp4", addr)
	if err != nil {
		return nil, err
	}
	c := nc.(*net.TCPConn)
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
	defer stop()
	s := newTCPStream(c)
	payload := make([]byte, w.Size)
	if w.Name == "W1" {
		rtts := make([]time.Duration, 0, w.Messages)
		for i := range w.Warmup + w.Messages {
			binary.BigEndian.PutUint64(payload, uint64(i))
			start := time.Now()
			if err := s.send(payload); err != nil {
				return nil, err
			}
			if err := s.w.Flush(); err != nil {
				return nil, err
			}
			b, err := s.receive()
			if err != nil {
				return nil, fmt.Errorf("round trip %d: %w", i, err)
			}
			if len(b) != w.Size || binary.BigEndian.Uint64(b) != uint64(i) {
				return nil, fmt.Errorf("round trip %d: wrong echo", i)
			}
			if i >= w.Warmup {
				rtts = append(rtts, time.Since(start))
			}
		}
		slices.Sort(rtts)
		us := func(p float64) float64 { return float64(percentile(rtts, p)) / float64(time.Microsecond) }
		return Metrics{P50: us(50), P99: us(99)}, nil
	}
	start := time.Now()
	for i := range w.Messages {
		binary.BigEndian.PutUint64(payload, uint64(i))
		if err := s.send(payload); err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
	}
	if err := s.w.Flush(); err != nil {
		return nil, err
	}
	b, err := s.receive()
	if err != nil {
		return nil, fmt.Errorf("waiting for the server to receive everything: %w", err)
	}
	if string(b) != string(doneMessage) {
		return nil, fmt.Errorf("the server said %q", b)
	}
	return Metrics{Rate: float64(w.Messages) / time.Since(start).Seconds()}, nil
}
