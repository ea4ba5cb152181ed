//go:build unix

package udpdriver_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/udpdriver"
)

// stallHelperEnv names the server address a stalled client (this test
// binary run again, stallClient) connects to.
const stallHelperEnv = "FASTNET_STALL_SERVER"

// stallModeEnv says what the client does: "resend" for
// TestStalledProcessResendsNothingAcked, else
// TestStalledProcessReadsBeforeTimers's part.
const stallModeEnv = "FASTNET_STALL_MODE"

// stallTimeout is the stalled client's Timeout: it sends heartbeats every
// 50 ms (D16) and hears the server's echoes as often, so while it runs
// it never comes near it.
const stallTimeout = time.Second

// TestStalledProcessReadsBeforeTimers stops a client's process for twice
// its Timeout while the server's heartbeats keep arriving in its socket,
// then lets it go on. The timer that ends a connection whose peer was
// silent for Timeout is then long overdue, and the heartbeats that keep
// it alive are waiting to be read: the driver reads them before it
// handles the overdue deadline (N129), so the connection survives, as it
// would have had the process never stopped. The same holds for an
// overdue resend and the acks waiting for it. The heartbeats may wait
// behind thousands of other datagrams, more than one put-off's worth to
// read; and the process may stop again while the deadline is put off,
// after a stop too short to end the connection.
func TestStalledProcessReadsBeforeTimers(t *testing.T) {
	if addr := os.Getenv(stallHelperEnv); addr != "" {
		stallClient(addr)
		return
	}
	if testing.Short() {
		t.Skip("stops processes for 2 s, six times")
	}
	tests := []struct {
		name string
		junk int // datagrams sent to the client ahead of the heartbeats
		// hiccup, if set, stops the client for that long first, and
		// the long stop then begins within a put-off.
		hiccup time.Duration
	}{
		// Handling the deadline first failed about one round in three
		// of each.
		{name: "stop"},
		{name: "stop"},
		{name: "backlog", junk: 3000},
		{name: "backlog", junk: 3000},
		{name: "again", hiccup: 250 * time.Millisecond},
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
	pc, c, cmd, next, in := startStall(t, ctx, "")
	time.Sleep(200 * time.Millisecond)
	p := cmd.Process
	signal := func(sig syscall.Signal) {
		t.Helper()
		if err := p.Signal(sig); err != nil {
			t.Fatal(err)
		}
	}
	if hiccup > 0 {
		// Longer than the client's heartbeat interval (50 ms): a
		// deadline fires overdue as it goes on, and the stop below
		// begins while it is put off (overdueGrace).
		signal(syscall.SIGSTOP)
		time.Sleep(hiccup)
		signal(syscall.SIGCONT)
		for start := time.Now(); time.Since(start) < 700*time.Microsecond; {
		}
	}
	signal(syscall.SIGSTOP)
	// Datagrams the client's driver reads and drops, then the server's
	// heartbeats (every second) and a message arrive while it is
	// stopped.
	to := net.UDPAddrFromAddrPort(c.RemoteAddr())
	b := make([]byte, 64)
	for range junk {
		pc.WriteTo(b, to)
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
	// The client closes once told to: until then, the server's end is
	// up.
	if err := c.Err(); err != nil {
		t.Errorf("server's connection: %v", err)
	}
	in.Close()
	if err := cmd.Wait(); err != nil {
		t.Errorf("client: %v", err)
	}
}

// startStall starts a server on a socket of its own, pc, and the client
// process (stallClient) in mode, and waits for their connection, c, the
// server's end. It returns them with the process, a function that
// returns the next line it prints ("" once it prints no more), and its
// input, whose end makes it close its connection and exit. The server
// closes when the test ends.
func startStall(t *testing.T, ctx context.Context, mode string) (pc *net.UDPConn, c *udpdriver.Conn, cmd *exec.Cmd, next func() string, in io.WriteCloser) {
	t.Helper()
	pc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	l, err := udpdriver.ListenPacket(ctx, pc, udpdriver.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	cmd = exec.CommandContext(ctx, os.Args[0], "-test.run=^TestStalledProcessReadsBeforeTimers$", "-test.count=1")
	cmd.Env = append(os.Environ(), stallHelperEnv+"="+l.Addr().String(), stallModeEnv+"="+mode)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if in, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	lines := bufio.NewScanner(out)
	next = func() string {
		if !lines.Scan() {
			return ""
		}
		return lines.Text()
	}
	if l := next(); l != "connected" {
		t.Fatalf("client printed %q, want connected", l)
	}
	if c, err = l.Accept(ctx); err != nil {
		t.Fatal(err)
	}
	return pc, c, cmd, next, in
}

// TestStalledProcessResendsNothingAcked stops a client's process (it
// stops itself) 1 ms after it sent a reliable message, before the
// server's ack, which the server holds for a reply for up to 5 ms (N75),
// came; the ack arrives while it is stopped, among 3,000 other
// datagrams. When it goes on 300 ms
// later, the packet's resend (due about 20 ms after it was sent, D14) is
// long overdue and its ack waits in the socket: the driver reads the ack
// first (N129), so nothing is resent, as nothing would have been had
// the process run.
func TestStalledProcessResendsNothingAcked(t *testing.T) {
	if testing.Short() {
		t.Skip("stops processes")
	}
	for round := range 4 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			pc, c, cmd, next, in := startStall(t, ctx, "resend")
			// The server waits in Receive, as an application does: the
			// ack of what it receives waits for a reply (N75).
			got := make(chan string, 1)
			go func() {
				m, err := c.Receive(ctx)
				if err != nil {
					got <- err.Error()
					return
				}
				got <- string(m.Data)
			}()
			if l := next(); l != "stopping" {
				t.Fatalf("client printed %q, want stopping", l)
			}
			// Datagrams for the client to read and drop, some before
			// the ack and some after.
			to := net.UDPAddrFromAddrPort(c.RemoteAddr())
			b := make([]byte, 64)
			for range 3000 {
				pc.WriteTo(b, to)
			}
			time.Sleep(300 * time.Millisecond)
			if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			if l := next(); l != "resent 0" {
				t.Errorf("client printed %q, want resent 0", l)
			}
			if m := <-got; m != "ping" {
				t.Errorf("server received %q, want ping", m)
			}
			in.Close()
			if err := cmd.Wait(); err != nil {
				t.Errorf("client: %v", err)
			}
		})
	}
}

// stallClient is the client process: it connects, then prints each
// message it receives until it has two, or the error that ended its
// connection, and exits with status 1 on an error; with two, it closes
// the connection once its input ends.
func stallClient(addr string) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	fail := func(err error) {
		fmt.Println("error", err)
		os.Exit(1)
	}
	c, err := udpdriver.Dial(ctx, addr, udpdriver.Config{Engine: fastnet.Config{Timeout: stallTimeout}})
	if err != nil {
		fail(err)
	}
	fmt.Println("connected")
	if os.Getenv(stallModeEnv) == "resend" {
		// Sent, then stopped before the ack can come (the read role
		// is the background reader's, or free, with no Receive).
		time.Sleep(300 * time.Millisecond)
		if err := c.Send(ctx, 1, []byte("ping"), true); err != nil {
			fail(err)
		}
		for start := time.Now(); time.Since(start) < time.Millisecond; {
		}
		fmt.Println("stopping")
		syscall.Kill(os.Getpid(), syscall.SIGSTOP)
		time.Sleep(200 * time.Millisecond)
		fmt.Println("resent", c.Stats().PacketsResent)
		io.Copy(io.Discard, os.Stdin)
		c.Close()
		os.Exit(0)
	}
	for range 2 {
		m, err := c.Receive(ctx)
		if err != nil {
			if errors.Is(err, fastnet.ErrClosed) {
				fail(fmt.Errorf("connection ended: %w", err))
			}
			fail(err)
		}
		fmt.Println("message", string(m.Data))
	}
	io.Copy(io.Discard, os.Stdin)
	c.Close()
	os.Exit(0)
}
