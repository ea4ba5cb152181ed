package urpclient_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/urp"
	"github.com/fastnet-engine/fastnet/urp/internal/urptest"
	"github.com/fastnet-engine/fastnet/urp/urpclient"
	"github.com/fastnet-engine/fastnet/urp/urpserver"
)

func relay(t *testing.T, cfg urpserver.Config) string {
	t.Helper()
	return urptest.Relay(t, cfg).Addr().String()
}

var ctxFor = urptest.Context

func dial(t *testing.T, addr string, cfg urpclient.Config) *urpclient.Conn {
	t.Helper()
	c, err := urpclient.Dial(ctxFor(t, 10*time.Second), addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Abort() })
	return c
}

// fake serves one TCP connection with serve.
func fake(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer nc.Close()
				serve(nc)
			}()
		}
	}()
	return ln.Addr().String()
}

// TestDialFailures checks what Dial says of servers that are not URP
// relays, or not there (U15).
func TestDialFailures(t *testing.T) {
	silent := fake(t, func(nc net.Conn) { time.Sleep(time.Second) })
	http := fake(t, func(nc net.Conn) { nc.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\n")) })
	v2 := fake(t, func(nc net.Conn) {
		nc.Write(urp.Append(nil, urp.Packet{ID: urp.R2UWelc, Version: 2, UID: 1}))
		time.Sleep(time.Second)
	})
	cut := fake(t, func(nc net.Conn) { nc.Write(urp.Append(nil, urp.Packet{ID: urp.R2UWelc, Version: 1})[:20]) })
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	nobody := ln.Addr().String()
	ln.Close()
	tests := []struct {
		name string
		addr string
		want error
	}{
		{"nothing listening", nobody, syscall.ECONNREFUSED},
		{"silent", silent, context.DeadlineExceeded},
		{"an HTTP server", http, urp.ErrUnknownPacket},
		{"URP 2.0", v2, urp.ErrBadWelcome},
		{"a welcome cut short", cut, urp.ErrTruncated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := urpclient.Dial(ctxFor(t, 300*time.Millisecond), tt.addr, urpclient.Config{})
			if !errors.Is(err, tt.want) {
				t.Errorf("Dial: %v, want %v", err, tt.want)
			}
		})
	}
	var ve *urp.VersionError
	if _, err := urpclient.Dial(ctxFor(t, time.Second), v2, urpclient.Config{}); !errors.As(err, &ve) || ve.Version != 2 {
		t.Errorf("URP 2.0: %v", err)
	}
	if _, err := urpclient.Dial(context.Background(), nobody, urpclient.Config{WriteQueue: -1}); err == nil {
		t.Error("a negative WriteQueue")
	}
}

// TestContext checks that blocking calls return when their context is
// done, and that the connection goes on.
func TestContext(t *testing.T) {
	addr := relay(t, urpserver.Config{})
	c := dial(t, addr, urpclient.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := c.Receive(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Receive: %v", err)
	}
	if _, err := c.Make(ctxFor(t, time.Second)); err != nil {
		t.Fatal(err)
	}
	cancelled, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if _, err := c.Get(cancelled, urp.KeyGroupMax); !errors.Is(err, context.Canceled) {
		t.Errorf("Get: %v", err)
	}
	if v, err := c.Get(ctxFor(t, time.Second), urp.KeyGroupMax); err != nil || v != urp.DefaultMaxGroupSize {
		t.Errorf("Get after a cancelled one: %d, %v", v, err)
	}
}

// A request made with a context already done queues nothing and returns
// the context's error: a Set that only notifies, which waits for no
// answer, changes nothing on the relay.
func TestCancelledRequestSendsNothing(t *testing.T) {
	addr := relay(t, urpserver.Config{})
	c := dial(t, addr, urpclient.Config{})
	ctx := ctxFor(t, 10*time.Second)
	if _, err := c.Make(ctx); err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Set(cancelled, urp.Notify, urp.KeyGroupMax, 3); !errors.Is(err, context.Canceled) {
		t.Errorf("Set with a cancelled context: %v", err)
	}
	if v, err := c.Get(ctx, urp.KeyGroupMax); err != nil || v != urp.DefaultMaxGroupSize {
		t.Errorf("after a cancelled Set, the group's limit is %d (%v), want %d", v, err, urp.DefaultMaxGroupSize)
	}
}

// TestClose: Close writes what was queued; afterwards every call says the
// connection is closed.
func TestClose(t *testing.T) {
	addr := relay(t, urpserver.Config{})
	ctx := ctxFor(t, 10*time.Second)
	h := dial(t, addr, urpclient.Config{})
	gid, err := h.Make(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m := dial(t, addr, urpclient.Config{})
	if err := m.Join(ctx, gid, 0); err != nil {
		t.Fatal(err)
	}
	msg := make([]byte, 64<<10)
	for range 50 {
		if err := m.Send(ctx, h.UID(), msg); err != nil {
			t.Fatal(err)
		}
	}
	m.Close()
	if _, err := h.Receive(ctx); err != nil { // GotJoined
		t.Fatal(err)
	}
	for i := range 50 {
		ev, err := h.Receive(ctx)
		if err != nil || ev.Kind != urp.GotText || len(ev.Data) != len(msg) {
			t.Fatalf("message %d: %v %v", i, ev.Kind, err)
		}
	}
	if ev, err := h.Receive(ctx); err != nil || ev.Kind != urp.GotLeft {
		t.Errorf("after the messages: %v %v", ev.Kind, err)
	}
	if err := m.Send(ctx, h.UID(), nil); !errors.Is(err, urp.ErrClosed) {
		t.Errorf("Send after Close: %v", err)
	}
	if _, err := m.Receive(ctx); !errors.Is(err, urp.ErrClosed) {
		t.Errorf("Receive after Close: %v", err)
	}
	<-m.Done()
}

// TestQueue checks the calls for a transport: Queue does not wait, Queued
// counts, and OnWritten tells when bytes went out.
func TestQueue(t *testing.T) {
	addr := relay(t, urpserver.Config{})
	ctx := ctxFor(t, 10*time.Second)
	var written atomic.Int64
	h := dial(t, addr, urpclient.Config{WriteQueue: 1024, OnWritten: func() { written.Add(1) }})
	gid, _ := h.Make(ctx)
	m := dial(t, addr, urpclient.Config{})
	m.Join(ctx, gid, 0)
	for range 100 {
		if err := h.Queue(m.UID(), make([]byte, 1000)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 100 {
		if ev, err := m.Receive(ctx); err != nil || ev.Kind != urp.GotText || ev.UID != h.UID() {
			t.Fatalf("message %d: %v %v", i, ev.Kind, err)
		}
	}
	// The writer counts what it wrote once its write returns, which may
	// be after the member has read it all.
	for end := time.Now().Add(5 * time.Second); h.Queued() != 0 && time.Now().Before(end); {
		time.Sleep(time.Millisecond)
	}
	if h.Queued() != 0 || written.Load() == 0 {
		t.Errorf("queued %d, written %d times", h.Queued(), written.Load())
	}
	if err := h.Queue(m.UID(), make([]byte, urp.DefaultMaxMessage+1)); !errors.Is(err, urp.ErrMessageTooLong) {
		t.Errorf("a long message: %v", err)
	}
}

// TestReceiveQueue: a client whose Receive is behind stops reading the
// relay, so its memory stays within ReceiveQueue and one read; nothing is
// lost once it reads again.
func TestReceiveQueue(t *testing.T) {
	addr := relay(t, urpserver.Config{WriteTimeout: -1})
	ctx := ctxFor(t, 20*time.Second)
	h := dial(t, addr, urpclient.Config{})
	gid, _ := h.Make(ctx)
	const limit = 64 << 10
	m := dial(t, addr, urpclient.Config{ReceiveQueue: limit})
	m.Join(ctx, gid, 0)
	msg := make([]byte, 8<<10)
	const n = 1000 // 8 MB
	sent := make(chan error, 1)
	go func() {
		for i := range n {
			msg[0] = byte(i)
			if err := h.Send(ctx, m.UID(), msg); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	time.Sleep(200 * time.Millisecond)
	if u := m.Unread(); u > limit+32<<10 {
		t.Errorf("%d bytes unread, above the limit %d and a read", u, limit)
	}
	for i := range n {
		ev, err := m.Receive(ctx)
		if err != nil || ev.Data[0] != byte(i) || !bytes.Equal(ev.Data[1:], msg[1:]) {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
}

func TestMadeError(t *testing.T) {
	tests := []struct {
		s    urp.Status
		want string
	}{
		{urp.StatPass, "urpclient: group 7: no such group, or wrong password"},
		{urp.StatLock, "urpclient: group 7 is locked"},
		{urp.StatFull, "urpclient: group 7 is full"},
		{urp.StatLimit, "urpclient: the relay has too many groups open"},
		{urp.StatFail, "urpclient: refused by the relay: STAT_FAIL"},
	}
	for _, tt := range tests {
		err := &urpclient.MadeError{Status: tt.s, GID: 7}
		if err.Error() != tt.want || !errors.Is(err, urpclient.ErrRefused) {
			t.Errorf("%v: %q", tt.s, err.Error())
		}
	}
}
