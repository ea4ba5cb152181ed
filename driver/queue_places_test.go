package driver_test

import (
	"context"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/udpdriver"
)

// A connection's receive queue counts each message's place in the queue
// with its data (N107): a peer that sends empty messages to a connection
// whose application is behind in Receive, or never calls it (a
// send-only server), fills the queue, and the intake pauses. Before,
// only the data counted: the queue held all 100,000 empty messages and
// never paused.
func TestReceiveQueueCountsPlaces(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const limit = 4096 // ReceiveQueue: the bytes a connection may hold
	l, err := udpdriver.Listen(ctx, "127.0.0.1:0", udpdriver.Config{ReceiveQueue: limit})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := udpdriver.Dial(ctx, l.Addr().String(), udpdriver.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := l.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const sent = 100000
	for range sent {
		if err := c.Send(ctx, 1, nil, true); err != nil {
			t.Fatal(err)
		}
	}
	// Let every message arrive, or the intake pause and stay paused;
	// the server's application has not called Receive yet.
	last := uint64(0)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		n := s.Stats().MessagesDelivered
		if n >= sent || (s.Pauses() > 0 && n == last) {
			break
		}
		last = n
	}
	// What the connection holds unread: every message the endpoint
	// delivered, as nothing was received yet (draining it would resume
	// the intake, and count what came after).
	held := int(s.Stats().MessagesDelivered)
	pauses := s.Pauses()
	t.Logf("ReceiveQueue %d bytes: the server held %d empty messages unread (about %d bytes of queue), pauses %d", limit, held, held*40, pauses)
	// 40 bytes a place: ReceiveQueue holds about limit/40 of them, plus
	// what one read brought before the pause took hold (N13: up to 64
	// datagrams, each with hundreds of empty messages in a bundle), far
	// fewer than were sent.
	if held >= sent/2 || pauses == 0 {
		t.Fatalf("with ReceiveQueue %d bytes, the connection held %d messages unread (%d bytes of queue places) and paused %d times: the queue is not bounded", limit, held, held*40, pauses)
	}
	// Receive resumes the intake: more come than were held.
	for got := 0; got < 3*held; got++ {
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := s.Receive(rctx)
		rcancel()
		if err != nil {
			t.Fatalf("message %d of the %d sent: %v", got, sent, err)
		}
	}
}
