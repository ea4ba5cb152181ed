package tcpdriver

import (
	"context"
	"testing"
	"time"
)

// TestInputWaiting checks the TCP transport's InputWaiting (N131): it
// sees bytes waiting in a connection's socket, and input its read role
// holds, but not what waits in a paused connection, which is not read
// until Receive catches up; and a query allocates nothing.
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

	// Input the read role holds.
	tc.held.Store(true)
	if w, _ := tr.InputWaiting(); !w {
		t.Error("InputWaiting() with input held = false, want true")
	}
	tc.held.Store(false)
}
