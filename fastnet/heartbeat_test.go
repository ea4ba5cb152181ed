package fastnet

import (
	"errors"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
)

// D16: the server originates 1..32767 and echoes negative values; the
// client the reverse; the interval is min(1 s, timeout/20).
func TestHeartbeatsServer(t *testing.T) {
	cfg := serverConfig()
	cfg.Timeout = 10 * time.Second // interval 500 ms
	tc := newTestEndpoint(t, cfg)
	tc.connectServer() // consumes and echoes the first heartbeat, sent at once
	first := tc.firstBeat
	tc.advance(499 * time.Millisecond)
	tc.wantNoPacket("not before the interval")
	tc.recv(chHeartbeat, appendHeartbeat(nil, first)) // the client's echo, ignored as an echo
	tc.wantNoPacket("our own value is not echoed")
	tc.recv(chHeartbeat, appendHeartbeat(nil, -77))
	tc.wantPacket("negative value echoed at once", chHeartbeat, appendHeartbeat(nil, -77))
	tc.advance(time.Millisecond)
	tc.wantPacket("second heartbeat at 500 ms", chHeartbeat, appendHeartbeat(nil, first%32767+1))
	tc.recv(chHeartbeat, appendHeartbeat(nil, 0))
	tc.wantNoPacket("zero is neither side's")
}

func TestHeartbeatCycles(t *testing.T) {
	var h heartbeat
	h.init(Server)
	h.next = 32767
	if v := h.originate(1, time.Second, 0); v != 32767 {
		t.Fatal(v)
	}
	if v := h.originate(2, time.Second, 0); v != 1 {
		t.Fatalf("server after 32767: %d, want 1", v)
	}
	h.init(Client)
	h.next = -32768
	h.originate(1, time.Second, 0)
	if v := h.originate(2, time.Second, 0); v != -1 {
		t.Fatalf("client after -32768: %d, want -1", v)
	}
}

// D17: an RTT sample is the time from an originated heartbeat to its echo,
// smoothed as RFC 6298 does; 200 ms before the first sample; unknown echoes
// are ignored.
func TestRTTFromHeartbeats(t *testing.T) {
	tc := newTestEndpoint(t, clientConfig())
	h := tc.connectClient(1)
	st, _ := tc.ep.Stats(h)
	if st.RTT != 200*time.Millisecond {
		t.Fatalf("initial RTT %v", st.RTT)
	}
	first := clientBeat(tc, h, 0)
	tc.wantPacket("first heartbeat", chHeartbeat, appendHeartbeat(nil, first))
	tc.advance(80 * time.Millisecond)
	tc.recv(chHeartbeat, appendHeartbeat(nil, first))
	st, _ = tc.ep.Stats(h)
	if st.RTT != 80*time.Millisecond || st.MinRTT != 80*time.Millisecond || st.RTTVar != 40*time.Millisecond {
		t.Fatalf("after one 80 ms sample: rtt %v var %v min %v", st.RTT, st.RTTVar, st.MinRTT)
	}
	tc.recv(chHeartbeat, appendHeartbeat(nil, first)) // a duplicate echo: no second sample
	tc.recv(chHeartbeat, appendHeartbeat(nil, clientBeat(tc, h, 999)))
	st2, _ := tc.ep.Stats(h)
	if st2.RTT != st.RTT {
		t.Fatalf("a duplicate or unknown echo changed the RTT to %v", st2.RTT)
	}
	// Early on, the client's heartbeats go every ConnectRetry (N33).
	tc.advance(120 * time.Millisecond)
	tc.wantPacket("second heartbeat at 200 ms", chHeartbeat, appendHeartbeat(nil, clientBeat(tc, h, 1)))
	tc.advance(40 * time.Millisecond)
	tc.recv(chHeartbeat, appendHeartbeat(nil, clientBeat(tc, h, 1)))
	st, _ = tc.ep.Stats(h)
	// srtt = 7/8*80 + 1/8*40 = 75; rttvar = 3/4*40 + 1/4*|80-40| = 40.
	if st.RTT != 75*time.Millisecond || st.RTTVar != 40*time.Millisecond || st.MinRTT != 40*time.Millisecond {
		t.Fatalf("after a 40 ms sample: rtt %v var %v min %v", st.RTT, st.RTTVar, st.MinRTT)
	}
}

// D16: a connection whose peer sends no heartbeat for the timeout breaks;
// any heartbeat restarts the timeout.
func TestHeartbeatTimeout(t *testing.T) {
	cfg := serverConfig()
	cfg.Timeout = 2 * time.Second
	tc := newTestEndpoint(t, cfg)
	h, _ := tc.connectServer()
	tc.advance(1900 * time.Millisecond)
	tc.recv(chHeartbeat, appendHeartbeat(nil, -5))
	tc.advance(1900 * time.Millisecond)
	tc.wantNoEvent("heartbeat restarted the timeout")
	tc.advance(100 * time.Millisecond)
	ev := tc.wantEvent("timeout", EventDisconnected)
	if ev.Conn != h || !errors.Is(ev.Err, ErrTimeout) {
		t.Fatalf("event %+v", ev)
	}
	if tc.ep.NumConns() != 0 {
		t.Fatal("timed-out connection still held")
	}
}

// N33: a client's heartbeats go every ConnectRetry for its first
// ValidationTimeout, while the server may be validating it (D25), then
// every second (D16).
func TestClientEarlyHeartbeats(t *testing.T) {
	cfg := clientConfig()
	cfg.ValidationTimeout = time.Second
	tc := newTestEndpoint(t, cfg)
	h := tc.connectClient(1)
	tc.wantPacket("first heartbeat at once", chHeartbeat, appendHeartbeat(nil, clientBeat(tc, h, 0)))
	var at []time.Duration
	start := tc.now
	for range 40 {
		tc.advance(100 * time.Millisecond)
		for _, p := range tc.sent {
			if p.ch == chHeartbeat {
				at = append(at, tc.now.Sub(start))
			}
		}
		tc.sent = nil
	}
	want := []time.Duration{200, 400, 600, 800, 1000, 2000, 3000, 4000}
	for i := range want {
		want[i] *= time.Millisecond
	}
	if len(at) != len(want) {
		t.Fatalf("heartbeats at %v, want %v", at, want)
	}
	for i := range want {
		if at[i] != want[i] {
			t.Fatalf("heartbeats at %v, want %v", at, want)
		}
	}
}

// N52: heartbeats fall on a grid of an eighth of their interval, so that
// an endpoint's connections send theirs together; the interval never
// exceeds D16's and is at least 7/8 of it.
func TestHeartbeatGrid(t *testing.T) {
	const interval = time.Second
	g := clock.Time(interval / beatGrid)
	for _, now := range []clock.Time{clock.Epoch, clock.Epoch + 1, clock.Epoch + g - 1, clock.Epoch + 12345678, clock.Epoch + 7*g + 5} {
		next := beatAfter(now, interval)
		if next%g != 0 {
			t.Errorf("beatAfter(%v) = %v, not on the grid of %v", now, next, time.Duration(g))
		}
		if d := next.Sub(now); d > interval || d <= interval-time.Duration(g) {
			t.Errorf("beatAfter(%v): interval %v, want in (%v, %v]", now, d, interval-time.Duration(g), interval)
		}
	}
	if got := beatAfter(clock.Never-5, interval); got != clock.Never {
		t.Errorf("beatAfter near Never = %v", got)
	}
}
