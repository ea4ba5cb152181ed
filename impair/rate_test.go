package impair

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

func TestParseRate(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in   string
		want int64
	}{
		{"20mbit", 2_500_000},
		{"20Mbit/s", 2_500_000},
		{"5mbit", 625_000},
		{"512kbit", 64_000},
		{"1gbit", 125_000_000},
		{"100bit", 13}, // 12.5, rounded
		{"2.5MB", 2_500_000},
		{"300kB/s", 300_000},
		{"300KB", 300_000},
		{"1MiB", 1 << 20},
		{"800B", 800},
		{" 8 bit ", 1},
	} {
		got, err := ParseRate(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseRate(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
	for _, tt := range []struct{ in, want string }{
		{"20", "no unit"},
		{"20mb", `unknown unit "mb"`},
		{"mbit", "does not start with a number"},
		{"", "does not start with a number"},
		{"-5mbit", "does not start with a number"},
		{"1.2.3mbit", "bad number"},
		{"0mbit", "want 8bit"},
		{"3bit", "want 8bit"},
		{"1000gbit", "want 8bit"},
		{"20 furlongs", "unknown unit"},
	} {
		if got, err := ParseRate(tt.in); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseRate(%q) = %d, %v; want an error with %q", tt.in, got, err, tt.want)
		}
	}
}

func TestParseSize(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in   string
		want int64
	}{
		{"100kB", 100_000},
		{"100KB", 100_000},
		{"64KiB", 65536},
		{"1.5MB", 1_500_000},
		{"1500B", 1500},
		{"150000", 150000},
		{"0", 0},
	} {
		got, err := ParseSize(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
	for _, tt := range []struct{ in, want string }{
		{"100kbit", "unknown unit"},
		{"kB", "does not start with a number"},
		{"10GiB", "too large"},
	} {
		if got, err := ParseSize(tt.in); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseSize(%q) = %d, %v; want an error with %q", tt.in, got, err, tt.want)
		}
	}
}

func TestDefaultQueue(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		cfg  Config
		want int
	}{
		{Config{Rate: 2_500_000, Delay: 20 * time.Millisecond}, 100_000},
		{Config{Rate: 625_000, Delay: 20 * time.Millisecond}, 25_000},
		{Config{Rate: 1000}, MinDefaultQueue},
		{Config{Rate: MaxRate, Delay: time.Second}, MaxQueue},
	} {
		if got := tt.cfg.DefaultQueue(); got != tt.want {
			t.Errorf("%+v: DefaultQueue() = %d, want %d", tt.cfg, got, tt.want)
		}
	}
	p := newPair(t, Config{Rate: 625_000, Delay: 20 * time.Millisecond})
	if got := p.r.Config().Queue; got != 25_000 {
		t.Errorf("the relay's queue is %d, want the default 25000", got)
	}
}

// waitQueued waits until n datagrams have reached r's queue towards the
// target, and returns its statistics.
func waitQueued(t *testing.T, r *Relay, n uint64) Stats {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		st := r.Stats()
		if st.Up.Queued+st.Up.Dropped >= n {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d datagrams reached the queue, want %d", st.Up.Queued+st.Up.Dropped, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// arrivalTimes reads k datagrams on c, or as many as come with no more
// than quiet between them, and returns when each came.
func arrivalTimes(c *net.UDPConn, k int, quiet time.Duration) []time.Time {
	var at []time.Time
	buf := make([]byte, 2048)
	for len(at) < k {
		c.SetReadDeadline(time.Now().Add(quiet))
		if _, _, err := c.ReadFromUDPAddrPort(buf); err != nil {
			break
		}
		at = append(at, time.Now())
	}
	return at
}

// TestRate checks that a burst leaves at the rate, its datagrams counted
// with their headers, and shared by two clients: 40 datagrams of 1000
// bytes on the wire at 100 kB/s take 400 ms to leave, the last no sooner
// than that after the burst was sent.
func TestRate(t *testing.T) {
	t.Parallel()
	p := newPair(t, Config{Rate: 100_000, Queue: 1 << 20})
	other := listenUDP(t)
	b := make([]byte, 1000-28)
	start := time.Now()
	for range 20 {
		for _, c := range []*net.UDPConn{p.client, other} {
			if _, err := c.WriteToUDPAddrPort(b, p.r.Addr()); err != nil {
				t.Fatal(err)
			}
		}
	}
	at := arrivalTimes(p.target, 40, 2*time.Second)
	if len(at) != 40 {
		t.Fatalf("%d datagrams arrived, want 40", len(at))
	}
	// The relay's timers may deliver a datagram a little late, never
	// early: the last leaves 400 ms after the burst reached the queue,
	// which is after it was sent. The first may be late, so the span from
	// the first to the last is only bounded loosely.
	if d := at[39].Sub(start); d < 395*time.Millisecond || d > 2*time.Second {
		t.Errorf("the last datagram came %v after the burst was sent, want 400ms", d)
	}
	if d := at[39].Sub(at[0]); d < 300*time.Millisecond {
		t.Errorf("the burst took %v from the first to the last, want about 390ms", d)
	}
	st := p.r.Stats()
	if st.Up.Queued != 40 || st.Up.QueuedBytes != 40_000 || st.Up.Dropped != 0 || st.Up.MaxBytes < 10_000 {
		t.Errorf("up queue: %+v", st.Up)
	}
	if st.Up.DelayMax < 350*time.Millisecond || st.Up.DelayP50 < 100*time.Millisecond || st.Up.DelayP99 > st.Up.DelayMax {
		t.Errorf("queueing delays: %+v", st.Up)
	}
	if st.Down != (QueueStats{}) {
		t.Errorf("down queue, unused: %+v", st.Down)
	}
}

// TestQueueTailDrop checks the byte limit of the queue: a burst beyond it
// is dropped, and every datagram is either queued or dropped.
func TestQueueTailDrop(t *testing.T) {
	t.Parallel()
	p := newPair(t, Config{Rate: 10_000, Queue: 5000})
	p.sendNumbered(t, 20, 1000-28) // 100 ms each on the wire
	st := waitQueued(t, p.r, 20)
	if st.Up.Queued+st.Up.Dropped != 20 || st.Up.Queued < 5 || st.Up.Queued > 6 || st.Up.MaxBytes > 5000 {
		t.Fatalf("up queue after a burst of 20: %+v; want 5 or 6 queued, the rest dropped, at most 5000 bytes", st.Up)
	}
	nums := receiveNumbered(p.target, int(st.Up.Queued), 2*time.Second)
	if len(nums) != int(st.Up.Queued) || nums[0] != 0 {
		t.Errorf("received %v, want the first %d", nums, st.Up.Queued)
	}
	if st := p.r.Stats(); st.Up.DroppedBytes != 1000*st.Up.Dropped {
		t.Errorf("dropped bytes %d for %d datagrams", st.Up.DroppedBytes, st.Up.Dropped)
	}
}

// TestRateBothWays checks that each direction has a queue of its own.
func TestRateBothWays(t *testing.T) {
	t.Parallel()
	p := newPair(t, Config{Rate: 1_000_000, Delay: time.Millisecond})
	p.sendNumbered(t, 3, 100)
	buf := make([]byte, 200)
	for range 3 {
		p.target.SetReadDeadline(time.Now().Add(2 * time.Second))
		n, from, err := p.target.ReadFromUDPAddrPort(buf)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.target.WriteToUDPAddrPort(buf[:n], from); err != nil {
			t.Fatal(err)
		}
	}
	if got := receiveNumbered(p.client, 3, 2*time.Second); len(got) != 3 {
		t.Fatalf("%d answers arrived, want 3", len(got))
	}
	st := p.r.Stats()
	if st.Up.Queued != 3 || st.Down.Queued != 3 || st.Up.QueuedBytes != 3*128 {
		t.Errorf("up %+v, down %+v; want 3 datagrams of 128 bytes each way", st.Up, st.Down)
	}
}

// TestRateIPv6 checks that a datagram to an IPv6 target counts 48 bytes of
// headers.
func TestRateIPv6(t *testing.T) {
	t.Parallel()
	target, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6loopback})
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	defer target.Close()
	r, err := Listen(context.Background(), "[::1]:0", target.LocalAddr().String(), Config{Rate: 1_000_000})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6loopback})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.WriteToUDPAddrPort(make([]byte, 52), r.Addr()); err != nil {
		t.Fatal(err)
	}
	st := waitQueued(t, r, 1)
	if st.Up.QueuedBytes != 100 {
		t.Errorf("a 52-byte datagram over IPv6 counted %d bytes, want 100", st.Up.QueuedBytes)
	}
}

// TestQueue checks a Queue on its own, in made-up time: the rate, the
// byte limit, room made by sending, and the delays.
func TestQueue(t *testing.T) {
	t.Parallel()
	if _, err := NewQueue(0, 1000); err == nil {
		t.Error("NewQueue accepted a zero rate")
	}
	if _, err := NewQueue(1000, 0); err == nil {
		t.Error("NewQueue accepted a zero limit")
	}
	q, err := NewQueue(1000, 2500) // a millisecond a byte
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1000, 0)
	var leave []time.Time
	for range 4 {
		if at, ok := q.Enqueue(t0, 1000); ok {
			leave = append(leave, at)
		}
	}
	if len(leave) != 2 || !leave[0].Equal(t0.Add(time.Second)) || !leave[1].Equal(t0.Add(2*time.Second)) {
		t.Fatalf("left at %v, want 1s and 2s after the start, two of four taken", leave)
	}
	// 1.5 s on, 500 bytes wait: 2000 more fit, not 2001.
	if _, ok := q.Enqueue(t0.Add(1500*time.Millisecond), 2001); ok {
		t.Error("took 2001 bytes behind 500 with a limit of 2500")
	}
	if at, ok := q.Enqueue(t0.Add(1500*time.Millisecond), 2000); !ok || !at.Equal(t0.Add(4*time.Second)) {
		t.Errorf("2000 bytes behind 500: %v %v, want taken, sent 4s after the start", at, ok)
	}
	// An empty queue takes a packet above the limit.
	if at, ok := q.Enqueue(t0.Add(10*time.Second), 3000); !ok || !at.Equal(t0.Add(13*time.Second)) {
		t.Errorf("3000 bytes into an empty queue: %v %v", at, ok)
	}
	s := q.Stats()
	if s.Queued != 4 || s.Dropped != 3 || s.QueuedBytes != 7000 || s.DroppedBytes != 4001 || s.MaxBytes != 3000 {
		t.Errorf("stats %+v", s)
	}
	// Delays of 1, 2, 2.5 and 3 s; the percentiles are to the tenth of a
	// millisecond above.
	if s.DelayMax != 3*time.Second || s.DelayP50 != 2*time.Second+delayBucket || s.DelayP99 != 3*time.Second {
		t.Errorf("delays: max %v p50 %v p99 %v; want 3s, 2.0001s, 3s", s.DelayMax, s.DelayP50, s.DelayP99)
	}
}
