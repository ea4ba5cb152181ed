package main

import (
	"bytes"
	"context"
	"flag"
	"io"
	"net"
	"net/netip"
	"regexp"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/fastnet-engine/fastnet/driver"
	"github.com/fastnet-engine/fastnet/fastnet"
)

func TestParseInterspersed(t *testing.T) {
	tests := []struct {
		args []string
		pos  []string
		tcp  bool
		ch   int
	}{
		{[]string{"a:1"}, []string{"a:1"}, false, 0},
		{[]string{"a:1", "--tcp"}, []string{"a:1"}, true, 0},
		{[]string{"--tcp", "a:1", "-channel", "5"}, []string{"a:1"}, true, 5},
		{[]string{"a:1", "--channel=3", "b:2"}, []string{"a:1", "b:2"}, false, 3},
		{[]string{"--", "--tcp", "x"}, []string{"--tcp", "x"}, false, 0},
		{[]string{"a:1", "--", "--tcp"}, []string{"a:1", "--tcp"}, false, 0},
		{nil, nil, false, 0},
	}
	for _, tt := range tests {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		tcp := fs.Bool("tcp", false, "")
		ch := fs.Int("channel", 0, "")
		pos, err := parseInterspersed(fs, tt.args)
		if err != nil || !slices.Equal(pos, tt.pos) || *tcp != tt.tcp || *ch != tt.ch {
			t.Errorf("parse %q = %q, %v, tcp %v, channel %d; want %q, tcp %v, channel %d",
				tt.args, pos, err, *tcp, *ch, tt.pos, tt.tcp, tt.ch)
		}
	}
}

func TestCheckAddr(t *testing.T) {
	tests := []struct {
		addr string
		ok   bool
	}{
		{"127.0.0.1:7000", true},
		{"localhost:0", true},
		{":7000", true},
		{"[::1]:7000", true},
		{"example.com:65535", true},
		{"127.0.0.1", false},
		{"127.0.0.1:65536", false},
		{"127.0.0.1:-1", false},
		{"127.0.0.1:", false},
		{"::1:7000", false},
		{"a b:1", false},
	}
	for _, tt := range tests {
		if err := checkAddr(tt.addr); (err == nil) != tt.ok {
			t.Errorf("checkAddr(%q) = %v, want ok %v", tt.addr, err, tt.ok)
		}
	}
}

// TestChecker feeds the demo's checker right and wrong message sequences.
func TestChecker(t *testing.T) {
	const seed = 7
	rel := func(client, ch int, seq uint32) []byte { return appendReliable(nil, seed, client, ch, seq) }
	pos := func(client int, seq uint32) []byte { return appendPosition(nil, seed, client, seq, time.Second) }
	corrupt := func(b []byte) []byte { b[len(b)-1] ^= 1; return b }
	type msg struct {
		ch       int
		reliable bool
		data     []byte
	}
	tests := []struct {
		name     string
		msgs     []msg
		received [numReliable]int
		posCount int
		errs     int
		firstErr string
	}{
		{"in order", []msg{{1, true, rel(3, 1, 0)}, {2, true, rel(3, 2, 0)}, {1, true, rel(3, 1, 1)}, {3, true, rel(3, 3, 0)}, {0, false, pos(3, 0)}, {0, false, pos(3, 5)}},
			[numReliable]int{2, 1, 1}, 2, 0, ""},
		{"gap", []msg{{1, true, rel(3, 1, 0)}, {1, true, rel(3, 1, 2)}, {1, true, rel(3, 1, 3)}},
			[numReliable]int{2, 0, 0}, 0, 1, "channel 1: message 2 where 1 was due"}, // 0 and 3
		{"duplicate", []msg{{2, true, rel(3, 2, 0)}, {2, true, rel(3, 2, 0)}},
			[numReliable]int{0, 1, 0}, 0, 1, "channel 2: message 0 where 1 was due"},
		{"corrupted", []msg{{3, true, corrupt(rel(3, 3, 0))}},
			[numReliable]int{}, 0, 1, "channel 3: message 0 corrupted"},
		{"truncated", []msg{{3, true, rel(3, 3, 0)[:100]}},
			[numReliable]int{}, 0, 1, "channel 3: message 0 corrupted"},
		{"wrong channel", []msg{{2, true, rel(3, 1, 0)}},
			[numReliable]int{}, 0, 1, "channel 2: message 0 corrupted"},
		{"other client", []msg{{1, true, rel(3, 1, 0)}, {1, true, rel(4, 1, 1)}},
			[numReliable]int{1, 0, 0}, 0, 1, "a message of client 4 from client 3"},
		{"short", []msg{{1, true, []byte{0, 3}}},
			[numReliable]int{}, 0, 1, "shorter than its header"},
		{"unreliable on a reliable channel", []msg{{1, false, rel(3, 1, 0)}},
			[numReliable]int{}, 0, 1, "not part of the demo"},
		{"position twice", []msg{{0, false, pos(3, 4)}, {0, false, pos(3, 4)}},
			[numReliable]int{}, 1, 1, "position update 4 after 4"},
		{"position backwards", []msg{{0, false, pos(3, 4)}, {0, false, pos(3, 2)}},
			[numReliable]int{}, 1, 1, "position update 2 after 4"},
		{"position corrupted", []msg{{0, false, corrupt(pos(3, 0))}},
			[numReliable]int{}, 0, 1, "position update 0: corrupted"},
	}
	for _, tt := range tests {
		c := newChecker(seed, -1)
		for _, m := range tt.msgs {
			c.add(m.ch, m.reliable, m.data)
		}
		st := c.state()
		if st.received != tt.received || st.posCount != tt.posCount || st.errs != tt.errs || !strings.Contains(st.firstErr, tt.firstErr) {
			t.Errorf("%s: received %v, positions %d, %d errors (%q); want %v, %d, %d (%q)",
				tt.name, st.received, st.posCount, st.errs, st.firstErr, tt.received, tt.posCount, tt.errs, tt.firstErr)
		}
	}
}

// TestTrafficSizes checks that the generated reliable messages span their
// kinds' sizes, some above a 1470-byte payload MTU.
func TestTrafficSizes(t *testing.T) {
	for ch := 1; ch <= numReliable; ch++ {
		k := reliableKinds[ch-1]
		lo, hi := 1<<30, 0
		for seq := range uint32(500) {
			n := len(appendReliable(nil, 1, 0, ch, seq))
			lo, hi = min(lo, n), max(hi, n)
		}
		if lo < k.lo || hi > k.hi || hi-lo < (k.hi-k.lo)/2 {
			t.Errorf("channel %d: sizes %d..%d, want a spread within %d..%d", ch, lo, hi, k.lo, k.hi)
		}
	}
	if len(appendPosition(nil, 1, 0, 0, 0)) != posSize {
		t.Errorf("position update of %d bytes, want %d", len(appendPosition(nil, 1, 0, 0, 0)), posSize)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestInProcess runs listen, connect, probe and a short demo in the test's
// process, so that the race detector watches their goroutines.
func TestInProcess(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var lout, lerr syncBuffer
	listened := make(chan int, 1)
	go func() {
		listened <- run(ctx, []string{"listen", "--echo", "--print", "--udp", "127.0.0.1:0", "--tcp", "127.0.0.1:0"}, &stdio{out: &lout, err: &lerr})
	}()
	addrs := map[string]string{}
	for deadline := time.Now().Add(5 * time.Second); len(addrs) < 2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("listen did not start: %q %q", lout.String(), lerr.String())
		}
		for _, l := range strings.Split(lout.String(), "\n") {
			if f := strings.Fields(l); len(f) == 3 && f[0] == "listening" {
				addrs[f[1]] = f[2]
			}
		}
	}

	var wg sync.WaitGroup
	for _, args := range [][]string{{addrs["udp"]}, {"--tcp", addrs["tcp"]}} {
		wg.Go(func() {
			var out, errb syncBuffer
			in := "a\nbb\nccc\n"
			if code := run(context.Background(), append([]string{"connect"}, args...), &stdio{in: strings.NewReader(in), out: &out, err: &errb}); code != 0 || out.String() != in {
				t.Errorf("connect %q: exit %d, stdout %q, stderr %q; want 0 and %q", args, code, out.String(), errb.String(), in)
			}
			out, errb = syncBuffer{}, syncBuffer{}
			if code := run(context.Background(), append([]string{"probe"}, args...), &stdio{out: &out, err: &errb}); code != 0 || !strings.Contains(out.String(), "version: 1.0") {
				t.Errorf("probe %q: exit %d, stdout %q, stderr %q", args, code, out.String(), errb.String())
			}
		})
	}
	wg.Go(func() {
		// Through an impairing relay, raw.
		impCtx, stopImp := context.WithCancel(context.Background())
		defer stopImp()
		var iout, ierr syncBuffer
		impaired := make(chan int, 1)
		go func() {
			impaired <- run(impCtx, []string{"impair", "127.0.0.1:0", "--to", addrs["udp"], "--delay", "2ms", "--dup", "0.1", "--reorder", "0.1"}, &stdio{out: &iout, err: &ierr})
		}()
		var relay string
		for deadline := time.Now().Add(5 * time.Second); relay == ""; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Errorf("impair did not start: %q %q", iout.String(), ierr.String())
				return
			}
			if f := strings.Fields(iout.String()); len(f) > 2 && f[0] == "impairing" {
				relay = f[2]
			}
		}
		var out, errb syncBuffer
		in := "\x00\r\n\xff raw bytes"
		if code := run(context.Background(), []string{"connect", "--raw", "--chunk", "3", relay}, &stdio{in: strings.NewReader(in), out: &out, err: &errb}); code != 0 || out.String() != in {
			t.Errorf("connect --raw through impair: exit %d, stdout %q, stderr %q; want 0 and %q", code, out.String(), errb.String(), in)
		}
		stopImp()
		if code := <-impaired; code != 0 || !strings.Contains(iout.String(), "\nrelayed ") {
			t.Errorf("impair: exit %d, stdout %q, stderr %q", code, iout.String(), ierr.String())
		}
	})
	wg.Go(func() {
		// Short enough for no large message (channel 3 sends 2 a second):
		// under the race detector the engine is too slow for a message of
		// 1,000 packets at the initial MTU; TestDemo runs a full demo.
		var out, errb syncBuffer
		if code := run(context.Background(), []string{"demo", "--duration", "400ms", "--clients", "3"}, &stdio{out: &out, err: &errb}); code != 0 {
			t.Errorf("demo: exit %d\n%s\n%s", code, out.String(), errb.String())
		}
	})
	wg.Wait()
	cancel()
	select {
	case code := <-listened:
		if code != 0 {
			t.Errorf("listen exited %d", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("listen did not end after its context")
	}
	// The relay may be gone before the last client's "disconnect" passed
	// it: that connection then ends when listen does.
	if n := strings.Count(lout.String(), "\ndisconnected "); n != 3 {
		t.Errorf("listen reported %d disconnections, want 3:\n%s", n, lout.String())
	}
	if n := strings.Count(lout.String(), "\nmessage "); n != 3+3+5 {
		t.Errorf("listen printed %d messages, want 11:\n%s", n, lout.String())
	}
}

// TestDemoGivesUp runs a demo whose clients cannot wait long enough for
// their last echoes (a 400 ms round trip, a 1 ms --wait) and checks that the
// report says they stopped waiting, with how many echoes were on their way,
// and does not present the run as damaged.
func TestDemoGivesUp(t *testing.T) {
	t.Parallel()
	var out, errb syncBuffer
	code := run(context.Background(), []string{"demo", "--duration", "300ms", "--clients", "1",
		"--delay", "200ms", "--jitter", "0s", "--loss", "0", "--dup", "0", "--reorder", "0", "--wait", "1ms"},
		&stdio{out: &out, err: &errb})
	if code != exitFailure {
		t.Fatalf("demo: exit %d, want %d\n%s\n%s", code, exitFailure, out.String(), errb.String())
	}
	report := out.String()
	for _, want := range []string{
		"verdict: FAIL: incomplete: 1 of 1 clients stopped waiting before every echo arrived; nothing arrived damaged",
		"client 0: stopped waiting with ",
		"echoes still on their way",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
}

// TestDemoReportsUnreliableExpired checks that the demo's report says how
// many unreliable messages the senders dropped for waiting longer than
// Config.UnreliableMaxDelay (D30), so that the unreliable messages that did
// not arrive are not all taken for the relay's losses, and that the count is
// within those that did not arrive.
func TestDemoReportsUnreliableExpired(t *testing.T) {
	t.Parallel()
	var out, errb syncBuffer
	code := run(context.Background(), []string{"demo", "--duration", "1s", "--clients", "1",
		"--loss", "0", "--dup", "0", "--reorder", "0", "--wait", "5s"},
		&stdio{out: &out, err: &errb})
	report := out.String()
	if code != exitOK {
		t.Fatalf("demo: exit %d\n%s\n%s", code, report, errb.String())
	}
	sent := regexp.MustCompile(`unreliable messages +(\d+) +(\d+) `).FindStringSubmatch(report)
	expired := regexp.MustCompile(`(?m)^unreliable expired: +(\d+) at the clients, (\d+) at the server`).FindStringSubmatch(report)
	if sent == nil || expired == nil {
		t.Fatalf("report lacks the unreliable counts or the expired line:\n%s", report)
	}
	n := func(s string) int { v, _ := strconv.Atoi(s); return v }
	if n(expired[1]) > n(sent[1])-n(sent[2]) {
		t.Errorf("%s unreliable messages expired at the clients, but only %d of %s did not reach the server:\n%s",
			expired[1], n(sent[1])-n(sent[2]), sent[1], report)
	}
}

// TestLineReader cuts input into the messages of connect's line mode.
func TestLineReader(t *testing.T) {
	long := strings.Repeat("y", 10)
	tests := []struct {
		in    string
		max   int
		lines []string
		err   string
	}{
		{"", 10, nil, ""},
		{"\n", 10, []string{""}, ""},
		{"a\nb", 10, []string{"a", "b"}, ""},
		{"a\r\nb\r\n", 10, []string{"a", "b"}, ""},
		{"a\rb\n\r\r\n\r", 10, []string{"a\rb", "\r", "\r"}, ""},
		{"\x00\n\n", 10, []string{"\x00", ""}, ""},
		{long + "\n" + long + "\r\n" + long, 10, []string{long, long, long}, ""},
		{"ok\n" + long + "z\nnext\n", 10, []string{"ok"}, "input line 2 is longer than 10 bytes"},
		{long + "\r\r\n", 10, nil, "input line 1 is longer than 10 bytes"},
		{long + "zz", 10, nil, "input line 1 is longer than 10 bytes"},
		{strings.Repeat("w", 200<<10) + "\n", 200 << 10, []string{strings.Repeat("w", 200<<10)}, ""},
	}
	for _, tt := range tests {
		lr := newLineReader(strings.NewReader(tt.in), tt.max)
		var got []string
		var err error
		for {
			var b []byte
			if b, err = lr.next(); err != nil {
				break
			}
			got = append(got, string(b))
		}
		if !slices.Equal(got, tt.lines) {
			t.Errorf("%q: lines %q, want %q", trim(tt.in), got, tt.lines)
		}
		switch {
		case tt.err == "" && err != io.EOF:
			t.Errorf("%q: ended with %v, want EOF", trim(tt.in), err)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%q: ended with %v, want %q", trim(tt.in), err, tt.err)
		}
	}
}

// TestChunkReader cuts input into the messages of connect --raw.
func TestChunkReader(t *testing.T) {
	for _, tt := range []struct {
		in     string
		size   int
		chunks []string
	}{
		{"", 3, nil},
		{"abc", 3, []string{"abc"}},
		{"abcdefg", 3, []string{"abc", "def", "g"}},
		{"\x00\r\n\x00", 2, []string{"\x00\r", "\n\x00"}},
	} {
		cr := newChunkReader(iotest.OneByteReader(strings.NewReader(tt.in)), tt.size)
		var got []string
		for {
			b, err := cr.next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, string(b))
		}
		if !slices.Equal(got, tt.chunks) {
			t.Errorf("%q in %d: %q, want %q", tt.in, tt.size, got, tt.chunks)
		}
	}
}

func TestDoubleDash(t *testing.T) {
	for in, want := range map[string]string{
		"flag provided but not defined: -bogus":              "flag provided but not defined: --bogus",
		`invalid value "-5x" for flag -channel: parse error`: `invalid value "-5x" for flag --channel: parse error`,
		"flag needs an argument: -max-conns":                 "flag needs an argument: --max-conns",
		`invalid boolean value "x" for -tcp: parse error`:    `invalid boolean value "x" for --tcp: parse error`,
		"bad flag syntax: ---x":                              "bad flag syntax: ---x",
		"--already two":                                      "--already two",
	} {
		if got := doubleDash(in); got != want {
			t.Errorf("doubleDash(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPrintFlags(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.Bool("tcp", false, "over TCP")
	fs.String("udp", "127.0.0.1:7000", "serve on `HOST:PORT`")
	fs.Int("n", 5, "how many (`N`)")
	fs.Duration("wait", 0, "wait this long")
	var b strings.Builder
	printFlags(&b, fs)
	want := "  --n N\n    \thow many (N) (default 5)\n" +
		"  --tcp\n    \tover TCP\n" +
		"  --udp HOST:PORT\n    \tserve on HOST:PORT (default \"127.0.0.1:7000\")\n" +
		"  --wait duration\n    \twait this long\n"
	if b.String() != want {
		t.Errorf("printFlags wrote\n%s\nwant\n%s", b.String(), want)
	}
}

func TestVersionLines(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.99", Main: debug.Module{Path: "github.com/fastnet-engine/fastnet", Version: "(devel)"}}
	got := versionLines(bi, true)
	if got[0] != "fastnet (devel)" || !strings.HasPrefix(got[2], "revision: not recorded") || !strings.HasPrefix(got[3], "go:       go1.99 ") {
		t.Errorf("without VCS information: %q", got)
	}
	bi.Main.Version = "v1.2.3"
	bi.Settings = []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789abcdef0123"},
		{Key: "vcs.time", Value: "2026-01-02T03:04:05Z"},
		{Key: "vcs.modified", Value: "true"},
		{Key: "GOOS", Value: "plan9"},
		{Key: "GOARCH", Value: "arm"},
	}
	got = versionLines(bi, true)
	want := []string{
		"fastnet v1.2.3",
		"module:   github.com/fastnet-engine/fastnet v1.2.3",
		"revision: 0123456789ab 2026-01-02T03:04:05Z (modified)",
		"go:       go1.99 plan9/arm",
		"protocol: Fastnet 1.0",
	}
	if !slices.Equal(got, want) {
		t.Errorf("with VCS information: %q, want %q", got, want)
	}
	if got := versionLines(nil, false); !strings.Contains(got[0], "no build information") {
		t.Errorf("without build information: %q", got)
	}
}

func TestCountLines(t *testing.T) {
	prev := turnedAway{unlogged: 1, expired: 2}
	cur := turnedAway{unlogged: 6, expired: 2, hsTimedOut: 1}
	got := countLines("tcp", prev, cur)
	want := []string{
		`refused tcp clients=5 reason="too many to name"`,
		`dropped tcp clients=1 reason="handshake timed out"`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("countLines = %q, want %q", got, want)
	}
	if got := countLines("udp", cur, cur); got != nil {
		t.Errorf("nothing new: %q", got)
	}
}

func TestDialAddr(t *testing.T) {
	for in, want := range map[string]string{
		":7000":          "127.0.0.1:7000",
		"[::1]:7000":     "[::1]:7000",
		"example.org:80": "example.org:80",
		"localhost:http": "localhost:http",
	} {
		if got := dialAddr(in); got != want {
			t.Errorf("dialAddr(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestLogRefused checks listen's lines for refused clients (N67): one per
// client, though its "connect?" was refused twice, with the reason it was
// sent; the listener's other events are not printed.
func TestLogRefused(t *testing.T) {
	c1, c2 := netip.MustParseAddrPort("[::1]:3"), netip.MustParseAddrPort("[::ffff:127.0.0.1]:4")
	events := make(chan driver.Event, 8)
	full := &fastnet.RefusedError{Reason: "server full"}
	events <- driver.Event{Kind: driver.EventRefused, Addr: c1, Err: full}
	events <- driver.Event{Kind: driver.EventConnected, Addr: c2}
	events <- driver.Event{Kind: driver.EventRefused, Addr: c1, Err: full}
	events <- driver.Event{Kind: driver.EventRefused, Addr: c2, Err: &fastnet.RefusedError{Reason: "server busy"}}
	close(events)
	var out, errb syncBuffer
	logRefused(&stdio{out: &out, err: &errb}, "udp", events)
	want := "refused udp [::1]:3 reason=\"server full\"\nrefused udp 127.0.0.1:4 reason=\"server busy\"\n"
	if out.String() != want {
		t.Errorf("logged %q, want %q", out.String(), want)
	}
}

// TestUsageNamesEveryFlag checks that each command's synopsis, the first
// line of its help, names every flag the command takes, and that the help
// gives each flag that takes a value a placeholder of its own (N, D,
// HOST:PORT, TEXT), not the name of a Go type.
func TestUsageNamesEveryFlag(t *testing.T) {
	for _, c := range commands() {
		fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
		c.flags(fs)
		fs.VisitAll(func(f *flag.Flag) {
			if !regexp.MustCompile(`\[?--` + regexp.QuoteMeta(f.Name) + `[ \]]`).MatchString(c.usage + " ") {
				t.Errorf("fastnet %s: the synopsis %q lacks --%s", c.name, c.usage, f.Name)
			}
			switch name, _ := flag.UnquoteUsage(f); name {
			case "string", "int", "uint", "float", "duration", "value":
				t.Errorf("fastnet %s: --%s shows the placeholder %q in the help; name it in backquotes in the flag's usage", c.name, f.Name, name)
			}
		})
	}
}

// TestDialFailureRefused checks that a server's refusal is reported as
// docs/cli.md shows it, with the server's reason after the address alone,
// not the dial's own words around it.
func TestDialFailureRefused(t *testing.T) {
	err := error(&net.OpError{Op: "dial", Net: "udp", Addr: net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:7000")),
		Err: &fastnet.RefusedError{Reason: "server full"}})
	for _, tcp := range []bool{false, true} {
		got := dialFailure("127.0.0.1:7000", tcp, 5*time.Second, err)
		if want := "127.0.0.1:7000: connection refused: server full"; got != want {
			t.Errorf("tcp %v: %q, want %q", tcp, got, want)
		}
	}
}
