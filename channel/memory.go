package channel

import (
	"reflect"

	"github.com/fastnet-engine/fastnet/internal/bufpool"
)

// What a Receiver charges (D22, D23; N20, N25, N49 of docs/protocol.md).
// Every byte a peer makes a receiver hold is charged at its size in
// memory, computed from the types rather than written down, so that the
// limits bound the heap itself:
//
//   - the arrays of its receive queue: slotSize per place of the ring and
//     its bit in each bitmap (ringBytes), plus the base arrays the ring
//     keeps while it has grown past them (N39), from the first packet
//     queued until Reset, idle or not;
//   - each queued packet's buffer at its capacity, a power of two of at
//     least 32 bytes (bufpool.ClassCap), not at its chunk's length;
//   - each delivered message not yet taken by Poll, its payload, and the
//     places of the queue of them beyond the keptReady it keeps while idle.
//
// MaxBytes and the Budget bound all of it (Receiver.Bytes). The Receiver
// itself with its keptReady places for delivered messages, ReceiverSize,
// is its owner's to charge, since the owner decides when a receiver is
// made and given up: a connection charges it to the same Budget. (Were
// those places in Bytes, the room that an acked packet reserves for the
// packets owed before it could be taken after the fact by the places a
// delivery adds, and the channel could stall.)

// The sizes of the types a Receiver holds, on this platform, as
// unsafe.Sizeof gives them (the core does not import unsafe).
var (
	// slotSize is what a place of the receive ring costs in its slot
	// array; a place also has one bit in each of the numBitmaps bitmaps.
	slotSize = int(reflect.TypeFor[slot]().Size())
	// messageSize is what a delivered message costs in the queue of
	// messages waiting for Poll, beyond its payload.
	messageSize = int(reflect.TypeFor[Message]().Size())
	// receiverSize is what a Receiver costs with the places for
	// delivered messages it keeps, beyond Bytes.
	receiverSize = int(reflect.TypeFor[Receiver]().Size()) + keptReady*messageSize
)

// ringBytes returns what the arrays of a ring of n places cost: n slots and
// the words of its bitmaps (arraysFor).
func ringBytes(n int) int {
	if n <= 0 {
		return 0
	}
	return n*slotSize + numBitmaps*8*max(n/64, 1)
}

// PacketOverhead bounds what a queued packet of a message of two or more
// packets costs beyond its chunk bytes, when the message is cut at the
// smallest message MTU (25 bytes, D12) or more: its buffer rounded up to a
// power of two, its place in the ring (whose capacity is a power of two,
// up to twice the packets) and its share of the ring's base arrays. So
// encoded + packets*PacketOverhead bytes of MaxBytes always hold such a
// message (TestPacketOverheadBound); MessageMemory is the exact worst case.
const PacketOverhead = 160

// HoldOverhead is what a Receiver holding queued packets needs at least
// beyond their buffers: its own state and the smallest arrays of its
// receive queue (minRing places) on this platform; a queue that grew for a
// message of many packets keeps its base arrays of up to baseRing places,
// 2.6 KiB on 64-bit platforms, until the receiver is given up.
// Budget.MaxHolders bounds how many receivers of a connection hold packets
// at once, and so this memory. An idle Receiver (Idle) needs only its
// Position kept, so a connection may give the rest up and Reuse the
// receiver. It is computed from the types at initialization (1,192 bytes
// on 64-bit platforms); it is not a setting.
var HoldOverhead = receiverSize + ringBytes(minRing)

// ReceiverSize is what a Receiver costs beyond Bytes on this platform:
// the Receiver and the few places for delivered messages it keeps. It is
// computed from the types at initialization; it is not a setting.
var ReceiverSize = receiverSize

// MessageMemory returns the most that a receiver's queue, counted as
// MaxBytes counts it, needs to hold every packet of one message of encoded
// bytes (header and checksum included) when the sender cuts it into
// chunks of minChunk bytes or more: the worst over the chunk sizes, whose
// buffers are rounded up to powers of two, of the buffers and of the ring
// that covers the packets (with its base arrays once it grows past them).
// A message that arrives whole in one packet at the head of the queue is
// delivered without being queued.
func MessageMemory(encoded, minChunk int) int {
	worst := 0
	for c := max(minChunk, 1); ; {
		p := (encoded + c - 1) / c
		n := capFor(p)
		m := (p-1)*bufpool.ClassCap(c) + bufpool.ClassCap(encoded-(p-1)*c) + ringBytes(n)
		if n > baseRing {
			m += ringBytes(baseRing)
		}
		worst = max(worst, m)
		if p <= 1 {
			return worst
		}
		// Within a buffer class the smallest chunk costs the most: try
		// the smallest of the next class.
		c = bufpool.ClassCap(c) + 1
	}
}
