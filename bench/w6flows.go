package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fastnet-engine/fastnet/udpdriver"
)

// W6's flows: each is one connection that sends numbered messages of
// w6Spec.Size bytes, reliable and ordered on channel 0 (fastnet) or as
// records of a byte stream (TCP), for a fixed time; the receiver checks
// their order and counts the bytes delivered in order in buckets of
// w6Bucket, from the first message of any flow. When its time is up a
// flow sends an end marker with its count and waits, for at most
// w6Spec.Drain, for the receiver to confirm it had every message.

// w6Command is the hidden first argument that makes the binary play one
// side of W6; the second is a w6Spec in JSON.
const w6Command = "__fastnet_bench_w6"

// w6Bucket is the width of the receiver's time buckets.
const w6Bucket = 100 * time.Millisecond

// The systems of W6.
const (
	w6Fastnet  = "fastnet"
	w6TCPCubic = "tcp-cubic"
	w6TCPBBR   = "tcp-bbr"
	// w6FastnetUnreliable sends the messages unreliably: the receiver
	// counts those that arrive, any that come after a later one as out of
	// order, and the sender's queue drops what waits too long (N80).
	w6FastnetUnreliable = "fastnet-unreliable"
)

// w6IsFastnet reports whether system runs over Fastnet.
func w6IsFastnet(system string) bool {
	return system == w6Fastnet || system == w6FastnetUnreliable
}

// w6Spec is what a W6 child process runs.
type w6Spec struct {
	Role      string // "server" or "client"
	System    string // w6Fastnet, w6TCPCubic or w6TCPBBR
	Addr      string // server: where to listen; client: where to connect
	Flows     int
	Size      int           // bytes a message
	Duration  time.Duration // how long each flow sends, from the start of the first
	LateStart time.Duration // when the last flow starts, if more than one
	Drain     time.Duration // how long a flow waits for its last messages to arrive
}

// w6Header is the bytes of a message before its payload: the flow and the
// message's number; an end marker has the number ^0 and the count after.
const w6Header = 12

const w6End = ^uint64(0)

// w6ServerResult is what the receiving side reports.
type w6ServerResult struct {
	Flows []w6FlowIn
}

// w6FlowIn is one flow as the receiver saw it.
type w6FlowIn struct {
	Delivered  uint64   // messages in order
	OutOfOrder uint64   // messages whose number was not the next one
	Buckets    []uint64 // bytes delivered in order by w6Bucket since the first message of any flow
	First      int      // the bucket of the flow's first message
	Ended      bool     // the end marker came, with the count delivered
	Err        string   // how the connection ended, if not by the marker
}

// w6ClientResult is what the sending side reports.
type w6ClientResult struct {
	Flows []w6FlowOut
}

// w6FlowOut is one flow as the sender saw it.
type w6FlowOut struct {
	Sent      uint64          // messages sent
	Confirmed bool            // the receiver confirmed every message
	Err       string          // a connection error, if any
	RTT       []time.Duration // the sender's RTT estimate every w6Bucket while sending
}

// runW6Child is the W6 child process: it runs spec's role and writes
// "ready ADDR" (server) and then "result JSON" on out. A server ends when
// in is closed.
func runW6Child(specJSON string, in io.Reader, out io.Writer) error {
	var spec w6Spec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var res any
	switch spec.Role {
	case "server":
		srv, err := startW6Server(ctx, spec)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "ready %s\n", srv.addr)
		io.Copy(io.Discard, in)
		res = srv.stop()
	case "client":
		go func() {
			io.Copy(io.Discard, in)
			cancel()
		}()
		res = runW6Client(ctx, spec)
	default:
		return fmt.Errorf("unknown role %q", spec.Role)
	}
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "result %s\n", b)
	return err
}

// w6Server is the receiving side of W6.
type w6Server struct {
	spec   w6Spec
	addr   string
	close  func()
	wg     sync.WaitGroup
	start  atomic.Int64 // UnixNano of the first message; 0 before
	mu     sync.Mutex
	flows  []w6FlowIn
	closed bool
}

func startW6Server(ctx context.Context, spec w6Spec) (*w6Server, error) {
	s := &w6Server{spec: spec, flows: make([]w6FlowIn, spec.Flows)}
	for i := range s.flows {
		s.flows[i].First = -1
	}
	if w6IsFastnet(spec.System) {
		l, err := udpdriver.Listen(ctx, spec.Addr, udpdriver.Config{})
		if err != nil {
			return nil, err
		}
		s.addr = l.Addr().String()
		s.close = func() { l.Close() }
		s.wg.Go(func() {
			for {
				c, err := l.Accept(ctx)
				if err != nil {
					return
				}
				s.wg.Go(func() { s.serveFastnet(ctx, c) })
			}
		})
		return s, nil
	}
	ln, err := net.Listen("tcp", spec.Addr)
	if err != nil {
		return nil, err
	}
	s.addr = ln.Addr().String()
	var conns sync.Map
	s.close = func() {
		ln.Close()
		conns.Range(func(k, _ any) bool { k.(net.Conn).Close(); return true })
	}
	s.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Store(c, nil)
			s.wg.Go(func() { s.serveTCP(c) })
		}
	})
	return s, nil
}

// stop closes the server and returns what it saw.
func (s *w6Server) stop() w6ServerResult {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.close()
	s.wg.Wait()
	return w6ServerResult{Flows: s.flows}
}

// flowState is the receiver's state of one connection.
type flowState struct {
	s    *w6Server
	flow int // -1 until the first message
	next uint64
}

// take handles one message (or record); it returns a reply to send, if
// any: the confirmation of an end marker.
func (f *flowState) take(b []byte) ([]byte, error) {
	if len(b) < w6Header {
		return nil, fmt.Errorf("a message of %d bytes", len(b))
	}
	flow := int(binary.BigEndian.Uint32(b))
	seq := binary.BigEndian.Uint64(b[4:])
	s := f.s
	if flow < 0 || flow >= len(s.flows) || f.flow >= 0 && flow != f.flow {
		return nil, fmt.Errorf("a message of flow %d on the connection of flow %d", flow, f.flow)
	}
	now := time.Now().UnixNano()
	s.start.CompareAndSwap(0, now)
	bucket := int(time.Duration(now-s.start.Load()) / w6Bucket)
	s.mu.Lock()
	defer s.mu.Unlock()
	fl := &s.flows[flow]
	if f.flow < 0 {
		f.flow = flow
		fl.First = bucket
	}
	unreliable := s.spec.System == w6FastnetUnreliable
	if seq == w6End {
		if len(b) >= w6Header+8 && (unreliable || binary.BigEndian.Uint64(b[w6Header:]) == fl.Delivered) {
			fl.Ended = true
			return []byte("fin"), nil
		}
		return nil, nil
	}
	if seq != f.next && (!unreliable || seq < f.next) {
		fl.OutOfOrder++
	}
	f.next = seq + 1
	fl.Delivered++
	if bucket >= len(fl.Buckets) {
		fl.Buckets = append(fl.Buckets, make([]uint64, bucket+1-len(fl.Buckets))...)
	}
	fl.Buckets[bucket] += uint64(len(b))
	return nil, nil
}

// end records how a flow's connection ended, unless by its marker or by
// the server's own closing.
func (f *flowState) end(err error) {
	s := f.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if f.flow < 0 || s.closed || s.flows[f.flow].Ended || err == nil {
		return
	}
	if s.flows[f.flow].Err == "" {
		s.flows[f.flow].Err = err.Error()
	}
}

func (s *w6Server) serveFastnet(ctx context.Context, c *udpdriver.Conn) {
	defer c.Close()
	f := &flowState{s: s, flow: -1}
	for {
		m, err := c.Receive(ctx)
		if err != nil {
			f.end(err)
			return
		}
		reply, err := f.take(m.Data)
		if err != nil {
			f.end(err)
			return
		}
		if reply != nil {
			c.Send(ctx, 0, reply, true)
		}
	}
}

func (s *w6Server) serveTCP(c net.Conn) {
	defer c.Close()
	f := &flowState{s: s, flow: -1}
	r := bufio.NewReaderSize(c, 1<<16)
	buf := make([]byte, s.spec.Size)
	for {
		if _, err := io.ReadFull(r, buf[:w6Header]); err != nil {
			if !errors.Is(err, io.EOF) {
				f.end(err)
			}
			return
		}
		n := s.spec.Size
		if binary.BigEndian.Uint64(buf[4:]) == w6End {
			n = w6Header + 8
		}
		if _, err := io.ReadFull(r, buf[w6Header:n]); err != nil {
			f.end(err)
			return
		}
		reply, err := f.take(buf[:n])
		if err != nil {
			f.end(err)
			return
		}
		if reply != nil {
			c.Write(reply)
		}
	}
}

// runW6Client runs spec.Flows flows to spec.Addr, the last starting at
// spec.LateStart when there are several, and each sending until
// spec.Duration after the first started.
func runW6Client(ctx context.Context, spec w6Spec) w6ClientResult {
	start := time.Now()
	stop := start.Add(spec.Duration)
	res := w6ClientResult{Flows: make([]w6FlowOut, spec.Flows)}
	var wg sync.WaitGroup
	for i := range spec.Flows {
		at := start
		if i == spec.Flows-1 && spec.Flows > 1 {
			at = start.Add(spec.LateStart)
		}
		wg.Go(func() {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Until(at)):
			}
			fl := &res.Flows[i]
			var err error
			if w6IsFastnet(spec.System) {
				err = fastnetFlow(ctx, spec, i, stop, fl)
			} else {
				err = tcpFlow(ctx, spec, i, stop, fl)
			}
			if err != nil {
				fl.Err = err.Error()
			}
		})
	}
	wg.Wait()
	return res
}

// message fills b with flow's message number seq.
func message(b []byte, flow int, seq uint64) {
	binary.BigEndian.PutUint32(b, uint32(flow))
	binary.BigEndian.PutUint64(b[4:], seq)
}

// endMarker returns flow's end marker after sent messages.
func endMarker(flow int, sent uint64) []byte {
	b := make([]byte, w6Header+8)
	message(b, flow, w6End)
	binary.BigEndian.PutUint64(b[w6Header:], sent)
	return b
}

// sampleRTT appends rtt() to out every w6Bucket until done is closed.
func sampleRTT(done <-chan struct{}, rtt func() time.Duration, out *[]time.Duration) {
	t := time.NewTicker(w6Bucket)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			if d := rtt(); d > 0 {
				*out = append(*out, d)
			}
		}
	}
}

func fastnetFlow(ctx context.Context, spec w6Spec, flow int, stop time.Time, fl *w6FlowOut) error {
	dialCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	c, err := udpdriver.Dial(dialCtx, spec.Addr, udpdriver.Config{})
	cancel()
	if err != nil {
		return err
	}
	defer c.Close()
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		sampleRTT(done, func() time.Duration { return c.Stats().RTT }, &fl.RTT)
		close(sampled)
	}()
	sendCtx, cancel := context.WithDeadline(ctx, stop)
	msg := make([]byte, spec.Size)
	reliable := spec.System != w6FastnetUnreliable
	for {
		message(msg, flow, fl.Sent)
		if err = c.Send(sendCtx, 0, msg, reliable); err != nil {
			break
		}
		fl.Sent++
	}
	cancel()
	close(done)
	<-sampled
	if sendCtx.Err() == nil || ctx.Err() != nil {
		return err // the connection ended, or the run was stopped
	}
	drainCtx, cancel := context.WithTimeout(ctx, spec.Drain)
	defer cancel()
	if err := c.Send(drainCtx, 0, endMarker(flow, fl.Sent), true); err != nil {
		return drainError(err, spec.Drain)
	}
	for {
		m, err := c.Receive(drainCtx)
		if err != nil {
			return drainError(err, spec.Drain)
		}
		if string(m.Data) == "fin" {
			fl.Confirmed = true
			return nil
		}
	}
}

// drainError says why a flow's last messages were not confirmed.
func drainError(err error, drain time.Duration) error {
	if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
		return fmt.Errorf("not every message arrived within %v of the end", drain)
	}
	return err
}

func tcpFlow(ctx context.Context, spec w6Spec, flow int, stop time.Time, fl *w6FlowOut) error {
	cc := "cubic"
	if spec.System == w6TCPBBR {
		cc = "bbr"
	}
	var ccErr error
	d := net.Dialer{Timeout: 10 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
		rc.Control(func(fd uintptr) {
			ccErr = setCongestion(fd, cc)
		})
		return ccErr
	}}
	nc, err := d.DialContext(ctx, "tcp", spec.Addr)
	if err != nil {
		return err
	}
	c := nc.(*net.TCPConn)
	defer c.Close()
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		sampleRTT(done, func() time.Duration {
			var rtt time.Duration
			rc.Control(func(fd uintptr) { rtt = tcpRTT(fd) })
			return rtt
		}, &fl.RTT)
		close(sampled)
	}()
	stopWatch := context.AfterFunc(ctx, func() { c.Close() })
	defer stopWatch()
	c.SetWriteDeadline(stop)
	msg := make([]byte, spec.Size)
	for {
		message(msg, flow, fl.Sent)
		n, err := c.Write(msg)
		if err == nil {
			fl.Sent++
			continue
		}
		close(done)
		<-sampled
		if !isTimeout(err) {
			return err
		}
		// Time is up; finish the record begun, then the marker.
		c.SetWriteDeadline(time.Now().Add(spec.Drain))
		if n > 0 {
			if _, err := c.Write(msg[n:]); err != nil {
				return drainError(err, spec.Drain)
			}
			fl.Sent++
		}
		break
	}
	if _, err := c.Write(endMarker(flow, fl.Sent)); err != nil {
		return drainError(err, spec.Drain)
	}
	c.SetReadDeadline(time.Now().Add(spec.Drain))
	var fin [3]byte
	if _, err := io.ReadFull(c, fin[:]); err != nil {
		return drainError(err, spec.Drain)
	}
	fl.Confirmed = string(fin[:]) == "fin"
	return nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
