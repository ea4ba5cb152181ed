// Package drivertest is the conformance suite of the project's drivers: the
// same tests run the UDP and the TCP driver over real loopback sockets, so
// that both keep the promises of the blocking API (delivery, order, close,
// refusal, timeouts, cancellation, no leaked goroutines) the same way.
//
// A driver's test file calls Run with a Driver that opens listeners and
// dials with a given engine configuration:
//
//	func TestConformance(t *testing.T) {
//		drivertest.Run(t, drivertest.Driver{Name: "udp", Listen: ..., Dial: ...})
//	}
//
// Every test bounds its waits generously and asserts no tight timing, so
// that the suite passes on a loaded machine under the race detector.
package drivertest

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/driver"
	"github.com/fastnet-engine/fastnet/fastnet"
)

// Driver is what the suite needs of a driver.
type Driver struct {
	// Name names the driver in failure messages.
	Name string
	// TCP says whether the driver runs over TCP (a Stream transport,
	// with a transport connection per peer) rather than UDP.
	TCP bool
	// Listen starts a server on addr ("127.0.0.1:0") with the given
	// engine configuration; Role and Transport are the driver's to set.
	// opts are the driver's own settings (zero: its defaults).
	Listen func(ctx context.Context, addr string, engine fastnet.Config, opts ListenOptions) (*driver.Listener, error)
	// Dial connects a client to addr with the given engine configuration.
	Dial func(ctx context.Context, addr string, engine fastnet.Config) (*driver.Conn, error)
}

// ListenOptions are the settings of a driver's Config beyond the engine's
// that the suite varies.
type ListenOptions struct {
	ReceiveQueue int // Config.ReceiveQueue
	Backlog      int // Config.Backlog
}

// Run runs the conformance suite on d, each test as a subtest. The tests
// run one after another: each checks that it leaves no goroutine behind.
func Run(t *testing.T, d Driver) {
	tests := []struct {
		name string
		f    func(t *testing.T, d Driver)
	}{
		{"ManyClients", testManyClients},
		{"LargeMessages", testLargeMessages},
		{"ConcurrentSenders", testConcurrentSenders},
		{"ManyChannels", testManyChannels},
		{"SlowReader", testSlowReader},
		{"IdleReceiver", testIdleReceiver},
		{"ConcurrentReceiveCancel", testConcurrentReceiveCancel},
		{"Unreliable", testUnreliable},
		{"GracefulClose", testGracefulClose},
		{"ListenerClose", testListenerClose},
		{"Backlog", testBacklog},
		{"ServerForgets", testServerForgets},
		{"Refused", testRefused},
		{"PeerVanishes", testPeerVanishes},
		{"TransportCut", testTransportCut},
		{"DialNothing", testDialNothing},
		{"DialSilent", testDialSilent},
		{"CloseUnblocksSend", testCloseUnblocksSend},
		{"CloseUnblocksReceive", testCloseUnblocksReceive},
		{"ContextUnblocks", testContextUnblocks},
		{"MisuseErrors", testMisuseErrors},
		{"EndedDialReleases", testEndedDialReleases},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkGoroutines(t)
			tt.f(t, d)
		})
	}
}

// settle is how long checkGoroutines waits for goroutines to return.
const settle = 2 * time.Second

// checkGoroutines fails the test if, once it and its cleanups are over,
// more goroutines run than when it started (after letting them settle),
// and prints them all. Call it before anything that registers a cleanup.
func checkGoroutines(t *testing.T) {
	t.Helper()
	base := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(settle)
		for {
			n := runtime.NumGoroutine()
			if n <= base {
				return
			}
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				buf = buf[:runtime.Stack(buf, true)]
				t.Errorf("goroutines leaked: %d before the test, %d after:\n%s", base, n, buf)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// testContext returns a context for one test: a bound on everything it
// waits for, far above what any test needs.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// config returns the engine configuration of the tests. Tests that wait
// for a timeout shorten it themselves.
//
// MaxInFlight is lowered from its default of 1 MiB: the engine has no
// congestion control, and at the default payload MTU of 32 a megabyte in
// flight is some 40,000 datagrams sent at once, far more than a socket
// buffer holds. Over loopback on a slow machine (the race detector on two
// cores) the losses then take so many resends that a packet can miss all
// of them within Timeout. 64 KiB keeps each burst within the default socket
// buffers, so that the suite tests the drivers rather than loss recovery
// under overload.
func config() fastnet.Config {
	return fastnet.Config{
		MaxInFlight:    64 << 10,
		ConnectTimeout: 10 * time.Second,
		Linger:         time.Second,
	}
}

// listen starts a server, closed when the test ends.
func listen(t *testing.T, ctx context.Context, d Driver, cfg fastnet.Config) *driver.Listener {
	t.Helper()
	return listenWith(t, ctx, d, cfg, ListenOptions{})
}

// listenWith is listen with the driver's own settings.
func listenWith(t *testing.T, ctx context.Context, d Driver, cfg fastnet.Config, opts ListenOptions) *driver.Listener {
	t.Helper()
	l, err := d.Listen(ctx, "127.0.0.1:0", cfg, opts)
	if err != nil {
		t.Fatalf("%s: Listen: %v", d.Name, err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// dial connects a client, aborted when the test ends.
func dial(t *testing.T, ctx context.Context, d Driver, addr string, cfg fastnet.Config) *driver.Conn {
	t.Helper()
	c, err := d.Dial(ctx, addr, cfg)
	if err != nil {
		t.Fatalf("%s: Dial %s: %v", d.Name, addr, err)
	}
	t.Cleanup(func() { c.Abort("test over") })
	return c
}

// accept returns the listener's next connection.
func accept(t *testing.T, ctx context.Context, l *driver.Listener) *driver.Conn {
	t.Helper()
	c, err := l.Accept(ctx)
	if err != nil {
		t.Fatalf("Accept: %v", err)
	}
	return c
}

// connect dials l and accepts the connection: the client's side, then the
// server's.
func connect(t *testing.T, ctx context.Context, d Driver, l *driver.Listener, cfg fastnet.Config) (client, server *driver.Conn) {
	t.Helper()
	client = dial(t, ctx, d, l.Addr().String(), cfg)
	return client, accept(t, ctx, l)
}

// Messages of the tests carry their stream (a channel, or a sender) and
// their place in it, then bytes that depend on both, so that the receiver
// checks order and content without knowing what was sent.
const headerLen = 8

// payload returns message seq of stream, size bytes long (at least
// headerLen).
func payload(stream, seq uint32, size int) []byte {
	b := make([]byte, max(size, headerLen))
	binary.BigEndian.PutUint32(b, stream)
	binary.BigEndian.PutUint32(b[4:], seq)
	for i := headerLen; i < len(b); i++ {
		b[i] = byte(uint32(i)*31 + seq*7 + stream*13)
	}
	return b
}

// parse returns the stream and place of a message made by payload, or an
// error if its bytes are not what payload makes.
func parse(b []byte) (stream, seq uint32, err error) {
	if len(b) < headerLen {
		return 0, 0, fmt.Errorf("message of %d bytes, shorter than its header", len(b))
	}
	stream = binary.BigEndian.Uint32(b)
	seq = binary.BigEndian.Uint32(b[4:])
	for i := headerLen; i < len(b); i++ {
		if b[i] != byte(uint32(i)*31+seq*7+stream*13) {
			return stream, seq, fmt.Errorf("message %d of stream %d corrupted at byte %d of %d", seq, stream, i, len(b))
		}
	}
	return stream, seq, nil
}

// size is the length of message seq on a stream: 8 to 300 bytes, so that
// messages span one packet or several at the initial payload MTU.
func size(stream, seq uint32) int {
	return headerLen + int(seq*37+stream*11)%293
}

// orderChecker checks that each stream's messages arrive once each, in
// order, intact.
type orderChecker struct {
	next map[uint32]uint32
	n    int
}

func newOrderChecker() *orderChecker { return &orderChecker{next: make(map[uint32]uint32)} }

// check checks message m, which must be on the channel named by its stream
// when byChannel is set.
func (o *orderChecker) check(m driver.Message, byChannel bool) error {
	stream, seq, err := parse(m.Data)
	if err != nil {
		return err
	}
	if byChannel && int(stream) != m.Channel {
		return fmt.Errorf("message of stream %d arrived on channel %d", stream, m.Channel)
	}
	if want := o.next[stream]; seq != want {
		return fmt.Errorf("stream %d: message %d arrived when %d was due", stream, seq, want)
	}
	o.next[stream] = seq + 1
	o.n++
	return nil
}

// digest returns the SHA-256 of b, to compare large messages.
func digest(b []byte) [sha256.Size]byte { return sha256.Sum256(b) }

// wantClosedBy checks that err is the end of a connection the peer closed
// with reason: it matches fastnet.ErrClosed and unwraps to a
// *fastnet.PeerClosedError (D18).
func wantClosedBy(err error, reason string) error {
	if !errors.Is(err, fastnet.ErrClosed) {
		return fmt.Errorf("error %v does not match fastnet.ErrClosed", err)
	}
	var pc *fastnet.PeerClosedError
	if !errors.As(err, &pc) {
		return fmt.Errorf("error %v (%T) does not unwrap to *fastnet.PeerClosedError", err, err)
	}
	if pc.Reason != reason {
		return fmt.Errorf("peer's reason %q, want %q", pc.Reason, reason)
	}
	return nil
}

// within runs f on a goroutine and returns its error, or fails the test if
// f takes longer than limit.
func within(t *testing.T, limit time.Duration, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		t.Fatalf("%s did not return within %v", what, limit)
		return nil
	}
}

// eventually waits, up to bound, until cond holds, and fails the test if
// it never does.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, bound)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Echo starts a server of d on loopback that echoes every message on the
// channel it came on, and returns a client connected to it, both with the
// engine configuration engine. The server ends with tb.
func Echo(tb testing.TB, ctx context.Context, d Driver, engine fastnet.Config) *driver.Conn {
	tb.Helper()
	l, err := d.Listen(ctx, "127.0.0.1:0", engine, ListenOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { l.Close() })
	go func() {
		c, err := l.Accept(ctx)
		if err != nil {
			return
		}
		for {
			m, err := c.Receive(ctx)
			if err != nil {
				return
			}
			c.Send(ctx, m.Channel, m.Data, m.Reliable)
		}
	}()
	c, err := d.Dial(ctx, l.Addr().String(), engine)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}
