// Command fastnet serves, talks to, probes and demonstrates the Fastnet 1.0
// protocol over UDP and TCP, and relays UDP through an impaired path to try
// programs on a bad network. docs/cli.md is its reference.
//
// Usage:
//
//	fastnet listen  [--udp HOST:PORT] [--tcp HOST:PORT] [--via-urp RELAY] [--echo] [--print]
//	                [--max-conns N]
//	fastnet connect HOST:PORT [--tcp] [--channel N] [--unreliable] [--raw [--chunk N]]
//	                [--timeout D] [--drain D] [--stats]
//	fastnet connect --via-urp RELAY --group GID --password P [the flags above but --tcp]
//	fastnet relay   [--urp HOST:PORT] [--max-users N] [--max-groups N] [--max-group-size N]
//	                [--max-message BYTES] [--max-output BYTES] [--write-timeout D]
//	                [--join-failures N] [--join-failure-every D] [--brand TEXT]
//	fastnet probe   HOST:PORT [--tcp] [--timeout D]
//	fastnet impair  LISTEN --to TARGET [--loss P] [--delay D] [--jitter D] [--dup P]
//	                [--reorder P] [--mtu BYTES] [--rate RATE] [--queue SIZE] [--seed N]
//	fastnet introducer [LISTEN] [--max-conns N] [--relay HOST:PORT]
//	fastnet peer    --via SERVER [--listen HOST:PORT] [--nat HOST:PORT] [--accept [--echo] [--print]]
//	fastnet peer    --via SERVER --to ID [--listen HOST:PORT] [--nat HOST:PORT] [connect's flags]
//	fastnet nat     --outside IP [--inside HOST:PORT] [--type TYPE] [--timeout D] [--hairpinning]
//	                [--first-port N]
//	fastnet demo    [--clients N] [--duration D] [--wait D] [--loss P] [--delay D]
//	                [--jitter D] [--dup P] [--reorder P] [--mtu BYTES] [--seed N]
//	fastnet version
//	fastnet help    [COMMAND]
//
// listen serves until SIGINT or SIGTERM, then closes every connection
// gracefully (D18) and exits. Without --udp and --tcp it listens on UDP
// 127.0.0.1:7000. Its standard output has one line per event:
//
//	listening udp 127.0.0.1:7000
//	connected udp 127.0.0.1:51234 id=2271560481
//	message udp 127.0.0.1:51234 id=2271560481 channel=0 reliable "hello"
//	disconnected udp 127.0.0.1:51234 id=2271560481 messages=3 reason="closed by peer"
//	refused udp 127.0.0.1:51240 reason="server full"
//	refused udp clients=3 reason="server busy"
//
// With --echo every message goes back to its sender on the same channel
// with the same reliability; with --print each is a "message" line, its
// bytes quoted as strconv.Quote does, so that any message is one line.
// --max-conns bounds the connections; the clients beyond it are refused
// with "server full", and those that come while the backlog is full with
// "server busy", a "refused" line naming each. Clients dropped before their
// connection is established (validation, TCP handshakes) are counted in a
// line a second.
//
// connect sends standard input as messages on --channel (default 0),
// reliably unless --unreliable, and writes what it receives on standard
// output. By default each line is a message: a line ends at LF, a CR just
// before it is part of the line ending, and a line may be as long as the
// largest message (1 MiB); each message received is written with a newline
// after it. With --raw, input is sent in messages of --chunk bytes (default
// 1024) and messages received are written as they are. An empty host
// (":7000") is 127.0.0.1. --timeout bounds the handshake (default the
// engine's, 5s); a UDP handshake that gets no answer, or a refused TCP
// connection, suggests the other transport. At the end of its input it
// waits until everything it sent was acknowledged, then keeps writing
// until nothing has arrived for --drain (default 250ms, at most 5 s in
// all, so that the echoes of an --echo server are shown), and closes
// gracefully.
//
// probe sends the status queries of channel -1 (D15) from a plain socket,
// every 200 ms over UDP and once over TCP (framed as D20 says), and prints
// whether Fastnet answers, its version and the round-trip time of the
// queries, or that what answered is not Fastnet, with the size and first
// bytes of its answer. It gives up after --timeout (default 3s).
//
// impair relays UDP datagrams from clients on LISTEN to the server at
// --to and back (package impair), losing, delaying, jittering,
// duplicating and reordering them, and dropping those above --mtu bytes.
//
// demo runs a server and --clients clients in this process, over real
// loopback UDP through the same relay. Each client sends numbered reliable
// messages of varied sizes on channels 1 to 3 and unreliable 64-byte
// position updates on channel 0; the server checks and echoes them and the
// client checks the echoes. It shows progress on standard error and ends
// with a report and a verdict: every reliable message arrived intact and
// in order, both ways.
//
// relay runs a URP 1.0 relay (package urp/urpserver), one line per user
// and group event; listen --via-urp hosts a group on it and prints the
// group's id and password, and connect --via-urp joins that group and
// speaks Fastnet to its host through the relay (package urp/urpdriver).
//
// introducer serves Fastnet over UDP as an introducer (docs/nat.md): peer
// connects to it, prints its id and waits to be introduced (consenting
// with --accept), or with --to ID gets introduced to that peer, punches a
// direct path from the same socket and then behaves as connect, saying on
// standard error which path it got.
//
// nat runs a userspace NAT of a chosen type (package internal/usernat, over
// the simulator's NAT models): mappings on its --outside address, and a
// gateway on --inside through which "peer --nat" sends and receives. It
// prints a line per mapping created and expired.
//
// version prints the module version, the revision it was built from, the
// Go version and the protocol version, from runtime/debug.ReadBuildInfo.
//
// Flags may come before or after the address, with one dash or two; help
// and errors spell them with two.
//
// Exit status: 0 on success (probe: a Fastnet 1.0 server answered; demo:
// the verdict passed), 1 on failure (no answer, refused, connection lost,
// verdict failed), 2 for a usage error (bad flag or address), reported in
// one line on standard error, and for probe 3 when something answered that
// is not a Fastnet 1.0 server.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fastnet-engine/fastnet/udpdriver"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
	// exitNotFastnet is probe's status when something answered that is
	// not a Fastnet 1.0 server.
	exitNotFastnet = 3
)

// maxFlagDuration is the longest --duration and --timeout: the command
// adds its margins to them, and a day is longer than any run wants
// (N109).
const maxFlagDuration = 24 * time.Hour

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// After the first signal, the next one ends the process at once.
		<-ctx.Done()
		stop()
	}()
	os.Exit(run(ctx, os.Args[1:], &stdio{in: os.Stdin, out: os.Stdout, err: os.Stderr}))
}

// stdio is the command's standard streams. Writes to out and err are
// whole lines, serialised so that lines from different goroutines do not
// interleave.
type stdio struct {
	in  io.Reader
	out io.Writer
	err io.Writer
	mu  sync.Mutex
}

// printf writes one line to standard output.
func (s *stdio) printf(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(s.out, format+"\n", args...)
}

// writeLine writes b and a newline to standard output.
func (s *stdio) writeLine(b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.out.Write(b); err != nil {
		return err
	}
	_, err := s.out.Write([]byte{'\n'})
	return err
}

// write writes b to standard output as it is.
func (s *stdio) write(b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, err := s.out.Write(b)
	return err
}

// errorf writes one line to standard error.
func (s *stdio) errorf(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(s.err, format+"\n", args...)
}

// A command is one subcommand.
type command struct {
	name    string
	summary string
	usage   string // the synopsis line after "fastnet "
	details string // paragraphs after the synopsis
	status  string // the exit statuses, if not the usual ones
	// flags adds the command's flags to fs and returns the function that
	// runs the command with the positional arguments, or a usage error.
	flags func(fs *flag.FlagSet) func(ctx context.Context, args []string, s *stdio) int
}

func commands() []*command {
	return []*command{listenCommand(), connectCommand(), probeCommand(), impairCommand(), relayCommand(), introducerCommand(), peerCommand(), natCommand(), demoCommand(), versionCommand()}
}

func findCommand(name string) *command {
	for _, c := range commands() {
		if c.name == name {
			return c
		}
	}
	return nil
}

// run is the command line: it returns the exit status.
func run(ctx context.Context, args []string, s *stdio) int {
	if len(args) == 0 {
		s.errorf("fastnet: missing command (try \"fastnet help\")")
		return exitUsage
	}
	name, args := args[0], args[1:]
	switch name {
	case "-version", "--version":
		name = "version"
	case "help", "-h", "-help", "--help":
		if len(args) == 0 {
			mainHelp(s.out)
			return exitOK
		}
		if len(args) > 1 {
			s.errorf("fastnet help: one command at a time, not %q (try \"fastnet help\")", strings.Join(args, " "))
			return exitUsage
		}
		switch args[0] {
		case "help", "-h", "-help", "--help":
			mainHelp(s.out)
			return exitOK
		}
		c := findCommand(args[0])
		if c == nil {
			s.errorf("fastnet help: unknown command %q (try \"fastnet help\")", args[0])
			return exitUsage
		}
		commandHelp(s.out, c)
		return exitOK
	}
	c := findCommand(name)
	if c == nil {
		s.errorf("fastnet: unknown command %q (try \"fastnet help\")", name)
		return exitUsage
	}
	fs := flag.NewFlagSet("fastnet "+c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	runCmd := c.flags(fs)
	pos, err := parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		commandHelp(s.out, c)
		return exitOK
	}
	if err != nil {
		s.errorf("fastnet %s: %s (see \"fastnet help %s\")", c.name, doubleDash(err.Error()), c.name)
		return exitUsage
	}
	return runCmd(ctx, pos, s)
}

// usageError is a bad command line, reported by a command in one line with
// exit status 2.
func usageError(s *stdio, cmd string, format string, args ...any) int {
	s.errorf("fastnet %s: %s (see \"fastnet help %s\")", cmd, fmt.Sprintf(format, args...), cmd)
	return exitUsage
}

// parseInterspersed parses flags that may come before, between or after the
// positional arguments, which it returns. Everything after "--" is
// positional.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

func mainHelp(w io.Writer) {
	fmt.Fprint(w, `fastnet is a tool for the Fastnet 1.0 protocol over UDP and TCP.

Usage:

	fastnet COMMAND [flags]

Commands:

`)
	for _, c := range commands() {
		fmt.Fprintf(w, "\t%-10s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, `	help       show the help of a command

Run "fastnet help COMMAND" or "fastnet COMMAND --help" for its flags.
Flags may come before or after the arguments, with one dash or two.

Exit status: 0 success, 1 failure, 2 usage error (probe: 3 when something
answered that is not a Fastnet 1.0 server).
`)
}

func commandHelp(w io.Writer, c *command) {
	fmt.Fprintf(w, "Usage: fastnet %s\n\n%s\n", c.usage, strings.TrimSpace(c.details))
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	c.flags(fs)
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprint(w, "\nFlags:\n")
		printFlags(w, fs)
	}
	status := c.status
	if status == "" {
		status = "0 success, 1 failure, 2 usage error."
	}
	fmt.Fprintf(w, "\nExit status: %s\n", status)
}

// printFlags lists the flags of fs as the synopses spell them, with two
// dashes: the name, its argument (the back-quoted word of the usage, as
// flag.UnquoteUsage finds it), the usage and the default unless it is the
// zero value.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		arg, usage := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if arg != "" {
			line += " " + arg
		}
		fmt.Fprintf(w, "%s\n    \t%s", line, strings.ReplaceAll(usage, "\n", "\n    \t"))
		switch f.DefValue {
		case "", "0", "false", "0s":
		default:
			if g, ok := f.Value.(flag.Getter); ok && isString(g.Get()) {
				fmt.Fprintf(w, " (default %q)", f.DefValue)
			} else {
				fmt.Fprintf(w, " (default %s)", f.DefValue)
			}
		}
		fmt.Fprintln(w)
	})
}

func isString(v any) bool {
	_, ok := v.(string)
	return ok
}

// flagName is a flag as the flag package's errors spell it: one dash, the
// name, then the end of the text or a character that cannot be in a name.
var flagName = regexp.MustCompile(`(^|[\s(])-([A-Za-z][A-Za-z0-9-]*)\b`)

// doubleDash rewrites the flag package's error texts ("flag provided but
// not defined: -bogus") with the two dashes the help shows.
func doubleDash(msg string) string {
	return flagName.ReplaceAllString(msg, "$1--$2")
}

// checkAddr checks that addr is "host:port" with a numeric port, or a
// service name the system knows. A missing host means every address to
// listen on, and the local host to connect to (see dialAddr).
func checkAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("bad address %q: want HOST:PORT", addr)
	}
	if strings.ContainsAny(host, " \t") {
		return fmt.Errorf("bad address %q: bad host", addr)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		if _, err := net.LookupPort("udp", port); err != nil || port == "" {
			return fmt.Errorf("bad address %q: bad port %q", addr, port)
		}
	}
	return nil
}

// localHost is the host connect and probe use for an address without one
// (":7000"): listen's default address is on it, and so is a server that
// listens on every address.
const localHost = "127.0.0.1"

// dialAddr returns addr, checked by checkAddr, with localHost for a
// missing host.
func dialAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host != "" {
		return addr
	}
	return net.JoinHostPort(localHost, port)
}

// reason says in a few words why a connection ended or did not start.
func reason(err error) string {
	var ce *udpdriver.CloseError
	if errors.As(err, &ce) && ce.Err != nil {
		err = ce.Err
	}
	return strings.TrimPrefix(err.Error(), "fastnet: ")
}
