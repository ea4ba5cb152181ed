package urpdriver_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/driver"
	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/urp"
	"github.com/fastnet-engine/fastnet/urp/internal/urptest"
	"github.com/fastnet-engine/fastnet/urp/urpclient"
	"github.com/fastnet-engine/fastnet/urp/urpdriver"
	"github.com/fastnet-engine/fastnet/urp/urpserver"
)

func relay(t testing.TB) *urpserver.Server { return urptest.Relay(t, urpserver.Config{}) }

func testCtx(t testing.TB) context.Context { return urptest.Context(t, 30*time.Second) }

func listen(t testing.TB, s *urpserver.Server) *urpdriver.Listener {
	t.Helper()
	l, err := urpdriver.Listen(testCtx(t), s.Addr().String(), urpdriver.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// echo answers every message on the channel and with the reliability it
// came with, until the listener closes.
func echo(l *urpdriver.Listener) {
	for {
		c, err := l.Accept(context.Background())
		if err != nil {
			return
		}
		go func() {
			for m, err := c.Receive(context.Background()); err == nil; m, err = c.Receive(context.Background()) {
				c.Send(context.Background(), m.Channel, m.Data, m.Reliable)
			}
		}()
	}
}

func dial(t testing.TB, s *urpserver.Server, l *urpdriver.Listener) *driver.Conn {
	t.Helper()
	gid, pass := l.Group()
	c, err := urpdriver.Dial(testCtx(t), s.Addr().String(), gid, pass, urpdriver.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Abort("") })
	return c
}

// TestEcho: several members each connect to the host over the one relay
// connection it has, and every reliable message comes back, intact and
// in order, both ways.
func TestEcho(t *testing.T) {
	s := relay(t)
	l := listen(t, s)
	go echo(l)
	var wg sync.WaitGroup
	for i := range 4 {
		c := dial(t, s, l)
		wg.Go(func() {
			ctx := testCtx(t)
			for k := range 200 {
				msg := fmt.Appendf(nil, "member %d message %d %s", i, k, bytes.Repeat([]byte{'x'}, k*10))
				if err := c.Send(ctx, k%3, msg, true); err != nil {
					t.Error(err)
					return
				}
			}
			next := map[int]int{}
			for range 200 {
				m, err := c.Receive(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				var mi, k int
				fmt.Sscanf(string(m.Data), "member %d message %d", &mi, &k)
				if mi != i || k%3 != m.Channel || k < next[m.Channel] || !m.Reliable {
					t.Errorf("member %d got %q on channel %d", i, m.Data[:30], m.Channel)
					return
				}
				next[m.Channel] = k + 1
			}
		})
	}
	wg.Wait()
	if n := l.NumConns(); n != 4 {
		t.Errorf("the host has %d connections", n)
	}
	if st := s.Stats(); st.Groups != 1 || st.Users != 5 {
		t.Errorf("relay %+v", st)
	}
}

// TestLargeMessage: a message of Fastnet's default largest size is one
// URP message within the relay's default limit (U18).
func TestLargeMessage(t *testing.T) {
	s := relay(t)
	l := listen(t, s)
	go echo(l)
	c := dial(t, s, l)
	ctx := testCtx(t)
	msg := bytes.Repeat([]byte("0123456789abcdef"), fastnet.DefaultMaxMessageSize/16)
	for range 3 {
		if err := c.Send(ctx, 1, msg, true); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		m, err := c.Receive(ctx)
		if err != nil || !bytes.Equal(m.Data, msg) {
			t.Fatalf("%d bytes, %v", len(m.Data), err)
		}
	}
}

// TestEnds: a member that closes ends its connection at the host and
// leaves the group; a host that closes ends its members' connections.
func TestEnds(t *testing.T) {
	s := relay(t)
	l := listen(t, s)
	ctx := testCtx(t)
	gid, _ := l.Group()
	a := dial(t, s, l)
	ha, err := l.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b := dial(t, s, l)
	if _, err := l.Accept(ctx); err != nil {
		t.Fatal(err)
	}
	a.CloseWithReason("bye")
	<-ha.Done()
	var pc *fastnet.PeerClosedError
	if !errors.As(ha.Err(), &pc) || pc.Reason != "bye" {
		t.Errorf("the host's end: %v", ha.Err())
	}
	waitFor(t, func() bool { g, _ := s.Group(gid); return len(g.Members) == 2 })

	l.CloseWithReason("closing")
	<-b.Done()
	if !errors.As(b.Err(), &pc) || pc.Reason != "closing" {
		t.Errorf("the member's end: %v", b.Err())
	}
	waitFor(t, func() bool { _, ok := s.Group(gid); return !ok })
}

// TestStatsPath: every connection over a relay says so in its statistics
// (fastnet.PathRelay, docs/nat.md X13), while it is open and once it has
// ended, by the peer's close or its own endpoint's, and in the final
// statistics of its EventEnded.
func TestStatsPath(t *testing.T) {
	s := relay(t)
	ctx := testCtx(t)
	events := make(chan driver.Event, 64)
	l, err := urpdriver.Listen(ctx, s.Addr().String(), urpdriver.Config{Events: events})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a, b := dial(t, s, l), dial(t, s, l)
	ha, err := l.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hb, err := l.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []*driver.Conn{a, b, ha, hb} {
		if p := c.Stats().Path; p != fastnet.PathRelay {
			t.Errorf("%v: open, Stats.Path %v", c.RemoteAddr(), p)
		}
	}
	a.CloseWithReason("bye") // ha ends by its peer's close
	<-ha.Done()
	for ended := false; !ended; {
		select {
		case ev := <-events:
			if ended = ev.Kind == driver.EventEnded; ended && (ev.Conn != ha || ev.Stats == nil || ev.Stats.Path != fastnet.PathRelay) {
				t.Errorf("EventEnded of %v, stats %+v", ev.Addr, ev.Stats)
			}
		case <-ctx.Done():
			t.Fatal("no EventEnded")
		}
	}
	l.CloseWithReason("closing") // hb ends with its endpoint
	<-b.Done()
	for _, c := range []*driver.Conn{a, b, ha, hb} {
		if p := c.Stats().Path; p != fastnet.PathRelay {
			t.Errorf("%v: ended, Stats.Path %v", c.RemoteAddr(), p)
		}
	}
}

// TestLock: a locked group refuses a new member, even one with the
// password (STAT_LOCK), and the wrong password still as before; the
// member already in it keeps its connection.
func TestLock(t *testing.T) {
	s := relay(t)
	l := listen(t, s)
	go echo(l)
	ctx := testCtx(t)
	gid, pass := l.Group()
	a := dial(t, s, l)
	if err := l.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if g, ok := s.Group(gid); !ok || g.Flags != urpdriver.GroupFlags|urp.FlagLock || len(g.Members) != 2 {
		t.Fatalf("group %+v, %v", g, ok)
	}
	for _, tc := range []struct {
		password uint32
		want     urp.Status
	}{{pass, urp.StatLock}, {pass + 1, urp.StatPass}} {
		_, err := urpdriver.Dial(ctx, s.Addr().String(), gid, tc.password, urpdriver.Config{})
		var me *urpclient.MadeError
		if !errors.As(err, &me) || me.Status != tc.want || !errors.Is(err, urpclient.ErrRefused) {
			t.Errorf("password %d: %v, want %v", tc.password, err, tc.want)
		}
	}
	if err := a.Send(ctx, 0, []byte("still here"), true); err != nil {
		t.Fatal(err)
	}
	if m, err := a.Receive(ctx); err != nil || string(m.Data) != "still here" {
		t.Fatalf("%q, %v", m.Data, err)
	}
	l.Close()
	if err := l.Lock(ctx); err == nil {
		t.Error("Lock after Close")
	}
}

// TestRelayLost: when the relay goes away, every connection over it ends
// and the listener closes.
func TestRelayLost(t *testing.T) {
	s := relay(t)
	l := listen(t, s)
	c := dial(t, s, l)
	hc, err := l.Accept(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	for _, conn := range []*driver.Conn{c, hc} {
		select {
		case <-conn.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("a connection outlived the relay")
		}
		if !errors.Is(conn.Err(), fastnet.ErrTransportClosed) {
			t.Errorf("ended with %v", conn.Err())
		}
	}
	if _, err := l.Accept(testCtx(t)); !errors.Is(err, fastnet.ErrClosed) {
		t.Errorf("Accept: %v", err)
	}
}

// TestDialFailures: a wrong password, and a group that is not a Fastnet
// group (U20).
func TestDialFailures(t *testing.T) {
	s := relay(t)
	l := listen(t, s)
	ctx := testCtx(t)
	gid, pass := l.Group()
	if _, err := urpdriver.Dial(ctx, s.Addr().String(), gid, pass+1, urpdriver.Config{}); !errors.Is(err, urpclient.ErrRefused) {
		t.Errorf("wrong password: %v", err)
	}
	plain, err := urpclient.Dial(ctx, s.Addr().String(), urpclient.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Abort()
	pgid, _ := plain.Make(ctx)
	if _, err := urpdriver.Dial(ctx, s.Addr().String(), pgid, 0, urpdriver.Config{}); !errors.Is(err, urpdriver.ErrNotFastnetGroup) {
		t.Errorf("a plain group: %v", err)
	}
	for ev, err := plain.Receive(ctx); ev.Kind != urp.GotLeft; ev, err = plain.Receive(ctx) {
		if err != nil {
			t.Fatal(err) // the refused member joined, then left
		}
	}
	plain.Set(ctx, urp.Respond, urp.KeyGroupFlags, urpdriver.GroupFlags)
	go func() {
		// The answer to Set (RESPOND, U8) may come first.
		for {
			ev, err := plain.Receive(ctx)
			if err != nil {
				return
			}
			if ev.Kind == urp.GotJoined {
				plain.Quit(ctx)
				return
			}
		}
	}()
	if _, err := urpdriver.Dial(ctx, s.Addr().String(), pgid, 0, urpdriver.Config{}); !errors.Is(err, urpdriver.ErrHostLeft) {
		t.Errorf("a host that leaves: %v", err)
	}
	if _, err := urpdriver.Listen(ctx, "127.0.0.1:1", urpdriver.Config{}); err == nil {
		t.Error("Listen with no relay")
	}
}

// TestConfigRefused: Listen and Dial refuse a negative limit, with an
// error that names it; zero means the default. A negative WriteQueue was
// taken for the default.
func TestConfigRefused(t *testing.T) {
	s := relay(t)
	l := listen(t, s)
	ctx := testCtx(t)
	gid, pass := l.Group()
	tests := []struct {
		name string
		cfg  urpdriver.Config
		want string // in the error, "" for none
	}{
		{"zero", urpdriver.Config{}, ""},
		{"negative WriteQueue", urpdriver.Config{WriteQueue: -1}, "WriteQueue"},
		{"negative ReceiveQueue", urpdriver.Config{ReceiveQueue: -1}, "ReceiveQueue"},
		{"negative Backlog", urpdriver.Config{Backlog: -1}, "Backlog"},
		{"negative relay queue", urpdriver.Config{Relay: urpclient.Config{WriteQueue: -1}}, "queue size"},
		{"negative MaxMembers", urpdriver.Config{Relay: urpclient.Config{Client: urp.ClientConfig{MaxMembers: -1}}}, "MaxMembers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := s.Stats().Connects
			hl, lerr := urpdriver.Listen(ctx, s.Addr().String(), tt.cfg)
			if lerr == nil {
				hl.Close()
			}
			c, derr := urpdriver.Dial(ctx, s.Addr().String(), gid, pass, tt.cfg)
			if derr == nil {
				c.Abort("")
			}
			for _, err := range []error{lerr, derr} {
				switch {
				case tt.want == "" && err != nil:
					t.Errorf("%v", err)
				case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
					t.Errorf("%v, want an error about %s", err, tt.want)
				}
			}
			// A limit refused is refused before the relay is contacted.
			if n := s.Stats().Connects - before; tt.want != "" && n != 0 {
				t.Errorf("the relay saw %d connections for a refused configuration", n)
			}
		})
	}
}

func TestUserAddr(t *testing.T) {
	for _, uid := range []uint32{1, 0x12345678, 0xffffffff} {
		a := urpdriver.UserAddr(uid)
		if got, ok := urpdriver.UserOf(a); !ok || got != uid {
			t.Errorf("%d: %v gives %d, %v", uid, a, got, ok)
		}
	}
	for _, a := range []string{"127.0.0.1:0", "[fd55:5250::1]:7", "[fd55:5250:1::1]:0", "[::1]:0"} {
		if _, ok := urpdriver.UserOf(netip.MustParseAddrPort(a)); ok {
			t.Errorf("%s taken for a user", a)
		}
	}
	if s := (urpdriver.GroupAddr{Relay: "r:1", GID: 9}).String(); s != "r:1/9" {
		t.Errorf("GroupAddr %q", s)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestSlowHost: a host whose application is behind stops reading the
// relay (the driver's pause), the relay holds the group (U11), and
// nothing is lost.
func TestSlowHost(t *testing.T) {
	s := relay(t)
	l, err := urpdriver.Listen(testCtx(t), s.Addr().String(), urpdriver.Config{ReceiveQueue: 64 << 10, Relay: urpclient.Config{ReceiveQueue: 64 << 10}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c := dial(t, s, l)
	ctx := testCtx(t)
	hc, err := l.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const n = 300 // 4.8 MB
	sent := make(chan error, 1)
	go func() {
		msg := make([]byte, 16<<10)
		for i := range n {
			msg[0], msg[1] = byte(i), byte(i>>8)
			if err := c.Send(ctx, 0, msg, true); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	time.Sleep(300 * time.Millisecond)
	if q := hc.Queued(); q > 256<<10 {
		t.Errorf("the host holds %d bytes for Receive", q)
	}
	for i := range n {
		m, err := hc.Receive(ctx)
		if err != nil || int(m.Data[0])|int(m.Data[1])<<8 != i {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	if hc.Pauses() == 0 {
		t.Error("the host never paused")
	}
}
