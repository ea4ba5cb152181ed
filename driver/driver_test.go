package driver

import (
	"context"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/internal/udpio"
)

// blockingTransport holds its first WriteBatch until release is closed,
// and records whether Close came while a write was in progress.
type blockingTransport struct {
	mu          sync.Mutex
	writes      int
	writing     bool
	closedEarly bool
	entered     chan struct{}
	release     chan struct{}
}

func (t *blockingTransport) WriteBatch(msgs []udpio.Message) {
	t.mu.Lock()
	t.writes++
	first := t.writes == 1
	t.writing = true
	t.mu.Unlock()
	if first {
		close(t.entered)
		<-t.release
	}
	t.mu.Lock()
	t.writing = false
	t.mu.Unlock()
}

func (t *blockingTransport) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closedEarly = t.closedEarly || t.writing
	return nil
}

// With Options.CombineWrites datagrams are written outside the engine's
// lock. Close must wait for a write in progress before it closes the
// transport: otherwise the last datagrams of a connection (the "disconnect"
// of a graceful close, D18) are lost to a closed socket.
func TestCloseWaitsForWrite(t *testing.T) {
	e, err := NewEngine(fastnet.Config{Role: fastnet.Client}, Options{CombineWrites: true})
	if err != nil {
		t.Fatal(err)
	}
	tr := &blockingTransport{entered: make(chan struct{}), release: make(chan struct{})}
	e.Start(tr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dialed := make(chan error, 1)
	go func() {
		_, err := e.Dial(ctx, netip.MustParseAddrPort("192.0.2.1:7000"))
		dialed <- err
	}()
	<-tr.entered // Dial is writing its first query, outside the lock
	closed := make(chan struct{})
	go func() {
		e.Close()
		close(closed)
	}()
	select {
	case <-closed:
		t.Fatal("Close returned while a write was in progress")
	case <-time.After(50 * time.Millisecond):
	}
	close(tr.release)
	<-closed
	if err := <-dialed; err == nil {
		t.Error("Dial succeeded on a closed engine")
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.closedEarly {
		t.Error("the transport was closed during a write")
	}
}

// A negative ReceiveQueue is refused: the queue could never resume from
// a pause (N13).
func TestNegativeReceiveQueue(t *testing.T) {
	if _, err := NewEngine(fastnet.Config{}, Options{ReceiveQueue: -1}); err == nil {
		t.Fatal("NewEngine accepted ReceiveQueue -1")
	}
}

// ReuseMessageBuffers is refused: the driver's queues keep messages past
// the next datagram, when the endpoint would carve others over them (N103).
func TestReuseMessageBuffersRefused(t *testing.T) {
	if _, err := NewEngine(fastnet.Config{ReuseMessageBuffers: true}, Options{}); err == nil {
		t.Fatal("NewEngine accepted ReuseMessageBuffers")
	}
}

// TestBurst checks which Sends count as part of a burst: one that follows
// another within sendBurst, unless a Receive returned a message between
// them (an answer goes out at once, however short the round trip).
func TestBurst(t *testing.T) {
	const t0 = clock.Epoch + clock.Time(time.Second)
	tests := []struct {
		name     string
		lastSend clock.Time
		answered bool
		now      clock.Time
		want     bool
	}{
		{"first Send", 0, false, t0, false},
		{"right after another", t0, false, t0.Add(sendBurst / 2), true},
		{"long after another", t0, false, t0.Add(2 * sendBurst), false},
		{"answer right after another", t0, true, t0.Add(sendBurst / 2), false},
	}
	for _, tt := range tests {
		e := &Engine{lastSend: tt.lastSend, answered: tt.answered}
		if got := e.burstLocked(tt.now); got != tt.want {
			t.Errorf("%s: burst %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestReceiveAnswers checks that a message returned by Receive makes the
// next Send an answer, not part of a burst, however soon it follows the
// previous Send.
func TestReceiveAnswers(t *testing.T) {
	const t0 = clock.Epoch + clock.Time(time.Second)
	e := &Engine{opts: Options{ReceiveQueue: 1 << 20}, lastSend: t0}
	c := &Conn{e: e, queueBytes: 1}
	c.queue.Push(Message{Channel: 1, Reliable: true, Data: []byte("x")})
	soon := t0.Add(sendBurst / 2)
	if !e.burstLocked(soon) {
		t.Fatal("a Send right after another is not part of a burst")
	}
	if m, err := c.Receive(context.Background()); err != nil || string(m.Data) != "x" {
		t.Fatalf("Receive = %+v, %v", m, err)
	}
	if e.burstLocked(soon) {
		t.Error("a Send right after Receive returned a message counts as part of a burst")
	}
}
