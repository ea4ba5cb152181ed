package fastnettest

import (
	"bytes"
	"errors"
	"math"
	"math/bits"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/fastnet"
)

// pair returns a network with a ticker at addr(1) sending to an echo node at
// addr(2), both recording.
func pair(t *testing.T, seed uint64, l Link, ticks int, every time.Duration) (*Network, *fake, *fake) {
	t.Helper()
	n := NewNetwork(seed)
	a := &fake{record: true}
	b := &fake{record: true, echo: -1}
	n.Add(addr(1), a)
	n.Add(addr(2), b)
	n.SetDefaultLink(l)
	a.startTicker(n.Now(), addr(2), every, ticks, 40)
	return n, a, b
}

// checkAccounting checks the identity documented on LinkStats once the
// network is idle.
func checkAccounting(t *testing.T, n *Network) {
	t.Helper()
	s := n.Stats()
	if got, want := s.Delivered+s.Dropped()+uint64(n.InFlight()), s.Sent+s.Duplicated; got != want {
		t.Errorf("Delivered+Dropped+InFlight = %d, Sent+Duplicated = %d: %+v", got, want, s)
	}
}

func run(t *testing.T, n *Network, d time.Duration) {
	t.Helper()
	if err := n.RunFor(d); err != nil {
		t.Fatal(err)
	}
}

func TestZeroLinkDeliversAtOnce(t *testing.T) {
	n, a, b := pair(t, 1, Link{}, 3, 10*time.Millisecond)
	if err := n.RunUntilIdle(100); err != nil {
		t.Fatal(err)
	}
	want := []clock.Time{at(0), at(10 * time.Millisecond), at(20 * time.Millisecond)}
	for i, g := range b.got {
		if g.at != want[i] || g.from != addr(1) || seq(g.b) != uint32(i) || len(g.b) != 40 {
			t.Errorf("datagram %d: at %v from %v seq %d len %d; want at %v from %v seq %d len 40", i, g.at, g.from, seq(g.b), len(g.b), want[i], addr(1), i)
		}
	}
	if len(b.got) != 3 || len(a.got) != 3 {
		t.Fatalf("echo node got %d, ticker got %d echoes; want 3 and 3", len(b.got), len(a.got))
	}
	if n.Now() != at(20*time.Millisecond) {
		t.Errorf("idle at %v, want %v", n.Now(), at(20*time.Millisecond))
	}
	if a.backwards || b.backwards {
		t.Error("time went backwards for a node")
	}
	checkAccounting(t, n)
}

func TestStepOnEmptyNetwork(t *testing.T) {
	n := NewNetwork(1)
	if n.Step() {
		t.Error("Step on an empty network returned true")
	}
	n.Add(addr(1), &fake{})
	if n.Step() {
		t.Error("Step with an idle node returned true")
	}
	if n.Now() != clock.Epoch {
		t.Errorf("Now = %v, want clock.Epoch", n.Now())
	}
	if err := n.RunFor(time.Second); err != nil || n.Now() != at(time.Second) {
		t.Errorf("RunFor(1s) = %v, Now %v; want nil at %v", err, n.Now(), at(time.Second))
	}
}

func TestTimeoutFiresAtDeadline(t *testing.T) {
	n := NewNetwork(1)
	f := &fake{record: true}
	n.Add(addr(1), f)
	f.deadline = at(50 * time.Millisecond)
	if !n.Step() {
		t.Fatal("Step returned false with a deadline set")
	}
	if len(f.timeouts) != 1 || f.timeouts[0] != at(50*time.Millisecond) {
		t.Fatalf("timeouts %v, want one at %v", f.timeouts, at(50*time.Millisecond))
	}
	// A deadline already past fires at the current time: time never goes
	// back.
	run(t, n, time.Second)
	f.deadline = at(100 * time.Millisecond)
	n.Step()
	if got := f.timeouts[len(f.timeouts)-1]; got != at(1050*time.Millisecond) || f.backwards {
		t.Errorf("past deadline fired at %v (backwards %v), want %v", got, f.backwards, at(1050*time.Millisecond))
	}
}

func TestArrivalBeforeDeadlineAtSameInstant(t *testing.T) {
	n := NewNetwork(1)
	var order []string
	n.OnEvent = func(_ clock.Time, node netip.AddrPort, ev fastnet.Event) {
		order = append(order, node.String()+" "+ev.Kind.String())
	}
	a := &fake{}
	b := &fake{emitOnRecv: true}
	c := &fake{}
	n.Add(addr(1), a)
	n.Add(addr(2), b)
	n.Add(addr(3), c)
	n.SetDefaultLink(Link{Delay: 10 * time.Millisecond})
	a.send(addr(2), []byte("x"))
	// Deadlines of b and c at the arrival instant; c's is earlier-added
	// last, and must still come after the arrival.
	c.deadline = at(10 * time.Millisecond)
	b.deadline = at(10 * time.Millisecond)
	b.record, c.record = true, true
	n.Step() // sync sends the datagram, then the arrival goes first
	if b.nGot != 1 || len(b.timeouts) != 0 || len(c.timeouts) != 0 {
		t.Fatalf("after one step: b got %d datagrams, %d timeouts; c %d timeouts; want 1, 0, 0", b.nGot, len(b.timeouts), len(c.timeouts))
	}
	n.Step()
	if len(b.timeouts) != 1 || len(c.timeouts) != 0 {
		t.Fatalf("second step fired b %d and c %d times; want b (added first) once", len(b.timeouts), len(c.timeouts))
	}
	n.Step()
	if len(c.timeouts) != 1 {
		t.Fatalf("third step fired c %d times, want 1", len(c.timeouts))
	}
	if len(order) != 1 || order[0] != addr(2).String()+" Message" {
		t.Errorf("events %q", order)
	}
}

func TestSameSeedSameTrace(t *testing.T) {
	l := Link{
		Loss: 0.1, Dup: 0.1, Reorder: 0.1, Corrupt: 0.1,
		Delay: 5 * time.Millisecond, Jitter: 3 * time.Millisecond,
		Bandwidth: 30000, QueueLimit: 400,
	}
	trace := func(seed uint64) string {
		var buf bytes.Buffer
		n, _, _ := pair(t, seed, l, 400, time.Millisecond)
		n.Trace = &buf
		if err := n.RunUntilIdle(10000); err != nil {
			t.Fatal(err)
		}
		checkAccounting(t, n)
		return buf.String()
	}
	t1, t2, t3 := trace(7), trace(7), trace(8)
	if t1 != t2 {
		t.Fatal("two runs with seed 7 gave different traces")
	}
	if t1 == t3 {
		t.Fatal("seeds 7 and 8 gave the same trace")
	}
	for _, w := range []string{" send ", " recv ", " drop ", " loss\n", " queue\n", " dup", " corrupt", " reorder"} {
		if !strings.Contains(t1, w) {
			t.Errorf("trace has no %q", w)
		}
	}
}

func TestTraceFormat(t *testing.T) {
	var buf bytes.Buffer
	n := NewNetwork(1)
	n.Trace = &buf
	a := &fake{}
	b := &fake{emitOnRecv: true}
	n.Add(addr(1), a)
	n.Add(addr(2), b)
	n.SetLink(addr(1), addr(2), Link{Delay: 10 * time.Millisecond})
	n.SetLink(addr(2), addr(1), Link{MTU: 2})
	run(t, n, 5*time.Millisecond)
	a.send(addr(2), []byte("abc"))
	b.send(addr(1), []byte("abc"))
	b.deadline = at(20 * time.Millisecond)
	if err := n.RunUntilIdle(10); err != nil {
		t.Fatal(err)
	}
	n.CloseTransport(addr(1), addr(2))
	// FNV-1a("abc") = 0x1a47e90b.
	want := "" +
		"0.005000000 send 10.0.0.1:7000 > 10.0.0.2:7000 3B #1a47e90b arrive=0.015000000\n" +
		"0.005000000 drop 10.0.0.2:7000 > 10.0.0.1:7000 3B #1a47e90b mtu\n" +
		"0.015000000 recv 10.0.0.1:7000 > 10.0.0.2:7000 3B #1a47e90b\n" +
		"0.015000000 event 10.0.0.2:7000 Message conn=0 peer=10.0.0.1:7000 ch=0 unreliable 3B #1a47e90b\n" +
		"0.020000000 timeout 10.0.0.2:7000\n" +
		"0.020000000 cut 10.0.0.1:7000 - 10.0.0.2:7000\n"
	if got := buf.String(); got != want {
		t.Errorf("trace:\n%s\nwant:\n%s", got, want)
	}
}

func TestDescribeEvent(t *testing.T) {
	peer := addr(9)
	tests := []struct {
		ev   fastnet.Event
		want string
	}{
		{fastnet.Event{Kind: fastnet.EventConnected, Conn: 3, Addr: peer, ID: 77}, "Connected conn=3 peer=10.0.0.9:7000 id=77"},
		{fastnet.Event{Kind: fastnet.EventMessage, Conn: 3, Addr: peer, Channel: 5, Reliable: true, Data: []byte("abc")}, "Message conn=3 peer=10.0.0.9:7000 ch=5 reliable 3B #1a47e90b"},
		{fastnet.Event{Kind: fastnet.EventMTUChanged, Conn: 1, Addr: peer, MTU: 1400}, "MTUChanged conn=1 peer=10.0.0.9:7000 mtu=1400"},
		{fastnet.Event{Kind: fastnet.EventDisconnected, Conn: 1, Addr: peer, Err: fastnet.ErrTimeout}, `Disconnected conn=1 peer=10.0.0.9:7000 err="fastnet: timed out"`},
		{fastnet.Event{Kind: fastnet.EventWritable, Conn: 2, Addr: peer}, "Writable conn=2 peer=10.0.0.9:7000"},
	}
	for _, tt := range tests {
		if got := DescribeEvent(tt.ev); got != tt.want {
			t.Errorf("DescribeEvent = %q, want %q", got, tt.want)
		}
	}
}

// within reports whether got/total is within tol of p.
func within(got, total uint64, p, tol float64) bool {
	return math.Abs(float64(got)/float64(total)-p) <= tol
}

func TestLossRate(t *testing.T) {
	for _, loss := range []float64{0, 0.05, 0.3, 0.5, 1} {
		n, a, b := pair(t, 3, Link{Loss: loss, Delay: time.Millisecond}, 20000, time.Millisecond)
		b.echo = 0
		a.record, b.record = false, false
		if err := n.RunUntilIdle(100000); err != nil {
			t.Fatal(err)
		}
		s := n.LinkStats(addr(1), addr(2))
		if s.Sent != 20000 || s.Delivered+s.Lost != 20000 || uint64(b.nGot) != s.Delivered {
			t.Fatalf("loss %v: sent %d delivered %d lost %d, node got %d", loss, s.Sent, s.Delivered, s.Lost, b.nGot)
		}
		if !within(s.Lost, s.Sent, loss, 0.015) {
			t.Errorf("loss %v: lost %d of %d", loss, s.Lost, s.Sent)
		}
		checkAccounting(t, n)
	}
}

func TestMTU(t *testing.T) {
	n := NewNetwork(1)
	a := &fake{}
	b := &fake{record: true}
	n.Add(addr(1), a)
	n.Add(addr(2), b)
	n.SetLink(addr(1), addr(2), Link{MTU: 100})
	for _, size := range []int{50, 100, 101, 2000, 0} {
		a.send(addr(2), make([]byte, size))
	}
	if err := n.RunUntilIdle(10); err != nil {
		t.Fatal(err)
	}
	var sizes []int
	for _, g := range b.got {
		sizes = append(sizes, len(g.b))
	}
	if len(sizes) != 3 || sizes[0] != 50 || sizes[1] != 100 || sizes[2] != 0 {
		t.Errorf("delivered sizes %v, want [50 100 0]", sizes)
	}
	if s := n.LinkStats(addr(1), addr(2)); s.TooBig != 2 || s.Delivered != 3 {
		t.Errorf("stats %+v, want TooBig 2, Delivered 3", s)
	}
}

func TestDuplication(t *testing.T) {
	t.Run("always", func(t *testing.T) {
		n, a, b := pair(t, 1, Link{Dup: 1, Delay: time.Millisecond, Jitter: time.Millisecond}, 100, time.Millisecond)
		b.echo = 0
		_ = a
		if err := n.RunUntilIdle(1000); err != nil {
			t.Fatal(err)
		}
		count := map[uint32]int{}
		for _, g := range b.got {
			count[seq(g.b)]++
		}
		for i := range uint32(100) {
			if count[i] != 2 {
				t.Errorf("datagram %d delivered %d times, want 2", i, count[i])
			}
		}
		if s := n.LinkStats(addr(1), addr(2)); s.Duplicated != 100 || s.Delivered != 200 {
			t.Errorf("stats %+v", s)
		}
	})
	t.Run("rate", func(t *testing.T) {
		n, _, b := pair(t, 2, Link{Dup: 0.2}, 10000, time.Millisecond)
		b.echo = 0
		if err := n.RunUntilIdle(100000); err != nil {
			t.Fatal(err)
		}
		s := n.LinkStats(addr(1), addr(2))
		if !within(s.Duplicated, s.Sent, 0.2, 0.015) || s.Delivered != s.Sent+s.Duplicated {
			t.Errorf("stats %+v: want about 20%% duplicated, all delivered", s)
		}
	})
}

// inversions counts the datagrams that arrived after one with a higher
// number.
func inversions(got []arrival) int {
	n := 0
	var high uint32
	for i, g := range got {
		if s := seq(g.b); i > 0 && s < high {
			n++
		} else {
			high = s
		}
	}
	return n
}

func TestReorder(t *testing.T) {
	tests := []struct {
		name     string
		l        Link
		reorders bool
	}{
		{"none", Link{Delay: 10 * time.Millisecond}, false},
		{"reorder", Link{Delay: 10 * time.Millisecond, Reorder: 0.2}, true},
		{"reorder without delay", Link{Reorder: 0.2}, true},
		{"jitter", Link{Delay: 10 * time.Millisecond, Jitter: 5 * time.Millisecond}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, _, b := pair(t, 5, tt.l, 1000, time.Millisecond)
			b.echo = 0
			if err := n.RunUntilIdle(10000); err != nil {
				t.Fatal(err)
			}
			if len(b.got) != 1000 {
				t.Fatalf("got %d datagrams, want 1000", len(b.got))
			}
			inv := inversions(b.got)
			if (inv > 0) != tt.reorders {
				t.Errorf("%d datagrams out of order", inv)
			}
			s := n.LinkStats(addr(1), addr(2))
			if tt.l.Reorder > 0 && !within(s.Reordered, s.Sent, tt.l.Reorder, 0.04) {
				t.Errorf("reordered %d of %d", s.Reordered, s.Sent)
			}
			// Every datagram arrives no earlier than Delay after it was
			// sent at its number's millisecond, and no later than the
			// longest extra delay allows.
			for _, g := range b.got {
				sent := at(time.Duration(seq(g.b)) * time.Millisecond)
				lag := g.at.Sub(sent)
				maxLag := tt.l.Delay + tt.l.Jitter
				if tt.l.Reorder > 0 {
					maxLag += max(2*(tt.l.Delay+tt.l.Jitter), 10*time.Millisecond)
				}
				if lag < tt.l.Delay || lag > maxLag {
					t.Fatalf("datagram %d took %v, want within [%v, %v]", seq(g.b), lag, tt.l.Delay, maxLag)
				}
			}
		})
	}
}

func TestJitterBounds(t *testing.T) {
	n, _, b := pair(t, 9, Link{Delay: 10 * time.Millisecond, Jitter: 5 * time.Millisecond}, 2000, time.Millisecond)
	b.echo = 0
	if err := n.RunUntilIdle(10000); err != nil {
		t.Fatal(err)
	}
	lo, hi := time.Hour, time.Duration(0)
	for _, g := range b.got {
		lag := g.at.Sub(at(time.Duration(seq(g.b)) * time.Millisecond))
		lo, hi = min(lo, lag), max(hi, lag)
	}
	if lo < 10*time.Millisecond || hi >= 15*time.Millisecond || hi-lo < 4*time.Millisecond {
		t.Errorf("delays span [%v, %v], want to fill [10ms, 15ms)", lo, hi)
	}
}

func TestCorruption(t *testing.T) {
	n := NewNetwork(4)
	a := &fake{}
	b := &fake{record: true}
	n.Add(addr(1), a)
	n.Add(addr(2), b)
	n.SetLink(addr(1), addr(2), Link{Corrupt: 1})
	orig := make([]byte, 32)
	for i := range orig {
		orig[i] = byte(i * 7)
	}
	for range 500 {
		a.send(addr(2), orig)
	}
	a.send(addr(2), nil) // nothing to corrupt
	a.send(addr(2), []byte{0xff})
	if err := n.RunUntilIdle(1000); err != nil {
		t.Fatal(err)
	}
	hist := map[int]int{}
	for _, g := range b.got[:500] {
		d := 0
		for i := range g.b {
			d += bits.OnesCount8(g.b[i] ^ orig[i])
		}
		hist[d]++
	}
	if hist[1] == 0 || hist[2] == 0 || hist[3] == 0 || hist[1]+hist[2]+hist[3] != 500 {
		t.Errorf("bits flipped per datagram: %v, want 1, 2 and 3 only", hist)
	}
	if len(b.got[500].b) != 0 || !(5 <= bits.OnesCount8(b.got[501].b[0]) && bits.OnesCount8(b.got[501].b[0]) <= 7) {
		t.Errorf("short datagrams delivered as %x and %x", b.got[500].b, b.got[501].b)
	}
	if s := n.LinkStats(addr(1), addr(2)); s.Corrupted != 501 {
		t.Errorf("Corrupted = %d, want 501", s.Corrupted)
	}
}

func TestBandwidth(t *testing.T) {
	t.Run("serialisation", func(t *testing.T) {
		n := NewNetwork(1)
		a := &fake{}
		b := &fake{record: true}
		n.Add(addr(1), a)
		n.Add(addr(2), b)
		n.SetLink(addr(1), addr(2), Link{Bandwidth: 1000, Delay: 50 * time.Millisecond})
		for range 5 {
			a.send(addr(2), make([]byte, 100))
		}
		if err := n.RunUntilIdle(100); err != nil {
			t.Fatal(err)
		}
		for i, g := range b.got {
			// 100 bytes at 1000 B/s take 100 ms each to leave.
			if want := at(time.Duration(i+1)*100*time.Millisecond + 50*time.Millisecond); g.at != want {
				t.Errorf("datagram %d arrived at %v, want %v", i, g.at, want)
			}
		}
		if len(b.got) != 5 {
			t.Errorf("got %d datagrams, want 5", len(b.got))
		}
		// Once the queue has drained a new datagram leaves at once.
		a.send(addr(2), make([]byte, 10))
		sent := n.Now()
		if err := n.RunUntilIdle(100); err != nil {
			t.Fatal(err)
		}
		if g := b.got[5]; g.at != sent.Add(60*time.Millisecond) {
			t.Errorf("after a pause: arrived %v after sending, want 60ms", g.at.Sub(sent))
		}
	})
	t.Run("queue limit", func(t *testing.T) {
		n := NewNetwork(1)
		a := &fake{}
		b := &fake{record: true}
		n.Add(addr(1), a)
		n.Add(addr(2), b)
		n.SetLink(addr(1), addr(2), Link{Bandwidth: 1000, QueueLimit: 250})
		// The first leaves at once; the second waits behind 100 queued
		// bytes; the third would make 300 > 250.
		for range 5 {
			a.send(addr(2), make([]byte, 100))
		}
		if err := n.RunUntilIdle(100); err != nil {
			t.Fatal(err)
		}
		if s := n.LinkStats(addr(1), addr(2)); s.Delivered != 2 || s.QueueFull != 3 {
			t.Errorf("stats %+v, want 2 delivered and 3 dropped by the queue", s)
		}
	})
	t.Run("default queue is one second", func(t *testing.T) {
		n := NewNetwork(1)
		a := &fake{}
		n.Add(addr(1), a)
		n.Add(addr(2), &fake{})
		n.SetLink(addr(1), addr(2), Link{Bandwidth: 10000})
		for range 200 {
			a.send(addr(2), make([]byte, 100))
		}
		if err := n.RunUntilIdle(1000); err != nil {
			t.Fatal(err)
		}
		if s := n.LinkStats(addr(1), addr(2)); s.Delivered != 100 || s.QueueFull != 100 {
			t.Errorf("stats %+v, want 100 delivered (one second's worth, the one leaving included), 100 dropped", s)
		}
	})
}

func TestReliablePipe(t *testing.T) {
	n, _, b := pair(t, 11, Link{
		Reliable: true, Delay: 5 * time.Millisecond, Jitter: 20 * time.Millisecond, Bandwidth: 20000,
	}, 3000, 100*time.Microsecond)
	b.echo = 0
	if err := n.RunUntilIdle(100000); err != nil {
		t.Fatal(err)
	}
	if len(b.got) != 3000 || inversions(b.got) != 0 {
		t.Fatalf("got %d datagrams, %d out of order; want 3000 in order", len(b.got), inversions(b.got))
	}
	for i, g := range b.got {
		if seq(g.b) != uint32(i) {
			t.Fatalf("datagram %d is number %d", i, seq(g.b))
		}
	}
	// The bandwidth queue of a pipe does not drop: 3000*40 bytes at 20000
	// B/s take 6 s to leave.
	if last := b.got[2999].at; last < at(6*time.Second) {
		t.Errorf("last datagram arrived at %v, before the 6 s the bandwidth allows", last.Sub(clock.Epoch))
	}
}

func TestInvalidLinks(t *testing.T) {
	for _, l := range []Link{
		{Loss: -0.1}, {Dup: 1.5}, {Reorder: math.NaN()}, {Corrupt: 2},
		{Delay: -1}, {Jitter: -1}, {ReorderDelay: -1}, {MTU: -1}, {Bandwidth: -1}, {QueueLimit: -1},
		{Reliable: true, Loss: 0.1}, {Reliable: true, MTU: 1200}, {Reliable: true, Corrupt: 0.01},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("SetLink(%+v) did not panic", l)
				}
			}()
			NewNetwork(1).SetLink(addr(1), addr(2), l)
		}()
	}
}

func TestDefaultAndExplicitLinks(t *testing.T) {
	n := NewNetwork(1)
	a, b, c := &fake{}, &fake{record: true}, &fake{record: true}
	n.Add(addr(1), a)
	n.Add(addr(2), b)
	n.Add(addr(3), c)
	n.SetLink(addr(1), addr(2), Link{Delay: 10 * time.Millisecond})
	a.send(addr(3), []byte{1}) // creates the 1->3 link with the default
	run(t, n, 0)
	n.SetDefaultLink(Link{Delay: 30 * time.Millisecond}) // applies to 1->3, not 1->2
	a.send(addr(2), []byte{2})
	a.send(addr(3), []byte{3})
	if err := n.RunUntilIdle(100); err != nil {
		t.Fatal(err)
	}
	if len(b.got) != 1 || b.got[0].at != at(10*time.Millisecond) {
		t.Errorf("explicit link: got %v", b.got)
	}
	if len(c.got) != 2 || c.got[0].at != at(0) || c.got[1].at != at(30*time.Millisecond) {
		t.Errorf("default link: got %v", c.got)
	}
}

func TestFilter(t *testing.T) {
	n := NewNetwork(1)
	a, b := &fake{}, &fake{record: true}
	n.Add(addr(1), a)
	n.Add(addr(2), b)
	var seen []string
	n.Filter = func(from, to netip.AddrPort, p []byte) bool {
		seen = append(seen, from.String()+">"+to.String()+":"+string(p))
		if p[0] == 'x' {
			return false
		}
		p[0] = 'Y'
		return true
	}
	a.send(addr(2), []byte("xa"))
	a.send(addr(2), []byte("yb"))
	if err := n.RunUntilIdle(10); err != nil {
		t.Fatal(err)
	}
	if len(b.got) != 1 || string(b.got[0].b) != "Yb" {
		t.Errorf("delivered %v, want only the changed \"Yb\"", b.got)
	}
	if len(seen) != 2 || seen[0] != "10.0.0.1:7000>10.0.0.2:7000:xa" {
		t.Errorf("filter saw %q", seen)
	}
	if s := n.LinkStats(addr(1), addr(2)); s.Filtered != 1 {
		t.Errorf("Filtered = %d, want 1", s.Filtered)
	}
}

func TestInjectAndNoRoute(t *testing.T) {
	n := NewNetwork(1)
	b := &fake{record: true, echo: -1}
	n.Add(addr(2), b)
	attacker := addr(66)
	n.Inject(attacker, addr(2), []byte("junk"))
	n.Inject(attacker, addr(3), []byte("nobody")) // no node there
	if err := n.RunUntilIdle(10); err != nil {
		t.Fatal(err)
	}
	if len(b.got) != 1 || b.got[0].from != attacker || string(b.got[0].b) != "junk" {
		t.Errorf("got %v", b.got)
	}
	// The echo went back to the attacker's address, where no node is.
	if s := n.LinkStats(addr(2), attacker); s.NoRoute != 1 {
		t.Errorf("echo to the attacker: %+v, want NoRoute 1", s)
	}
	if s := n.LinkStats(attacker, addr(3)); s.NoRoute != 1 {
		t.Errorf("inject to nobody: %+v, want NoRoute 1", s)
	}
	checkAccounting(t, n)
}

func TestEvents(t *testing.T) {
	n := NewNetwork(1)
	a, b := &fake{emitOnRecv: true}, &fake{emitOnRecv: true}
	n.Add(addr(1), a)
	n.Add(addr(2), b)
	// On each message b gets, the test makes a answer it: calls from
	// OnEvent reach other nodes and their output is sent.
	replies := 0
	n.OnEvent = func(now clock.Time, node netip.AddrPort, ev fastnet.Event) {
		if node == addr(2) && replies < 3 {
			replies++
			a.send(addr(2), []byte{byte(replies)})
		}
	}
	a.send(addr(2), []byte{0})
	if err := n.RunUntilIdle(100); err != nil {
		t.Fatal(err)
	}
	evs := n.Events(addr(2))
	if len(evs) != 4 {
		t.Fatalf("b has %d events, want 4", len(evs))
	}
	for i, ev := range evs {
		if ev.Kind != fastnet.EventMessage || ev.Addr != addr(1) || ev.Data[0] != byte(i) {
			t.Errorf("event %d: %s", i, DescribeEvent(ev))
		}
	}
	if got := n.TakeEvents(addr(2)); len(got) != 4 || len(n.Events(addr(2))) != 0 {
		t.Errorf("TakeEvents returned %d and left %d", len(got), len(n.Events(addr(2))))
	}
	if n.Events(addr(1)) != nil || n.Events(addr(99)) != nil || n.TakeEvents(addr(99)) != nil {
		t.Error("events for a node with none or no node")
	}
	n.DiscardEvents = true
	a.send(addr(2), []byte{9})
	if err := n.RunUntilIdle(100); err != nil {
		t.Fatal(err)
	}
	if len(n.Events(addr(2))) != 0 || b.nGot != 5 {
		t.Errorf("with DiscardEvents: %d events kept, %d datagrams", len(n.Events(addr(2))), b.nGot)
	}
}

func TestRunUntilIdleDetectsLivelock(t *testing.T) {
	// Two echo nodes bounce one datagram for ever.
	n := NewNetwork(1)
	a, b := &fake{echo: -1}, &fake{echo: -1}
	n.Add(addr(1), a)
	n.Add(addr(2), b)
	n.SetDefaultLink(Link{Delay: time.Millisecond})
	a.send(addr(2), []byte("ping"))
	if err := n.RunUntilIdle(1000); !errors.Is(err, ErrLivelock) {
		t.Fatalf("RunUntilIdle = %v, want ErrLivelock", err)
	}
	if got := n.Now(); got != at(1000*time.Millisecond) {
		t.Errorf("stopped at %v, want after 1000 steps of 1ms", got.Sub(clock.Epoch))
	}
	// Once the bouncing stops the network goes idle.
	a.echo, b.echo = 0, 0
	if err := n.RunUntilIdle(1000); err != nil {
		t.Errorf("RunUntilIdle after the echo stopped: %v", err)
	}
}

// stuck is a node whose deadline never moves: HandleTimeout does nothing.
type stuck struct{ fake }

func (s *stuck) NextDeadline() (clock.Time, bool) { return at(time.Millisecond), true }

func TestRunDetectsTimeStandingStill(t *testing.T) {
	tests := []struct {
		name string
		run  func(n *Network) error
	}{
		{"RunFor", func(n *Network) error { return n.RunFor(time.Second) }},
		{"RunUntil", func(n *Network) error { return n.RunUntil(at(time.Second)) }},
		{"RunUntilCond", func(n *Network) error { return n.RunUntilCond(func() bool { return false }, time.Second) }},
		{"RunUntilIdle", func(n *Network) error { return n.RunUntilIdle(1 << 30) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := NewNetwork(1)
			n.MaxStepsPerInstant = 500
			n.Add(addr(1), &stuck{})
			err := tt.run(n)
			if !errors.Is(err, ErrLivelock) {
				t.Fatalf("got %v, want ErrLivelock", err)
			}
			if n.Now() != at(time.Millisecond) {
				t.Errorf("stopped at %v", n.Now().Sub(clock.Epoch))
			}
		})
	}
	// A burst at one instant below the limit is not a livelock.
	n := NewNetwork(1)
	n.MaxStepsPerInstant = 500
	a, b := &fake{}, &fake{}
	n.Add(addr(1), a)
	n.Add(addr(2), b)
	for range 400 {
		a.send(addr(2), []byte{1})
	}
	if err := n.RunFor(time.Second); err != nil {
		t.Errorf("400 datagrams at one instant: %v", err)
	}
}

func TestRunUntilCond(t *testing.T) {
	n, _, b := pair(t, 1, Link{Delay: 10 * time.Millisecond}, 10, 100*time.Millisecond)
	got := func(k int) func() bool { return func() bool { return b.nGot >= k } }
	if err := n.RunUntilCond(got(3), time.Second); err != nil {
		t.Fatal(err)
	}
	if n.Now() != at(210*time.Millisecond) {
		t.Errorf("third datagram at %v, want 210ms", n.Now().Sub(clock.Epoch))
	}
	if err := n.RunUntilCond(got(3), 0); err != nil {
		t.Errorf("condition already true: %v", err)
	}
	if err := n.RunUntilCond(got(8), 200*time.Millisecond); !errors.Is(err, ErrTimeLimit) {
		t.Errorf("got %v, want ErrTimeLimit", err)
	}
	if n.Now() != at(410*time.Millisecond) {
		t.Errorf("after the time limit the clock reads %v, want 410ms", n.Now().Sub(clock.Epoch))
	}
	if err := n.RunUntilCond(got(11), time.Hour); !errors.Is(err, ErrIdle) {
		t.Errorf("got %v, want ErrIdle", err)
	}
}

func TestRunUntil(t *testing.T) {
	n, _, b := pair(t, 1, Link{Delay: 10 * time.Millisecond}, -1, 100*time.Millisecond)
	b.echo = 0
	if err := n.RunUntil(at(310 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	// Arrivals at 10, 110, 210, 310 ms: the one at the limit is included.
	if b.nGot != 4 || n.Now() != at(310*time.Millisecond) {
		t.Errorf("got %d by %v, want 4 by 310ms", b.nGot, n.Now().Sub(clock.Epoch))
	}
	if err := n.RunUntil(at(time.Millisecond)); err != nil || n.Now() != at(310*time.Millisecond) {
		t.Errorf("RunUntil an earlier time moved the clock to %v (%v)", n.Now().Sub(clock.Epoch), err)
	}
}

func TestCloseTransport(t *testing.T) {
	n := NewNetwork(1)
	a, b := &fake{}, &fake{record: true}
	n.Add(addr(1), a)
	n.Add(addr(2), b)
	n.SetPath(addr(1), addr(2), Link{Reliable: true, Delay: 10 * time.Millisecond})
	a.send(addr(2), []byte("lost with the connection"))
	run(t, n, 5*time.Millisecond)
	n.CloseTransport(addr(1), addr(2))
	a.send(addr(2), []byte("after"))
	run(t, n, time.Second)
	if len(b.got) != 1 || string(b.got[0].b) != "after" {
		t.Errorf("got %v, want only the datagram sent after the cut", b.got)
	}
	if len(a.closed) != 1 || a.closed[0] != addr(2) || len(b.closed) != 1 || b.closed[0] != addr(1) {
		t.Errorf("HandleTransportClosed: a heard %v, b heard %v", a.closed, b.closed)
	}
	if s := n.LinkStats(addr(1), addr(2)); s.Cut != 1 || s.Delivered != 1 {
		t.Errorf("stats %+v, want one cut, one delivered", s)
	}
}

func TestAddPanics(t *testing.T) {
	n := NewNetwork(1)
	n.Add(addr(1), &fake{})
	for _, a := range []netip.AddrPort{{}, addr(1)} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Add(%v) did not panic", a)
				}
			}()
			n.Add(a, &fake{})
		}()
	}
}

// configNode is a fake that reports a configuration, as an Endpoint does.
type configNode struct {
	fake
	size   int
	bufLen int
}

func (c *configNode) Config() fastnet.Config { return fastnet.Config{MaxPacketSize: c.size} }

func (c *configNode) PollTransmit(now clock.Time, buf []byte) (fastnet.Transmit, bool) {
	c.bufLen = len(buf)
	return c.fake.PollTransmit(now, buf)
}

func TestTransmitBufferSize(t *testing.T) {
	n := NewNetwork(1)
	small := &configNode{size: 4096}
	n.Add(addr(1), small)
	n.Step()
	if small.bufLen != 65536 {
		t.Errorf("buffer of %d bytes, want 65536", small.bufLen)
	}
	big := &configNode{size: 1<<20 + 23}
	n.Add(addr(2), big)
	big.send(addr(1), make([]byte, 1<<20))
	if err := n.RunUntilIdle(10); err != nil {
		t.Fatal(err)
	}
	if big.bufLen != 1<<20+23 || small.nGot != 1 {
		t.Errorf("buffer of %d bytes, %d delivered", big.bufLen, small.nGot)
	}
}

func TestBadTransmitPanics(t *testing.T) {
	n := NewNetwork(1)
	n.Add(addr(1), badTransmit{})
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "Transmit.N") {
			t.Errorf("recovered %v, want a panic about Transmit.N", r)
		}
	}()
	n.Step()
}

type badTransmit struct{ *fake }

func (badTransmit) PollTransmit(now clock.Time, buf []byte) (fastnet.Transmit, bool) {
	return fastnet.Transmit{To: addr(2), N: len(buf) + 1}, true
}

func (badTransmit) HandleDatagram(clock.Time, netip.AddrPort, []byte) {}
func (badTransmit) HandleTimeout(clock.Time)                          {}
func (badTransmit) NextDeadline() (clock.Time, bool)                  { return 0, false }
func (badTransmit) PollEvent() (fastnet.Event, bool)                  { return fastnet.Event{}, false }

func TestQueueOrder(t *testing.T) {
	var q flightQueue
	r := NewNetwork(3).Rand()
	seqOf := func(b []byte) uint64 { return uint64(b[0]) | uint64(b[1])<<8 }
	var seq uint64
	// Pushes and pops interleaved, so that slots are reused.
	type popped struct {
		at  clock.Time
		seq uint64
	}
	var out []popped
	most := 0
	for round := range 20 {
		for range 100 + round {
			seq++
			b := []byte{byte(seq), byte(seq >> 8)}
			q.push(clock.Time(1000*round+r.IntN(50)), seq, packet{b: b})
		}
		most = max(most, q.len())
		for range 90 {
			at, p := q.pop()
			out = append(out, popped{at, seqOf(p.b)})
		}
	}
	for q.len() > 0 {
		at, p := q.pop()
		out = append(out, popped{at, seqOf(p.b)})
	}
	if len(out) != int(seq) {
		t.Fatalf("popped %d of %d", len(out), seq)
	}
	seen := map[uint64]bool{}
	for i, p := range out {
		if seen[p.seq] {
			t.Fatalf("packet %d popped twice", p.seq)
		}
		seen[p.seq] = true
		if i == 0 {
			continue
		}
		if prev := out[i-1]; p.at < prev.at || p.at == prev.at && p.seq < prev.seq {
			t.Fatalf("popped (%d, %d) after (%d, %d)", p.at, p.seq, prev.at, prev.seq)
		}
	}
	if len(q.slots) != most {
		t.Errorf("%d slots for at most %d packets in flight", len(q.slots), most)
	}
}

func TestPoolSizeClasses(t *testing.T) {
	var p bufPool
	for _, n := range []int{0, 1, 64, 65, 1500, 65536, 1<<20 + 1} {
		b := p.get(n)
		if len(b) != n || cap(b) < n || cap(b) > max(2*n, 64) {
			t.Errorf("get(%d): len %d cap %d", n, len(b), cap(b))
		}
		p.put(b)
		if c := p.get(n); &c[:1][0] != &b[:1][0] {
			t.Errorf("get(%d) after put did not reuse the buffer", n)
		}
	}
}
