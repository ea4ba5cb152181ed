package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/fastnet-engine/fastnet/driver"
	"github.com/fastnet-engine/fastnet/fastnet"
)

// defaultListen is where listen serves when given neither --udp nor --tcp.
const defaultListen = "127.0.0.1:7000"

// maxMaxConns bounds --max-conns.
const maxMaxConns = 1 << 20

// countsEvery is how often listen looks for clients refused or dropped
// that it cannot report one by one.
const countsEvery = time.Second

func listenCommand() *command {
	return &command{
		name:    "listen",
		summary: "serve Fastnet connections, optionally echoing or printing their messages",
		usage:   "listen [--udp HOST:PORT] [--tcp HOST:PORT] [--via-urp RELAY] [--echo] [--print] [--max-conns N]",
		details: `
Serves Fastnet on a UDP address, a TCP address or both (without --udp and
--tcp: UDP ` + defaultListen + `) until SIGINT or SIGTERM, then closes every
connection gracefully and exits 0. Port 0 picks a free port; an empty host
(":7000") is every address.

Standard output has one line per event:

	listening udp 127.0.0.1:7000
	connected udp 127.0.0.1:51234 id=2271560481
	message udp 127.0.0.1:51234 id=2271560481 channel=0 reliable "hello\x00\r\n"
	disconnected udp 127.0.0.1:51234 id=2271560481 messages=3 reason="closed by peer"
	refused udp 127.0.0.1:51240 reason="server full"
	refused udp clients=3 reason="server busy"
	dropped udp clients=2 reason="address not validated in time"

With --echo every message is sent back to its sender on the same channel with
the same reliability. With --print every message received is a "message"
line: its connection, channel and reliability, then its bytes as a
double-quoted Go string (strconv.Quote): printable text as it is, quotes and
backslashes escaped, other bytes as \n, \r, \t, \x00 and the like, so that
one message is always one line whatever it holds.

Clients beyond --max-conns connections are refused with "server full", and
clients that arrive while too many connections wait to be served with
"server busy": one "refused" line each, with the client's address and the
reason it was sent, once a second at most for a client that asks again.
Refusals that come faster than they can be printed are counted instead, in
a line every second when there were some, as are the UDP clients dropped
before their address was validated and the TCP connections dropped before
their handshake completed ("dropped").

With --via-urp RELAY it serves through a URP relay ("fastnet relay") instead
of on an address of its own, for clients that cannot reach it directly: it
hosts a group on the relay, prints its id and password, and serves the
Fastnet connections of the group's members as above ("fastnet connect
--via-urp"):

	listening urp 127.0.0.1:7100 group=1630325441 password=3735928559
	connected urp [fd55:5250::a7ad:d4ca]:0 id=2271560481

A member's address is fd55:5250:: and its user id on the relay, in hex.`,
		flags: func(fs *flag.FlagSet) func(context.Context, []string, *stdio) int {
			var o listenOptions
			fs.StringVar(&o.udp, "udp", "", "serve on this UDP `HOST:PORT`")
			fs.StringVar(&o.tcp, "tcp", "", "serve on this TCP `HOST:PORT`")
			fs.BoolVar(&o.echo, "echo", false, "send every message back to its sender")
			fs.BoolVar(&o.print, "print", false, "print every message received, quoted, one line each")
			fs.StringVar(&o.viaURP, "via-urp", "", "serve through a group hosted on the URP relay at `HOST:PORT`")
			fs.IntVar(&o.maxConns, "max-conns", fastnet.DefaultMaxConnections, "serve at most `N` connections per transport, refuse more clients, 1..1048576")
			return func(ctx context.Context, args []string, s *stdio) int {
				if len(args) > 0 {
					return usageError(s, "listen", "unexpected argument %q", args[0])
				}
				if o.maxConns < 1 || o.maxConns > maxMaxConns {
					return usageError(s, "listen", "--max-conns %d: want 1..%d", o.maxConns, maxMaxConns)
				}
				if o.viaURP != "" {
					if o.udp != "" || o.tcp != "" {
						return usageError(s, "listen", "--via-urp serves through the relay, not on --udp or --tcp")
					}
					if err := checkAddr(o.viaURP); err != nil {
						return usageError(s, "listen", "--via-urp: %v", err)
					}
					return listenURP(ctx, s, o)
				}
				if o.udp == "" && o.tcp == "" {
					o.udp = defaultListen
				}
				for _, a := range []string{o.udp, o.tcp} {
					if a == "" {
						continue
					}
					if err := checkAddr(a); err != nil {
						return usageError(s, "listen", "%v", err)
					}
				}
				return listen(ctx, s, o)
			}
		},
	}
}

// listenOptions are the settings of listen.
type listenOptions struct {
	udp, tcp    string
	viaURP      string // a relay to serve through
	echo, print bool
	maxConns    int
}

// served is one listener of listen.
type served struct {
	l      *listener
	tcp    bool
	events chan driver.Event // the listener's: its refused clients
}

// eventBacklog is the room of a listener's events channel; refusals
// beyond it while listen prints are dropped, and counted (turnedAway).
const eventBacklog = 1024

// listen is the listen command.
func listen(ctx context.Context, s *stdio, o listenOptions) int {
	var ls []*served
	closeAll := func() {
		for _, x := range ls {
			x.l.Close()
		}
	}
	for _, t := range []struct {
		addr string
		tcp  bool
	}{{o.udp, false}, {o.tcp, true}} {
		if t.addr == "" {
			continue
		}
		// The engine refuses the clients beyond --max-conns, and the
		// listener's events name each (N67).
		events := make(chan driver.Event, eventBacklog)
		l, err := listenOn(ctx, t.tcp, t.addr, fastnet.Config{MaxConnections: o.maxConns}, events)
		if err != nil {
			closeAll()
			s.errorf("fastnet listen: %v", err)
			return exitFailure
		}
		ls = append(ls, &served{l: l, tcp: t.tcp, events: events})
		s.printf("listening %s %s", transportName(t.tcp), l.Addr())
	}

	var wg, logs sync.WaitGroup
	for _, x := range ls {
		name := transportName(x.tcp)
		logs.Go(func() { logRefused(s, name, x.events) })
		wg.Go(func() {
			for {
				c, err := x.l.Accept(ctx)
				if err != nil {
					return // ctx is done or the listener closed
				}
				s.printf("connected %s %s id=%d", name, c.RemoteAddr(), c.ID())
				wg.Go(func() { serve(c, name, o.echo, o.print, s) })
			}
		})
	}
	stopCounts := make(chan struct{})
	countsDone := make(chan struct{})
	go func() {
		defer close(countsDone)
		reportCounts(s, ls, stopCounts)
	}()

	<-ctx.Done()
	close(stopCounts)
	<-countsDone // its last look, while the listeners are open
	for _, x := range ls {
		wg.Go(func() { x.l.CloseWithReason("server shutting down") })
	}
	wg.Wait()
	for _, x := range ls {
		close(x.events) // the listener is closed: no more can come
	}
	logs.Wait()
	return exitOK
}

// serve receives the messages of c until it ends, printing and echoing them
// if asked, and reports the end.
func serve(c *conn, transport string, echo, print bool, s *stdio) {
	ctx := context.Background()
	n := 0
	for {
		m, err := c.Receive(ctx)
		if err != nil {
			s.printf("disconnected %s %s id=%d messages=%d reason=%q", transport, c.RemoteAddr(), c.ID(), n, reason(err))
			return
		}
		n++
		if print {
			rel := "reliable"
			if !m.Reliable {
				rel = "unreliable"
			}
			s.printf("message %s %s id=%d channel=%d %s %s", transport, c.RemoteAddr(), c.ID(), m.Channel, rel, strconv.Quote(string(m.Data)))
		}
		if echo {
			// An error means the connection ended; the next Receive
			// reports why.
			c.Send(ctx, m.Channel, m.Data, m.Reliable)
		}
	}
}

// logRefused prints a line for each client a listener refused, until its
// events channel is closed. A client that asks again within a second (its
// "connect?" repeated while the refusal was on its way) is not printed
// again.
func logRefused(s *stdio, transport string, events <-chan driver.Event) {
	seen := map[netip.AddrPort]time.Time{}
	for ev := range events {
		if ev.Kind != driver.EventRefused {
			continue
		}
		now := time.Now()
		if t, ok := seen[ev.Addr]; ok && now.Sub(t) < time.Second {
			continue
		}
		if len(seen) >= eventBacklog {
			for k, t := range seen {
				if now.Sub(t) >= time.Second {
					delete(seen, k)
				}
			}
		}
		seen[ev.Addr] = now
		reason := ev.Err.Error()
		var re *fastnet.RefusedError
		if errors.As(ev.Err, &re) {
			reason = re.Reason
		}
		s.printf("refused %s %s reason=%q", transport, netip.AddrPortFrom(ev.Addr.Addr().Unmap(), ev.Addr.Port()), reason)
	}
}

// turnedAway counts the clients a listener turned away without listen
// hearing of each.
type turnedAway struct {
	unlogged   uint64 // refused, too many to print one by one
	expired    uint64 // UDP: address not validated in time
	evicted    uint64 // UDP: too many clients validating at once
	forged     uint64 // UDP: a validation that echoed what was never sent
	hsDropped  uint64 // TCP: too many handshakes at once
	hsTimedOut uint64 // TCP: handshake not completed in time
	overflowed uint64 // TCP: asked for more answers than it read
	longFull   uint64 // TCP: a long packet past what all may hold
}

func (x *served) turnedAway() turnedAway {
	d, v := x.l.DriverStats(), x.l.ValidationStats()
	return turnedAway{
		unlogged:   d.EventsDropped,
		expired:    v.Expired,
		evicted:    v.Evicted,
		forged:     v.Forged,
		hsDropped:  d.HandshakesDropped,
		hsTimedOut: d.HandshakeTimeouts,
		overflowed: d.WriteOverflows,
		longFull:   d.LongPacketsRefused,
	}
}

// countLines says what grew from prev to cur, a line each.
func countLines(transport string, prev, cur turnedAway) []string {
	var lines []string
	for _, c := range []struct {
		verb, reason string
		prev, cur    uint64
	}{
		{"refused", "too many to name", prev.unlogged, cur.unlogged},
		{"dropped", "address not validated in time", prev.expired, cur.expired},
		{"dropped", "too many clients validating their address", prev.evicted, cur.evicted},
		{"dropped", "forged address validation", prev.forged, cur.forged},
		{"dropped", "too many handshakes at once", prev.hsDropped, cur.hsDropped},
		{"dropped", "handshake timed out", prev.hsTimedOut, cur.hsTimedOut},
		{"dropped", "write queue overflowed", prev.overflowed, cur.overflowed},
		{"dropped", "too much held for long packets", prev.longFull, cur.longFull},
	} {
		if c.cur > c.prev {
			lines = append(lines, fmt.Sprintf("%s %s clients=%d reason=%q", c.verb, transport, c.cur-c.prev, c.reason))
		}
	}
	return lines
}

// reportCounts prints every countsEvery, and once more when stop is
// closed, what the listeners turned away since the last look.
func reportCounts(s *stdio, ls []*served, stop <-chan struct{}) {
	prev := make([]turnedAway, len(ls))
	look := func() {
		for i, x := range ls {
			cur := x.turnedAway()
			for _, l := range countLines(transportName(x.tcp), prev[i], cur) {
				s.printf("%s", l)
			}
			prev[i] = cur
		}
	}
	t := time.NewTicker(countsEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			look()
		case <-stop:
			look()
			return
		}
	}
}
