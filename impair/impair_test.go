package impair

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
)

// pair is a relay with a UDP target socket behind it and a client socket in
// front.
type pair struct {
	r      *Relay
	target *net.UDPConn
	client *net.UDPConn
}

func newPair(t *testing.T, cfg Config) *pair {
	t.Helper()
	target := listenUDP(t)
	target.SetReadBuffer(8 << 20) // room for every datagram of a test
	r, err := Listen(context.Background(), "127.0.0.1:0", target.LocalAddr().String(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := &pair{r, target, listenUDP(t)}
	t.Cleanup(func() { r.Close() })
	return p
}

func listenUDP(t *testing.T) *net.UDPConn {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// sendNumbered sends n datagrams of size bytes, numbered in their first
// two bytes, from the client through the relay.
func (p *pair) sendNumbered(t *testing.T, n, size int) {
	t.Helper()
	for i := range n {
		b := make([]byte, size)
		b[0], b[1] = byte(i>>8), byte(i)
		if _, err := p.client.WriteToUDPAddrPort(b, p.r.Addr()); err != nil {
			t.Fatal(err)
		}
	}
}

// receiveNumbered reads datagrams on c until it has want of them or none
// came for quiet, and returns their numbers.
func receiveNumbered(c *net.UDPConn, want int, quiet time.Duration) []int {
	var nums []int
	buf := make([]byte, 2048)
	for want == 0 || len(nums) < want {
		c.SetReadDeadline(time.Now().Add(quiet))
		n, _, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			break
		}
		if n >= 2 {
			nums = append(nums, int(buf[0])<<8|int(buf[1]))
		}
	}
	return nums
}

// TestForwarding checks each impairment alone on datagrams from a client
// to the target.
func TestForwarding(t *testing.T) {
	t.Parallel()
	const n = 200
	tests := []struct {
		name  string
		cfg   Config
		size  int
		want  int // datagrams to wait for; fewer is not a failure in itself
		check func(t *testing.T, nums []int, st Stats)
	}{
		{"clean", Config{}, 100, n, func(t *testing.T, nums []int, st Stats) {
			if len(nums) != n || !slices.IsSorted(nums) {
				t.Errorf("got %d datagrams (sorted %v), want all %d in order", len(nums), slices.IsSorted(nums), n)
			}
		}},
		{"all lost", Config{Loss: 1}, 100, 0, func(t *testing.T, nums []int, st Stats) {
			if len(nums) != 0 || st.Lost != n {
				t.Errorf("got %d datagrams, %d lost; want 0, %d", len(nums), st.Lost, n)
			}
		}},
		{"above the MTU", Config{MTU: 600}, 601, 0, func(t *testing.T, nums []int, st Stats) {
			if len(nums) != 0 || st.TooBig != n {
				t.Errorf("got %d datagrams, %d too big; want 0, %d", len(nums), st.TooBig, n)
			}
		}},
		{"at the MTU", Config{MTU: 600}, 600, n, func(t *testing.T, nums []int, st Stats) {
			if len(nums) != n || st.TooBig != 0 {
				t.Errorf("got %d datagrams, %d too big; want %d, 0", len(nums), st.TooBig, n)
			}
		}},
		{"duplicated", Config{Dup: 1}, 100, 2 * n, func(t *testing.T, nums []int, st Stats) {
			counts := map[int]int{}
			for _, x := range nums {
				counts[x]++
			}
			for i := range n {
				if counts[i] != 2 {
					t.Fatalf("datagram %d arrived %d times, want 2", i, counts[i])
				}
			}
			if st.Duplicated != n {
				t.Errorf("%d duplicated, want %d", st.Duplicated, n)
			}
		}},
		{"reordered", Config{Reorder: 0.2, Delay: 2 * time.Millisecond}, 100, n, func(t *testing.T, nums []int, st Stats) {
			if len(nums) != n || slices.IsSorted(nums) || st.Reordered == 0 {
				t.Errorf("got %d datagrams, sorted %v, %d held back; want all %d, out of order", len(nums), slices.IsSorted(nums), st.Reordered, n)
			}
		}},
		{"delayed in order", Config{Delay: 5 * time.Millisecond}, 100, n, func(t *testing.T, nums []int, st Stats) {
			// Without jitter or reordering, a delay keeps the order.
			if len(nums) != n || !slices.IsSorted(nums) {
				t.Errorf("got %d datagrams (sorted %v), want all %d in order", len(nums), slices.IsSorted(nums), n)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := newPair(t, tt.cfg)
			p.sendNumbered(t, n, tt.size)
			quiet := 2 * time.Second
			if tt.want == 0 {
				quiet = 200 * time.Millisecond // nothing should come
			}
			nums := receiveNumbered(p.target, tt.want, quiet)
			// Anything beyond what was awaited?
			if tt.want > 0 {
				nums = append(nums, receiveNumbered(p.target, 1<<20, 50*time.Millisecond)...)
			}
			st := waitCounted(t, p.r, n)
			tt.check(t, nums, st)
		})
	}
}

// waitCounted waits until r has counted n datagrams, and returns its
// statistics.
func waitCounted(t *testing.T, r *Relay, n uint64) Stats {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		st := r.Stats()
		if st.Datagrams >= n {
			if st.Datagrams > n {
				t.Errorf("counted %d datagrams, want %d", st.Datagrams, n)
			}
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("counted %d datagrams, want %d", st.Datagrams, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestLossRate checks that the loss over many datagrams, with a fixed seed,
// is within 4 standard deviations of the probability asked for, that the
// seed decides which are lost, and that every datagram is either lost or
// delivered. It counts the relay's decisions, not arrivals, so that loss in
// the test's own sockets cannot blur it.
func TestLossRate(t *testing.T) {
	t.Parallel()
	const n = 5000
	for _, loss := range []float64{0.05, 0.3} {
		cfg := Config{Loss: loss, Seed: 42}
		var lost []uint64
		for range 2 {
			p := newPair(t, cfg)
			p.sendNumbered(t, n, 16)
			st := waitCounted(t, p.r, n)
			nums := receiveNumbered(p.target, n-int(st.Lost), 2*time.Second)
			if st.Datagrams != n || int(st.Lost)+len(nums) != n {
				t.Fatalf("loss %v: %d datagrams counted, %d lost, %d arrived; want %d = lost + arrived", loss, st.Datagrams, st.Lost, len(nums), n)
			}
			lost = append(lost, st.Lost)
		}
		mean, sd := n*loss, math.Sqrt(n*loss*(1-loss))
		if d := math.Abs(float64(lost[0]) - mean); d > 4*sd {
			t.Errorf("loss %v: %d of %d lost, want %.0f ± %.0f", loss, lost[0], n, mean, 4*sd)
		}
		if lost[0] != lost[1] {
			t.Errorf("loss %v, seed 42: %d then %d lost; the same seed and datagrams should lose the same", loss, lost[0], lost[1])
		}
	}
}

// TestStatsCountFateFirst checks that a snapshot of the statistics never
// counts a datagram without what befell it (TestLossRate relies on it): with
// every datagram lost, or every one too big, snapshots taken while they
// arrive must count at least as many lost, or too big, as received.
func TestStatsCountFateFirst(t *testing.T) {
	t.Parallel()
	const n = 3000
	tests := []struct {
		name string
		cfg  Config
		fate func(Stats) uint64
	}{
		{"lost", Config{Loss: 1}, func(st Stats) uint64 { return st.Lost }},
		{"too big", Config{MTU: 8}, func(st Stats) uint64 { return st.TooBig }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := newPair(t, tt.cfg)
			sent := make(chan error, 1)
			go func() {
				for i := range n {
					if _, err := p.client.WriteToUDPAddrPort(make([]byte, 16), p.r.Addr()); err != nil {
						sent <- fmt.Errorf("datagram %d: %w", i, err)
						return
					}
				}
				sent <- nil
			}()
			deadline := time.Now().Add(5 * time.Second)
			snapshots := 0
			for st := p.r.Stats(); st.Datagrams < n; st = p.r.Stats() {
				if f := tt.fate(st); f < st.Datagrams {
					t.Fatalf("snapshot counts %d datagrams and %d of them %s; want every one", st.Datagrams, f, tt.name)
				}
				if time.Now().After(deadline) {
					t.Fatalf("counted %d datagrams, want %d", st.Datagrams, n)
				}
				snapshots++
			}
			if err := <-sent; err != nil {
				t.Fatal(err)
			}
			t.Logf("%d snapshots", snapshots)
		})
	}
}

// TestAnswers checks the delay both ways, and that answers go back to the
// client that sent, from the relay's address, each client through an
// upstream socket of its own.
func TestAnswers(t *testing.T) {
	t.Parallel()
	const delay = 30 * time.Millisecond
	p := newPair(t, Config{Delay: delay})
	other := listenUDP(t)
	buf := make([]byte, 100)
	var sources []netip.AddrPort
	for i, c := range []*net.UDPConn{p.client, other} {
		start := time.Now()
		if _, err := c.WriteToUDPAddrPort([]byte{byte(i)}, p.r.Addr()); err != nil {
			t.Fatal(err)
		}
		p.target.SetReadDeadline(time.Now().Add(2 * time.Second))
		n, from, err := p.target.ReadFromUDPAddrPort(buf)
		if err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d < delay {
			t.Errorf("client %d: arrived after %v, want at least %v", i, d, delay)
		}
		sources = append(sources, from)
		start = time.Now()
		if _, err := p.target.WriteToUDPAddrPort(append(buf[:n], 'A'), from); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		n, back, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d < delay {
			t.Errorf("client %d: answer arrived after %v, want at least %v", i, d, delay)
		}
		if back != p.r.Addr() || n != 2 || buf[0] != byte(i) {
			t.Errorf("client %d: answer %q from %v, want its own from the relay's %v", i, buf[:n], back, p.r.Addr())
		}
	}
	if sources[0] == sources[1] {
		t.Errorf("both clients reached the target from %v, want an upstream socket each", sources[0])
	}
	if st := p.r.Stats(); st.Clients != 2 || st.Datagrams != 4 {
		t.Errorf("stats %+v, want 2 clients and 4 datagrams", st)
	}
}

// TestClients checks MaxClients and the closing of idle clients' sockets.
func TestClients(t *testing.T) {
	t.Parallel()
	p := newPair(t, Config{MaxClients: 1, Idle: 500 * time.Millisecond})
	other := listenUDP(t)
	p.client.WriteToUDPAddrPort([]byte{0, 0}, p.r.Addr())
	if got := receiveNumbered(p.target, 1, 2*time.Second); len(got) != 1 {
		t.Fatalf("first client: %d datagrams arrived, want 1", len(got))
	}
	other.WriteToUDPAddrPort([]byte{0, 1}, p.r.Addr())
	if got := receiveNumbered(p.target, 1, 100*time.Millisecond); len(got) != 0 {
		t.Errorf("second client, beyond MaxClients: %d datagrams arrived, want 0", len(got))
	}
	if st := waitCounted(t, p.r, 2); st.NoRoom != 1 {
		t.Errorf("stats %+v, want 1 dropped for no room", st)
	}
	// Once the first is idle, its place is free.
	deadline := time.Now().Add(5 * time.Second)
	for p.r.Stats().Clients != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the idle client's socket was not closed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	other.WriteToUDPAddrPort([]byte{0, 2}, p.r.Addr())
	if got := receiveNumbered(p.target, 1, 2*time.Second); len(got) != 1 || got[0] != 2 {
		t.Errorf("second client, after the first went idle: got %v, want [2]", got)
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	bad := []struct {
		cfg  Config
		want string
	}{
		{Config{Loss: -0.1}, "Loss -0.1"},
		{Config{Loss: 1.5}, "Loss 1.5"},
		{Config{Dup: math.NaN()}, "Dup NaN"},
		{Config{Reorder: 2}, "Reorder 2"},
		{Config{Delay: -time.Second}, "Delay -1s"},
		{Config{Delay: time.Hour}, "Delay 1h0m0s"},
		{Config{Jitter: -1}, "Jitter -1ns"},
		{Config{MTU: -1}, "MTU -1"},
		{Config{MTU: 70000}, "MTU 70000"},
		{Config{MaxClients: -1}, "MaxClients -1"},
		{Config{Idle: -1}, "Idle -1ns"},
		{Config{Rate: -1}, "Rate -1"},
		{Config{Rate: MaxRate + 1}, "Rate 100000000001"},
		{Config{Rate: 1000, Queue: -1}, "Queue -1"},
		{Config{Rate: 1000, Queue: MaxQueue + 1}, "Queue 67108865"},
		{Config{Queue: 1000}, "Queue 1000 without a Rate"},
	}
	for _, tt := range bad {
		err := tt.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: %v, want an error with %q", tt.cfg, err, tt.want)
		}
		if _, err := Listen(context.Background(), "127.0.0.1:0", "127.0.0.1:9", tt.cfg); err == nil {
			t.Errorf("Listen accepted %+v", tt.cfg)
		}
	}
	for _, good := range []Config{{}, {Loss: 1, Dup: 1, Reorder: 1, Delay: MaxDelay, Jitter: MaxDelay, MTU: 65535, Seed: math.MaxUint64}, {Rate: 1}, {Rate: MaxRate, Queue: MaxQueue}} {
		if err := good.Validate(); err != nil {
			t.Errorf("%+v: %v", good, err)
		}
	}
}

func TestListenErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ listen, target, want string }{
		{"127.0.0.1:0", "nonsense", "want HOST:PORT"},
		{"127.0.0.1:0", "127.0.0.1:0", "port 0"},
		{"127.0.0.1:0", "127.0.0.1:99999", "bad port"},
		{"nonsense", "127.0.0.1:9", "nonsense"},
	} {
		r, err := Listen(context.Background(), tt.listen, tt.target, Config{})
		if err == nil {
			r.Close()
			t.Errorf("Listen(%q, %q) succeeded", tt.listen, tt.target)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Listen(%q, %q): %v, want %q in it", tt.listen, tt.target, err, tt.want)
		}
	}
	// An empty host is 127.0.0.1.
	r, err := Listen(context.Background(), "127.0.0.1:0", ":9", Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if want := netip.MustParseAddrPort("127.0.0.1:9"); r.Target() != want {
		t.Errorf("target %v, want %v", r.Target(), want)
	}
	if err := r.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := r.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
