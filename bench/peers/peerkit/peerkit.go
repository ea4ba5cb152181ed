// Package peerkit is what the peer libraries' benchmark binaries share: the
// bench command's child protocol, for both roles, and the workloads of
// docs/workloads.md (W1-W4) written once over a message connection, so
// that each peer module only adapts its library to [Conn].
//
// It depends on the standard library only, and lives in a module of its
// own beside the peer modules (bench/peers/*), which reach it through a
// replace directive; neither the engine's module nor the bench module
// requires it.
//
// The protocol: the binary started as
//
//	BINARY __fastnet_bench_server SPEC
//
// listens on 127.0.0.1, writes "ready ADDR" on stdout, serves one run, and
// once its stdin is closed (the client has finished) writes "result JSON"
// with its metrics; started as
//
//	BINARY __fastnet_bench_client SPEC ADDR
//
// it runs the client's side against ADDR and writes "result JSON". SPEC is
// the bench command's JSON: the system's name, the workload and options.
package peerkit

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync/atomic"
	"time"
)

// The hidden first arguments of the two roles.
const (
	ServerCommand = "__fastnet_bench_server"
	ClientCommand = "__fastnet_bench_client"
)

// Workload is the part of the bench command's workload the peers use; it
// arrives as JSON, and fields it does not know are ignored.
type Workload struct {
	// Name is W1, W2, W3 or W4.
	Name string
	// Warmup is the number of unmeasured round trips first (W1).
	Warmup int
	// Messages is the number of measured messages (W1: round trips).
	Messages int
	// Size is the length of each message in bytes.
	Size int
	// Silence ends W4: the server stops counting after this long without a
	// message.
	Silence time.Duration
	// WarmUp is the bench command's bound on a connection's settling,
	// unused here: it is declared so that JSON, which matches names
	// regardless of case, does not put it in Warmup.
	WarmUp time.Duration
}

// Metrics are one side's measurements, by the names the bench command
// knows.
type Metrics map[string]float64

// The metric names (bench/harness.go).
const (
	P50            = "p50_us"
	P99            = "p99_us"
	Rate           = "rate"
	Sent           = "sent"
	SendSeconds    = "send_s"
	Received       = "received"
	ReceiveSeconds = "recv_s"
)

// Spec is the bench command's description of a run.
type Spec struct {
	System   string
	Workload Workload
}

// ErrInterrupted is what Receive returns once Interrupt has been called.
var ErrInterrupted = errors.New("peerkit: receive interrupted")

// Conn is one connection of a peer library, used by one goroutine at a
// time except for Interrupt.
type Conn interface {
	// Send queues one message, reliable and ordered or unreliable. b may
	// be reused once Send returns.
	Send(b []byte, reliable bool) error
	// Flush sends what Send queued without waiting for more.
	Flush() error
	// Receive blocks until a message arrives and returns it (valid until
	// the next Receive) and whether it came reliably; after Interrupt it
	// returns ErrInterrupted, and io.EOF once the other side has closed
	// the connection, where the library says so.
	Receive() (b []byte, reliable bool, err error)
	// Interrupt makes a blocked Receive, and every later one, return
	// ErrInterrupted. It may be called from any goroutine.
	Interrupt()
	// Close ends the connection.
	Close() error
}

// Peer is a library under test.
type Peer interface {
	// Supports reports whether the library runs the workload (W4 needs
	// unreliable messages).
	Supports(w Workload) bool
	// Listen starts a server on 127.0.0.1 for workload w and returns its
	// address and a function that accepts one connection.
	Listen(ctx context.Context, w Workload) (addr string, accept func(context.Context) (Conn, error), closer io.Closer, err error)
	// Dial connects to a server for workload w.
	Dial(ctx context.Context, addr string, w Workload) (Conn, error)
}

// Main is a peer binary's main function: it plays the role its arguments
// name and exits.
func Main(p Peer) {
	if err := run(p, os.Args[1:], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "peer:", err)
		os.Exit(1)
	}
}

func run(p Peer, args []string, stdin io.Reader, stdout io.Writer) error {
	usage := fmt.Errorf("usage: %s SPEC | %s SPEC ADDR (started by the bench command)", ServerCommand, ClientCommand)
	if len(args) < 2 {
		return usage
	}
	var spec Spec
	if err := json.Unmarshal([]byte(args[1]), &spec); err != nil {
		return fmt.Errorf("spec: %w", err)
	}
	if err := check(p, spec.Workload); err != nil {
		return err
	}
	switch {
	case args[0] == ServerCommand && len(args) == 2:
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			io.Copy(io.Discard, stdin)
			cancel()
		}()
		m, err := Server(ctx, p, spec.Workload, func(addr string) { fmt.Fprintf(stdout, "ready %s\n", addr) })
		if err != nil {
			return err
		}
		return writeResult(stdout, m)
	case args[0] == ClientCommand && len(args) == 3:
		m, err := Client(context.Background(), p, spec.Workload, args[2])
		if err != nil {
			return err
		}
		return writeResult(stdout, m)
	}
	return usage
}

// check refuses a workload the peer cannot run or whose counts make no
// sense.
func check(p Peer, w Workload) error {
	switch {
	case !p.Supports(w):
		return fmt.Errorf("workload %q not supported", w.Name)
	case w.Messages < 1 || w.Warmup < 0:
		return fmt.Errorf("workload %s: %d messages, %d warm-up", w.Name, w.Messages, w.Warmup)
	case w.Size < 8 || w.Size > 64<<10:
		return fmt.Errorf("workload %s: messages of %d bytes (want 8 to 65536: each carries its number)", w.Name, w.Size)
	}
	return nil
}

func writeResult(out io.Writer, m Metrics) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "result %s\n", b)
	return err
}

// doneMessage is what the W2 and W3 server sends back once it has received
// every message: the client's clock stops when it arrives.
var doneMessage = []byte("done")

// Server serves one run of w: it listens, passes the address to ready,
// accepts one connection and plays the server's part until ctx is done
// (the client has finished) or, for W4, its count is complete.
func Server(ctx context.Context, p Peer, w Workload, ready func(addr string)) (Metrics, error) {
	addr, accept, closer, err := p.Listen(ctx, w)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	defer closer.Close()
	ready(addr)
	c, err := accept(ctx)
	if err != nil {
		return nil, fmt.Errorf("accept: %w", err)
	}
	defer c.Close()
	if w.Name == "W4" {
		// Only silence ends the count: the client is done once it has
		// sent its last message, before the server has read them all.
		return count(ctx, w, c)
	}
	stop := context.AfterFunc(ctx, c.Interrupt)
	defer stop()
	switch w.Name {
	case "W1":
		echoed := 0
		for {
			b, _, err := c.Receive()
			if errors.Is(err, ErrInterrupted) || errors.Is(err, io.EOF) {
				// The client is done (and may have closed first).
				return Metrics{"echoed": float64(echoed)}, nil
			}
			if err != nil {
				return nil, err
			}
			if err := c.Send(b, true); err != nil {
				return nil, err
			}
			if err := c.Flush(); err != nil {
				return nil, err
			}
			echoed++
		}
	}
	// W2, W3: every message, in order, then tell the client.
	var first time.Time
	for i := range w.Messages {
		b, reliable, err := c.Receive()
		if err != nil {
			return nil, fmt.Errorf("after %d of %d messages: %w", i, w.Messages, err)
		}
		if i == 0 {
			first = time.Now()
		}
		if len(b) != w.Size || !reliable || binary.BigEndian.Uint64(b) != uint64(i) {
			return nil, fmt.Errorf("message %d: %d bytes, reliable %v: out of order or damaged", i, len(b), reliable)
		}
	}
	took := time.Since(first)
	if err := c.Send(doneMessage, true); err != nil {
		return nil, err
	}
	if err := c.Flush(); err != nil {
		return nil, err
	}
	// Keep serving (the library may have to resend) until the client has
	// its answer.
	for {
		if _, _, err := c.Receive(); err != nil {
			break
		}
	}
	return Metrics{"server_rate": float64(w.Messages-1) / took.Seconds()}, nil
}

// count is the W4 server: it counts unreliable messages from the first one
// until none has come for w.Silence (or, if none came at all, until
// w.Silence after the client finished), and reports the count and the
// time from the first receipt to the last.
func count(ctx context.Context, w Workload, c Conn) (Metrics, error) {
	var (
		n     atomic.Int64
		first time.Time    // of the first receipt, read by the watch once n > 0
		last  atomic.Int64 // time of the last receipt, ns since first
	)
	done := make(chan struct{})
	defer close(done)
	go func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			if n.Load() == 0 {
				if ctx.Err() != nil {
					time.Sleep(w.Silence)
					if n.Load() == 0 {
						c.Interrupt()
						return
					}
				}
				continue
			}
			if time.Since(first.Add(time.Duration(last.Load()))) >= w.Silence {
				c.Interrupt()
				return
			}
		}
	}()
	for {
		b, reliable, err := c.Receive()
		now := time.Now()
		if errors.Is(err, ErrInterrupted) || errors.Is(err, io.EOF) {
			// Silence, or the client closed after its last message.
			break
		}
		if err != nil {
			return nil, err
		}
		if len(b) != w.Size || reliable {
			return nil, fmt.Errorf("a message of %d bytes, reliable %v", len(b), reliable)
		}
		if n.Load() == 0 {
			first = now // published to the watch by n.Add below
		}
		last.Store(int64(now.Sub(first)))
		n.Add(1)
	}
	return Metrics{Received: float64(n.Load()), ReceiveSeconds: time.Duration(last.Load()).Seconds()}, nil
}

// Client runs the client's part of w against addr.
func Client(ctx context.Context, p Peer, w Workload, addr string) (Metrics, error) {
	c, err := p.Dial(ctx, addr, w)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	defer c.Close()
	payload := make([]byte, w.Size)
	m := Metrics{}
	switch w.Name {
	case "W1":
		rtts := make([]time.Duration, 0, w.Messages)
		for i := range w.Warmup + w.Messages {
			binary.BigEndian.PutUint64(payload, uint64(i))
			start := time.Now()
			if err := c.Send(payload, true); err != nil {
				return nil, err
			}
			if err := c.Flush(); err != nil {
				return nil, err
			}
			b, _, err := c.Receive()
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
		m[P50], m[P99] = us(50), us(99)
	case "W2", "W3":
		start := time.Now()
		for i := range w.Messages {
			binary.BigEndian.PutUint64(payload, uint64(i))
			if err := c.Send(payload, true); err != nil {
				return nil, fmt.Errorf("message %d: %w", i, err)
			}
		}
		if err := c.Flush(); err != nil {
			return nil, err
		}
		b, _, err := c.Receive()
		if err != nil {
			return nil, fmt.Errorf("waiting for the server to receive everything: %w", err)
		}
		if string(b) != string(doneMessage) {
			return nil, fmt.Errorf("the server said %q", b)
		}
		m[Rate] = float64(w.Messages) / time.Since(start).Seconds()
	case "W4":
		start := time.Now()
		for i := range w.Messages {
			binary.BigEndian.PutUint64(payload, uint64(i))
			if err := c.Send(payload, false); err != nil {
				return nil, fmt.Errorf("message %d: %w", i, err)
			}
		}
		if err := c.Flush(); err != nil {
			return nil, err
		}
		m[Sent] = float64(w.Messages)
		m[SendSeconds] = time.Since(start).Seconds()
	default:
		return nil, fmt.Errorf("unknown workload %q", w.Name)
	}
	return m, nil
}

// percentile returns the nearest-rank p-th percentile of sorted d.
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := int(float64(len(d))*p/100+0.999999) - 1
	return d[min(max(i, 0), len(d)-1)]
}

// StreamConn is a Conn over a reliable byte stream (a QUIC stream): each
// message is a 4-byte big-endian length and the bytes, written through a
// buffer that Flush (or a full buffer) sends. It sends only reliably.
type StreamConn struct {
	rw          io.ReadWriter
	w           *bufio.Writer
	r           *bufio.Reader
	hdr         [4]byte
	buf         []byte
	interrupted atomic.Bool
	// OnInterrupt unblocks a read of the stream (a deadline in the
	// past).
	OnInterrupt func()
	// OnClose closes the stream and what carries it.
	OnClose func() error
	// ClosedBy reports whether a read error means the other side closed
	// the connection, which Receive then reports as io.EOF.
	ClosedBy func(error) bool
}

// NewStreamConn frames messages over rw.
func NewStreamConn(rw io.ReadWriter) *StreamConn {
	return &StreamConn{rw: rw, w: bufio.NewWriterSize(rw, 64<<10), r: bufio.NewReaderSize(rw, 64<<10)}
}

func (s *StreamConn) Send(b []byte, reliable bool) error {
	if !reliable {
		return errors.New("a stream sends only reliably")
	}
	binary.BigEndian.PutUint32(s.hdr[:], uint32(len(b)))
	if _, err := s.w.Write(s.hdr[:]); err != nil {
		return err
	}
	_, err := s.w.Write(b)
	return err
}

func (s *StreamConn) Flush() error { return s.w.Flush() }

// maxMessage bounds the length a received header may announce.
const maxMessage = 1 << 20

func (s *StreamConn) Receive() ([]byte, bool, error) {
	if s.interrupted.Load() {
		return nil, false, ErrInterrupted
	}
	if _, err := io.ReadFull(s.r, s.hdr[:]); err != nil {
		return nil, false, s.readErr(err)
	}
	n := binary.BigEndian.Uint32(s.hdr[:])
	if n > maxMessage {
		return nil, false, fmt.Errorf("a message of %d bytes announced (at most %d)", n, maxMessage)
	}
	if cap(s.buf) < int(n) {
		s.buf = make([]byte, n)
	}
	s.buf = s.buf[:n]
	if _, err := io.ReadFull(s.r, s.buf); err != nil {
		return nil, false, s.readErr(err)
	}
	return s.buf, true, nil
}

func (s *StreamConn) readErr(err error) error {
	switch {
	case s.interrupted.Load():
		return ErrInterrupted
	case errors.Is(err, io.ErrUnexpectedEOF) || s.ClosedBy != nil && s.ClosedBy(err):
		return io.EOF
	}
	return err
}

func (s *StreamConn) Interrupt() {
	s.interrupted.Store(true)
	if s.OnInterrupt != nil {
		s.OnInterrupt()
	}
}

func (s *StreamConn) Close() error {
	if s.OnClose != nil {
		return s.OnClose()
	}
	return nil
}
