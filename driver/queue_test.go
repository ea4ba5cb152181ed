package driver

import (
	"slices"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/fastnet"
)

// A receive queue that Receive never quite empties stays as large as
// what it holds, not as what went through it: the part already taken is
// reclaimed before the queue grows.
func TestReceiveQueueCompacts(t *testing.T) {
	e := &Engine{opts: Options{ReceiveQueue: 1 << 30}}
	c := &Conn{e: e, notify: make(chan struct{}, 1)}
	data := make([]byte, 8)
	deliver := func() {
		c.deliverLocked(fastnet.Event{Kind: fastnet.EventMessage, Reliable: true, Data: data})
	}
	deliver()
	for range 100000 {
		deliver()
		// What Receive does to take one message: one is always left.
		c.queue.Take()
		c.queueBytes -= len(data)
		if c.queue.Len() == 0 {
			t.Fatal("the queue emptied")
		}
	}
	if got := c.queue.Cap(); got > 16 {
		t.Errorf("the queue grew to %d places, holding %d message", got, c.queue.Len())
	}
}

// A Send loop yields its processor once every burstYield Sends of a burst
// (N87), and a Send that is not part of a burst starts the count again.
func TestBurstYields(t *testing.T) {
	e := &Engine{opts: Options{CombineWrites: true}, kick: make(chan struct{}, 1)}
	e.lastSend = 1
	now := clock.Time(1)
	var yields []int
	for i := 1; i <= 3*burstYield; i++ {
		now = now.Add(time.Microsecond)
		if e.sentLocked(now) {
			yields = append(yields, i)
		}
	}
	if want := []int{burstYield, 2 * burstYield, 3 * burstYield}; !slices.Equal(yields, want) {
		t.Errorf("yielded at Sends %v, want %v", yields, want)
	}
}
