package tcpdriver_test

import (
	"context"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/tcpdriver"
)

// A Receive that holds the read role (ReadFor) while a burst of unreliable
// messages arrives together: with a small ReceiveQueue, N13 pauses the
// stream so that at most the one message that did not fit is dropped per
// pause; the rest wait in TCP.
func TestReadForBurstUnreliableDrops(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l := listenTCP(t, ctx, tcpdriver.Config{})
	c, err := tcpdriver.Dial(ctx, l.Addr().String(), tcpdriver.Config{ReceiveQueue: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Abort("")
	sc, err := l.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const n = 60
	got := make(chan int)
	go func() {
		k := 0
		for {
			rctx, rcancel := context.WithTimeout(ctx, 500*time.Millisecond)
			_, err := c.Receive(rctx)
			rcancel()
			if err != nil {
				got <- k
				return
			}
			k++
			time.Sleep(time.Millisecond) // a slow reader: the queue fills
		}
	}()
	time.Sleep(50 * time.Millisecond) // the Receive waits, holding the read role
	msg := make([]byte, 100)
	for i := range n {
		msg[0] = byte(i)
		if err := sc.TrySend(1, msg, false); err != nil {
			t.Fatal(err)
		}
	}
	k := <-got
	t.Logf("received %d of %d, DroppedUnread %d, pauses %d", k, n, c.DroppedUnread(), c.Pauses())
	if d := c.DroppedUnread(); d > c.Pauses() {
		t.Errorf("%d unreliable messages dropped in %d pauses: more than one a pause", d, c.Pauses())
	}
}
