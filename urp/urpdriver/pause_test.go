package urpdriver_test

import (
	"context"
	"errors"
	"net"
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

// slowQueues makes a connection's intake pause after 64 KiB not yet
// received.
var slowQueues = urpdriver.Config{ReceiveQueue: 64 << 10, Relay: urpclient.Config{ReceiveQueue: 64 << 10}}

// returnsWithin reports whether f returns within d.
func returnsWithin(d time.Duration, f func()) bool {
	done := make(chan struct{})
	go func() { f(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// floodUntilPaused has from send to to until to's intake has paused.
func floodUntilPaused(t *testing.T, ctx context.Context, from, to *driver.Conn) {
	t.Helper()
	go func() {
		msg := make([]byte, 16<<10)
		for range 40 {
			if from.Send(ctx, 0, msg, true) != nil {
				return
			}
		}
	}()
	for deadline := time.Now().Add(10 * time.Second); to.Pauses() == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the connection's intake never paused")
		}
	}
}

// pausedHost returns a host whose connection from a first member is
// paused (its application has fallen behind), and a second member and
// the host's connection from it.
func pausedHost(t *testing.T, ctx context.Context, s *urpserver.Server) (l *urpdriver.Listener, paused, b, hb *driver.Conn) {
	t.Helper()
	l, err := urpdriver.Listen(ctx, s.Addr().String(), slowQueues)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	gid, pass := l.Group()
	member := func() (*driver.Conn, *driver.Conn) {
		c, err := urpdriver.Dial(ctx, s.Addr().String(), gid, pass, urpdriver.Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Abort("") })
		hc, err := l.Accept(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return c, hc
	}
	a, ha := member()
	b, hb = member()
	floodUntilPaused(t, ctx, a, ha)
	return l, ha, b, hb
}

// TestPausedConnectionEnds: a connection of a host that ends while its
// intake is paused resumes the relay connection that all its
// connections share (N144). It stayed paused for good: the host's other
// connections got nothing more, and Close spun a processor and never
// returned.
func TestPausedConnectionEnds(t *testing.T) {
	s := urptest.Relay(t, urpserver.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, ha, b, hb := pausedHost(t, ctx, s)
	ha.Abort("bye")
	if err := b.Send(ctx, 1, []byte("ping"), true); err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
	defer rcancel()
	if m, err := hb.Receive(rctx); err != nil || string(m.Data) != "ping" {
		t.Fatalf("after the paused connection ended, another's message: %q, %v", m.Data, err)
	}
	if !returnsWithin(10*time.Second, func() { l.Close() }) {
		t.Fatal("Listener.Close did not return within 10 s")
	}
}

// TestCloseWhilePaused: a listener, or a member, whose intake is paused
// closes (N144), and one whose relay goes away hears it.
func TestCloseWhilePaused(t *testing.T) {
	t.Run("listener", func(t *testing.T) {
		s := urptest.Relay(t, urpserver.Config{})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		l, _, _, _ := pausedHost(t, ctx, s)
		if !returnsWithin(10*time.Second, func() { l.Close() }) {
			t.Fatal("Listener.Close did not return within 10 s")
		}
	})
	t.Run("member", func(t *testing.T) {
		s := urptest.Relay(t, urpserver.Config{})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		l, err := urpdriver.Listen(ctx, s.Addr().String(), urpdriver.Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		gid, pass := l.Group()
		c, err := urpdriver.Dial(ctx, s.Addr().String(), gid, pass, slowQueues)
		if err != nil {
			t.Fatal(err)
		}
		hc, err := l.Accept(ctx)
		if err != nil {
			t.Fatal(err)
		}
		floodUntilPaused(t, ctx, hc, c)
		if !returnsWithin(10*time.Second, func() { c.Close() }) {
			t.Fatal("a member's Close did not return within 10 s")
		}
	})
	t.Run("relay lost", func(t *testing.T) {
		s := urptest.Relay(t, urpserver.Config{})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		l, _, _, hb := pausedHost(t, ctx, s)
		s.Close()
		actx, acancel := context.WithTimeout(ctx, 10*time.Second)
		defer acancel()
		if _, err := l.Accept(actx); err == nil || errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Accept once the relay went away: %v, want the listener closed", err)
		}
		select {
		case <-hb.Done():
		case <-time.After(10 * time.Second):
			t.Error("a connection still open 10 s after the relay went away")
		}
	})
}

// TestSilentRelay: Dial and Listen against a relay address where
// something accepts and never speaks, or welcomes and then answers
// nothing, fail within Engine.ConnectTimeout, with an error that matches
// fastnet.ErrTimeout, even with a context without a deadline (N144):
// they waited for as long as the context allowed.
func TestSilentRelay(t *testing.T) {
	for _, welcome := range []bool{false, true} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		accepting := make(chan struct{})
		go func() {
			defer close(accepting)
			var held []net.Conn // accepted, never answered
			defer func() {
				for _, c := range held {
					c.Close()
				}
			}()
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				if welcome {
					c.Write(urp.Append(urp.Append(nil, urp.Packet{ID: urp.R2UWelc, Version: urp.Version, Revision: urp.Revision, UID: 7, Brand: "mute"}),
						urp.Packet{ID: urp.R2UStat, Role: urp.Connected}))
				}
				held = append(held, c)
			}
		}()
		cfg := urpdriver.Config{Engine: fastnet.Config{ConnectTimeout: 300 * time.Millisecond}}
		for name, f := range map[string]func() error{
			"Dial": func() error {
				_, err := urpdriver.Dial(context.Background(), ln.Addr().String(), 1, 2, cfg)
				return err
			},
			"Listen": func() error {
				_, err := urpdriver.Listen(context.Background(), ln.Addr().String(), cfg)
				return err
			},
		} {
			var err error
			if !returnsWithin(5*time.Second, func() { err = f() }) {
				t.Fatalf("%s against a silent relay (welcome %v) did not return within 5 s", name, welcome)
			}
			if !errors.Is(err, fastnet.ErrTimeout) {
				t.Errorf("%s against a silent relay (welcome %v): %v, want fastnet.ErrTimeout", name, welcome, err)
			}
		}
		ln.Close()
		<-accepting
	}
}
