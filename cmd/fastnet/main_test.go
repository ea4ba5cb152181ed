package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// fastnetBin is the command, built once by TestMain.
var fastnetBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fastnet-cmd-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fastnetBin = filepath.Join(dir, "fastnet")
	if out, err := exec.Command("go", "build", "-o", fastnetBin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the command: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// result is how a run of the command ended.
type result struct {
	stdout, stderr string
	code           int
	took           time.Duration
}

// runBin runs the command with args and stdin, and fails the test if it
// takes longer than limit.
func runBin(t *testing.T, stdin string, limit time.Duration, args ...string) result {
	t.Helper()
	return runBinReader(t, strings.NewReader(stdin), limit, args...)
}

// runBinReader is runBin with stdin read from r.
func runBinReader(t *testing.T, stdin io.Reader, limit time.Duration, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, fastnetBin, args...)
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String(), took: time.Since(start)}
	if ctx.Err() != nil {
		t.Fatalf("fastnet %q did not end within %v\nstdout:\n%s\nstderr:\n%s", args, limit, r.stdout, r.stderr)
	}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("fastnet %q: %v", args, err)
	}
	return r
}

// server is a running "fastnet listen".
type server struct {
	cmd      *exec.Cmd
	udp, tcp string // the addresses it listens on
	lines    chan string
	stderr   bytes.Buffer
	mu       sync.Mutex
	seen     []string
	exited   chan struct{}
	exitCode int
}

// startServer runs "fastnet listen" with args on free ports and waits
// until it listens.
func startServer(t *testing.T, args ...string) *server {
	t.Helper()
	s := startCmd(t, append([]string{"listen"}, args...)...)
	want := strings.Count(strings.Join(args, " "), "--udp") + strings.Count(strings.Join(args, " "), "--tcp")
	for range max(want, 1) {
		l := s.waitLine(t, "listening ")
		f := strings.Fields(l)
		if len(f) != 3 {
			t.Fatalf("listen said %q", l)
		}
		switch f[1] {
		case "udp":
			s.udp = f[2]
		case "tcp":
			s.tcp = f[2]
		}
	}
	return s
}

// startCmd runs the command with args in the background, its standard
// output read line by line into lines.
func startCmd(t *testing.T, args ...string) *server {
	t.Helper()
	s := &server{lines: make(chan string, 10000), exited: make(chan struct{})}
	s.cmd = exec.Command(fastnetBin, args...)
	s.cmd.Stderr = &s.stderr
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 8<<20) // a printed message of 1 MiB, quoted
		for sc.Scan() {
			s.lines <- sc.Text()
		}
		close(s.lines)
		err := s.cmd.Wait()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			s.exitCode = ee.ExitCode()
		}
		close(s.exited)
	}()
	t.Cleanup(func() {
		s.cmd.Process.Kill()
		<-s.exited
	})
	return s
}

// waitLine returns the next line of the server's output that starts with
// prefix, failing the test after 10 seconds.
func (s *server) waitLine(t *testing.T, prefix string) string {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case l, ok := <-s.lines:
			if !ok {
				t.Fatalf("listen ended before a line %q; stderr:\n%s", prefix, s.stderrText())
			}
			s.mu.Lock()
			s.seen = append(s.seen, l)
			s.mu.Unlock()
			if strings.HasPrefix(l, prefix) {
				return l
			}
		case <-timeout:
			t.Fatalf("no line %q from listen; seen %q", prefix, s.seenLines())
		}
	}
}

func (s *server) seenLines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.seen...)
}

func (s *server) stderrText() string {
	<-s.exited
	return s.stderr.String()
}

// stop sends sig and returns the exit status.
func (s *server) stop(t *testing.T, sig os.Signal) int {
	t.Helper()
	s.cmd.Process.Signal(sig)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("listen did not exit within 10s of %v", sig)
	}
	return s.exitCode
}

// A connection event line of listen.
var (
	connectedRE    = regexp.MustCompile(`^connected (udp|tcp) (127\.0\.0\.1:\d+) id=(\d+)$`)
	disconnectedRE = regexp.MustCompile(`^disconnected (udp|tcp) (127\.0\.0\.1:\d+) id=(\d+) messages=(\d+) reason="(.*)"$`)
	clientIDRE     = regexp.MustCompile(`connected to 127\.0\.0\.1:\d+ over (udp|tcp), id (\d+)`)
)

// TestConnectEcho pipes lines through "connect" to an "--echo" server over
// UDP and TCP and checks that each comes back, in order, that connect
// exits 0, and that listen reports the connection and its graceful end.
func TestConnectEcho(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "--echo", "--udp", "127.0.0.1:0", "--tcp", "127.0.0.1:0")
	long := strings.Repeat("0123456789", 500) // far above the initial payload MTU of 32 bytes
	tests := []struct {
		name  string
		args  []string
		lines []string
		delay time.Duration // before the input comes
	}{
		{"udp", []string{srv.udp}, []string{"hello", "", "Fastnet ✓", long, "last"}, 0},
		{"udp-unreliable-channel", []string{srv.udp, "--unreliable", "--channel", "7"}, []string{"one", "two"}, 0},
		{"udp-late-input", []string{srv.udp}, []string{"late"}, 600 * time.Millisecond},
		{"tcp", []string{srv.tcp, "--tcp"}, []string{"hello", "", "Fastnet ✓", long, "last"}, 0},
	}
	for _, tt := range tests {
		// One at a time, so that the server's lines belong to this
		// connection.
		t.Run(tt.name, func(t *testing.T) {
			in := strings.Join(tt.lines, "\n") + "\n"
			r := runBinReader(t, &delayedReader{d: tt.delay, r: strings.NewReader(in)}, 20*time.Second, append([]string{"connect"}, tt.args...)...)
			if r.code != 0 {
				t.Fatalf("connect exited %d; stderr:\n%s", r.code, r.stderr)
			}
			if r.stdout != in {
				t.Errorf("connect printed %q, want the echoes %q", trim(r.stdout), trim(in))
			}
			m := clientIDRE.FindStringSubmatch(r.stderr)
			if m == nil {
				t.Fatalf("connect's stderr %q does not say it connected", r.stderr)
			}
			transport, id := m[1], m[2]

			c := connectedRE.FindStringSubmatch(srv.waitLine(t, "connected "))
			if c == nil || c[1] != transport || c[3] != id {
				t.Errorf("listen said %q, want a %s connection with id %s", c, transport, id)
			}
			d := disconnectedRE.FindStringSubmatch(srv.waitLine(t, "disconnected "))
			switch {
			case d == nil:
				t.Errorf("disconnected line malformed; seen %q", srv.seenLines())
			case d[1] != transport || d[2] != c[2] || d[3] != id:
				t.Errorf("disconnected %q does not match connected %q", d[0], c[0])
			case d[4] != fmt.Sprint(len(tt.lines)):
				t.Errorf("listen counted %s messages, want %d", d[4], len(tt.lines))
			case d[5] != "closed by peer":
				t.Errorf("reason %q, want %q", d[5], "closed by peer")
			}
		})
	}
	if code := srv.stop(t, syscall.SIGINT); code != 0 {
		t.Errorf("listen exited %d after SIGINT, want 0; stderr:\n%s", code, srv.stderrText())
	}
}

// delayedReader reads from r after waiting d.
type delayedReader struct {
	d      time.Duration
	r      io.Reader
	waited bool
}

func (d *delayedReader) Read(p []byte) (int, error) {
	if !d.waited {
		time.Sleep(d.d)
		d.waited = true
	}
	return d.r.Read(p)
}

// trim shortens s for a failure message.
func trim(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

// TestListenShutdown checks that SIGTERM closes the connections of listen
// gracefully: the client hears why (D18) and listen exits 0.
func TestListenShutdown(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "--udp", "127.0.0.1:0")
	cmd := exec.Command(fastnetBin, "connect", srv.udp)
	stdin, err := cmd.StdinPipe() // held open: the client waits for input
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	srv.waitLine(t, "connected udp ")

	if code := srv.stop(t, syscall.SIGTERM); code != 0 {
		t.Errorf("listen exited %d after SIGTERM, want 0", code)
	}
	d := disconnectedRE.FindStringSubmatch(srv.waitLine(t, "disconnected "))
	if d == nil || d[5] != "connection closed: server shutting down" {
		t.Errorf("listen said %q, want the reason %q", d, "connection closed: server shutting down")
	}
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Errorf("connect ended with %v, want exit status 1", err)
		}
		if want := "connection lost: closed by peer: server shutting down"; !strings.Contains(stderr.String(), want) {
			t.Errorf("connect said %q, want %q", stderr.String(), want)
		}
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatal("connect did not end after the server shut down")
	}
}

// TestMaxConns checks that --max-conns refuses the client beyond it.
func TestMaxConns(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "--tcp", "127.0.0.1:0", "--max-conns", "1")
	first := exec.Command(fastnetBin, "connect", "--tcp", srv.tcp)
	stdin, err := first.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		first.Wait()
	}()
	srv.waitLine(t, "connected tcp ")

	r := runBin(t, "", 10*time.Second, "connect", "--tcp", srv.tcp)
	if r.code != 1 || !strings.Contains(r.stderr, "refused: server full") {
		t.Errorf("second connect: exit %d, stderr %q; want 1 and %q", r.code, r.stderr, "refused: server full")
	}
	if l := srv.waitLine(t, "refused "); !refusedRE.MatchString(l) || !strings.HasPrefix(l, "refused tcp ") {
		t.Errorf("listen said %q, want a line like %q", l, `refused tcp 127.0.0.1:5555 reason="server full"`)
	}
}

var refusedRE = regexp.MustCompile(`^refused (udp|tcp) 127\.0\.0\.1:\d+ reason="server full"$`)

// TestMaxConnsUDP checks that --max-conns refuses the UDP client beyond it,
// names it, and lets a client in once a place is free.
func TestMaxConnsUDP(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "--udp", "127.0.0.1:0", "--max-conns", "1")
	first := exec.Command(fastnetBin, "connect", srv.udp)
	stdin, err := first.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	defer first.Wait()
	srv.waitLine(t, "connected udp ")

	r := runBin(t, "", 10*time.Second, "connect", srv.udp)
	if r.code != 1 || !strings.Contains(r.stderr, "refused: server full") {
		t.Errorf("second connect: exit %d, stderr %q; want 1 and %q", r.code, r.stderr, "refused: server full")
	}
	l := srv.waitLine(t, "refused ")
	if !refusedRE.MatchString(l) || !strings.HasPrefix(l, "refused udp ") {
		t.Errorf("listen said %q, want a line like %q", l, `refused udp 127.0.0.1:5555 reason="server full"`)
	}
	stdin.Close() // the first client leaves
	srv.waitLine(t, "disconnected ")
	if r := runBin(t, "hi\n", 10*time.Second, "connect", srv.udp); r.code != 0 {
		t.Errorf("connect once the first left: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestProbe probes a listening server over UDP and TCP.
func TestProbe(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "--udp", "127.0.0.1:0", "--tcp", "127.0.0.1:0")
	for _, args := range [][]string{{srv.udp}, {"--tcp", srv.tcp}} {
		r := runBin(t, "", 10*time.Second, append([]string{"probe"}, args...)...)
		if r.code != 0 {
			t.Errorf("probe %q exited %d; stderr %q", args, r.code, r.stderr)
		}
		for _, want := range []string{"fastnet: yes\n", "version: 1.0\n", "rtt: "} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("probe %q printed %q, want %q in it", args, r.stdout, want)
			}
		}
	}
	if code := srv.stop(t, syscall.SIGTERM); code != 0 {
		t.Errorf("listen exited %d", code)
	}
	for l := range srv.lines {
		t.Errorf("probing made listen report %q; queries make no connection (D15)", l)
	}
}

// TestProbeNoServer checks that probe fails fast, with exit status 1, when
// nothing listens, and within the timeout when nothing answers.
func TestProbeNoServer(t *testing.T) {
	t.Parallel()
	closedUDP := freePort(t, "udp")
	closedTCP := freePort(t, "tcp")
	silent, err := net.ListenPacket("udp", "127.0.0.1:0") // reads nothing, answers nothing
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { silent.Close() })
	tests := []struct {
		name    string
		args    []string
		want    string
		atLeast time.Duration
		limit   time.Duration
	}{
		{"closed-udp", []string{closedUDP}, "nothing listening (connection refused); is it a TCP server? try --tcp", 0, 4 * time.Second},
		{"closed-tcp", []string{"--tcp", closedTCP}, "nothing listening (connection refused); is it a UDP server? try without --tcp", 0, 4 * time.Second},
		{"silent-udp", []string{silent.LocalAddr().String()}, "no answer within 3s; is it a TCP server? try --tcp", 3 * time.Second, 5 * time.Second},
		{"silent-udp-timeout", []string{silent.LocalAddr().String(), "--timeout", "500ms"}, "no answer within 500ms", 500 * time.Millisecond, 2 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := runBin(t, "", 10*time.Second, append([]string{"probe"}, tt.args...)...)
			for try := 1; tt.name == "closed-udp" && strings.Contains(r.stderr, "no answer within") && try < 3; try++ {
				// As in TestConnectNoServer: the system limits the
				// ICMP messages it sends, and under other tests' load
				// the port unreachable may not come (seen once under a
				// processor hog). Try again.
				t.Logf("no ICMP port unreachable on try %d (%v): trying again", try, r.took)
				r = runBin(t, "", 10*time.Second, "probe", freePort(t, "udp"))
			}
			if r.code != 1 || !strings.Contains(r.stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want 1 and %q", r.code, r.stderr, tt.want)
			}
			if r.took < tt.atLeast || r.took > tt.limit {
				t.Errorf("took %v, want %v..%v", r.took, tt.atLeast, tt.limit)
			}
		})
	}
}

// freePort returns an address of 127.0.0.1 nothing listens on.
func freePort(t *testing.T, network string) string {
	t.Helper()
	var addr string
	if network == "udp" {
		c, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr = c.LocalAddr().String()
		c.Close()
	} else {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr = l.Addr().String()
		l.Close()
	}
	return addr
}

// TestProbeOtherVersion checks probe against a server that answers the
// queries with another version, or says nothing of Fastnet (D15).
func TestProbeOtherVersion(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		answers map[string]string
		stdout  []string
		stderr  string
	}{
		{"version-2.0", map[string]string{queryFastnet: answerFastnet, queryVersion: "query:version=2.0"},
			[]string{"fastnet: yes", "version: 2.0"}, "speaks Fastnet 2.0, not 1.0"},
		{"no-fastnet", map[string]string{queryVersion: "query:version=1.0", queryFastnet: "query:fastnet=no"},
			[]string{"fastnet: no (an answer that is not Fastnet 1.0: ", `, starting "\xff\xffquery:fastnet=no")`, "version: 1.0"}, "did not say it speaks Fastnet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			addr := answerQueries(t, tt.answers)
			r := runBin(t, "", 10*time.Second, "probe", addr, "--timeout", "1s")
			if r.code != 3 || !strings.Contains(r.stderr, tt.stderr) {
				t.Errorf("exit %d, stderr %q; want 3 and %q", r.code, r.stderr, tt.stderr)
			}
			for _, want := range tt.stdout {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("stdout %q, want %q in it", r.stdout, want)
				}
			}
		})
	}
}

// answerQueries serves channel -1 over UDP with the given answer to each
// query payload, until the test ends, and returns its address.
func answerQueries(t *testing.T, answers map[string]string) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if n < 2 || binary.BigEndian.Uint16(buf) != 0xffff {
				continue
			}
			if a, ok := answers[string(buf[2:n])]; ok {
				pc.WriteTo(appendPacket(nil, a), from)
			}
		}
	}()
	return pc.LocalAddr().String()
}

// TestUsage checks the exit status and the messages of help and of bad
// command lines: a usage error is one line on stderr and exit status 2.
func TestUsage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args   []string
		code   int
		stdout string // in stdout
		stderr string // in the one line of stderr
	}{
		{nil, 2, "", "missing command"},
		{[]string{"serve"}, 2, "", `unknown command "serve"`},
		{[]string{"help"}, 0, "Commands:", ""},
		{[]string{"--help"}, 0, "Commands:", ""},
		{[]string{"help", "demo"}, 0, "Usage: fastnet demo", ""},
		{[]string{"help", "nope"}, 2, "", `unknown command "nope"`},
		{[]string{"help", "help"}, 0, "Commands:", ""},
		{[]string{"help", "demo", "probe"}, 2, "", "one command at a time"},
		{[]string{"listen", "--help"}, 0, "\n  --max-conns N\n", ""},
		{[]string{"connect", "--help"}, 0, "\n  --timeout D\n", ""},
		{[]string{"probe", "--help"}, 0, "3 something answered that is not\na Fastnet 1.0 server", ""},
		{[]string{"help", "impair"}, 0, "Usage: fastnet impair LISTEN --to TARGET", ""},
		{[]string{"version", "extra"}, 2, "", `unexpected argument "extra"`},
		{[]string{"connect", "-h"}, 0, "Usage: fastnet connect HOST:PORT", ""},
		{[]string{"probe", "--help"}, 0, "Exit status", ""},
		{[]string{"listen", "--bogus"}, 2, "", "flag provided but not defined: --bogus"},
		{[]string{"listen", "-bogus"}, 2, "", "flag provided but not defined: --bogus"},
		{[]string{"connect", "127.0.0.1:7000", "--timeout"}, 2, "", "flag needs an argument: --timeout"},
		{[]string{"connect", "127.0.0.1:7000", "--timeout", "0s"}, 2, "", "--timeout 0s: want more than 0, at most 24h0m0s"},
		// N109: the command adds margins to these; beyond a day, refused.
		{[]string{"connect", "127.0.0.1:7000", "--timeout", "2562047h47m16s"}, 2, "", "--timeout 2562047h47m16s: want more than 0, at most 24h0m0s"},
		{[]string{"demo", "--duration", "2562047h47m16s"}, 2, "", "--duration 2562047h47m16s: want more than 0, at most 24h0m0s"},
		{[]string{"peer", "--via", ":7000", "--to", "5", "--timeout", "25h"}, 2, "", "--timeout 25h0m0s: want more than 0, at most 24h0m0s"},
		{[]string{"connect", "127.0.0.1:7000", "--raw", "--chunk", "0"}, 2, "", "--chunk 0: want 1..1048576"},
		{[]string{"connect", "127.0.0.1:7000", "--raw", "--chunk", "1048577"}, 2, "", "--chunk 1048577"},
		{[]string{"connect", "127.0.0.1:7000", "--chunk", "10"}, 2, "", "--chunk is for --raw input"},
		{[]string{"listen", "--max-conns", "2000000"}, 2, "", "--max-conns 2000000"},
		{[]string{"impair"}, 2, "", "missing LISTEN address"},
		{[]string{"impair", "127.0.0.1:0"}, 2, "", "missing --to HOST:PORT"},
		{[]string{"impair", "127.0.0.1:0", "--to", "x"}, 2, "", `bad address "x"`},
		{[]string{"impair", "127.0.0.1:0", "--to", ":7000", "--loss", "1.5"}, 2, "", "--loss 1.5: want a probability from 0 to 1"},
		{[]string{"impair", "127.0.0.1:0", "--to", ":7000", "--dup", "NaN"}, 2, "", "--dup NaN"},
		{[]string{"impair", "127.0.0.1:0", "--to", ":7000", "--delay", "-1s"}, 2, "", "--delay -1s"},
		{[]string{"impair", "127.0.0.1:0", "--to", ":7000", "--jitter", "2m"}, 2, "", "--jitter 2m0s"},
		{[]string{"impair", "127.0.0.1:0", "--to", ":7000", "--mtu", "-1"}, 2, "", "--mtu -1"},
		{[]string{"impair", "127.0.0.1:0", "127.0.0.1:1", "--to", ":7000"}, 2, "", `unexpected argument "127.0.0.1:1"`},
		{[]string{"listen", "--udp", "nonsense"}, 2, "", `bad address "nonsense"`},
		{[]string{"listen", "--tcp", "127.0.0.1:70000"}, 2, "", "bad port"},
		{[]string{"listen", "--max-conns", "0"}, 2, "", "--max-conns 0: want 1..1048576"},
		{[]string{"listen", "extra"}, 2, "", `unexpected argument "extra"`},
		{[]string{"connect"}, 2, "", "missing HOST:PORT"},
		{[]string{"connect", "localhost"}, 2, "", `bad address "localhost"`},
		{[]string{"connect", "127.0.0.1:7000", "--channel", "40000"}, 2, "", "--channel 40000"},
		{[]string{"connect", "127.0.0.1:7000", "--channel", "x"}, 2, "", `invalid value "x"`},
		{[]string{"probe", "127.0.0.1:7000", "127.0.0.1:7001"}, 2, "", "unexpected argument"},
		{[]string{"probe", "127.0.0.1:7000", "--timeout", "0s"}, 2, "", "must be positive"},
		{[]string{"demo", "--loss", "2"}, 2, "", "--loss 2"},
		{[]string{"demo", "--clients", "0"}, 2, "", "--clients 0"},
		{[]string{"demo", "--mtu", "100"}, 2, "", "--mtu 100"},
		{[]string{"demo", "--wait", "0s"}, 2, "", "--wait 0s"},
	}
	for _, tt := range tests {
		r := runBin(t, "", 10*time.Second, tt.args...)
		if r.code != tt.code || !strings.Contains(r.stdout, tt.stdout) || !strings.Contains(r.stderr, tt.stderr) {
			t.Errorf("fastnet %q: exit %d, stdout %q, stderr %q; want %d, %q, %q",
				tt.args, r.code, trim(r.stdout), r.stderr, tt.code, tt.stdout, tt.stderr)
			continue
		}
		if tt.code == 2 && strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("fastnet %q: stderr %q, want one line", tt.args, r.stderr)
		}
		if tt.code == 0 && r.stderr != "" {
			t.Errorf("fastnet %q: stderr %q, want none", tt.args, r.stderr)
		}
	}
}

// TestHelpDashes checks that every command's help spells its flags with
// two dashes, as the synopses do, and that every flag a synopsis names is
// listed.
func TestHelpDashes(t *testing.T) {
	t.Parallel()
	single := regexp.MustCompile(`(?m)^\s+-[a-z]`)
	for _, c := range commands() {
		r := runBin(t, "", 10*time.Second, c.name, "--help")
		if r.code != 0 {
			t.Fatalf("%s --help: exit %d", c.name, r.code)
		}
		if m := single.FindString(r.stdout); m != "" {
			t.Errorf("%s --help lists a flag with one dash: %q", c.name, m)
		}
		for _, f := range regexp.MustCompile(`--[a-z-]+`).FindAllString(c.usage, -1) {
			if !strings.Contains(r.stdout, "\n  "+f+"\n") && !strings.Contains(r.stdout, "\n  "+f+" ") {
				t.Errorf("%s --help does not list %s of its synopsis", c.name, f)
			}
		}
	}
}

// TestDemo runs a short demo and checks that its verdict passes, that its
// counts agree with it, and that it reports progress.
func TestDemo(t *testing.T) {
	t.Parallel()
	r := runBin(t, "", 45*time.Second, "demo", "--duration", "2s", "--clients", "2")
	if r.code != 0 {
		t.Fatalf("demo exited %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "verdict: PASS") {
		t.Errorf("no passing verdict in:\n%s", r.stdout)
	}
	m := regexp.MustCompile(`reliable messages +(\d+) +(\d+) +(\d+)`).FindStringSubmatch(r.stdout)
	if m == nil || m[1] == "0" || m[1] != m[2] || m[1] != m[3] {
		t.Errorf("reliable counts %q: want equal, non-zero counts", m)
	}
	if !regexp.MustCompile(`(?m)^ +\d+\.\ds +reliable \d+ sent`).MatchString(r.stderr) {
		t.Errorf("no progress line in stderr:\n%s", r.stderr)
	}
	if r.took > 15*time.Second {
		t.Errorf("a 2s demo took %v", r.took)
	}
}

// closingServer returns the address of a TCP server that closes every
// connection as it accepts it, until the test ends.
func closingServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ln.Addr().String()
}

// TestConnectNoServer checks that connect fails with exit status 1 and a
// clear reason when no server answers: at once over TCP, after the connect
// timeout of 5 s (D15) over UDP.
func TestConnectNoServer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		args  []string
		want  string
		limit time.Duration
	}{
		{"tcp", []string{"--tcp", freePort(t, "tcp")}, "nothing listening over tcp (connection refused); is it a UDP server? try without --tcp", 2 * time.Second},
		{"udp", []string{freePort(t, "udp")}, "nothing listening over udp (connection refused); is it a TCP server? try --tcp", 2 * time.Second}, // the ICMP port unreachable (N65)
		// A TCP server that closes every connection at once (N144).
		{"tcp closes", []string{"--tcp", closingServer(t)}, "the server closed the connection before the Fastnet handshake; is it a Fastnet server?", 2 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := runBin(t, "hello\n", 15*time.Second, append([]string{"connect"}, tt.args...)...)
			for try := 1; tt.name == "udp" && r.took > tt.limit && strings.Contains(r.stderr, "timed out") && try < 3; try++ {
				// The system limits the ICMP messages it sends (Linux:
				// net.ipv4.icmp_msgs_per_sec); under other tests' load
				// the port unreachable may not come, and the connect
				// times out as it should without one. Try again.
				t.Logf("no ICMP port unreachable on try %d (%v): trying again", try, r.took)
				r = runBin(t, "hello\n", 15*time.Second, append([]string{"connect"}, freePort(t, "udp"))...)
			}
			if r.code != 1 || !strings.Contains(r.stderr, tt.want) || strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("exit %d, stderr %q; want 1 and one line with %q", r.code, r.stderr, tt.want)
			}
			if r.took > tt.limit {
				t.Errorf("took %v, want at most %v", r.took, tt.limit)
			}
		})
	}
}
