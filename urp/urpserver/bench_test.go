package urpserver_test

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/urp"
	"github.com/fastnet-engine/fastnet/urp/internal/urptest"
	"github.com/fastnet-engine/fastnet/urp/urpserver"
)

// The relay against a direct TCP connection, in the same run, on the
// workloads of docs/workloads.md that apply to it: W1 (the round trip of a
// 64-byte message), W2 and W3 (64-byte and 1 KiB messages one way, as fast
// as they go). Both sides speak from plain sockets with buffered writes,
// so that what differs is the relay: through it, A sends U2R_SEND and B
// reads R2U_TEXT; directly, A writes the R2U_TEXT bytes B would read.
//
//	go test -run '^$' -bench . -benchtime 2s ./urp/urpserver
func BenchmarkRelay(b *testing.B) {
	urptest.RunWorkloads(b, []string{"relay", "direct"}, func(b *testing.B, w urptest.Workload, path string) {
		var p *pipe
		if path == "relay" {
			p = relayPipe(b)
		} else {
			p = directPipe(b)
		}
		if w.Echo {
			benchEcho(b, p, w.Size)
		} else {
			benchStream(b, p, w.Size)
		}
	})
}

// pipe is a path from A to B and back: each side writes what its peer
// reads as R2U_TEXT.
type pipe struct {
	a, b     net.Conn
	out      urp.ID // what a side writes: U2R_SEND through the relay, R2U_TEXT directly
	toA, toB uint32 // the UID each side's messages go to (through the relay)
}

func relayPipe(b *testing.B) *pipe {
	s := urptest.Relay(b, urpserver.Config{Relay: urp.Config{MaxOutput: 64 << 20}})
	a, bb := dialRaw(b, s), dialRaw(b, s)
	a.send(urp.Packet{ID: urp.U2RMake})
	made := a.next()
	a.next()
	bb.join2(made.GID)
	a.next() // R2U_JOIN
	return &pipe{a: a.nc, b: bb.nc, out: urp.U2RSend, toA: a.uid, toB: bb.uid}
}

// join2 joins gid without a host client to check with.
func (r *raw) join2(gid uint32) {
	r.send(urp.Packet{ID: urp.U2RJoin, GID: gid})
	r.next()
	r.next()
}

func directPipe(b *testing.B) *pipe {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	bb, err := ln.Accept()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { a.Close(); bb.Close() })
	return &pipe{a: a, b: bb, out: urp.R2UText}
}

// reader reads R2U_TEXT messages from a socket.
type reader struct {
	nc  net.Conn
	dec *urp.Decoder
	buf []byte
}

func newReader(nc net.Conn) *reader {
	return &reader{nc: nc, dec: urp.NewDecoder(urp.ToUser, 1<<20), buf: make([]byte, 64<<10)}
}

// next returns the next message's length.
func (r *reader) next() (int, error) {
	for {
		p, ok, err := r.dec.Next()
		if err != nil {
			return 0, err
		}
		if ok {
			return len(p.Data), nil
		}
		n, err := r.nc.Read(r.buf)
		if err != nil {
			return 0, err
		}
		r.dec.Feed(r.buf[:n])
	}
}

// benchEcho: A sends a message to B, B sends it back, b.N times (W1).
func benchEcho(b *testing.B, p *pipe, size int) {
	msg := make([]byte, size)
	done := make(chan error, 1)
	go func() {
		r := newReader(p.b)
		var out []byte
		for {
			n, err := r.next()
			if err != nil {
				done <- nil
				return
			}
			out = urp.AppendMessage(out[:0], p.out, p.toA, msg[:n])
			if _, err := p.b.Write(out); err != nil {
				done <- err
				return
			}
		}
	}()
	r := newReader(p.a)
	out := urp.AppendMessage(nil, p.out, p.toB, msg)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		if _, err := p.a.Write(out); err != nil {
			b.Fatal(err)
		}
		if _, err := r.next(); err != nil {
			b.Fatal(err)
		}
	}
	el := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(el.Microseconds())/float64(b.N), "µs/rtt")
	p.a.Close()
	p.b.Close()
	<-done
}

// benchStream: A sends b.N messages to B as fast as it can (W2, W3).
func benchStream(b *testing.B, p *pipe, size int) {
	msg := make([]byte, size)
	got := make(chan error, 1)
	n := b.N
	go func() {
		r := newReader(p.b)
		for range n {
			if _, err := r.next(); err != nil {
				got <- err
				return
			}
		}
		got <- nil
	}()
	w := bufio.NewWriterSize(p.a, 64<<10)
	out := urp.AppendMessage(nil, p.out, p.toB, msg)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range n {
		if _, err := w.Write(out); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := <-got; err != nil && err != io.EOF {
		b.Fatal(err)
	}
	el := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(n)/el.Seconds(), "msgs/s")
}
