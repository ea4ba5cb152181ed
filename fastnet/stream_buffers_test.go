package fastnet

import "testing"

// A Stream connection encodes each message in a recycled buffer of its
// size class, and keeps at most streamKeep bytes of free ones (N107). An
// application that sends bursts of large messages mixed with small ones,
// within SendQueueSize, finds its queue holding buffers within twice what
// SendQueueSize counts, and an idle connection keeping no more than a
// Datagram connection's senders do (256 KiB). Before, a small message
// could sit in a freed 64 KiB buffer: 4 MiB of buffers for 1 MiB
// counted, and 4 MiB kept by each idle connection.
func TestStreamBuffersBounded(t *testing.T) {
	stream := Config{Transport: Stream}
	p := newPair(t, stream, stream)
	p.keep = false
	big := make([]byte, 60000)
	tiny := []byte{1}
	c := p.cli.conns[p.ch]
	maxQueued, maxHeld := 0, 0
	for round := range 4 {
		// round tiny messages, in the big buffers freed before, then 16
		// large ones: at most about 960 KB queued, within SendQueueSize.
		for range 16 * round {
			if err := p.cli.Send(p.now, p.ch, 1, tiny, true); err != nil {
				t.Fatal(err)
			}
		}
		for range 16 {
			if err := p.cli.Send(p.now, p.ch, 1, big, true); err != nil {
				t.Fatal(err)
			}
		}
		held := 0
		for i := range c.stream.q.Len() {
			held += cap(c.stream.q.At(i).enc)
		}
		maxQueued, maxHeld = max(maxQueued, c.queued+c.stream.bytes), max(maxHeld, held)
		p.flush()
	}
	p.advance(10 * 1e9) // idle
	if c.stream.bytes != 0 || !c.stream.empty() {
		t.Fatalf("still %d bytes queued", c.stream.bytes)
	}
	free := c.stream.bufs.Retained // the pool's own count, tested in channel
	t.Logf("queue counted at most %d bytes while its buffers held %d; idle, free buffers keep %d bytes", maxQueued, maxHeld, free)
	if maxHeld > 2*p.cli.cfg.SendQueueSize {
		t.Errorf("the send queue held %d bytes of buffers while it counted %d (SendQueueSize %d)", maxHeld, maxQueued, p.cli.cfg.SendQueueSize)
	}
	if free > 256<<10 {
		t.Errorf("an idle Stream connection keeps %d bytes of free message buffers", free)
	}
}
