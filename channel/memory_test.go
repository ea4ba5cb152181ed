package channel

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/fastnet-engine/fastnet/internal/bufpool"
)

// TestRingPlaceCharge checks N49: a place of the receive ring is charged
// what it costs, the size of a slot and its bit in each bitmap, computed
// from the types, and a ring's arrays take on the heap what ringBytes
// says (within the allocator's rounding).
func TestRingPlaceCharge(t *testing.T) {
	place := int(unsafe.Sizeof(slot{}))
	for _, n := range []int{minRing, 8, 64, 65536} {
		want := n*place + numBitmaps*8*max(n/64, 1)
		if got := ringBytes(n); got != want {
			t.Errorf("ringBytes(%d) = %d, want %d", n, got, want)
		}
	}
	t.Logf("a ring place costs %d bytes and %d bits (%.1f bytes a place in a ring of 65536)",
		place, numBitmaps, float64(ringBytes(65536))/65536)

	// The heap agrees.
	const rings, n = 8, 65536
	var kept [rings][]slot
	var bms [rings][numBitmaps][]uint64
	before := heapAlloc()
	for i := range kept {
		kept[i], bms[i] = arraysFor(n)
	}
	grew := heapAlloc() - before
	runtime.KeepAlive(&kept)
	runtime.KeepAlive(&bms)
	if per := int(grew / rings); per < ringBytes(n)*99/100 || per > ringBytes(n)*101/100 {
		t.Errorf("a ring of %d places takes %d bytes of heap, charged %d", n, per, ringBytes(n))
	}

	// A receiver's charge grows by exactly the ring it grows into, with
	// its base arrays kept beside it (N39).
	r := NewReceiver(ReceiverConfig{MaxBytes: 8 << 20})
	c := []byte{0x01, 0x80, 0, 0} // a header announcing more than it holds
	if got := r.Handle(t0, Header{Reliable: true, Start: true, Seq: 0, Rel: 1}, c); got != Accepted {
		t.Fatal(got)
	}
	if got, want := r.Bytes(), bufpool.ClassCap(len(c))+ringBytes(minRing); got != want {
		t.Errorf("one packet: Bytes = %d, want %d", got, want)
	}
	if got := r.Handle(t0, Header{Reliable: true, Seq: 999, Rel: 1000}, c); got != Accepted {
		t.Fatal(got)
	}
	if got, want := r.Bytes(), 2*bufpool.ClassCap(len(c))+ringBytes(1024)+ringBytes(minRing); got != want {
		t.Errorf("two packets 1000 places apart: Bytes = %d, want %d", got, want)
	}
}

// TestPacketOverheadBound checks that PacketOverhead bounds what a packet
// of a message of two or more packets cut at the smallest message MTU or
// more costs beyond its chunk bytes (N49), and that MessageMemory is what
// a receiver holding every packet of such a message but the first is
// charged at most.
func TestPacketOverheadBound(t *testing.T) {
	for p := 2; p <= 50000; p++ {
		enc := (p-1)*minMessageMTU + 1 // the fewest bytes that make p packets
		if m := MessageMemory(enc, minMessageMTU); m > enc+p*PacketOverhead {
			t.Fatalf("%d packets of %d bytes: MessageMemory %d above %d + %d*PacketOverhead", p, enc, m, enc, p)
		}
	}
	for _, size := range []int{40, 1000, 60000, 1 << 20} {
		for _, mtu := range []int{minMessageMTU, 33, 100, 1193} {
			s := NewSender(0)
			msg := payload(size, size)
			s.Queue(msg, true)
			pkts := sendNew(t, s, t0, mtu)
			enc := 0
			for _, p := range pkts {
				enc += len(p.chunk)
			}
			r := NewReceiver(ReceiverConfig{MaxMessage: size})
			peak := 0
			for _, p := range pkts[1:] { // held back by the first
				if got := r.Handle(t0, p.h, p.chunk); got != Accepted {
					t.Fatalf("%d bytes at %d: %v", size, mtu, got)
				}
				peak = max(peak, r.Bytes())
			}
			if m := MessageMemory(enc, minMessageMTU); peak > m {
				t.Errorf("%d bytes at message MTU %d: held %d, MessageMemory %d", size, mtu, peak, m)
			}
		}
	}
	t.Logf("a 1 MiB message needs at most %d bytes of receive memory (%d at a message MTU of 1193)",
		MessageMemory(1<<20+maxOverhead, minMessageMTU), MessageMemory(1<<20+maxOverhead, 1193))
}

// maxOverhead is the longest message header and checksum (D2, D3).
const maxOverhead = 21

// TestBudgetParent checks N50: budgets that share a parent are bounded by
// its Limit together, grants are passed up to it, what a child holds
// leaves it with Detach, and the free buffers kept at the root count
// against the root's Limit and are given up when a packet needs their
// room.
func TestBudgetParent(t *testing.T) {
	enc := 2021 // a 2000-byte message: 81 packets at message MTU 25
	one := MessageMemory(enc, minMessageMTU)
	parent := &Budget{Limit: one + 4096}
	a := &Budget{Limit: 4 * one, Parent: parent}
	b := &Budget{Limit: 4 * one, Parent: parent}
	ra := NewReceiver(ReceiverConfig{Budget: a, MaxMessage: 2000})
	rb := NewReceiver(ReceiverConfig{Budget: b, MaxMessage: 2000})
	send := func(seed int) []packet {
		s := NewSender(0)
		s.Queue(payload(seed, 2000), true)
		return sendNew(t, s, t0, minMessageMTU)
	}
	pa, pb := send(1), send(2)
	if got := ra.Handle(t0, pa[0].h, pa[0].chunk); got != Accepted {
		t.Fatal(got)
	}
	if ra.grant == 0 || parent.committed != ra.grant || a.committed != ra.grant {
		t.Fatalf("grant %d, committed %d in the parent and %d in the child", ra.grant, parent.committed, a.committed)
	}
	// The other child's message begins, but its packets cannot eat into
	// the first one's grant: only the first completes at once.
	refused := 0
	for _, p := range pb {
		if rb.Handle(t0, p.h, p.chunk) == NoMemory {
			refused++
		}
		if parent.Used+parent.committed+parent.Free() > parent.Limit {
			t.Fatalf("parent holds %d + %d + %d free, above %d", parent.Used, parent.committed, parent.Free(), parent.Limit)
		}
	}
	if refused == 0 {
		t.Fatal("two messages fitted a parent that holds one")
	}
	for _, p := range pa[1:] {
		if got := ra.Handle(t0, p.h, p.chunk); got != Accepted {
			t.Fatalf("a packet of the granted message: %v", got)
		}
	}
	if _, ok := ra.Poll(t0); !ok {
		t.Fatal("the granted message was not delivered")
	}
	if parent.Used != a.Used+b.Used || parent.Free() == 0 {
		t.Errorf("parent used %d, children %d + %d; %d free", parent.Used, a.Used, b.Used, parent.Free())
	}
	// Its buffers, kept free at the root, make room for the second.
	for _, p := range pb {
		rb.Handle(t0, p.h, p.chunk) // resent
	}
	if _, ok := rb.Poll(t0); !ok {
		t.Fatal("the second message was not delivered once the first had been")
	}
	if parent.Used+parent.committed+parent.Free() > parent.Limit {
		t.Errorf("parent holds %d + %d + %d free, above %d", parent.Used, parent.committed, parent.Free(), parent.Limit)
	}
	used := a.Used
	a.Detach()
	if a.Parent != nil || parent.Used != b.Used || a.Used != used {
		t.Errorf("after Detach: parent used %d, want %d; child keeps %d, want %d", parent.Used, b.Used, a.Used, used)
	}
	if !parent.Take(100) || parent.Used != b.Used+100 {
		t.Error("Take of what fits failed")
	}
	if parent.Take(parent.Limit) {
		t.Error("Take of more than the limit succeeded")
	}
}

// TestClassOf checks the pool's size classes at their edges: the
// smallest class whose buffers hold n bytes, each a power of two from
// 32 bytes on.
func TestClassOf(t *testing.T) {
	for _, tc := range []struct{ n, class, cap int }{
		{0, 0, 32}, {1, 0, 32}, {32, 0, 32}, {33, 1, 64}, {64, 1, 64},
		{65, 2, 128}, {1200, 6, 2048}, {4096, 7, 4096}, {4097, 8, 8192},
		{1 << 30, 25, 1 << 30}, {1<<30 + 1, 26, 1<<30 + 1},
	} {
		if c := bufpool.ClassOf(tc.n); c != tc.class {
			t.Errorf("bufpool.ClassOf(%d) = %d, want %d", tc.n, c, tc.class)
		}
		if c := bufpool.ClassCap(tc.n); c != tc.cap {
			t.Errorf("bufpool.ClassCap(%d) = %d, want %d", tc.n, c, tc.cap)
		}
	}
}

// The message structs a sender lets go, once their messages are sent, are
// collected: no place its queues leave as it was keeps one, or its
// buffer, alive (N117). Of 20,000 unreliable messages sent in runs, all
// but the structs kept free are finalized.
func TestSentMessagesCollected(t *testing.T) {
	const n = 20000
	s := NewSender(1)
	msg := make([]byte, 100)
	for range n {
		s.Queue(msg, false)
	}
	var collected atomic.Int64
	for i := range s.pending.Len() {
		runtime.SetFinalizer(*s.pending.At(i), func(*message) { collected.Add(1) })
	}
	b := make([]byte, 0, 1<<20)
	for s.pending.Len() > 0 {
		b, _ = s.AppendRun(b[:0], t0, 7, RunLimit{End: cap(b), MTU: 1200, Max: n, Reliable: n, Frames: 1 << 30})
	}
	want := int64(n - len(s.msgs))
	for deadline := time.Now().Add(20 * time.Second); collected.Load() < want && time.Now().Before(deadline); {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if got := collected.Load(); got != want {
		t.Errorf("%d of the %d message structs let go were collected", got, want)
	}
	runtime.KeepAlive(s)
}
