package fastnettest

import (
	"testing"
	"time"
)

// impaired is a link with every impairment at once.
var impaired = Link{
	Loss: 0.05, Dup: 0.05, Reorder: 0.05, Corrupt: 0.05,
	Delay: time.Millisecond, Jitter: 500 * time.Microsecond,
	Bandwidth: 100 << 20,
}

// bouncing returns a network where k datagrams bounce for ever between two
// echo nodes, warmed up so that its queues and pools have grown.
func bouncing(tb testing.TB, l Link, k int) *Network {
	tb.Helper()
	n := NewNetwork(1)
	a, b := &fake{echo: -1}, &fake{echo: -1}
	n.Add(addr(1), a)
	n.Add(addr(2), b)
	n.SetDefaultLink(l)
	for i := range k {
		a.send(addr(2), make([]byte, 64+i%1200))
	}
	for range 10 * k {
		n.Step()
	}
	return n
}

// ticking returns a network where a ticker sends a datagram every 10 µs to
// an echo node over l, warmed up.
func ticking(tb testing.TB, l Link) (*Network, *fake) {
	tb.Helper()
	n := NewNetwork(1)
	a, b := &fake{}, &fake{echo: -1}
	n.Add(addr(1), a)
	n.Add(addr(2), b)
	n.SetDefaultLink(l)
	a.startTicker(n.Now(), addr(2), 10*time.Microsecond, -1, 200)
	if err := n.RunFor(100 * time.Millisecond); err != nil {
		tb.Fatal(err)
	}
	return n, a
}

func TestStepDoesNotAllocate(t *testing.T) {
	n, _ := ticking(t, impaired)
	tests := []struct {
		name string
		n    *Network
	}{
		{"echo", bouncing(t, Link{Delay: time.Millisecond, Jitter: time.Millisecond}, 100)},
		{"ticker impaired", n},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.n.Stats().Delivered
			if allocs := testing.AllocsPerRun(2000, func() { tt.n.Step() }); allocs != 0 {
				t.Errorf("Step allocates %v times", allocs)
			}
			if tt.n.Stats().Delivered == before {
				t.Error("nothing was delivered")
			}
		})
	}
	t.Run("RunFor", func(t *testing.T) {
		n, a := ticking(t, impaired)
		before := a.nGot
		if allocs := testing.AllocsPerRun(100, func() { n.RunFor(time.Millisecond) }); allocs != 0 {
			t.Errorf("RunFor(1ms) allocates %v times", allocs)
		}
		if a.nGot-before < 100*100*8/10 {
			t.Errorf("only %d echoes in 100 ms", a.nGot-before)
		}
	})
}

// BenchmarkStep measures Step, per datagram delivered: "echo" bounces 1000
// datagrams between two echo nodes over a link with delay and jitter (one
// delivery per step); "impaired" has a ticker send to an echo node over a
// link with every impairment (a step is a delivery or a tick).
func BenchmarkStep(b *testing.B) {
	for _, bm := range []struct {
		name string
		n    func() *Network
	}{
		{"echo", func() *Network { return bouncing(b, Link{Delay: time.Millisecond, Jitter: time.Millisecond}, 1000) }},
		{"impaired", func() *Network { n, _ := ticking(b, impaired); return n }},
	} {
		b.Run(bm.name, func(b *testing.B) {
			n := bm.n()
			before := n.Stats().Delivered
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				n.Step()
			}
			b.StopTimer()
			delivered := n.Stats().Delivered - before
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(delivered), "ns/packet")
		})
	}
}

// BenchmarkRunFor measures RunFor on a ticker sending 100,000 datagrams per
// virtual second to an echo node over an impaired link; per datagram
// delivered (ticks and echoes).
func BenchmarkRunFor(b *testing.B) {
	n, _ := ticking(b, impaired)
	before := n.Stats().Delivered
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := n.RunFor(time.Millisecond); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	delivered := n.Stats().Delivered - before
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(delivered), "ns/packet")
}
