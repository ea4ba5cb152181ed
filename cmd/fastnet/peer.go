package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/fastnet-engine/fastnet/driver"
	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/internal/usernat"
	"github.com/fastnet-engine/fastnet/udpdriver"
)

// The commands of introductions and hole punching (docs/nat.md): an
// introducer, and peers that get introduced through it.

// defaultIntroducer is where introducer serves without an address.
const defaultIntroducer = "127.0.0.1:7000"

// unknownRetry is how long peer --to asks again while the introducer does
// not know the target: a peer that has just connected answers the
// introducer's query with its first heartbeats (X2).
const unknownRetry = 2 * time.Second

func introducerCommand() *command {
	return &command{
		name:    "introducer",
		summary: "serve Fastnet over UDP and introduce the peers connected to it to each other",
		usage:   "introducer [LISTEN] [--max-conns N] [--relay HOST:PORT]",
		details: `
Serves Fastnet on the UDP address LISTEN (default ` + defaultIntroducer + `) as an
introducer (docs/nat.md): a "fastnet peer" connected to it may ask to be
introduced to another by that one's connection id, and both then punch a
direct path through their NATs from the sockets they reached the introducer
with. With --relay it names the URP relay at HOST:PORT ("fastnet relay") to
them: when punching finds no direct path, the target hosts a group there
and the other joins it (X13). It runs until SIGINT or SIGTERM, then closes
every connection gracefully and exits 0. Standard output has one line per
event, as listen's, and one per introduction made, refused or failed:

	introducing udp 127.0.0.1:7000 relay=127.0.0.1:7100
	connected udp 127.0.0.1:51234 id=2271560481
	introduced udp 127.0.0.1:43166 id=659614243 to=2271560481
	disconnected udp 127.0.0.1:51234 id=2271560481 messages=0 reason="closed by peer"

The peers report the paths they get.`,
		flags: func(fs *flag.FlagSet) func(context.Context, []string, *stdio) int {
			maxConns := fs.Int("max-conns", fastnet.DefaultMaxConnections, "serve at most `N` peers, refuse more, 1..1048576")
			relay := fs.String("relay", "", "name the URP relay at `HOST:PORT` to the peers, for when no direct path opens")
			return func(ctx context.Context, args []string, s *stdio) int {
				addr := defaultIntroducer
				switch {
				case len(args) > 1:
					return usageError(s, "introducer", "unexpected argument %q", args[1])
				case len(args) == 1:
					addr = args[0]
				}
				if err := checkAddr(addr); err != nil {
					return usageError(s, "introducer", "%v", err)
				}
				if *maxConns < 1 || *maxConns > maxMaxConns {
					return usageError(s, "introducer", "--max-conns %d: want 1..%d", *maxConns, maxMaxConns)
				}
				if *relay != "" {
					// The peers dial it as it is: a missing host would
					// mean each its own.
					if err := checkAddr(*relay); err != nil {
						return usageError(s, "introducer", "--relay: %v", err)
					}
					if host, _, _ := net.SplitHostPort(*relay); host == "" {
						return usageError(s, "introducer", "--relay %q: want the relay's host, as the peers reach it", *relay)
					}
				}
				return introduce(ctx, s, addr, *maxConns, *relay)
			}
		},
	}
}

// introduce is the introducer command; relay, if not empty, is the URP
// relay it names to the peers (X13).
func introduce(ctx context.Context, s *stdio, addr string, maxConns int, relay string) int {
	cfg := fastnet.Config{MaxConnections: maxConns, Punch: fastnet.PunchConfig{Introducer: true, Relay: relay}}
	events := make(chan driver.Event, eventBacklog)
	l, err := udpdriver.Listen(ctx, addr, udpdriver.Config{Engine: cfg, Events: events})
	if err != nil {
		s.errorf("fastnet introducer: %v", err)
		return exitFailure
	}
	if relay != "" {
		s.printf("introducing udp %s relay=%s", l.Addr(), relay)
	} else {
		s.printf("introducing udp %s", l.Addr())
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		// A line per introduction made, refused or failed (X6, X4, X7).
		for {
			select {
			case <-ctx.Done():
				return
			case ev := <-events:
				if ev.Kind != driver.EventIntroduction {
					continue
				}
				var id uint32
				if ev.Conn != nil {
					id = ev.Conn.ID()
				}
				if ev.Err != nil {
					s.printf("introduction udp %s id=%d to=%d failed: %s", ev.Addr, id, ev.Target, strings.TrimPrefix(ev.Err.Error(), "fastnet: introduction failed: "))
					continue
				}
				s.printf("introduced udp %s id=%d to=%d", ev.Addr, id, ev.Target)
			}
		}
	})
	wg.Go(func() {
		for {
			c, err := l.Accept(ctx)
			if err != nil {
				return
			}
			s.printf("connected udp %s id=%d", c.RemoteAddr(), c.ID())
			wg.Go(func() { serve(c, "udp", false, false, s) })
		}
	})
	<-ctx.Done()
	l.CloseWithReason("server shutting down")
	wg.Wait()
	return exitOK
}

func peerCommand() *command {
	return &command{
		name:    "peer",
		summary: "connect to an introducer, then to another peer through a punched path",
		usage:   "peer --via SERVER [--listen HOST:PORT] [--nat HOST:PORT] [--accept [--echo] [--print]]\n       fastnet peer --via SERVER --to ID [--listen HOST:PORT] [--nat HOST:PORT] [--channel N] [--unreliable] [--raw [--chunk N]] [--timeout D] [--drain D] [--stats]",
		details: `
Opens a UDP socket (--listen, default every address and a free port) and
connects from it to the introducer at SERVER ("fastnet introducer"). With
--nat the socket is an internal host of the "fastnet nat" whose inside is at
HOST:PORT: everything it sends goes out through that NAT, it hears only what
the NAT lets in, and it reports no local candidates.

Without --to it waits to be introduced. Standard output has its connection
id at the introducer, which the other peer gives as --to, then one line per
event:

	peer udp [::]:41234 via 127.0.0.1:7000 id=2271560481
	introduced udp 127.0.0.1:51234 id=339180163 peer=2813171306 path=direct
	message udp 127.0.0.1:51234 id=339180163 channel=0 reliable "hello"
	disconnected udp 127.0.0.1:51234 id=339180163 messages=1 reason="closed by peer"

It consents to introductions only with --accept (without it every offer is
refused with "no consent"). --echo and --print are listen's. It runs until
SIGINT or SIGTERM, or until the connection to the introducer is lost.

A connection that came through the introducer's relay, when punching found
no direct path (X13), is a urp one:

	introduced urp [fd55:5250::5c2e:1a07]:0 id=339180163 peer=2813171306 path=relay

With --to ID it asks the introducer to introduce it to the peer whose
connection id there is ID, punches a path to it from the same socket, and
once connected behaves as "fastnet connect": standard input is sent, what
arrives is written to standard output, with the same flags. Standard error
says which path it got, direct or, when no direct path opens and the
introducer names a relay, through the relay:

	peer id 339180163 via 127.0.0.1:7000
	connected to 127.0.0.1:41234 over udp (direct path), id 339180163
	connected to [fd55:5250::1d3f:88a2]:0 over a urp relay (relay path), id 339180163

When no path opens it exits 1 with the step that failed (the target unknown,
refusing or not answering, no direct path and no relay, the relay's group
not joined).`,
		flags: func(fs *flag.FlagSet) func(context.Context, []string, *stdio) int {
			var o peerOptions
			fs.StringVar(&o.via, "via", "", "the introducer at `SERVER` (HOST:PORT)")
			fs.StringVar(&o.listen, "listen", ":0", "open the socket on `HOST:PORT`")
			fs.StringVar(&o.nat, "nat", "", "send and receive everything through the \"fastnet nat\" whose inside is `HOST:PORT`")
			fs.BoolVar(&o.accept, "accept", false, "consent to every introduction")
			fs.BoolVar(&o.echo, "echo", false, "without --to, send every message back to its sender")
			fs.BoolVar(&o.print, "print", false, "without --to, print every message received, quoted, one line each")
			to := fs.String("to", "", "be introduced to the peer of connection id `ID` and talk to it")
			fs.IntVar(&o.c.channel, "channel", 0, "with --to, send on channel `N`, 0..32767")
			unreliable := fs.Bool("unreliable", false, "with --to, send unreliably")
			fs.BoolVar(&o.c.raw, "raw", false, "with --to, send standard input as it is, in chunks, and write the messages received as they are")
			fs.IntVar(&o.c.chunk, "chunk", defaultChunk, "with --raw, send messages of `N` bytes, 1..1048576")
			fs.DurationVar(&o.c.timeout, "timeout", fastnet.DefaultConnectTimeout, "give up the handshake with the introducer after `D`")
			fs.DurationVar(&o.c.drain, "drain", 250*time.Millisecond, "with --to, after the end of input, wait until nothing has arrived for `D`")
			fs.BoolVar(&o.c.stats, "stats", false, "with --to, on exit, print the connection's statistics on standard error")
			return func(ctx context.Context, args []string, s *stdio) int {
				set := map[string]bool{}
				fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
				if *to != "" {
					if err := parseU32(*to, &o.to); err != nil || o.to == 0 {
						return usageError(s, "peer", "--to %q: want a connection id, 1..4294967295", *to)
					}
				}
				switch {
				case len(args) > 0:
					return usageError(s, "peer", "unexpected argument %q", args[0])
				case o.via == "":
					return usageError(s, "peer", "missing --via SERVER")
				case o.to != 0 && (o.accept || o.echo || o.print):
					return usageError(s, "peer", "--accept, --echo and --print are for a peer waiting to be introduced, not --to")
				case o.to == 0 && (set["channel"] || set["unreliable"] || set["raw"] || set["chunk"] || set["drain"] || set["stats"]):
					return usageError(s, "peer", "--channel, --unreliable, --raw, --chunk, --drain and --stats are for --to")
				case o.c.channel < 0 || o.c.channel > fastnet.MaxChannel:
					return usageError(s, "peer", "--channel %d: want 0..%d", o.c.channel, fastnet.MaxChannel)
				case o.c.drain < 0:
					return usageError(s, "peer", "--drain %v: must not be negative", o.c.drain)
				case o.c.timeout <= 0 || o.c.timeout > maxFlagDuration:
					return usageError(s, "peer", "--timeout %v: want more than 0, at most %v", o.c.timeout, maxFlagDuration)
				case set["chunk"] && !o.c.raw:
					return usageError(s, "peer", "--chunk is for --raw input")
				case o.c.chunk < 1 || o.c.chunk > fastnet.DefaultMaxMessageSize:
					return usageError(s, "peer", "--chunk %d: want 1..%d, the largest message", o.c.chunk, fastnet.DefaultMaxMessageSize)
				}
				for _, a := range []string{o.via, o.listen} {
					if err := checkAddr(a); err != nil {
						return usageError(s, "peer", "%v", err)
					}
				}
				if o.nat != "" {
					if err := checkAddr(o.nat); err != nil {
						return usageError(s, "peer", "--nat: %v", err)
					}
				}
				o.via, o.nat, o.c.reliable = dialAddr(o.via), dialAddr(o.nat), !*unreliable
				return peer(ctx, s, o)
			}
		},
	}
}

// peerOptions are the settings of peer.
type peerOptions struct {
	via, listen string
	nat         string // the inside of a "fastnet nat" to go through, if not empty
	accept      bool
	echo, print bool
	to          uint32
	c           connectOptions // with --to, connect's settings
}

// pathName names an introduced connection's path in output.
func pathName(p fastnet.IntroPath) string {
	switch p {
	case fastnet.PathDirect:
		return "direct"
	case fastnet.PathRelay:
		return "relay"
	}
	return "unknown"
}

// peer is the peer command.
func peer(ctx context.Context, s *stdio, o peerOptions) int {
	cfg := fastnet.Config{ConnectTimeout: o.c.timeout}
	if o.accept {
		cfg.Punch.Consent = func(fastnet.IntroOffer) error { return nil }
	}
	p, err := openPeer(ctx, o, cfg)
	if err != nil {
		s.errorf("fastnet peer: %v", err)
		return exitFailure
	}
	defer p.Close()
	dialCtx, cancel := context.WithTimeout(ctx, o.c.timeout+time.Second)
	via, err := p.Dial(dialCtx, o.via)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			s.errorf("fastnet peer: interrupted")
		} else {
			s.errorf("fastnet peer: introducer %s", dialFailure(o.via, false, o.c.timeout, err))
		}
		return exitFailure
	}
	if o.to == 0 {
		return awaitIntroductions(ctx, s, p, via, o)
	}
	s.errorf("peer id %d via %s", via.ID(), via.RemoteAddr())
	c, path, err := p.Introduce(ctx, via, o.to)
	for end := time.Now().Add(unknownRetry); err != nil && time.Now().Before(end); {
		var ie *fastnet.IntroError
		if !errors.As(err, &ie) || ie.Code != fastnet.IntroUnknownTarget {
			break
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
		}
		c, path, err = p.Introduce(ctx, via, o.to)
	}
	if err != nil {
		if ctx.Err() != nil {
			s.errorf("fastnet peer: interrupted")
		} else {
			s.errorf("fastnet peer: %s", introFailure(err))
		}
		return exitFailure
	}
	over := "udp"
	if path == fastnet.PathRelay {
		over = "a urp relay"
		// converse then treats c as connect --via-urp's: a stream, and
		// "urp" in its statistics.
		if x, ok := p.Introduction(c); ok {
			o.c.viaURP = x.Relay
		}
	}
	s.errorf("connected to %s over %s (%s path), id %d", c.RemoteAddr(), over, pathName(path), c.ID())
	return converse(ctx, s, c, o.c, fastnet.DefaultMaxMessageSize)
}

// openPeer opens peer's socket on o.listen, through the NAT o.nat names
// if any.
func openPeer(ctx context.Context, o peerOptions, cfg fastnet.Config) (*udpdriver.Peer, error) {
	if o.nat == "" {
		return udpdriver.Open(ctx, o.listen, udpdriver.Config{Engine: cfg})
	}
	gw, err := net.ResolveUDPAddr("udp", o.nat)
	if err != nil {
		return nil, fmt.Errorf("--nat %s: %w", o.nat, err)
	}
	var lc net.ListenConfig
	pc, err := lc.ListenPacket(ctx, "udp", o.listen)
	if err != nil {
		return nil, err
	}
	// Behind the NAT the socket's own addresses are not on its inside:
	// the peer reports no local candidates (X9), and every path goes
	// through the NAT.
	cfg.Punch.Candidates = []netip.AddrPort{}
	return udpdriver.OpenPacket(ctx, usernat.NewClient(pc.(*net.UDPConn), gw.AddrPort()), udpdriver.Config{Engine: cfg})
}

// introFailure says why an introduction gave no connection.
func introFailure(err error) string {
	var ie *fastnet.IntroError
	var re *udpdriver.RelayError
	switch {
	case errors.As(err, &ie):
		return ie.Error()[len("fastnet: "):]
	case errors.As(err, &re):
		return re.Error()[len("udpdriver: "):]
	case errors.Is(err, fastnet.ErrNoIntroducer):
		return "the server does not introduce (is it \"fastnet introducer\"?)"
	}
	return reason(err)
}

// awaitIntroductions is peer without --to: it serves the peers introduced
// to it until ctx is done or the connection to the introducer is lost.
func awaitIntroductions(ctx context.Context, s *stdio, p *udpdriver.Peer, via *udpdriver.Conn, o peerOptions) int {
	s.printf("peer udp %s via %s id=%d", p.Addr(), via.RemoteAddr(), via.ID())
	var wg sync.WaitGroup
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg.Go(func() {
		for {
			c, err := p.Accept(actx)
			if err != nil {
				return
			}
			network := "udp"
			x, ok := p.Introduction(c)
			if ok && x.Path == fastnet.PathRelay {
				network = "urp" // through the introducer's relay (X13)
			}
			line := "introduced %s %s id=%d"
			args := []any{network, c.RemoteAddr(), c.ID()}
			if ok {
				line += " peer=%d path=%s"
				args = append(args, x.PeerID, pathName(x.Path))
			}
			s.printf(line, args...)
			wg.Go(func() { serve(c, network, o.echo, o.print, s) })
		}
	})
	code := exitOK
	select {
	case <-ctx.Done():
	case <-via.Done():
		s.errorf("fastnet peer: connection to the introducer lost: %s", reason(via.Err()))
		code = exitFailure
	}
	cancel()
	p.Close()
	wg.Wait()
	return code
}
