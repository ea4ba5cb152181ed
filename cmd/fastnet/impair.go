package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/fastnet-engine/fastnet/impair"
)

func impairCommand() *command {
	return &command{
		name:    "impair",
		summary: "relay UDP to a server through a lossy, slow, jittery, reordering or narrow path",
		usage:   "impair LISTEN --to TARGET [--loss P] [--delay D] [--jitter D] [--dup P] [--reorder P] [--mtu BYTES] [--rate RATE] [--queue SIZE] [--seed N]",
		details: `
Relays UDP datagrams between clients and the server at TARGET, impairing
them as a bad network path would, so that a program (a Fastnet client and
server, or any UDP program) can be tried on one. Clients send to LISTEN
instead of TARGET; each client address gets a socket of the relay's own
towards TARGET, and what TARGET answers on it goes back to that client from
LISTEN. Both directions are impaired alike: a datagram longer than --mtu
bytes is dropped, one in --loss is lost, one in --dup arrives twice, each
copy is delayed by --delay plus or minus up to --jitter, and one in
--reorder is held back further, for the datagrams after it to overtake it.

With --rate, each direction is also a bottleneck shared by every client:
datagrams (counted with their 28 bytes of IPv4 and UDP headers, 48 over
IPv6) wait in one queue per direction and leave at the rate, before their
delay; one that would make the queue pass --queue bytes is dropped (tail
drop). A rate is a number and a unit of bits (20mbit, 512kbit, 1gbit) or of
bytes (2.5MB, 300kB, 1MiB) a second; a size is a number of bytes, with or
without a unit (100kB, 64KiB, 150000). The queue defaults to one
bandwidth-delay product of the round trip the relay adds (--rate times
twice --delay), at least 15000 bytes.

An empty host in LISTEN (":7200") is every address; in TARGET it is
` + localHost + `. Port 0 in LISTEN picks a free port. The relay serves until SIGINT
or SIGTERM. Standard output has a line when it starts and one when it ends:

	impairing udp 127.0.0.1:7200 to 127.0.0.1:7000: loss 5%, delay 20ms ± 5ms, duplication 0%, reordering 0%, any size, seed 1
	relayed 1204 datagrams: 58 lost, 0 too big, 0 duplicated, 0 held back, 0 overflowed, 0 without room; clients active at the end: 1

With --rate, both lines say more:

	impairing udp 127.0.0.1:7401 to 127.0.0.1:7400: loss 0%, delay 20ms ± 0s, duplication 0%, reordering 0%, any size, rate 20 Mbit/s each way, queue 100000 bytes, seed 1
	relayed 111696 datagrams: 0 lost, 0 too big, 0 duplicated, 0 held back, 0 overflowed, 0 without room; clients active at the end: 1; queue up: 49308 dropped, deepest 100000 bytes, delay p50 26.7ms p99 40.0ms; queue down: 2575 dropped, deepest 100000 bytes, delay p50 14.2ms p99 40.0ms

With the same --seed, the same datagrams arriving in the same order meet
the same fate. At most 1024 client addresses are served at once (a client's
socket is closed after 2 minutes without a datagram either way), and at most
65,536 datagrams wait in each direction. The relay is the one the demo
command uses (package impair).

	fastnet listen --udp 127.0.0.1:7000 --echo &
	fastnet impair 127.0.0.1:7200 --to 127.0.0.1:7000 --loss 0.05 --delay 50ms &
	fastnet connect 127.0.0.1:7200
	fastnet impair 127.0.0.1:7200 --to 127.0.0.1:7000 --delay 20ms --rate 20mbit --queue 100kB`,
		flags: func(fs *flag.FlagSet) func(context.Context, []string, *stdio) int {
			to := fs.String("to", "", "relay to the UDP server at `HOST:PORT` (required)")
			var cfg impair.Config
			fs.Float64Var(&cfg.Loss, "loss", 0, "lose a datagram with probability `P`, each way, 0..1")
			fs.DurationVar(&cfg.Delay, "delay", 0, "delay each datagram by `D`, each way, at most 1m")
			fs.DurationVar(&cfg.Jitter, "jitter", 0, "vary each delay by up to `D` either way, at most 1m")
			fs.Float64Var(&cfg.Dup, "dup", 0, "duplicate a datagram with probability `P`, 0..1")
			fs.Float64Var(&cfg.Reorder, "reorder", 0, "hold a datagram back behind later ones with probability `P`, 0..1")
			fs.IntVar(&cfg.MTU, "mtu", 0, "drop datagrams longer than `BYTES`, 1..65535 (0: none)")
			fs.Uint64Var(&cfg.Seed, "seed", 1, "seed the random choices with `N`")
			rate := fs.String("rate", "", "limit each direction to `RATE`, as 20mbit or 2.5MB (default: no limit)")
			queue := fs.String("queue", "", "drop what would make the queue of --rate pass `SIZE` bytes, as 100kB (default: one bandwidth-delay product)")
			return func(ctx context.Context, args []string, s *stdio) int {
				bad := func(format string, a ...any) int { return usageError(s, "impair", format, a...) }
				prob := func(p float64) bool { return !math.IsNaN(p) && p >= 0 && p <= 1 }
				switch {
				case len(args) == 0:
					return bad("missing LISTEN address")
				case len(args) > 1:
					return bad("unexpected argument %q", args[1])
				case *to == "":
					return bad("missing --to HOST:PORT, the server to relay to")
				case !prob(cfg.Loss):
					return bad("--loss %v: want a probability from 0 to 1", cfg.Loss)
				case !prob(cfg.Dup):
					return bad("--dup %v: want a probability from 0 to 1", cfg.Dup)
				case !prob(cfg.Reorder):
					return bad("--reorder %v: want a probability from 0 to 1", cfg.Reorder)
				case cfg.Delay < 0 || cfg.Delay > impair.MaxDelay:
					return bad("--delay %v: want 0 to %v", cfg.Delay, impair.MaxDelay)
				case cfg.Jitter < 0 || cfg.Jitter > impair.MaxDelay:
					return bad("--jitter %v: want 0 to %v", cfg.Jitter, impair.MaxDelay)
				case cfg.MTU < 0 || cfg.MTU > 65535:
					return bad("--mtu %d: want 1 to 65535, or 0 for none", cfg.MTU)
				}
				if *rate != "" {
					r, err := impair.ParseRate(*rate)
					if err != nil {
						return bad("--rate: %v", err)
					}
					cfg.Rate = r
				}
				if *queue != "" {
					q, err := impair.ParseSize(*queue)
					switch {
					case err != nil:
						return bad("--queue: %v", err)
					case cfg.Rate == 0:
						return bad("--queue %s without --rate: the queue is the rate's", *queue)
					case q < 1 || q > impair.MaxQueue:
						return bad("--queue %s: want 1 byte to %d bytes", *queue, impair.MaxQueue)
					}
					cfg.Queue = int(q)
				}
				if err := cfg.Validate(); err != nil {
					return bad("%v", err)
				}
				for _, a := range []string{args[0], *to} {
					if err := checkAddr(a); err != nil {
						return bad("%v", err)
					}
				}
				return runImpair(ctx, s, args[0], dialAddr(*to), cfg)
			}
		},
	}
}

// runImpair is the impair command.
func runImpair(ctx context.Context, s *stdio, listen, target string, cfg impair.Config) int {
	setup, cancel := context.WithTimeout(ctx, 10*time.Second) // for the names
	defer cancel()
	r, err := impair.Listen(setup, listen, target, cfg)
	if err != nil {
		s.errorf("fastnet impair: %v", err)
		return exitFailure
	}
	desc := describeImpairment(cfg)
	if rc := r.Config(); rc.Rate > 0 {
		desc += fmt.Sprintf(", rate %s each way, queue %d bytes", describeRate(rc.Rate), rc.Queue)
	}
	s.printf("impairing udp %s to %s: %s, seed %d", r.Addr(), r.Target(), desc, cfg.Seed)
	<-ctx.Done()
	r.Close()
	st := r.Stats()
	queues := ""
	if cfg.Rate > 0 {
		queues = fmt.Sprintf("; queue up: %s; queue down: %s", describeQueue(st.Up), describeQueue(st.Down))
	}
	s.printf("relayed %d datagrams: %d lost, %d too big, %d duplicated, %d held back, %d overflowed, %d without room; clients active at the end: %d%s",
		st.Datagrams, st.Lost, st.TooBig, st.Duplicated, st.Reordered, st.Overflow, st.NoRoom, st.Clients, queues)
	return exitOK
}

// describeQueue says what the queue of one direction of a rate-limited
// relay did.
func describeQueue(q impair.QueueStats) string {
	ms := func(d time.Duration) string { return strconv.FormatFloat(d.Seconds()*1000, 'f', 1, 64) + "ms" }
	return fmt.Sprintf("%d dropped, deepest %d bytes, delay p50 %s p99 %s", q.Dropped, q.MaxBytes, ms(q.DelayP50), ms(q.DelayP99))
}

// describeRate writes a rate in bytes a second as bits a second, in the
// largest unit that keeps a whole part: "20 Mbit/s".
func describeRate(bytesPerSecond int64) string {
	bits := float64(bytesPerSecond) * 8
	for _, u := range []struct {
		div  float64
		name string
	}{{1e9, "Gbit/s"}, {1e6, "Mbit/s"}, {1e3, "kbit/s"}} {
		if bits >= u.div {
			return strconv.FormatFloat(bits/u.div, 'g', 4, 64) + " " + u.name
		}
	}
	return strconv.FormatFloat(bits, 'g', 4, 64) + " bit/s"
}
