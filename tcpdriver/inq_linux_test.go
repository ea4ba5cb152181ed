package tcpdriver

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/internal/frame"
)

// TestInputWaiting checks the TCP transport's InputWaiting (N131): it
// sees bytes waiting in a connection's socket, and a packet its reader
// has read and not yet handed to the engine, but not what waits in a
// paused connection, which is not read until Receive catches up; and a
// query allocates nothing.
func TestInputWaiting(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, c, tr := listenDial(t, ctx, Config{})
	sc, err := l.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tc := tr.conn(c.RemoteAddr())
	if tc == nil {
		t.Fatal("no connection in the transport")
	}
	// Until nothing waits: heartbeats are read as they come.
	until := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !cond(); {
			if time.Now().After(deadline) {
				t.Fatalf("no %s within 5 s", what)
			}
			time.Sleep(time.Millisecond)
		}
	}
	until("quiet", func() bool { w, k := tr.InputWaiting(); return !w && k })
	if a := testing.AllocsPerRun(100, func() { tr.InputWaiting() }); a != 0 {
		t.Errorf("InputWaiting allocates %v times a call, want 0", a)
	}

	// Paused, its reader reads nothing: what the server sends waits in
	// the socket, which the query sees, and InputWaiting leaves out. A
	// read under way as the pause came takes the first message; the
	// reader then sees the pause, and the second waits.
	tr.PauseRead(c.RemoteAddr(), true)
	for range 2 {
		if err := sc.Send(ctx, 1, make([]byte, 1000), true); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	until("bytes in the socket", func() bool { w, _ := tc.inq.waiting(); return w })
	if w, k := tr.InputWaiting(); w || !k {
		t.Errorf("InputWaiting() with only a paused connection's input = %v, %v; want false, true", w, k)
	}
	tc.pausedNow.Store(false) // as if not paused: the socket's bytes count
	if w, k := tr.InputWaiting(); !w || !k {
		t.Errorf("InputWaiting() with bytes in a socket = %v, %v; want true, true", w, k)
	}
	tc.pausedNow.Store(true)
	tr.PauseRead(c.RemoteAddr(), false)
	for range 2 {
		if m, err := c.Receive(ctx); err != nil || len(m.Data) != 1000 {
			t.Fatalf("Receive = %d bytes, %v", len(m.Data), err)
		}
	}
	until("quiet after the read", func() bool { w, _ := tr.InputWaiting(); return !w })

	// A packet the reader has read and not yet handed to the engine:
	// the socket is empty, and the read role holds input.
	in, release := make(chan struct{}), make(chan struct{})
	var armed atomic.Bool
	hook := func(hc *tcpConn) {
		if hc == tc && armed.CompareAndSwap(true, false) {
			in <- struct{}{}
			<-release
		}
	}
	testHookInput.Store(&hook)
	defer testHookInput.Store(nil)
	armed.Store(true)
	if err := sc.Send(ctx, 1, []byte("held"), true); err != nil {
		t.Fatal(err)
	}
	select {
	case <-in:
	case <-ctx.Done():
		t.Fatal("the reader read nothing")
	}
	if w, _ := tc.inq.waiting(); w {
		t.Error("bytes still in the socket with the packet read")
	}
	if w, k := tr.InputWaiting(); !w || !k {
		t.Errorf("InputWaiting() with a packet read and not handed over = %v, %v; want true, true", w, k)
	}
	close(release)
	if m, err := c.Receive(ctx); err != nil || string(m.Data) != "held" {
		t.Fatalf("Receive = %q, %v", m.Data, err)
	}
	until("quiet once handed over", func() bool { w, _ := tr.InputWaiting(); return !w })
	if tc.held.Load() {
		t.Error("the connection holds input once it is handed over")
	}
}

// A packet of which only a part has come is not input held: the reader
// waits for the rest, and a peer that stops in the middle of a packet
// would otherwise have every put-off last its whole budget (N131).
func TestInputWaitingPartialPacket(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg := Config{Engine: fastnet.Config{Role: fastnet.Client}}
	e, err := newEngine(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tr := newTransport(e, cfg)
	e.Start(tr)
	defer e.Close()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	peer, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	tr.add(nc, false)
	// An empty packet, whole, then the first 10 bytes of one of 100,
	// in one write: both reach the reader's buffer in one read.
	b := frame.AppendHeader(nil, 0)
	b = append(frame.AppendHeader(b, 100), make([]byte, 10)...)
	if _, err := peer.Write(b); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		w, k := tr.InputWaiting()
		if !w && k {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("InputWaiting() = %v, %v for 5 s with part of a packet buffered; want false, true", w, k)
		}
	}
	time.Sleep(50 * time.Millisecond) // and it stays so
	if w, _ := tr.InputWaiting(); w {
		t.Error("InputWaiting() = true with part of a packet buffered and nothing more to come")
	}
}

// BenchmarkInputWaitingSocket is what InputWaiting costs for each
// connection it asks the kernel about, when none holds input (N131).
func BenchmarkInputWaitingSocket(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, c, tr := listenDial(b, ctx, Config{})
	tc := tr.conn(c.RemoteAddr())
	b.ReportAllocs()
	for b.Loop() {
		tc.inq.waiting()
	}
}
