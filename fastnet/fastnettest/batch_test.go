package fastnettest

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/fastnet"
)

// batcher is a fake that takes datagrams in batches (a BatchNode) and
// records the size and instant of each call.
type batcher struct {
	fake
	calls []batchCall
	log   []string // "read" and "timeout", in order
}

type batchCall struct {
	at clock.Time
	n  int
}

func (b *batcher) HandleDatagrams(now clock.Time, ds []fastnet.Incoming) {
	b.calls = append(b.calls, batchCall{now, len(ds)})
	b.log = append(b.log, "read")
	for _, d := range ds {
		b.fake.HandleDatagram(now, d.From, d.Data)
	}
}

func (b *batcher) HandleTimeout(now clock.Time) {
	b.log = append(b.log, "timeout")
	b.fake.HandleTimeout(now)
}

// batchNet returns a network that hands over in batches (Batch, with
// ReadEvery readEvery), with a fake at addr(1) and node to at addr(2),
// each direction delayed by delay.
func batchNet(readEvery, delay time.Duration, to Node) (*Network, *fake) {
	n := NewNetwork(1)
	n.Batch, n.ReadEvery = true, readEvery
	a := &fake{}
	n.Add(addr(1), a)
	n.Add(addr(2), to)
	n.SetDefaultLink(Link{Delay: delay})
	return n, a
}

// sendBursts has from send k datagrams to to at each of the instants
// given, numbered in order.
func sendBursts(n *Network, from *fake, to netip.AddrPort, k int, instants ...time.Duration) error {
	seq := byte(0)
	for _, d := range instants {
		if err := n.RunUntil(at(d)); err != nil {
			return err
		}
		for range k {
			from.send(to, []byte{0, 0, 0, seq})
			seq++
		}
	}
	return n.RunUntilIdle(1000)
}

// Network.Batch: the datagrams that arrive at a node at one instant go to
// it in one HandleDatagrams call (or one by one to a Node without it), in
// order; with ReadEvery, what arrived since the node's last read goes to
// it at the next multiple of ReadEvery, before its deadline there.
func TestBatch(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		name      string
		readEvery time.Duration
		instants  []time.Duration
		k         int
		want      []batchCall
	}{
		{name: "one instant", instants: []time.Duration{0, 3 * ms}, k: 3,
			want: []batchCall{{at(5 * ms), 3}, {at(8 * ms), 3}}},
		{name: "read every 10 ms", readEvery: 10 * ms, instants: []time.Duration{0, 3 * ms, 12 * ms}, k: 2,
			want: []batchCall{{at(10 * ms), 4}, {at(20 * ms), 2}}},
		{name: "arrival on a read's instant", readEvery: 5 * ms, instants: []time.Duration{0}, k: 2,
			want: []batchCall{{at(5 * ms), 2}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := &batcher{fake: fake{record: true}}
			n, a := batchNet(c.readEvery, 5*ms, b)
			if err := sendBursts(n, a, addr(2), c.k, c.instants...); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(b.calls, c.want) {
				t.Errorf("calls %v, want %v", b.calls, c.want)
			}
			for i, g := range b.got {
				if g.b[3] != byte(i) || g.from != addr(1) {
					t.Errorf("datagram %d: %v from %v", i, g.b, g.from)
				}
			}
			checkAccounting(t, n)
		})
	}
	t.Run("a node without HandleDatagrams", func(t *testing.T) {
		b := &fake{record: true}
		n, a := batchNet(10*ms, 5*ms, b)
		if err := sendBursts(n, a, addr(2), 3, 0); err != nil {
			t.Fatal(err)
		}
		if len(b.got) != 3 {
			t.Fatalf("got %d datagrams, want 3", len(b.got))
		}
		for i, g := range b.got {
			if g.at != at(10*ms) || g.b[3] != byte(i) {
				t.Errorf("datagram %d: %v at %v, want at %v", i, g.b, g.at, at(10*ms))
			}
		}
	})
	t.Run("read before the deadline of its instant", func(t *testing.T) {
		b := &batcher{fake: fake{record: true}}
		n, a := batchNet(10*ms, 5*ms, b)
		b.deadline = at(10 * ms)
		if err := sendBursts(n, a, addr(2), 1, 0); err != nil {
			t.Fatal(err)
		}
		if len(b.got) != 1 || len(b.timeouts) != 1 || b.got[0].at != at(10*ms) || b.timeouts[0] != at(10*ms) {
			t.Fatalf("got %v, timeouts %v: want one datagram and one timeout at 10 ms", b.got, b.timeouts)
		}
		if !slices.Equal(b.log, []string{"read", "timeout"}) {
			t.Fatalf("inputs %v, want a read then a timeout", b.log)
		}
	})
}

// With ReadEvery, a datagram that arrived and is not read yet is still in
// flight: counted so, delivered only at the read, and dropped as cut if
// CloseTransport cuts its link before the read, not handed over after the
// node heard of the cut.
func TestReadEveryInFlight(t *testing.T) {
	ms := time.Millisecond
	for _, cut := range []bool{false, true} {
		b := &fake{record: true}
		n, a := batchNet(10*ms, 5*ms, b)
		a.send(addr(2), []byte{0, 0, 0, 1})
		if err := n.RunUntil(at(7 * ms)); err != nil {
			t.Fatal(err)
		}
		if s := n.Stats(); n.InFlight() != 1 || s.Delivered != 0 || len(b.got) != 0 {
			t.Fatalf("arrived, unread: in flight %d, delivered %d, handed over %d; want 1, 0, 0", n.InFlight(), s.Delivered, len(b.got))
		}
		if cut {
			n.CloseTransport(addr(1), addr(2))
		}
		if err := n.RunUntilIdle(100); err != nil {
			t.Fatal(err)
		}
		s := n.Stats()
		switch {
		case cut && (len(b.got) != 0 || s.Delivered != 0 || s.Cut != 1):
			t.Errorf("cut before the read: handed over %d, delivered %d, cut %d; want 0, 0, 1", len(b.got), s.Delivered, s.Cut)
		case !cut && (len(b.got) != 1 || b.got[0].at != at(10*ms) || s.Delivered != 1):
			t.Errorf("read: handed over %v, delivered %d; want one at 10 ms", b.got, s.Delivered)
		}
		checkAccounting(t, n)
	}
}

// A deadline already past when a read falls due does not go before it:
// at one instant, reads go before deadlines.
func TestReadBeforeOverdueDeadline(t *testing.T) {
	ms := time.Millisecond
	b := &batcher{fake: fake{record: true}}
	n, a := batchNet(10*ms, 10*ms, b)
	a.send(addr(2), []byte{0, 0, 0, 1})
	if err := n.RunUntil(at(10*ms - 1)); err != nil {
		t.Fatal(err)
	}
	n.Step() // the arrival at 10 ms, into b's inbox: its read is due then
	if n.Now() != at(10*ms) || len(b.log) != 0 {
		t.Fatalf("at %v, inputs %v: want the arrival alone at 10 ms", n.Now(), b.log)
	}
	b.deadline = at(9 * ms) // past
	n.Step()
	n.Step()
	if !slices.Equal(b.log, []string{"read", "timeout"}) {
		t.Fatalf("inputs %v, want the read, then the overdue timeout", b.log)
	}
}
