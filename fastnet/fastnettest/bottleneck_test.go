package fastnettest

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
)

// numbered returns a datagram of size bytes (at least 8) carrying flow and
// i.
func numbered(flow, i uint32, size int) []byte {
	b := make([]byte, max(size, 8))
	binary.BigEndian.PutUint32(b, i)
	binary.BigEndian.PutUint32(b[4:], flow)
	return b
}

// burst makes f send k numbered datagrams of size bytes to to at once.
func burst(f *fake, to netip.AddrPort, flow uint32, k, size int) {
	for i := range k {
		f.send(to, numbered(flow, uint32(i), size))
	}
}

// checkBottleneck checks the identity documented on BottleneckStats, and
// the network's own.
func checkBottleneck(t *testing.T, n *Network, b *Bottleneck) {
	t.Helper()
	s := b.Stats()
	if s.Offered != s.Forwarded+s.Dropped+uint64(s.Queued) {
		t.Errorf("Offered %d != Forwarded %d + Dropped %d + Queued %d", s.Offered, s.Forwarded, s.Dropped, s.Queued)
	}
	if s.OfferedBytes != s.ForwardedBytes+s.DroppedBytes+uint64(s.QueuedBytes) {
		t.Errorf("OfferedBytes %d != ForwardedBytes %d + DroppedBytes %d + QueuedBytes %d", s.OfferedBytes, s.ForwardedBytes, s.DroppedBytes, s.QueuedBytes)
	}
	checkAccounting(t, n)
}

// TestBottleneckRate checks that a busy bottleneck sends exactly Rate bytes
// a second, rounding once rather than per datagram, and adds its delay and
// the link's.
func TestBottleneckRate(t *testing.T) {
	n := NewNetwork(1)
	a, b := &fake{}, &fake{record: true}
	n.Add(addr(1), a)
	n.Add(addr(2), b)
	// 1000-byte datagrams at 3000 B/s: a third of a second each, which no
	// whole number of nanoseconds is.
	bn := n.NewBottleneck(BottleneckConfig{Rate: 3000, Delay: 20 * time.Millisecond, QueueLimit: 1 << 20})
	n.SetLink(addr(1), addr(2), Link{Bottleneck: bn, Delay: 5 * time.Millisecond})
	const k = 30
	burst(a, addr(2), 0, k, 1000)
	if err := n.RunUntilIdle(1000); err != nil {
		t.Fatal(err)
	}
	if len(b.got) != k {
		t.Fatalf("%d datagrams arrived, want %d", len(b.got), k)
	}
	for i, g := range b.got {
		sent := (int64(i+1)*1000*1e9 + 2999) / 3000 // ceil
		want := at(time.Duration(sent) + 25*time.Millisecond)
		if g.at != want || seq(g.b) != uint32(i) {
			t.Errorf("datagram %d (seq %d) arrived at %v, want %v", i, seq(g.b), g.at.Sub(clock.Epoch), want.Sub(clock.Epoch))
		}
	}
	s := bn.Stats()
	if s.Forwarded != k || s.ForwardedBytes != k*1000 || s.Dropped != 0 || s.MaxQueued != k || s.MaxQueuedBytes != k*1000 {
		t.Errorf("stats %+v", s)
	}
	// The last waited for all k to be sent.
	if want := time.Duration((int64(k)*1000*1e9 + 2999) / 3000); s.MaxQueueDelay != want {
		t.Errorf("MaxQueueDelay %v, want %v", s.MaxQueueDelay, want)
	}
	checkBottleneck(t, n, bn)
}

// TestBottleneckOverhead checks that Overhead counts for the rate and the
// queue.
func TestBottleneckOverhead(t *testing.T) {
	n := NewNetwork(1)
	a, b := &fake{}, &fake{record: true}
	n.Add(addr(1), a)
	n.Add(addr(2), b)
	bn := n.NewBottleneck(BottleneckConfig{Rate: 1000, QueueLimit: 3000, Overhead: 28})
	n.SetDefaultLink(Link{Bottleneck: bn})
	burst(a, addr(2), 0, 4, 972) // 1000 bytes each on the link: three fit
	if err := n.RunUntilIdle(1000); err != nil {
		t.Fatal(err)
	}
	if len(b.got) != 3 || b.got[2].at != at(3*time.Second) {
		t.Fatalf("got %d, the last at %v; want 3, at 3s", len(b.got), b.got[len(b.got)-1].at.Sub(clock.Epoch))
	}
	if s := bn.Stats(); s.OfferedBytes != 4000 || s.DroppedBytes != 1000 {
		t.Errorf("stats %+v", s)
	}
}

// TestBottleneckTailDrop checks the byte limit: a datagram that would pass
// it is dropped, one arriving at an empty queue never is, and room made by
// sending is taken again.
func TestBottleneckTailDrop(t *testing.T) {
	n := NewNetwork(1)
	a, b := &fake{}, &fake{record: true}
	n.Add(addr(1), a)
	n.Add(addr(2), b)
	bn := n.NewBottleneck(BottleneckConfig{Rate: 1000, QueueLimit: 2500})
	n.SetLink(addr(1), addr(2), Link{Bottleneck: bn})

	burst(a, addr(2), 0, 5, 1000) // 1000 and 2000 fit; 3000 does not
	run(t, n, 0)
	if s := bn.Stats(); s.Queued != 2 || s.QueuedBytes != 2000 || s.Dropped != 3 || s.DroppedBytes != 3000 {
		t.Fatalf("after the burst: %+v", s)
	}
	if ls := n.LinkStats(addr(1), addr(2)); ls.QueueFull != 3 {
		t.Errorf("link QueueFull %d, want 3", ls.QueueFull)
	}
	checkBottleneck(t, n, bn)

	// At 1.5 s one datagram is left, half sent: 1000 queued, one more fits.
	run(t, n, 1500*time.Millisecond)
	burst(a, addr(2), 1, 2, 1000)
	run(t, n, 0)
	if s := bn.Stats(); s.Queued != 2 || s.Dropped != 4 {
		t.Fatalf("at 1.5 s: %+v", s)
	}
	if err := n.RunUntilIdle(1000); err != nil {
		t.Fatal(err)
	}
	if len(b.got) != 3 || b.got[2].at != at(3*time.Second) {
		t.Fatalf("%d arrived, the last at %v; want 3, at 3s", len(b.got), b.got[len(b.got)-1].at.Sub(clock.Epoch))
	}

	// An empty queue takes a datagram above the limit, and then nothing
	// else until it has gone.
	burst(a, addr(2), 2, 2, 4000)
	run(t, n, 0)
	if s := bn.Stats(); s.Queued != 1 || s.QueuedBytes != 4000 || s.Dropped != 5 || s.MaxQueuedBytes != 4000 {
		t.Fatalf("oversized: %+v", s)
	}
	if err := n.RunUntilIdle(1000); err != nil {
		t.Fatal(err)
	}
	checkBottleneck(t, n, bn)
}

// TestBottleneckSharedFIFO checks that flows between different pairs share
// one queue and one rate, first come first served, where links with a
// Bandwidth each would not.
func TestBottleneckSharedFIFO(t *testing.T) {
	n := NewNetwork(1)
	srv := &fake{record: true}
	n.Add(addr(1), srv)
	var clients []*fake
	bn := n.NewBottleneck(BottleneckConfig{Rate: 10000, Delay: 10 * time.Millisecond, QueueLimit: 1 << 20})
	for i := range 4 {
		c := &fake{}
		clients = append(clients, c)
		n.Add(addr(byte(2+i)), c)
		n.SetLink(addr(byte(2+i)), addr(1), Link{Bottleneck: bn})
	}
	// Each client in turn sends a burst, 1 ms after the one before; the
	// bursts are of 10 datagrams of 500 bytes, each taking 50 ms.
	for i, c := range clients {
		run(t, n, time.Millisecond)
		burst(c, addr(1), uint32(i), 10, 500)
	}
	if err := n.RunUntilIdle(10000); err != nil {
		t.Fatal(err)
	}
	if len(srv.got) != 40 {
		t.Fatalf("%d arrived, want 40", len(srv.got))
	}
	for k, g := range srv.got {
		flow, i := k/10, k%10
		if g.from != addr(byte(2+flow)) || seq(g.b) != uint32(i) {
			t.Errorf("arrival %d: from %v seq %d, want from %v seq %d", k, g.from, seq(g.b), addr(byte(2+flow)), i)
		}
		// The queue became busy at 1 ms and stayed busy.
		if want := at(time.Millisecond + time.Duration(k+1)*50*time.Millisecond + 10*time.Millisecond); g.at != want {
			t.Errorf("arrival %d at %v, want %v", k, g.at.Sub(clock.Epoch), want.Sub(clock.Epoch))
		}
	}
	checkBottleneck(t, n, bn)
}

// TestBottleneckSetRate checks a rate that halves in the middle of a
// datagram, and one changed while the bottleneck is idle.
func TestBottleneckSetRate(t *testing.T) {
	n := NewNetwork(1)
	a, b := &fake{}, &fake{record: true}
	n.Add(addr(1), a)
	n.Add(addr(2), b)
	bn := n.NewBottleneck(BottleneckConfig{Rate: 1000, QueueLimit: 10000})
	n.SetLink(addr(1), addr(2), Link{Bottleneck: bn})
	burst(a, addr(2), 0, 4, 1000)
	run(t, n, 1500*time.Millisecond)
	bn.SetRate(500) // the second datagram has 500 bytes left: 1 s at 500 B/s
	if bn.Rate() != 500 {
		t.Errorf("Rate() = %d", bn.Rate())
	}
	if err := n.RunUntilIdle(1000); err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{time.Second, 2500 * time.Millisecond, 4500 * time.Millisecond, 6500 * time.Millisecond}
	if len(b.got) != len(want) {
		t.Fatalf("%d arrived, want %d", len(b.got), len(want))
	}
	for i, g := range b.got {
		if g.at != at(want[i]) {
			t.Errorf("datagram %d at %v, want %v", i, g.at.Sub(clock.Epoch), want[i])
		}
	}

	bn.SetRate(2000) // idle: the next burst goes at the new rate
	start := n.Now()
	burst(a, addr(2), 1, 2, 1000)
	if err := n.RunUntilIdle(1000); err != nil {
		t.Fatal(err)
	}
	if got := b.got[len(b.got)-1].at.Sub(start); got != time.Second {
		t.Errorf("two datagrams at 2000 B/s took %v, want 1s", got)
	}
	// Several changes within one datagram.
	start = n.Now()
	burst(a, addr(2), 2, 1, 1000) // 0.5 s at 2000 B/s
	run(t, n, 250*time.Millisecond)
	bn.SetRate(250) // 500 bytes left: 2 s
	run(t, n, time.Second)
	bn.SetRate(1000) // 250 bytes left: 0.25 s
	if err := n.RunUntilIdle(1000); err != nil {
		t.Fatal(err)
	}
	if got := b.got[len(b.got)-1].at.Sub(start); got != 1500*time.Millisecond {
		t.Errorf("arrived after %v, want 1.5s", got)
	}
	checkBottleneck(t, n, bn)
}

// TestBottleneckAccessLink checks a link with a Bandwidth of its own in
// front of a faster bottleneck: datagrams reach the bottleneck as the
// access link lets them.
func TestBottleneckAccessLink(t *testing.T) {
	n := NewNetwork(1)
	a, b := &fake{}, &fake{record: true}
	n.Add(addr(1), a)
	n.Add(addr(2), b)
	bn := n.NewBottleneck(BottleneckConfig{Rate: 1 << 20, Delay: time.Millisecond})
	n.SetLink(addr(1), addr(2), Link{Bandwidth: 1000, QueueLimit: 1 << 20, Bottleneck: bn})
	burst(a, addr(2), 0, 3, 1000)
	run(t, n, 0)
	if got := n.InFlight(); got != 3 {
		t.Errorf("InFlight %d, want 3", got)
	}
	if err := n.RunUntilIdle(1000); err != nil {
		t.Fatal(err)
	}
	for i, g := range b.got {
		tx := time.Duration((int64(1000)*1e9 + (1<<20 - 1)) / (1 << 20))
		if want := at(time.Duration(i+1)*time.Second + tx + time.Millisecond); g.at != want {
			t.Errorf("datagram %d at %v, want %v", i, g.at.Sub(clock.Epoch), want.Sub(clock.Epoch))
		}
	}
	if s := bn.Stats(); s.MaxQueued != 1 {
		t.Errorf("MaxQueued %d, want 1", s.MaxQueued)
	}
	checkBottleneck(t, n, bn)
}

// TestBottleneckAccounting runs echoing flows both ways through two
// bottlenecks whose rates change, with loss and duplication on the links and
// a transport cut, and checks the identities at every step.
func TestBottleneckAccounting(t *testing.T) {
	n := NewNetwork(7)
	srv := &fake{echo: -1}
	n.Add(addr(1), srv)
	up := n.NewBottleneck(BottleneckConfig{Rate: 50000, Delay: 10 * time.Millisecond, QueueLimit: 8000, Overhead: 28})
	down := n.NewBottleneck(BottleneckConfig{Rate: 40000, Delay: 10 * time.Millisecond, QueueLimit: 4000})
	for i := range 3 {
		c := &fake{}
		n.Add(addr(byte(2+i)), c)
		n.SetLink(addr(byte(2+i)), addr(1), Link{Bottleneck: up, Loss: 0.01, Dup: 0.02, Jitter: time.Millisecond})
		n.SetLink(addr(1), addr(byte(2+i)), Link{Bottleneck: down, Reorder: 0.05})
		c.startTicker(n.Now(), addr(1), time.Duration(2+i)*time.Millisecond, 2000, 300+200*i)
	}
	for step := 0; n.Step(); step++ {
		if step%500 == 0 {
			checkBottleneck(t, n, up)
			checkBottleneck(t, n, down)
			if t.Failed() {
				t.Fatalf("at step %d", step)
			}
		}
		switch step {
		case 3000:
			up.SetRate(25000)
		case 6000:
			down.SetRate(80000)
			n.CloseTransport(addr(2), addr(1))
		}
	}
	checkBottleneck(t, n, up)
	checkBottleneck(t, n, down)
	for _, b := range []*Bottleneck{up, down} {
		s := b.Stats()
		if s.Dropped == 0 || s.Forwarded == 0 || s.Queued != 0 {
			t.Errorf("expected drops and forwarding, an empty queue at the end: %+v", s)
		}
		if s.MaxQueuedBytes > b.QueueLimit() {
			t.Errorf("queue reached %d bytes, above its limit %d", s.MaxQueuedBytes, b.QueueLimit())
		}
	}
	var qf uint64
	for i := range 3 {
		qf += n.LinkStats(addr(byte(2+i)), addr(1)).QueueFull
	}
	if s := up.Stats(); qf != s.Dropped {
		t.Errorf("links counted %d queue drops, the bottleneck %d", qf, s.Dropped)
	}
	if n.Stats().Cut == 0 {
		t.Errorf("no datagram was cut by CloseTransport")
	}
}

// TestBottleneckTrace checks that a run through a bottleneck replays
// exactly, and the trace's queue lines.
func TestBottleneckTrace(t *testing.T) {
	trace := func() string {
		n := NewNetwork(3)
		var w bytes.Buffer
		n.Trace = &w
		a, b := &fake{}, &fake{echo: -1}
		n.Add(addr(1), a)
		n.Add(addr(2), b)
		bn := n.NewBottleneck(BottleneckConfig{Rate: 20000, Delay: 5 * time.Millisecond, QueueLimit: 2000})
		n.SetDefaultLink(Link{Bottleneck: bn, Loss: 0.1, Jitter: time.Millisecond})
		a.startTicker(n.Now(), addr(2), time.Millisecond, 100, 400)
		if err := n.RunUntilIdle(10000); err != nil {
			t.Fatal(err)
		}
		return w.String()
	}
	one, two := trace(), trace()
	if one != two {
		t.Fatal("two runs of one seed traced differently")
	}
	for _, want := range []string{
		"0.000000000 queue 10.0.0.1:7000 > 10.0.0.2:7000 400B #",
		" depth=400B\n",
		"0.020000000 send 10.0.0.1:7000 > 10.0.0.2:7000 400B #",
		" queue\n", // a drop at the queue
	} {
		if !strings.Contains(one, want) {
			t.Errorf("trace lacks %q", want)
		}
	}
}

// TestBottleneckInvalid checks what NewBottleneck, SetRate and SetLink
// refuse.
func TestBottleneckInvalid(t *testing.T) {
	n := NewNetwork(1)
	other := NewNetwork(2).NewBottleneck(BottleneckConfig{Rate: 1})
	bn := n.NewBottleneck(BottleneckConfig{Rate: 1})
	for name, f := range map[string]func(){
		"zero rate":        func() { n.NewBottleneck(BottleneckConfig{}) },
		"negative delay":   func() { n.NewBottleneck(BottleneckConfig{Rate: 1, Delay: -1}) },
		"negative limit":   func() { n.NewBottleneck(BottleneckConfig{Rate: 1, QueueLimit: -1}) },
		"negative over":    func() { n.NewBottleneck(BottleneckConfig{Rate: 1, Overhead: -1}) },
		"huge overhead":    func() { n.NewBottleneck(BottleneckConfig{Rate: 1, Overhead: 65536}) },
		"huge rate":        func() { n.NewBottleneck(BottleneckConfig{Rate: MaxBottleneckRate + 1}) },
		"SetRate(0)":       func() { bn.SetRate(0) },
		"reliable":         func() { n.SetLink(addr(1), addr(2), Link{Reliable: true, Bottleneck: bn}) },
		"other network's":  func() { n.SetLink(addr(1), addr(2), Link{Bottleneck: other}) },
		"default, other's": func() { n.SetDefaultLink(Link{Bottleneck: other}) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
	if got := n.NewBottleneck(BottleneckConfig{Rate: 5000}).QueueLimit(); got != 5000 {
		t.Errorf("default QueueLimit %d, want one second of the rate, 5000", got)
	}
}
