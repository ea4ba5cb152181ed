package main

import (
	"context"
	"flag"
	"sync"

	"github.com/fastnet-engine/fastnet/fastnet"
)

// defaultListen is where listen serves when given neither --udp nor --tcp.
const defaultListen = "127.0.0.1:7000"

func listenCommand() *command {
	return &command{
		name:    "listen",
		summary: "serve Fastnet connections, optionally echoing their messages",
		usage:   "listen [--udp HOST:PORT] [--tcp HOST:PORT] [--echo] [--max-conns N]",
		details: `
Serves Fastnet on a UDP address, a TCP address or both (without --udp and
--tcp: UDP ` + defaultListen + `) until SIGINT or SIGTERM, then closes every
connection gracefully and exits 0. Port 0 picks a free port.

Standard output has one line per event:

	listening udp 127.0.0.1:7000
	connected udp 127.0.0.1:51234 id=2271560481
	disconnected udp 127.0.0.1:51234 id=2271560481 messages=3 reason="closed by peer"

With --echo every message is sent back to its sender on the same channel with
the same reliability. Clients beyond --max-conns are refused with
"server full".`,
		flags: func(fs *flag.FlagSet) func(context.Context, []string, *stdio) int {
			udp := fs.String("udp", "", "serve on this UDP `HOST:PORT`")
			tcp := fs.String("tcp", "", "serve on this TCP `HOST:PORT`")
			echo := fs.Bool("echo", false, "send every message back to its sender")
			maxConns := fs.Int("max-conns", fastnet.DefaultMaxConnections, "most established connections per transport")
			return func(ctx context.Context, args []string, s *stdio) int {
				if len(args) > 0 {
					return usageError(s, "listen", "unexpected argument %q", args[0])
				}
				if *maxConns < 1 {
					return usageError(s, "listen", "--max-conns %d: need at least 1", *maxConns)
				}
				if *udp == "" && *tcp == "" {
					*udp = defaultListen
				}
				for _, a := range []string{*udp, *tcp} {
					if a == "" {
						continue
					}
					if err := checkAddr(a); err != nil {
						return usageError(s, "listen", "%v", err)
					}
				}
				return listen(ctx, s, *udp, *tcp, *echo, *maxConns)
			}
		},
	}
}

// listen is the listen command.
func listen(ctx context.Context, s *stdio, udpAddr, tcpAddr string, echo bool, maxConns int) int {
	cfg := fastnet.Config{MaxConnections: maxConns}
	type served struct {
		l   *listener
		tcp bool
	}
	var ls []served
	closeAll := func() {
		for _, x := range ls {
			x.l.Close()
		}
	}
	for _, t := range []struct {
		addr string
		tcp  bool
	}{{udpAddr, false}, {tcpAddr, true}} {
		if t.addr == "" {
			continue
		}
		l, err := listenOn(ctx, t.tcp, t.addr, cfg)
		if err != nil {
			closeAll()
			s.errorf("fastnet listen: %v", err)
			return exitFailure
		}
		ls = append(ls, served{l, t.tcp})
		s.printf("listening %s %s", transportName(t.tcp), l.Addr())
	}

	var wg sync.WaitGroup
	for _, x := range ls {
		wg.Go(func() {
			name := transportName(x.tcp)
			for {
				c, err := x.l.Accept(ctx)
				if err != nil {
					return // ctx is done or the listener closed
				}
				s.printf("connected %s %s id=%d", name, c.RemoteAddr(), c.ID())
				wg.Go(func() { serve(c, name, echo, s) })
			}
		})
	}
	<-ctx.Done()
	for _, x := range ls {
		wg.Go(func() { x.l.CloseWithReason("server shutting down") })
	}
	wg.Wait()
	return exitOK
}

// serve receives the messages of c until it ends, echoing them if asked,
// and reports the end.
func serve(c *conn, transport string, echo bool, s *stdio) {
	ctx := context.Background()
	n := 0
	for {
		m, err := c.Receive(ctx)
		if err != nil {
			s.printf("disconnected %s %s id=%d messages=%d reason=%q", transport, c.RemoteAddr(), c.ID(), n, reason(err))
			return
		}
		n++
		if echo {
			// An error means the connection ended; the next Receive
			// reports why.
			c.Send(ctx, m.Channel, m.Data, m.Reliable)
		}
	}
}
