package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"sync"
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
		usage:   "connect HOST:PORT [--tcp] [--channel N] [--unreliable] [--raw [--chunk N]] [--timeout D] [--drain D] [--stats]\n       fastnet connect --via-urp RELAY --group GID --password P [--channel N] [--unreliable] [--raw [--chunk N]] [--timeout D] [--drain D] [--stats]",
		details: `
Connects to the Fastnet server at HOST:PORT (UDP unless --tcp; an empty
HOST, as in ":7000", is ` + localHost + `), sends standard input as messages on
--channel, reliably unless --unreliable, and writes the messages received to
standard output.

Lines (the default): each line of standard input is one message, without
its line ending, and each message received is written followed by a newline,
its bytes unchanged. A line ends at a newline (LF); a carriage return just
before the newline (CRLF) is part of the line ending and is not sent either.
Any other carriage return is data, even at the very end of the input. A line
may be as long as the largest message, 1048576 bytes (1 MiB); a longer line
ends the command with an error naming its line number, after what was read
before it has been sent.

Raw (--raw): standard input is sent as it is, in messages of --chunk bytes
(the last one holds what is left), and the messages received are written as
they are, with nothing between them. A chunk is sent once it is full or
the input ends: for byte streams, files and binary data. --chunk is at most
the largest message, 1048576 bytes.

--timeout bounds the handshake. At the end of input connect waits until the
server has acknowledged everything sent, then keeps writing until nothing has
arrived for --drain (so that the echoes of "fastnet listen --echo" show; at
most 5s in all), closes the connection gracefully and exits 0. It exits 1 if
the connection cannot be made or is lost, or on SIGINT or SIGTERM (after
closing gracefully). When a UDP handshake gets no answer, or a TCP connection
is refused, the error suggests the other transport.

With --stats it prints the connection's final statistics on standard error
when it exits: among them the payload MTU each way, so that the figure MTU
estimation reached can be checked on any path (over UDP the estimation
takes about a second; give it input that lasts that long, or a --drain).

With --via-urp RELAY instead of HOST:PORT it joins group --group on that URP
relay with --password, as "fastnet listen --via-urp" printed them, and
speaks Fastnet to the group's host through the relay, with the same input
and output as a direct connection.`,
		flags: func(fs *flag.FlagSet) func(context.Context, []string, *stdio) int {
			var o connectOptions
			fs.BoolVar(&o.tcp, "tcp", false, "connect over TCP instead of UDP")
			fs.IntVar(&o.channel, "channel", 0, "send on channel `N`, 0..32767")
			unreliable := fs.Bool("unreliable", false, "send unreliably")
			fs.BoolVar(&o.raw, "raw", false, "send standard input as it is, in chunks, and write the messages received as they are")
			fs.IntVar(&o.chunk, "chunk", defaultChunk, "with --raw, send messages of `N` bytes, 1..1048576")
			fs.DurationVar(&o.timeout, "timeout", fastnet.DefaultConnectTimeout, "give up the handshake after `D`")
			fs.DurationVar(&o.drain, "drain", 250*time.Millisecond, "after the end of input, wait until nothing has arrived for `D`")
			fs.StringVar(&o.viaURP, "via-urp", "", "connect through the URP relay at `HOST:PORT` to the host of --group")
			fs.Func("group", "with --via-urp, the `GID` of the group to join", func(v string) error { return parseU32(v, &o.group) })
			fs.Func("password", "with --via-urp, the group's password `P`", func(v string) error { return parseU32(v, &o.password) })
			fs.BoolVar(&o.stats, "stats", false, "on exit, print the connection's statistics, the payload MTU each way among them, on standard error")
			return func(ctx context.Context, args []string, s *stdio) int {
				chunkSet := false
				fs.Visit(func(f *flag.Flag) { chunkSet = chunkSet || f.Name == "chunk" })
				switch {
				case o.viaURP != "":
					if code, bad := checkViaURP(s, o, args); bad {
						return code
					}
					args = []string{o.viaURP}
				case o.group != 0 || o.password != 0:
					return usageError(s, "connect", "--group and --password are for --via-urp")
				}
				switch {
				case len(args) == 0:
					return usageError(s, "connect", "missing HOST:PORT")
				case len(args) > 1:
					return usageError(s, "connect", "unexpected argument %q", args[1])
				case o.channel < 0 || o.channel > fastnet.MaxChannel:
					return usageError(s, "connect", "--channel %d: want 0..%d", o.channel, fastnet.MaxChannel)
				case o.drain < 0:
					return usageError(s, "connect", "--drain %v: must not be negative", o.drain)
				case o.timeout <= 0 || o.timeout > maxFlagDuration:
					return usageError(s, "connect", "--timeout %v: want more than 0, at most %v", o.timeout, maxFlagDuration)
				case chunkSet && !o.raw:
					return usageError(s, "connect", "--chunk is for --raw input")
				case o.chunk < 1 || o.chunk > fastnet.DefaultMaxMessageSize:
					return usageError(s, "connect", "--chunk %d: want 1..%d, the largest message", o.chunk, fastnet.DefaultMaxMessageSize)
				}
				if err := checkAddr(args[0]); err != nil {
					return usageError(s, "connect", "%v", err)
				}
				o.addr, o.reliable = dialAddr(args[0]), !*unreliable
				return connect(ctx, s, o)
			}
		},
	}
}

// defaultChunk is the default of connect --chunk.
const defaultChunk = 1024

// connectOptions are the settings of connect.
type connectOptions struct {
	addr     string
	tcp      bool
	channel  int
	reliable bool
	raw      bool
	chunk    int
	timeout  time.Duration
	drain    time.Duration
	stats    bool
	// Through a URP relay (--via-urp): the relay, the group, its password.
	viaURP          string
	group, password uint32
}

// connect is the connect command.
func connect(ctx context.Context, s *stdio, o connectOptions) int {
	cfg := fastnet.Config{ConnectTimeout: o.timeout}
	maxMessage := cfg.MaxMessageSize
	if maxMessage == 0 {
		maxMessage = fastnet.DefaultMaxMessageSize
	}
	// The engine's ConnectTimeout bounds the handshake; the context
	// bounds the rest of the dial (a TCP connect to an address that drops
	// its packets), a little later so that the engine's timeout speaks
	// first when both would.
	dialCtx, cancel := context.WithTimeout(ctx, o.timeout+time.Second)
	c, err := dialConnect(dialCtx, o, cfg)
	cancel()
	if err != nil {
		switch {
		case ctx.Err() != nil:
			s.errorf("fastnet connect: interrupted")
		case o.viaURP != "":
			s.errorf("fastnet connect: %s", urpDialFailure(o, err))
		default:
			s.errorf("fastnet connect: %s", dialFailure(o.addr, o.tcp, o.timeout, err))
		}
		return exitFailure
	}
	s.errorf("connected to %s over %s, id %d", c.RemoteAddr(), connectTransport(o), c.ID())
	return converse(ctx, s, c, o, maxMessage)
}

// converse is connect once connected: it sends standard input over c and
// writes what c receives, until the input ends and the peer is quiet, c is
// lost or ctx is done, and closes c.
func converse(ctx context.Context, s *stdio, c *conn, o connectOptions, maxMessage int) int {
	// A relay is a stream, as TCP is: no MTU estimation to report.
	tcp, channel, reliable, drain := o.tcp || o.viaURP != "", o.channel, o.reliable, o.drain

	// With --stats, the statistics are printed at exit: those the
	// connection ended with, which it keeps (N66).
	if o.stats {
		defer printStats(s, c, connectTransport(o), tcp)
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
			write := s.writeLine
			if o.raw {
				write = s.write
			}
			if err := write(m.Data); err != nil {
				mu.Lock()
				printErr = err
				mu.Unlock()
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
		next := newLineReader(s.in, maxMessage).next
		if o.raw {
			next = newChunkReader(s.in, o.chunk).next
		}
		for {
			msg, err := next()
			if err != nil {
				if err == io.EOF {
					err = nil
				}
				inputErr <- err
				close(lines)
				return
			}
			select {
			case lines <- msg:
			case <-c.Done():
				return
			}
		}
	}()

	lost := func() int {
		<-received
		s.errorf("fastnet connect: connection lost: %s", reason(c.Err()))
		return exitFailure
	}
	interrupted := func() int {
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
		// What was sent before is delivered: a graceful close.
		c.Close()
		<-received
		var tl *lineTooLongError
		if errors.As(err, &tl) {
			s.errorf("fastnet connect: %v", err)
		} else {
			s.errorf("fastnet connect: reading input: %v", err)
		}
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
