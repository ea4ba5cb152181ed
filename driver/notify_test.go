package driver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/driver"
	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/impair"
	"github.com/fastnet-engine/fastnet/udpdriver"
)

// lockedBuffer is a bytes.Buffer a logger and a test may share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// collect reads events from ch until want says it has what it waits for.
func collect(t *testing.T, ch <-chan driver.Event, want func([]driver.Event) bool) []driver.Event {
	t.Helper()
	var evs []driver.Event
	timeout := time.After(10 * time.Second)
	for !want(evs) {
		select {
		case ev := <-ch:
			evs = append(evs, ev)
		case <-timeout:
			t.Fatalf("events so far: %v", kinds(evs))
		}
	}
	return evs
}

func kinds(evs []driver.Event) []string {
	var ks []string
	for _, ev := range evs {
		ks = append(ks, ev.Kind.String())
	}
	return ks
}

func has(evs []driver.Event, k driver.EventKind) *driver.Event {
	for i := range evs {
		if evs[i].Kind == k {
			return &evs[i]
		}
	}
	return nil
}

// TestEvents: both sides hear their connection start, its MTU change and
// its quality reports, and its end with the final statistics, which Stats
// still returns after the end; the logger writes the same.
func TestEvents(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var logs lockedBuffer
	sev := make(chan driver.Event, 256)
	cev := make(chan driver.Event, 256)
	quick := fastnet.Config{QualityInterval: 50 * time.Millisecond}
	l, err := udpdriver.Listen(ctx, "127.0.0.1:0", udpdriver.Config{Engine: quick, Events: sev,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := udpdriver.Dial(ctx, l.Addr().String(), udpdriver.Config{Engine: quick, Events: cev})
	if err != nil {
		t.Fatal(err)
	}
	s, err := l.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if err := c.Send(ctx, 1, []byte{byte(i)}, true); err != nil {
			t.Fatal(err)
		}
	}
	for range 20 {
		if _, err := s.Receive(ctx); err != nil {
			t.Fatal(err)
		}
	}
	evs := collect(t, cev, func(evs []driver.Event) bool {
		return has(evs, driver.EventConnected) != nil && has(evs, driver.EventMTU) != nil && has(evs, driver.EventQuality) != nil
	})
	if ev := has(evs, driver.EventConnected); ev.Conn != c || ev.Addr != c.RemoteAddr() {
		t.Errorf("client's connected event %+v, want its conn and the server's address", ev)
	}
	if ev := has(evs, driver.EventMTU); ev.MTU <= 32 {
		t.Errorf("MTU event %d, want above the initial 32", ev.MTU)
	}
	if q := c.Quality(); q.MTU == 0 && q.RTT == 0 {
		t.Errorf("Quality() = %+v after a quality event", q)
	}
	// The server's own quality report, logged, before the end: with the
	// path's MTU used from the start (N84) the client's events can all
	// come before the server's first report is due.
	sevs := collect(t, sev, func(evs []driver.Event) bool {
		return has(evs, driver.EventConnected) != nil && has(evs, driver.EventQuality) != nil
	})
	if ev := has(sevs, driver.EventConnected); ev.Conn != s {
		t.Errorf("server's connected event names %p, want the accepted %p", ev.Conn, s)
	}

	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	evs = collect(t, cev, func(evs []driver.Event) bool { return has(evs, driver.EventEnded) != nil })
	ended := has(evs, driver.EventEnded)
	if ended.Stats == nil || ended.Stats.MessagesSent != 20 {
		t.Fatalf("ended event's stats %+v, want 20 messages sent", ended.Stats)
	}
	if !errors.Is(ended.Err, fastnet.ErrClosed) {
		t.Errorf("ended event's error %v, want fastnet.ErrClosed", ended.Err)
	}
	if st := c.Stats(); st.MessagesSent != 20 || st.RTT == 0 {
		t.Errorf("Stats after the end: %d sent, RTT %v; want the final figures", st.MessagesSent, st.RTT)
	}
	sevs = collect(t, sev, func(evs []driver.Event) bool { return has(evs, driver.EventEnded) != nil })
	if st := has(sevs, driver.EventEnded).Stats; st == nil || st.MessagesDelivered != 20 {
		t.Errorf("server's final stats %+v, want 20 delivered", st)
	}
	if st := s.Stats(); st.MessagesDelivered != 20 {
		t.Errorf("server Stats after the end: %d delivered, want 20", st.MessagesDelivered)
	}

	l.Close()
	out := logs.String()
	for _, want := range []string{`msg="fastnet: connected" net=udp`, `msg="fastnet: ended"`, `reason="closed by peer"`, `msg="fastnet: quality"`} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
}

// TestEventsNeverBlock: a full events channel drops events, counted, and
// the connection works on.
func TestEventsNeverBlock(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	full := make(chan driver.Event) // nobody reads it
	l, err := udpdriver.Listen(ctx, "127.0.0.1:0", udpdriver.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go serveEcho(ctx, l)
	c, err := udpdriver.Dial(ctx, l.Addr().String(), udpdriver.Config{Events: full, Engine: fastnet.Config{QualityInterval: 10 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for range 3 {
		c.Send(ctx, 0, []byte("x"), true)
		if _, err := c.Receive(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if c.DriverStats().EventsDropped == 0 {
		t.Error("no event was counted dropped")
	}
}

// TestSendTracked: every tracked message gets exactly one outcome: acked
// or sent on a live connection, lost or dropped when it ends first.
func TestSendTracked(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, err := udpdriver.Listen(ctx, "127.0.0.1:0", udpdriver.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go serveEcho(ctx, l)
	// No unreliable message expires behind the pacer (N80): 150 KB
	// queued at once can wait past the default 100 ms on a loaded
	// machine, and would end dropped on a live connection.
	c, err := udpdriver.Dial(ctx, l.Addr().String(), udpdriver.Config{Engine: fastnet.Config{UnreliableMaxDelay: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var rs []*driver.Receipt
	for i := range 50 {
		r, err := c.SendTracked(ctx, 2, bytes.Repeat([]byte{byte(i)}, 3000), i%2 == 0)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	for i, r := range rs {
		o, err := r.Wait(ctx)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		want := fastnet.OutcomeSent
		if i%2 == 0 {
			want = fastnet.OutcomeAcked
		}
		if o != want || r.Outcome() != want {
			t.Errorf("message %d: outcome %v, want %v", i, o, want)
		}
	}

	// A server that never takes its messages: the client's reliable data
	// stays unacknowledged, and ends lost when the client aborts.
	stuck, err := udpdriver.Listen(ctx, "127.0.0.1:0", udpdriver.Config{ReceiveQueue: 1024})
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close()
	c2, err := udpdriver.Dial(ctx, stuck.Addr().String(), udpdriver.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var lost []*driver.Receipt
	for range 10 {
		r, err := c2.SendTracked(ctx, 1, make([]byte, 4096), true)
		if err != nil {
			t.Fatal(err)
		}
		lost = append(lost, r)
	}
	time.Sleep(50 * time.Millisecond) // the server's queue fills
	c2.Abort("enough")
	nlost := 0
	for _, r := range lost {
		o, err := r.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if o != fastnet.OutcomeAcked && o != fastnet.OutcomeLost {
			t.Errorf("reliable outcome %v", o)
		}
		if o == fastnet.OutcomeLost {
			nlost++
		}
	}
	if nlost == 0 {
		t.Error("no message was lost with the connection")
	}
	if _, err := c2.SendTracked(ctx, 1, []byte("late"), true); !errors.Is(err, fastnet.ErrClosed) {
		t.Errorf("SendTracked after Abort: %v, want fastnet.ErrClosed", err)
	}
}

// TestTrySend: with the send queue full, TrySend returns ErrQueueFull at
// once; an unreliable message refused so is counted dropped.
func TestTrySend(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stuck, err := udpdriver.Listen(ctx, "127.0.0.1:0", udpdriver.Config{ReceiveQueue: 1024})
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close()
	small := fastnet.Config{MaxMessageSize: 4096, SendQueueSize: 64 << 10}
	c, err := udpdriver.Dial(ctx, stuck.Addr().String(), udpdriver.Config{Engine: small})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Abort("")
	msg := make([]byte, 4096)
	// fill sends reliable messages until the send queue refuses one.
	fill := func() {
		t.Helper()
		for range 10000 {
			err := c.TrySend(1, msg, true)
			if errors.Is(err, fastnet.ErrQueueFull) {
				return
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		t.Fatal("the send queue never filled")
	}
	fill()
	if c.SendsDropped() != 0 {
		t.Errorf("a refused reliable message counted as dropped")
	}
	// The pacer may let a packet go between the refusal and the next
	// call, making room: the queue is then filled again, a few times at
	// most.
	err = c.TrySend(2, msg, false)
	for try := 0; err == nil && try < 20; try++ {
		fill()
		err = c.TrySend(2, msg, false)
	}
	if !errors.Is(err, fastnet.ErrQueueFull) {
		t.Fatalf("unreliable TrySend on a full queue: %v", err)
	}
	if c.SendsDropped() != 1 || c.DriverStats().SendsDropped != 1 {
		t.Errorf("SendsDropped %d, DriverStats %d; want 1", c.SendsDropped(), c.DriverStats().SendsDropped)
	}
}

func TestMetricsJSON(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, err := udpdriver.Listen(ctx, "127.0.0.1:0", udpdriver.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go serveEcho(ctx, l)
	c, err := udpdriver.Dial(ctx, l.Addr().String(), udpdriver.Config{})
	if err != nil {
		t.Fatal(err)
	}
	c.Send(ctx, 0, []byte("x"), true)
	c.Receive(ctx)
	m := l.Metrics()
	if m.Conns != 1 {
		t.Errorf("Metrics().Conns = %d, want 1", m.Conns)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"Conns":1`)) {
		t.Errorf("JSON %s", b)
	}
	c.Close()
}

// serveEcho serves l until it closes, sending every message back.
func serveEcho(ctx context.Context, l *driver.Listener) {
	for {
		c, err := l.Accept(ctx)
		if err != nil {
			return
		}
		go func() {
			for m, err := c.Receive(ctx); err == nil; m, err = c.Receive(ctx) {
				c.Send(ctx, m.Channel, m.Data, m.Reliable)
			}
		}()
	}
}

// TestEventRefused: a server hears of each client it refuses (N67), with
// the client's address and the reason it was sent.
func TestEventRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ev := make(chan driver.Event, 16)
	var logs lockedBuffer
	cfg := fastnet.Config{Accept: func(netip.AddrPort) error { return errors.New("go away") }}
	l, err := udpdriver.Listen(ctx, "127.0.0.1:0", udpdriver.Config{Engine: cfg, Events: ev, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := udpdriver.Dial(ctx, l.Addr().String(), udpdriver.Config{}); !errors.Is(err, fastnet.ErrRefused) {
		t.Fatalf("Dial: %v, want refused", err)
	}
	evs := collect(t, ev, func(evs []driver.Event) bool { return has(evs, driver.EventRefused) != nil })
	r := has(evs, driver.EventRefused)
	var re *fastnet.RefusedError
	if r.Conn != nil || !r.Addr.IsValid() || !errors.As(r.Err, &re) || re.Reason != "go away" {
		t.Errorf("refused event %+v, want the client's address and reason %q", r, "go away")
	}
	if st := l.EndpointStats(); st.ConnectionsRefused == 0 {
		t.Error("EndpointStats.ConnectionsRefused = 0")
	}
	l.Close()
	if out := logs.String(); !strings.Contains(out, `msg="fastnet: refused" net=udp peer=`+r.Addr.String()+` reason="connection refused: go away"`) {
		t.Errorf("log lacks the refusal:\n%s", out)
	}
}

// TestSendTrackedLossy: over real sockets through a relay that loses,
// duplicates and reorders, every tracked message settles exactly once, and
// every reliable one settles acked and is delivered (N55, N66).
func TestSendTrackedLossy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// The client's disconnect is a single datagram (D18), which the relay
	// loses one time in ten: the server then sees the end only by its
	// Timeout, 20 s by default.
	l, err := udpdriver.Listen(ctx, "127.0.0.1:0", udpdriver.Config{Engine: fastnet.Config{Timeout: 3 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	r, err := impair.Listen(ctx, "127.0.0.1:0", l.Addr().String(), impair.Config{
		Loss: 0.1, Dup: 0.05, Reorder: 0.05, Delay: 2 * time.Millisecond, Jitter: time.Millisecond, Seed: 7,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got := make(chan int, 1)
	go func() {
		s, err := l.Accept(ctx)
		if err != nil {
			return
		}
		n := 0
		for {
			m, err := s.Receive(ctx)
			if err != nil {
				got <- n
				return
			}
			if m.Reliable {
				n++
			}
		}
	}()
	c, err := udpdriver.Dial(ctx, r.Addr().String(), udpdriver.Config{})
	if err != nil {
		t.Fatal(err)
	}
	const n = 150
	var rs []*driver.Receipt
	for i := range n {
		// Messages of one packet and of several, both modes.
		msg := bytes.Repeat([]byte{byte(i)}, 1+(i%7)*900)
		rec, err := c.SendTracked(ctx, i%5, msg, i%3 != 0)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, rec)
	}
	reliable, expired := 0, uint64(0)
	for i, rec := range rs {
		o, err := rec.Wait(ctx)
		if err != nil {
			t.Fatalf("message %d: no outcome: %v", i, err)
		}
		switch {
		case i%3 != 0 && o != fastnet.OutcomeAcked:
			t.Errorf("reliable message %d: %v, want acked", i, o)
		case i%3 == 0 && o == fastnet.OutcomeDropped:
			expired++ // waited past UnreliableMaxDelay (N80)
		case i%3 == 0 && o != fastnet.OutcomeSent:
			t.Errorf("unreliable message %d: %v, want sent", i, o)
		}
		if i%3 != 0 {
			reliable++
		}
		// Exactly once: a settled receipt never changes.
		if again := rec.Outcome(); again != o {
			t.Errorf("message %d: outcome %v, then %v", i, o, again)
		}
	}
	if st := c.Stats(); st.UnreliableExpired != expired {
		t.Errorf("%d unreliable messages dropped, Stats.UnreliableExpired %d", expired, st.UnreliableExpired)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case d := <-got:
		if d != reliable {
			t.Errorf("server got %d reliable messages, want %d", d, reliable)
		}
	case <-ctx.Done():
		t.Fatal("the server did not see the end")
	}
}
