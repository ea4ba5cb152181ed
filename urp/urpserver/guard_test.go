package urpserver_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/urp"
	"github.com/fastnet-engine/fastnet/urp/urpserver"
)

// dialRawFrom is dialRaw from the local address ip, one of the loopback
// addresses, so that a test can speak from several addresses.
func dialRawFrom(t testing.TB, s *urpserver.Server, ip string) *raw {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	nc, err := d.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	return welcomed(t, nc)
}

// rest reads what r is sent until the relay closes the connection, and
// reports whether it did within 10 seconds: an end or a reset (a relay
// that closes a connection with bytes unread resets it).
func (r *raw) rest() ([]urp.Packet, bool) {
	r.t.Helper()
	r.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(r.nc)
	r.dec.Feed(b)
	var ps []urp.Packet
	for {
		p, ok, derr := r.dec.Next()
		if derr != nil {
			r.t.Fatal(derr)
		}
		if !ok {
			var ne net.Error
			return ps, !errors.As(err, &ne) || !ne.Timeout()
		}
		ps = append(ps, p)
	}
}

// guesses encodes n joins of GIDs from gid on, password 0.
func guesses(gid uint32, n int) []byte {
	var b []byte
	for i := range n {
		b = urp.Append(b, urp.Packet{ID: urp.U2RJoin, GID: gid + uint32(i)})
	}
	return b
}

// waitGuessing waits for n users closed for guessing to be reported on
// events, and returns the joins that failed before them.
func waitGuessing(t *testing.T, events <-chan urpserver.Event, n int) (failed int) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for n > 0 {
		select {
		case ev := <-events:
			switch {
			case ev.Kind == urp.EventJoinFailed:
				failed++
			case ev.Kind == urp.EventDisconnected && errors.Is(ev.Err, urp.ErrGuessing):
				n--
			}
		case <-timeout:
			t.Fatalf("%d closes for guessing not reported", n)
		}
	}
	return failed
}

// guardClock replaces the clock of s's join budget with one the test
// moves.
func guardClock(s *urpserver.Server) *atomic.Int64 {
	var now atomic.Int64
	urpserver.SetGuardClock(s, func() time.Duration { return time.Duration(now.Load()) })
	return &now
}

// TestJoinGuessing: the joins the users of one address may fail are
// bounded (U26). One user sending a thousand guesses in one write has
// JoinFailures of them checked and is closed at the next; another from
// the same address is closed at its first join, right as it is, without
// an answer; a user of another address is not; and the budget grows
// back by one each JoinFailureEvery.
func TestJoinGuessing(t *testing.T) {
	const burst, every = 4, time.Hour
	events := make(chan urpserver.Event, 4096)
	s := start(t, urpserver.Config{JoinFailures: burst, JoinFailureEvery: every, Events: events})
	now := guardClock(s)
	host := dial(t, s)
	gid, err := host.Make(testCtx(t)) // no password: its GID is all there is to guess
	if err != nil {
		t.Fatal(err)
	}

	guesser := dialRawFrom(t, s, "127.0.0.1")
	guesser.write(guesses(gid+1, 1000))
	if _, closed := guesser.rest(); !closed {
		t.Fatal("a user guessing a thousand times was not closed")
	}
	if failed := waitGuessing(t, events, 1); failed != burst {
		t.Errorf("%d joins failed before the close, want %d", failed, burst)
	}

	again := dialRawFrom(t, s, "127.0.0.1")
	again.send(urp.Packet{ID: urp.U2RJoin, GID: gid})
	if ps, closed := again.rest(); !closed || len(ps) != 0 {
		t.Errorf("a right join from the same address: closed %v, answered %+v; want closed without an answer", closed, ps)
	}
	waitGuessing(t, events, 1)

	other := dialRawFrom(t, s, "127.0.0.2")
	other.send(urp.Packet{ID: urp.U2RJoin, GID: gid + 1})
	if p := other.next(); p.ID != urp.R2UMade || p.Status != urp.StatPass {
		t.Errorf("a guess from another address: %+v, want STAT_PASS", p)
	}
	other.join(host)

	// One JoinFailureEvery later, one more failure from the first
	// address, and no second.
	now.Add(int64(every))
	later := dialRawFrom(t, s, "127.0.0.1")
	later.send(urp.Packet{ID: urp.U2RJoin, GID: gid + 1})
	if p := later.next(); p.ID != urp.R2UMade || p.Status != urp.StatPass {
		t.Errorf("a guess once the budget grew: %+v, want STAT_PASS", p)
	}
	later.send(urp.Packet{ID: urp.U2RJoin, GID: gid + 2})
	if _, closed := later.rest(); !closed {
		t.Error("a second guess once the budget grew by one was not closed")
	}
	waitGuessing(t, events, 1)
	if got := s.Stats().Guessing; got != 3 {
		t.Errorf("Stats.Guessing = %d, want 3", got)
	}
}

// TestJoinGuessingUnbounded: JoinFailures negative turns the bound off.
func TestJoinGuessingUnbounded(t *testing.T) {
	s := start(t, urpserver.Config{JoinFailures: -1})
	r := dialRawFrom(t, s, "127.0.0.1")
	const n = 1000
	r.write(guesses(1, n))
	for i := range n {
		if p := r.next(); p.ID != urp.R2UMade || p.Status != urp.StatPass {
			t.Fatalf("guess %d: %+v", i, p)
		}
	}
	if got := s.Stats().Guessing; got != 0 {
		t.Errorf("Stats.Guessing = %d, want 0", got)
	}
}

// TestJoinFailureNetworks: the addresses of one network (an IPv4 /24)
// share a budget four times an address's (U26).
func TestJoinFailureNetworks(t *testing.T) {
	const burst = 2
	s := start(t, urpserver.Config{JoinFailures: burst, JoinFailureEvery: time.Hour})
	guardClock(s)
	for i := 1; i <= 4; i++ {
		r := dialRawFrom(t, s, fmt.Sprintf("127.0.0.%d", i))
		r.write(guesses(1, burst))
		for range burst {
			if p := r.next(); p.ID != urp.R2UMade || p.Status != urp.StatPass {
				t.Fatalf("address %d: %+v", i, p)
			}
		}
	}
	fifth := dialRawFrom(t, s, "127.0.0.5")
	fifth.send(urp.Packet{ID: urp.U2RJoin, GID: 7})
	if ps, closed := fifth.rest(); !closed || len(ps) != 0 {
		t.Errorf("a fifth address of a network whose budget is spent: closed %v, answered %+v", closed, ps)
	}
	other := dialRawFrom(t, s, "127.0.1.5")
	other.send(urp.Packet{ID: urp.U2RJoin, GID: 7})
	if p := other.next(); p.ID != urp.R2UMade || p.Status != urp.StatPass {
		t.Errorf("an address of another network: %+v", p)
	}
}

// TestJoinGuardConfig: the join budget's settings are validated, and a
// JoinGuard of the caller's is the one used.
func TestJoinGuardConfig(t *testing.T) {
	for _, cfg := range []urpserver.Config{
		{JoinFailureEvery: -time.Second},
		{JoinFailureAddrs: -1},
	} {
		if _, err := urpserver.Listen(context.Background(), "127.0.0.1:0", cfg); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
	mine := &refuseAll{}
	s := start(t, urpserver.Config{Relay: urp.Config{JoinGuard: mine}, JoinFailures: 1000})
	r := dialRawFrom(t, s, "127.0.0.1")
	r.send(urp.Packet{ID: urp.U2RJoin, GID: 7})
	if _, closed := r.rest(); !closed || mine.asked.Load() != 1 {
		t.Errorf("closed %v, the caller's guard asked %d times; want closed, asked once", closed, mine.asked.Load())
	}
}

// refuseAll is a JoinGuard that lets no join fail.
type refuseAll struct{ asked atomic.Int64 }

func (g *refuseAll) MayFail(uint32) bool { g.asked.Add(1); return false }
func (g *refuseAll) Failed(uint32)       {}
