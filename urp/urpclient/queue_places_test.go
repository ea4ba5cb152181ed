package urpclient_test

import (
	"testing"
	"time"
	"unsafe"

	"github.com/fastnet-engine/fastnet/urp"
	"github.com/fastnet-engine/fastnet/urp/urpclient"
	"github.com/fastnet-engine/fastnet/urp/urpserver"
)

// The client's receive queue counts each event's place in the queue with
// its data (N107): a group member that sends empty messages to a client
// whose application is behind in Receive fills the queue, and the client
// stops reading the relay. Before, only the data counted, and all
// 100,000 empty messages were queued.
func TestReceiveQueueCountsPlaces(t *testing.T) {
	addr := relay(t, urpserver.Config{WriteTimeout: -1})
	ctx := ctxFor(t, 20*time.Second)
	h := dial(t, addr, urpclient.Config{})
	gid, err := h.Make(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const limit = 4096
	m := dial(t, addr, urpclient.Config{ReceiveQueue: limit})
	if err := m.Join(ctx, gid, 0); err != nil {
		t.Fatal(err)
	}
	const n = 100000
	for range n {
		if err := h.Send(ctx, m.UID(), nil); err != nil {
			t.Fatal(err)
		}
	}
	for end := time.Now().Add(5 * time.Second); h.Queued() != 0 && time.Now().Before(end); {
		time.Sleep(time.Millisecond)
	}
	// Let the client read what it will: it stops once the queue is
	// full, and the relay keeps the rest.
	held := -1
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); {
		time.Sleep(100 * time.Millisecond)
		q := m.QueuedEvents()
		if q == held || q == n {
			break
		}
		held = q
	}
	held = m.QueuedEvents()
	t.Logf("ReceiveQueue %d bytes: %d events queued unread", limit, held)
	// What fills ReceiveQueue, plus what the read that filled it
	// brought: a whole buffer of 9-byte R2U_TEXT packets at most.
	place := int(unsafe.Sizeof(urp.ClientEvent{}))
	if bound := limit/place + urpclient.ReadBuffer/9 + 1; held > bound {
		t.Errorf("with ReceiveQueue %d bytes the client queued %d events unread, bound %d", limit, held, bound)
	}
	// Every message still comes, once Receive takes them.
	for got := 0; got < n; got++ {
		if _, err := m.Receive(ctx); err != nil {
			t.Fatalf("message %d: %v", got, err)
		}
	}
}
