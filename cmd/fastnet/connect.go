package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"sync"
	"syscall"
	"time"

	"github.com/fastnet-engine/fastnet/fastnet"
)

// maxDrain bounds the wait for the last messages after the end of input:
// a server that never stops sending does not keep connect open.
const maxDrain = 5 * time.Second

func connectCommand() *command {
	return &command{
		name:    "connect",
		summary: "send standard input as messages, print the messages received",
		usage:   "connect HOST:PORT [--tcp] [--channel N] [--unreliable] [--drain D] [--stats]",
		details: `
Connects to the Fastnet server at HOST:PORT (UDP unless --tcp), sends each line
of standard input, without its newline, as one message on --channel, and
prints each message received as one line of standard output.

At the end of input it waits until the server has acknowledged everything
sent, then keeps printing until nothing has arrived for --drain (so that the
echoes of "fastnet listen --echo" show; at most 5s in all), closes the
connection gracefully and exits 0. It exits 1 if the connection cannot be
made or is lost, or on SIGINT or SIGTERM (after closing gracefully).

With --stats it prints the connection's final statistics on standard error
when it exits: among them the payload MTU each way, so that the figure MTU
estimation reached can be checked on any path (over UDP the estimation
takes about a second; give it input that lasts that long, or a --drain).`,
		flags: func(fs *flag.FlagSet) func(context.Context, []string, *stdio) int {
			tcp := fs.Bool("tcp", false, "connect over TCP instead of UDP")
			channel := fs.Int("channel", 0, "channel to send on, 0..32767")
			unreliable := fs.Bool("unreliable", false, "send unreliably")
			drain := fs.Duration("drain", 250*time.Millisecond, "after the end of input, wait until nothing has arrived for this long")
			stats := fs.Bool("stats", false, "on exit, print the connection's statistics, the payload MTU each way among them, on standard error")
			return func(ctx context.Context, args []string, s *stdio) int {
				switch {
				case len(args) == 0:
					return usageError(s, "connect", "missing HOST:PORT")
				case len(args) > 1:
					return usageError(s, "connect", "unexpected argument %q", args[1])
				case *channel < 0 || *channel > fastnet.MaxChannel:
					return usageError(s, "connect", "--channel %d: want 0..%d", *channel, fastnet.MaxChannel)
				case *drain < 0:
					return usageError(s, "connect", "--drain %v: must not be negative", *drain)
				}
				if err := checkAddr(args[0]); err != nil {
					return usageError(s, "connect", "%v", err)
				}
				return connect(ctx, s, args[0], *tcp, *channel, !*unreliable, *drain, *stats)
			}
		},
	}
}

// connect is the connect command.
func connect(ctx context.Context, s *stdio, addr string, tcp bool, channel int, reliable bool, drain time.Duration, stats bool) int {
	cfg := fastnet.Config{}
	c, err := dial(ctx, tcp, addr, cfg)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			err = errNothingListening
		}
		s.errorf("fastnet connect: %s: %s", addr, reason(err))
		return exitFailure
	}
	s.errorf("connected to %s over %s, id %d", c.RemoteAddr(), transportName(tcp), c.ID())
	// With --stats, the statistics are printed at exit. Close and Abort
	// end the connection, and with it its statistics: each takes them
	// first (snap), and a connection lost leaves the last ones polled.
	var rec *statsRecorder
	if stats {
		rec = recordStats(c)
		defer rec.print(s, tcp)
	}
	snap := func() {
		if rec != nil {
			rec.capture()
		}
	}

	// The receiver prints every message until the connection ends.
	var (
		mu       sync.Mutex
		lastRecv = time.Now()
		printErr error
	)
	received := make(chan struct{})
	go func() {
		defer close(received)
		for {
			m, err := c.Receive(context.Background())
			if err != nil {
				return
			}
			mu.Lock()
			lastRecv = time.Now()
			mu.Unlock()
			if err := s.writeLine(m.Data); err != nil {
				mu.Lock()
				printErr = err
				mu.Unlock()
				snap()
				c.Abort("output closed")
				return
			}
		}
	}()

	// stdin is read on a goroutine of its own so that a lost connection or
	// a signal ends the command even while the input is idle.
	lines := make(chan []byte)
	inputErr := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(s.in)
		sc.Buffer(make([]byte, 64<<10), fastnet.DefaultMaxMessageSize+2)
		for sc.Scan() {
			line := append([]byte(nil), sc.Bytes()...)
			select {
			case lines <- line:
			case <-c.Done():
				return
			}
		}
		inputErr <- sc.Err()
		close(lines)
	}()

	lost := func() int {
		<-received
		s.errorf("fastnet connect: connection lost: %s", reason(c.Err()))
		return exitFailure
	}
	interrupted := func() int {
		snap()
		c.Close()
		<-received
		s.errorf("fastnet connect: interrupted")
		return exitFailure
	}

send:
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				break send
			}
			if err := c.Send(ctx, channel, line, reliable); err != nil {
				if ctx.Err() != nil {
					return interrupted()
				}
				if errors.Is(err, fastnet.ErrClosed) {
					return lost()
				}
				snap()
				c.Abort("")
				s.errorf("fastnet connect: %v", err)
				return exitFailure
			}
		case <-c.Done():
			return lost()
		case <-ctx.Done():
			return interrupted()
		}
	}
	if err := <-inputErr; err != nil {
		snap()
		c.Abort("")
		s.errorf("fastnet connect: reading input: %v", err)
		return exitFailure
	}

	// Wait until everything sent was acknowledged (for unreliable messages:
	// sent), then until the peer has been quiet for drain since then.
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	var ackedAt, drainEnd time.Time
	for {
		select {
		case <-c.Done():
			return lost()
		case <-ctx.Done():
			return interrupted()
		case now := <-tick.C:
			if drainEnd.IsZero() {
				st := c.Stats()
				if st.SendQueueBytes > 0 || (reliable && st.InFlightBytes > 0) {
					continue
				}
				ackedAt, drainEnd = now, now.Add(maxDrain)
			}
			mu.Lock()
			last := lastRecv
			mu.Unlock()
			if last.Before(ackedAt) {
				last = ackedAt
			}
			quiet := now.Sub(last) >= drain
			if !quiet && now.Before(drainEnd) {
				continue
			}
		}
		break
	}
	snap()
	c.Close()
	<-received
	mu.Lock()
	defer mu.Unlock()
	if printErr != nil {
		s.errorf("fastnet connect: writing output: %v", printErr)
		return exitFailure
	}
	if err := c.Err(); err != nil && !isLocalClose(err) {
		s.errorf("fastnet connect: connection lost: %s", reason(err))
		return exitFailure
	}
	return exitOK
}
