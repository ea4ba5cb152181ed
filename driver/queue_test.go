package driver

import (
	"testing"

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
		c.queue[c.head] = Message{}
		c.head++
		c.queueBytes -= len(data)
		if c.head == len(c.queue) {
			t.Fatal("the queue emptied")
		}
	}
	if got := cap(c.queue); got > 16 {
		t.Errorf("the queue grew to %d places, holding %d message", got, len(c.queue)-c.head)
	}
}
