package tcpdriver

import (
	"net"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/internal/frame"
)

// TestLongPacketMemory: what a server's connections hold for long
// packets is bounded for all of them together (N140). Peers that each
// send all of a packet of the largest size but its last byte, and
// nothing more, held that much each for as long as they liked, none of
// it counted: the default MaxConnections of them, 1 GiB. Here three
// fit the bound, the fourth is closed and counted, and a connection
// that ends gives back what it held.
func TestLongPacketMemory(t *testing.T) {
	cfg := Config{}
	cfg.Engine.Role = fastnet.Server
	cfg.Engine.MaxMessageSize = 100_000
	e, err := newEngine(cfg)
	if err != nil {
		t.Fatal(err)
	}
	maxPacket := e.Config().MaxPacketSize
	cfg.LongPacketMemory = 3 * maxPacket
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tr := newTransport(e, cfg)
	tr.ln = ln
	l := e.NewListener(ln.Addr())
	e.Start(tr)
	e.Go(tr.acceptLoop)
	t.Cleanup(func() { l.Close() })

	until := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); {
			if time.Now().After(deadline) {
				t.Fatalf("no %s within 10 s: %d bytes held, %d refused", what, tr.long.Used(), tr.longPacketsRefused.Load())
			}
			time.Sleep(time.Millisecond)
		}
	}
	// almost sends all of a packet of the largest size but its last byte.
	almost := func() net.Conn {
		t.Helper()
		nc, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		b := frame.AppendHeader(nil, maxPacket)
		if _, err := nc.Write(append(b, make([]byte, maxPacket-1)...)); err != nil {
			t.Fatal(err)
		}
		return nc
	}
	var held []net.Conn
	for i := 1; i <= 3; i++ {
		held = append(held, almost())
		until("long packet held", func() bool { return tr.long.Used() == i*maxPacket })
	}
	over := almost()
	until("refusal", func() bool { return tr.longPacketsRefused.Load() == 1 })
	over.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := over.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Errorf("the connection past the bound: read %v, want it closed", err)
	}
	if got := tr.long.Used(); got != 3*maxPacket {
		t.Errorf("%d bytes held after the refusal, want %d", got, 3*maxPacket)
	}
	// One ends: its memory goes back, and another takes it.
	held[0].Close()
	until("memory given back", func() bool { return tr.long.Used() == 2*maxPacket })
	held[0] = almost()
	until("long packet held again", func() bool { return tr.long.Used() == 3*maxPacket })
	if got := l.DriverStats().LongPacketsRefused; got != 1 {
		t.Errorf("DriverStats.LongPacketsRefused = %d, want 1", got)
	}
	for _, nc := range held {
		nc.Close()
	}
	until("all memory given back", func() bool { return tr.long.Used() == 0 })
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
