package driver_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/driver"
	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/tcpdriver"
	"github.com/fastnet-engine/fastnet/udpdriver"
)

// The errors a user meets, each asked the Go way (N65): errors.Is against
// the fastnet sentinels and net.ErrClosed, errors.As for the details, and
// texts that name the operation and the address without repeating
// "fastnet:".

type listenFunc func(ctx context.Context, cfg fastnet.Config) (*driver.Listener, error)
type dialFunc func(ctx context.Context, addr string, cfg fastnet.Config) (*driver.Conn, error)

var transports = []struct {
	name   string
	listen listenFunc
	dial   dialFunc
}{
	{"udp",
		func(ctx context.Context, cfg fastnet.Config) (*driver.Listener, error) {
			return udpdriver.Listen(ctx, "127.0.0.1:0", udpdriver.Config{Engine: cfg})
		},
		func(ctx context.Context, addr string, cfg fastnet.Config) (*driver.Conn, error) {
			return udpdriver.Dial(ctx, addr, udpdriver.Config{Engine: cfg})
		}},
	{"tcp",
		func(ctx context.Context, cfg fastnet.Config) (*driver.Listener, error) {
			return tcpdriver.Listen(ctx, "127.0.0.1:0", tcpdriver.Config{Engine: cfg})
		},
		func(ctx context.Context, addr string, cfg fastnet.Config) (*driver.Conn, error) {
			return tcpdriver.Dial(ctx, addr, tcpdriver.Config{Engine: cfg})
		}},
}

// checkText fails unless the error's text contains each of want and says
// "fastnet:" once at most.
func checkText(t *testing.T, err error, want ...string) {
	t.Helper()
	s := err.Error()
	for _, w := range want {
		if !strings.Contains(s, w) {
			t.Errorf("error %q does not contain %q", s, w)
		}
	}
	if n := strings.Count(s, "fastnet:"); n > 1 {
		t.Errorf("error %q says \"fastnet:\" %d times", s, n)
	}
}

func TestErrorRefused(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			l, err := tr.listen(ctx, fastnet.Config{Accept: func(netip.AddrPort) error { return errors.New("go away") }})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			_, err = tr.dial(ctx, l.Addr().String(), fastnet.Config{})
			if !errors.Is(err, fastnet.ErrRefused) {
				t.Fatalf("Dial: %v, want fastnet.ErrRefused", err)
			}
			var re *fastnet.RefusedError
			if !errors.As(err, &re) || re.Reason != "go away" {
				t.Errorf("Dial: %v, want a *fastnet.RefusedError with reason %q", err, "go away")
			}
			var oe *net.OpError
			if !errors.As(err, &oe) || oe.Op != "dial" || oe.Net != tr.name {
				t.Errorf("Dial: %#v, want a *net.OpError dial %s", err, tr.name)
			}
			checkText(t, err, "dial "+tr.name+" "+l.Addr().String(), "connection refused: go away")
		})
	}
}

// TestErrorUnreachable: a UDP Dial to a port where nothing listens fails as
// soon as the system hears the ICMP port unreachable, not after the
// handshake's timeout.
func TestErrorUnreachable(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("only a connected socket on Linux hears the ICMP error")
	}
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := pc.LocalAddr().String()
	pc.Close() // nothing listens there now
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cfg := fastnet.Config{ConnectTimeout: 15 * time.Second}
	_, err = udpdriver.Dial(ctx, addr, udpdriver.Config{Engine: cfg})
	if !errors.Is(err, fastnet.ErrRefused) || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("Dial: %v, want fastnet.ErrRefused and syscall.ECONNREFUSED", err)
	}
	var ue *driver.UnreachableError
	if !errors.As(err, &ue) {
		t.Errorf("Dial: %v, want a *driver.UnreachableError", err)
	}
	if ctx.Err() != nil {
		t.Errorf("Dial took the whole context")
	}
	checkText(t, err, "dial udp "+addr, "nothing listens there")
}

func TestErrorPeerClosedAndLocalClose(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			l, err := tr.listen(ctx, fastnet.Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			c, err := tr.dial(ctx, l.Addr().String(), fastnet.Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			s, err := l.Accept(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.CloseWithReason("bye"); err != nil {
				t.Fatalf("server Close: %v", err)
			}
			_, err = c.Receive(ctx)
			if !errors.Is(err, fastnet.ErrClosed) || !errors.Is(err, fastnet.ErrPeerClosed) {
				t.Fatalf("client Receive: %v, want fastnet.ErrClosed and fastnet.ErrPeerClosed", err)
			}
			var ce *driver.CloseError
			if !errors.As(err, &ce) || ce.Local || ce.Net != tr.name {
				t.Errorf("client Receive: %#v, want a remote *driver.CloseError on %s", err, tr.name)
			}
			checkText(t, err, tr.name+" "+l.Addr().String()+": connection lost: closed by peer: bye")

			// The server's side of it: closed here.
			_, err = s.Receive(ctx)
			if !errors.As(err, &ce) || !ce.Local || !errors.Is(err, fastnet.ErrClosed) {
				t.Errorf("server Receive after Close: %v, want a local *driver.CloseError", err)
			}
			checkText(t, err, "connection closed: bye")
			if err := s.Send(ctx, 0, []byte("late"), true); !errors.Is(err, fastnet.ErrClosed) {
				t.Errorf("Send after Close: %v, want fastnet.ErrClosed", err)
			}
			if err := s.Close(); err != nil {
				t.Errorf("second Close: %v, want nil", err)
			}

			// Accept after the listener's Close is net.ErrClosed.
			l.Close()
			if _, err := l.Accept(ctx); !errors.Is(err, net.ErrClosed) {
				t.Errorf("Accept after Close: %v, want net.ErrClosed", err)
			}
		})
	}
}

// TestErrorLingerExpired: a graceful Close whose data the peer never
// acknowledges returns an error matching fastnet.ErrLingerExpired once the
// linger runs out; one whose data was acknowledged returns nil.
func TestErrorLingerExpired(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// The server never accepts, and its receive queue holds 1 KiB: once
	// that is full the connection's packets are dropped unacknowledged
	// (N13), and the client's linger runs out.
	l, err := udpdriver.Listen(ctx, "127.0.0.1:0", udpdriver.Config{ReceiveQueue: 1024})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := udpdriver.Dial(ctx, l.Addr().String(), udpdriver.Config{Engine: fastnet.Config{Linger: 300 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	msg := make([]byte, 4096)
	for range 8 {
		if err := c.Send(ctx, 1, msg, true); err != nil {
			t.Fatal(err)
		}
	}
	err = c.Close()
	if !errors.Is(err, fastnet.ErrLingerExpired) || !errors.Is(err, fastnet.ErrClosed) {
		t.Fatalf("Close: %v, want fastnet.ErrLingerExpired", err)
	}
	checkText(t, err, "linger expired")

	c, err = udpdriver.Dial(ctx, l.Addr().String(), udpdriver.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Send(ctx, 1, []byte("small"), true); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close with everything acknowledged: %v, want nil", err)
	}
}

// TestCloseErrorText: a connection closed by this side, refusing what is
// sent on it while it closes (fastnet.ErrClosed), says so once.
func TestCloseErrorText(t *testing.T) {
	addr := netip.MustParseAddrPort("192.0.2.1:7000")
	for _, tt := range []struct {
		err  *driver.CloseError
		want string
	}{
		{&driver.CloseError{Local: true, Err: fastnet.ErrClosed, Net: "udp", Addr: addr}, "fastnet: udp 192.0.2.1:7000: connection closed"},
		{&driver.CloseError{Local: true, Err: fastnet.ErrTimeout, Net: "tcp", Addr: addr}, "fastnet: tcp 192.0.2.1:7000: connection closed: " + strings.TrimPrefix(fastnet.ErrTimeout.Error(), "fastnet: ")},
		{&driver.CloseError{Err: &fastnet.PeerClosedError{Reason: "bye"}, Net: "udp", Addr: addr}, "fastnet: udp 192.0.2.1:7000: connection lost: closed by peer: bye"},
	} {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("%#v: %q, want %q", tt.err, got, tt.want)
		}
	}
}
