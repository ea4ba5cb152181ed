//go:build unix

package tcpdriver_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/tcpdriver"
)

// stallHelperEnv names the server address a stalled client (this test
// binary run again, stallClient) connects to.
const stallHelperEnv = "FASTNET_TCP_STALL_SERVER"

// stallTimeout is the stalled client's Timeout: it sends heartbeats every
// 50 ms (D16) and hears the server's as often, so while it runs it never
// comes near it.
const stallTimeout = time.Second

// TestStalledProcessReadsBeforeTimers is the UDP driver's test of the
// same name over TCP: a client's process stopped for twice its Timeout,
// while the server's heartbeats, and in the backlog case 3,000 messages
// ahead of them, wait in its socket, keeps its connection when it goes
// on, its input read before the overdue deadline that would end it
// (N129).
func TestStalledProcessReadsBeforeTimers(t *testing.T) {
	if addr := os.Getenv(stallHelperEnv); addr != "" {
		stallClient(addr)
		return
	}
	if testing.Short() {
		t.Skip("stops processes for 2 s, four times")
	}
	tests := []struct {
		name   string
		junk   int           // messages sent to the client ahead of the heartbeats
		hiccup time.Duration // if set, a first stop this long; the long stop begins within a put-off
	}{
		// Without the put-off, each backlog round failed; under the
		// race detector, without the transport's InputWaiting (N131),
		// 5 backlog rounds of 6.
		{name: "stop"},
		{name: "backlog", junk: 3000},
		{name: "backlog", junk: 3000},
		{name: "again", hiccup: 250 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { stallRound(t, tt.junk, tt.hiccup) })
	}
}

// stallRound runs one client process, stops it and lets it go on.
func stallRound(t *testing.T, junk int, hiccup time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, err := tcpdriver.Listen(ctx, "127.0.0.1:0", tcpdriver.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestStalledProcessReadsBeforeTimers$", "-test.count=1")
	cmd.Env = append(os.Environ(), stallHelperEnv+"="+l.Addr().String())
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := bufio.NewScanner(out)
	next := func() string {
		if !lines.Scan() {
			return ""
		}
		return lines.Text()
	}
	if l := next(); l != "connected" {
		t.Fatalf("client printed %q, want connected", l)
	}
	c, err := l.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	p := cmd.Process
	signal := func(sig syscall.Signal) {
		t.Helper()
		if err := p.Signal(sig); err != nil {
			t.Fatal(err)
		}
	}
	if hiccup > 0 {
		signal(syscall.SIGSTOP)
		time.Sleep(hiccup)
		signal(syscall.SIGCONT)
		for start := time.Now(); time.Since(start) < 700*time.Microsecond; {
		}
	}
	signal(syscall.SIGSTOP)
	// Messages the client reads and drops, then the server's heartbeats
	// and a message, arrive while it is stopped.
	b := make([]byte, 64)
	for range junk {
		if err := c.Send(ctx, 2, b, false); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(2*stallTimeout - 200*time.Millisecond)
	if err := c.Send(ctx, 1, []byte("during"), true); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	signal(syscall.SIGCONT)
	time.Sleep(300 * time.Millisecond)
	if err := c.Send(ctx, 1, []byte("after"), true); err != nil {
		t.Fatalf("server: %v", err)
	}
	var got []string
	for len(got) < 2 {
		l := next()
		if l == "" {
			break
		}
		got = append(got, l)
	}
	if want := "message during|message after"; strings.Join(got, "|") != want {
		t.Errorf("client printed %q, want %q", got, want)
	}
	if err := c.Err(); err != nil {
		t.Errorf("server's connection: %v", err)
	}
	in.Close()
	if err := cmd.Wait(); err != nil {
		t.Errorf("client: %v", err)
	}
}

// stallClient is the client process: it connects, then prints each
// message it receives on channel 1 until it has two, or the error that
// ended its connection, and exits with status 1 on an error; with two,
// it closes the connection once its input ends.
func stallClient(addr string) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	fail := func(err error) {
		fmt.Println("error", err)
		os.Exit(1)
	}
	c, err := tcpdriver.Dial(ctx, addr, tcpdriver.Config{Engine: fastnet.Config{Timeout: stallTimeout}})
	if err != nil {
		fail(err)
	}
	fmt.Println("connected")
	for n := 0; n < 2; {
		m, err := c.Receive(ctx)
		if err != nil {
			if errors.Is(err, fastnet.ErrClosed) {
				fail(fmt.Errorf("connection ended: %w", err))
			}
			fail(err)
		}
		if m.Channel != 1 {
			continue
		}
		fmt.Println("message", string(m.Data))
		n++
	}
	io.Copy(io.Discard, os.Stdin)
	c.Close()
	os.Exit(0)
}
