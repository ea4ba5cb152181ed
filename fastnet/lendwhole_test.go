package fastnet

import (
	"bytes"
	"net/netip"
	"slices"
	"testing"
	"unsafe"

	"github.com/fastnet-engine/fastnet/channel"
	"github.com/fastnet-engine/fastnet/coalesce"
)

// wholeBundle lays out messages of the given sizes in a bundle as a
// datagram carries them, each after a gap of frame and packet headers
// and followed by its checksum, and returns the bundle and their places
// (channel.Whole). A negative size is a message placed before the one
// before it, out of order.
func wholeBundle(sizes []int) ([]byte, []channel.Whole) {
	const gap, hl = 11, 2
	b := make([]byte, 0, 1<<16)
	ws := make([]channel.Whole, len(sizes))
	for i, n := range sizes {
		back := n < 0
		n = max(n, -n)
		b = append(b, make([]byte, gap)...)
		off := len(b)
		b = append(b, 0xee, 0xee)
		for k := range n {
			b = append(b, byte(i*31+k))
		}
		b = append(b, make([]byte, coalesce.MD5Len)...)
		ws[i] = channel.Whole{H: channel.Header{Reliable: i%2 == 0}, Msg: coalesce.Header{Len: n, HeaderLen: hl}, Off: off, End: len(b)}
		if back && i > 0 {
			ws[i], ws[i-1] = ws[i-1], ws[i]
		}
	}
	return b, ws
}

// lendWhole lends the messages of a run in spans, each copied at once
// out of the bundle (Arena.Span), and a message of 0 or more than
// ArenaMax bytes alone, as Lend does (N127): every event has its
// message's bytes, in a buffer whose capacity is its length; the notes
// of lent buffers name each lent event once, in order, and the events of
// one span together; a span never takes more than the room of its block;
// and once every event is polled and given back, lending the same
// messages again allocates nothing.
func TestLendWhole(t *testing.T) {
	many := func(n, size int) []int {
		s := make([]int, n)
		for i := range s {
			s[i] = size
		}
		return s
	}
	tests := []struct {
		name  string
		used  int // bytes carved out of the current block before
		sizes []int
		notes []lentNote
	}{
		{"one span", 0, many(10, 64), []lentNote{{0, 10, 1}}},
		{"alone between", 0, []int{64, 0, 64, channel.ArenaMax + 1, 64, 64, channel.ArenaMax},
			[]lentNote{{0, 1, 1}, {2, 1, 1}, {4, 3, 1}}},
		// 64-byte messages 29 bytes apart: two in 157 bytes, three in
		// 250, so with 200 left the third starts a block.
		{"room ends a span", channel.ArenaBlock - 200, many(5, 64), []lentNote{{0, 2, 1}, {2, 3, 2}}},
		{"first past room", channel.ArenaBlock - 40, many(3, 64), []lentNote{{0, 3, 2}}},
		// A message that lies before the one before it ends the span;
		// the next span, in the same block, joins its note.
		{"out of order", 0, []int{64, 64, -64, 64}, []lentNote{{0, 4, 1}}},
		// 285 bytes a message: 14 to a block.
		{"many blocks", 0, many(40, channel.ArenaMax),
			[]lentNote{{0, 14, 1}, {14, 14, 2}, {28, 12, 3}}},
	}
	c := &conn{handle: 3, addr: netip.MustParseAddrPort("192.0.2.7:9")}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, ws := wholeBundle(tt.sizes)
			e, first := lendingEndpoint(tt.used)
			e.evBase = 5 // events polled before
			evs := make([]Event, len(ws))
			lend := func() {
				e.events = evs
				e.lendWhole(c, 9, b, ws, e.events)
			}
			lend()
			blocks := map[*channel.Block]int{first: 1}
			var got []lentNote
			for i := range e.lent.Len() {
				l := *e.lent.At(i)
				if _, ok := blocks[l.block]; !ok {
					blocks[l.block] = len(blocks) + 1
				}
				got = append(got, lentNote{l.ev - e.evBase, l.n, blocks[l.block]})
			}
			if !slices.Equal(got, tt.notes) {
				t.Errorf("notes %v, want %v", got, tt.notes)
			}
			for i := range ws {
				ev := &e.events[i]
				want := ws[i].Payload(b)
				if ev.Kind != EventMessage || ev.Conn != 3 || ev.Addr != c.addr || ev.Channel != 9 || ev.Reliable != ws[i].H.Reliable || !bytes.Equal(ev.Data, want) {
					t.Fatalf("event %d: %+v, want %x", i, ev, want)
				}
				if cap(ev.Data) != len(ev.Data) {
					t.Errorf("event %d: %d bytes, capacity %d", i, len(ev.Data), cap(ev.Data))
				}
				if len(ev.Data) > 0 && unsafe.SliceData(ev.Data) == unsafe.SliceData(want) {
					t.Errorf("event %d: not copied", i)
				}
			}
			// Polled and given back, the blocks are carved again.
			cycle := func() {
				e.evBase += len(e.events)
				e.events = e.events[:0]
				e.giveBack()
				lend()
			}
			alone := 0 // allocated each time, as Lend allocates them
			for _, n := range tt.sizes {
				if n > channel.ArenaMax {
					alone++
				}
			}
			cycle()
			if a := testing.AllocsPerRun(20, cycle); a != float64(alone) {
				t.Errorf("%.0f allocations a round of lending, want %d", a, alone)
			}
		})
	}
}

// lentNote is a note of lent buffers as TestLendWhole expects it: its
// events, counted from the first lent, and its block, numbered in order
// of first use, the block carved before the messages 1.
type lentNote struct{ ev, n, block int }

// lendWhole ends a span exactly where the room of its block ends
// (N127): a first message that fills the room is carved there, a span
// that fills it is one span, one that would pass it by a byte ends
// before the message that would, and a run that fills a block of its
// own, or would pass it by a byte, is cut as the room allows. Within a
// span each buffer lies as far from the one before as in the bundle;
// a span that follows another in the same block starts where that one's
// last buffer ends; and the room left in the block after is what those
// spans leave. A span that ended early, or one carved past its block's
// room, shows in where the buffers lie, in the notes or in the room.
func TestLendWholeSpans(t *testing.T) {
	many := func(sizes ...int) []int { // pairs of a count and a size
		var s []int
		for i := 0; i < len(sizes); i += 2 {
			for range sizes[i] {
				s = append(s, sizes[i+1])
			}
		}
		return s
	}
	tests := []struct {
		name  string
		used  int // bytes carved out of the current block before
		sizes []int
		spans []int // the messages of each span, in order
		notes []lentNote
		room  int // left in the current block after
	}{
		// 64-byte messages lie 93 bytes apart: two take 157.
		{"first fills the room", channel.ArenaBlock - 64, many(3, 64),
			[]int{1, 2}, []lentNote{{0, 1, 1}, {1, 2, 2}}, channel.ArenaBlock - 157},
		{"span fills the room", channel.ArenaBlock - 157, many(3, 64),
			[]int{2, 1}, []lentNote{{0, 2, 1}, {2, 1, 2}}, channel.ArenaBlock - 64},
		{"a byte short", channel.ArenaBlock - 156, many(3, 64),
			[]int{1, 1, 1}, []lentNote{{0, 2, 1}, {2, 1, 2}}, channel.ArenaBlock - 64},
		{"first past room", channel.ArenaBlock - 40, many(3, 64),
			[]int{3}, []lentNote{{0, 3, 2}}, channel.ArenaBlock - 250},
		// 15 messages of 246 bytes, 29 apart, fill 4096 bytes.
		{"a block filled", channel.ArenaBlock, many(16, 246),
			[]int{15, 1}, []lentNote{{0, 15, 2}, {15, 1, 3}}, channel.ArenaBlock - 246},
		// 14 of 256 take 3961 bytes, and 29+107 more would be 4097.
		{"a block and a byte", channel.ArenaBlock, many(14, 256, 1, 107),
			[]int{14, 1}, []lentNote{{0, 15, 2}}, channel.ArenaBlock - 3961 - 107},
	}
	c := &conn{handle: 3, addr: netip.MustParseAddrPort("192.0.2.7:9")}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, ws := wholeBundle(tt.sizes)
			e, first := lendingEndpoint(tt.used)
			e.evBase = 5
			e.events = make([]Event, len(ws))
			e.lendWhole(c, 9, b, ws, e.events)
			blocks := map[*channel.Block]int{first: 1}
			var got []lentNote
			blockOf := make([]int, len(ws)) // 0: alone
			for i := range e.lent.Len() {
				l := *e.lent.At(i)
				if _, ok := blocks[l.block]; !ok {
					blocks[l.block] = len(blocks) + 1
				}
				got = append(got, lentNote{l.ev - e.evBase, l.n, blocks[l.block]})
				for k := range l.n {
					blockOf[l.ev-e.evBase+k] = blocks[l.block]
				}
			}
			if !slices.Equal(got, tt.notes) {
				t.Errorf("notes %v, want %v", got, tt.notes)
			}
			if r := e.arena.Room(); r != tt.room {
				t.Errorf("room %d left, want %d", r, tt.room)
			}
			start := make([]bool, len(ws)) // the first of a span
			for i, k := 0, 0; k < len(tt.spans); i, k = i+tt.spans[k], k+1 {
				start[i] = true
			}
			for i := 1; i < len(ws); i++ {
				prev, cur := e.events[i-1].Data, e.events[i].Data
				if !bytes.Equal(cur, ws[i].Payload(b)) {
					t.Fatalf("event %d: %x, want %x", i, cur, ws[i].Payload(b))
				}
				same := blockOf[i] != 0 && blockOf[i] == blockOf[i-1]
				if !start[i] && !same {
					t.Errorf("event %d: in block %d, the one before in %d, want one span", i, blockOf[i], blockOf[i-1])
					continue
				}
				if !same {
					continue
				}
				d := int(uintptr(unsafe.Pointer(unsafe.SliceData(cur))) - uintptr(unsafe.Pointer(unsafe.SliceData(prev))))
				want := ws[i].Off - ws[i-1].Off // in the same span
				if start[i] {
					want = len(prev) // the span after, in the same block
				}
				if d != want {
					t.Errorf("event %d lies %d bytes after the one before, want %d (first of a span: %v)", i, d, want, start[i])
				}
			}
		})
	}
}

// A buffer lendWhole lends out of a span stays intact until its event is
// polled and the buffers are given back (N103, N127): its block counts
// every buffer of every span carved out of it, so that giving back all
// but one of them never lets the block be carved again. The events are
// polled one at a time, each time followed by the lending of a bundle of
// other bytes large enough to take new blocks, and every event not yet
// polled must still hold its message.
func TestLendWholeHeldUntilPolled(t *testing.T) {
	tests := []struct {
		name  string
		sizes []int
	}{
		{"small", slices.Repeat([]int{64}, 100)},
		{"largest", slices.Repeat([]int{channel.ArenaMax}, 40)},
		{"mixed", slices.Repeat([]int{64, channel.ArenaMax + 1, 200, 0, 17, channel.ArenaMax, 130}, 12)},
	}
	c := &conn{handle: 3, addr: netip.MustParseAddrPort("192.0.2.7:9")}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, ws := wholeBundle(tt.sizes)
			other, ows := wholeBundle(slices.Repeat([]int{channel.ArenaMax}, 20))
			for i := range other {
				other[i] = ^other[i]
			}
			n := len(ws)
			e := &Endpoint{}
			e.arena.Reuse = true
			e.evBase = 7
			e.events = make([]Event, n, n+n*len(ows))
			e.lendWhole(c, 9, b, ws, e.events)
			for p := range n {
				e.evHead = p + 1 // event p polled; those of other never are
				e.giveBack()
				k := len(e.events)
				e.events = e.events[:k+len(ows)]
				e.lendWhole(c, 9, other, ows, e.events[k:])
				for q := p + 1; q < n; q++ {
					if want := ws[q].Payload(b); !bytes.Equal(e.events[q].Data, want) {
						t.Fatalf("event %d, not yet polled, overwritten once %d are polled: %x, want %x", q, p+1, e.events[q].Data, want)
					}
				}
			}
		})
	}
}

// lendingEndpoint returns an endpoint that lends message buffers, with
// used bytes (at least 1) carved out of the arena's current block, which
// it returns: the block before the messages of a test.
func lendingEndpoint(used int) (*Endpoint, *channel.Block) {
	e := &Endpoint{}
	e.arena.Reuse = true
	first, _ := e.arena.Carve(1)
	if used > 1 {
		e.arena.Span(used-1, 0)
	}
	return e, first
}
