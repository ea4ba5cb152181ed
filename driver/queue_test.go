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
		c.deliverLocked(&fastnet.Event{Kind: fastnet.EventMessage, Reliable: true, Data: data})
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
		if e.sentLocked(now, true) {
			yields = append(yields, i)
		}
	}
	if want := []int{burstYield, 2 * burstYield, 3 * burstYield}; !slices.Equal(yields, want) {
		t.Errorf("yielded at Sends %v, want %v", yields, want)
	}
}

// A reliable Send while a write is pending that will poll it reads no
// clock, but every clockEvery-th does; an unreliable one, one that answers
// a Receive and one with no write pending always read it (N97).
func TestSendReadsClock(t *testing.T) {
	e := &Engine{opts: Options{CombineWrites: true}, kick: make(chan struct{}, 1), clk: clock.NewReal()}
	e.writing = true // a goroutine writing outside the lock polls again
	e.lastSend = e.clk.Now()
	var reads []int
	for i := 1; i <= 3*clockEvery; i++ {
		now, read := e.sendTimeLocked(true)
		if !read && now != e.lastSend {
			t.Fatalf("Send %d read no clock and queued at %v, not the last reading %v", i, now, e.lastSend)
		}
		if read {
			reads = append(reads, i)
		}
		e.sentLocked(now, read)
	}
	if want := []int{clockEvery, 2 * clockEvery, 3 * clockEvery}; !slices.Equal(reads, want) {
		t.Errorf("reliable Sends read the clock at %v, want %v", reads, want)
	}
	for _, tc := range []struct {
		name     string
		reliable bool
		set      func()
	}{
		{"unreliable", false, func() {}},
		{"answering a Receive", true, func() { e.answered = true }},
		{"no write pending", true, func() { e.writing, e.unsent = false, false }},
		{"what a Receive left for its reply (N75)", true, func() { e.writing, e.unsent, e.held = false, true, true }},
		{"without CombineWrites", true, func() { e.opts.CombineWrites = false }},
	} {
		e.unread, e.answered, e.writing, e.held, e.opts.CombineWrites = 0, false, true, false, true
		tc.set()
		if _, read := e.sendTimeLocked(tc.reliable); !read {
			t.Errorf("%s: no clock read", tc.name)
		}
	}
}

// After Sends that read no clock, the next that reads it is part of the
// burst if it came within sendBurst for each Send since the last reading.
func TestBurstAfterUnreadSends(t *testing.T) {
	e := &Engine{opts: Options{CombineWrites: true}}
	e.lastSend = clock.Epoch
	for _, tc := range []struct {
		unread int
		after  time.Duration
		want   bool
	}{
		{0, sendBurst - 1, true},
		{0, sendBurst, false},
		{clockEvery - 1, clockEvery*sendBurst - 1, true},
		{clockEvery - 1, clockEvery * sendBurst, false},
		{3, time.Millisecond, false},
	} {
		e.unread = tc.unread
		if got := e.burstLocked(e.lastSend.Add(tc.after)); got != tc.want {
			t.Errorf("%d Sends unread, next after %v: burst %v, want %v", tc.unread, tc.after, got, tc.want)
		}
	}
}

// What a Receive left unpolled for its reply (N75) waits only for the idle
// timer: a Send of a burst that finds it kicks the timer goroutine, which
// writes both, rather than leaving its message to wait as well.
func TestBurstSendAfterHeldReply(t *testing.T) {
	e := &Engine{opts: Options{CombineWrites: true}, kick: make(chan struct{}, 1), clk: clock.NewReal()}
	e.unsent, e.held = true, true
	now, read := e.sendTimeLocked(true)
	if !read {
		t.Fatal("a Send with only a Receive's acks unpolled read no clock")
	}
	e.lastSend = now.Add(-time.Microsecond) // the previous Send of the burst
	e.sentLocked(now, read)
	if len(e.kick) != 1 {
		t.Error("the timer goroutine was not kicked")
	}
	if !e.unsent || e.held {
		t.Errorf("unsent %v, held %v: want a write pending", e.unsent, e.held)
	}
}
