package driver_test

import (
	"context"
	"encoding/binary"
	"sync"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/udpdriver"
)

// TestBacklogSharesReceiveQueue (N152): the connections of a listener's
// backlog, which the application has not accepted, share one
// ReceiveQueue, so that clients sending at once to a server that accepts
// late hold one queue's worth, not one each; once accepted, each
// connection gets every message, in order, from its own queue.
func TestBacklogSharesReceiveQueue(t *testing.T) {
	const (
		queue   = 64 << 10
		clients = 4
		msgs    = 256
		size    = 1 << 10
	)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l, err := udpdriver.Listen(ctx, "127.0.0.1:0", udpdriver.Config{ReceiveQueue: queue})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := range clients {
		c, err := udpdriver.Dial(ctx, l.Addr().String(), udpdriver.Config{})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			for j := range msgs {
				b := make([]byte, size)
				binary.BigEndian.PutUint32(b, uint32(i))
				binary.BigEndian.PutUint32(b[4:], uint32(j))
				if err := c.Send(ctx, 1, b, true); err != nil {
					t.Errorf("client %d, message %d: %v", i, j, err)
					return
				}
			}
			// Until the server has had everything (Close lingers on
			// what is unacknowledged, and the server's queues pause).
			<-ctx.Done()
		}()
	}
	// The backlog fills as far as the shared queue lets it, then holds.
	deadline := time.Now().Add(10 * time.Second)
	most := 0
	for time.Now().Before(deadline) {
		most = max(most, l.BacklogQueued())
		if l.Backlogged() == clients && most >= queue/2 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	for range 50 {
		most = max(most, l.BacklogQueued())
		time.Sleep(5 * time.Millisecond)
	}
	if most > 2*queue {
		t.Errorf("the backlog's %d connections held %d bytes together, with a ReceiveQueue of %d", l.Backlogged(), most, queue)
	}
	if most < queue/2 {
		t.Errorf("the backlog held at most %d bytes: the clients never filled it", most)
	}
	for range clients {
		c, err := l.Accept(ctx)
		if err != nil {
			t.Fatal(err)
		}
		next, client := 0, -1
		for next < msgs {
			m, err := c.Receive(ctx)
			if err != nil {
				t.Fatalf("after %d messages: %v", next, err)
			}
			i, j := int(binary.BigEndian.Uint32(m.Data)), int(binary.BigEndian.Uint32(m.Data[4:]))
			if client < 0 {
				client = i
			}
			if i != client || j != next {
				t.Fatalf("message %d of client %d, want %d of client %d", j, i, next, client)
			}
			next++
		}
	}
	cancel()
}
