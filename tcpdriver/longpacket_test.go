package tcpdriver

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/driver"
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
	tr, l, maxPacket := longPacketServer(t, 3, 0)
	until := tr.until(t)
	// almost sends all of a packet of the largest size but its last byte.
	almost := func() net.Conn {
		t.Helper()
		return sendRaw(t, tr, frame.AppendHeader(nil, maxPacket), maxPacket-1)
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

// longPacketServer starts a server's transport whose engine takes
// messages of up to 100,000 bytes, with a LongPacketMemory of packets
// of the largest size (maxPacket), or of memory bytes if packets is 0.
// Its connections have a minute to complete their handshake.
func longPacketServer(t *testing.T, packets, memory int) (tr *transport, l *driver.Listener, maxPacket int) {
	t.Helper()
	cfg := Config{HandshakeTimeout: time.Minute}
	cfg.Engine.Role = fastnet.Server
	cfg.Engine.MaxMessageSize = 100_000
	e, err := newEngine(cfg)
	if err != nil {
		t.Fatal(err)
	}
	maxPacket = e.Config().MaxPacketSize
	cfg.LongPacketMemory = memory
	if packets > 0 {
		cfg.LongPacketMemory = packets * maxPacket
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tr = newTransport(e, cfg)
	tr.ln = ln
	l = e.NewListener(ln.Addr())
	e.Start(tr)
	e.Go(tr.acceptLoop)
	t.Cleanup(func() { l.Close() })
	return tr, l, maxPacket
}

// until returns a function that waits up to 10 s for a condition on tr.
func (tr *transport) until(t *testing.T) func(what string, cond func() bool) {
	return func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); {
			if time.Now().After(deadline) {
				t.Fatalf("no %s within 10 s: %d bytes held, %d refused", what, tr.long.Used(), tr.longPacketsRefused.Load())
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// sendRaw connects to tr's listener from a plain socket and writes head
// and n bytes more.
func sendRaw(t *testing.T, tr *transport, head []byte, n int) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", tr.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	if _, err := nc.Write(append(head, make([]byte, n)...)); err != nil {
		t.Fatal(err)
	}
	return nc
}

// TestLongPacketMemoryPaused: a connection whose reading is paused lets
// go of the buffer of the long packet it read last while it waits (N140).
// It kept it, counted, for as long as its application took to catch up
// with Receive, and others' long packets were refused meanwhile:
// legitimate connections were closed and their messages lost.
func TestLongPacketMemoryPaused(t *testing.T) {
	tr, _, maxPacket := longPacketServer(t, 2, 0)
	until := tr.until(t)
	// The first peer's connection is paused, then gets a whole packet
	// of the largest size: it is read, and the reader waits.
	nc, err := net.Dial("tcp", tr.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	lap := nc.LocalAddr().(*net.TCPAddr).AddrPort()
	remote := netip.AddrPortFrom(lap.Addr().Unmap(), lap.Port())
	until("the connection", func() bool { return tr.conn(remote) != nil })
	tr.PauseRead(remote, true)
	read := make(chan struct{}, 1)
	hook := func(c *tcpConn) {
		if c.remote == remote {
			select {
			case read <- struct{}{}:
			default:
			}
		}
	}
	testHookInput.Store(&hook)
	t.Cleanup(func() { testHookInput.Store(nil) })
	if _, err := nc.Write(append(frame.AppendHeader(nil, maxPacket), make([]byte, maxPacket)...)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-read:
	case <-time.After(10 * time.Second):
		t.Fatal("the paused connection's packet was not read")
	}
	until("the paused connection's buffer given back", func() bool { return tr.long.Used() == 0 })
	// Two others each hold a packet of the largest size, all but a
	// byte: the budget has room for both.
	for i := 1; i <= 2; i++ {
		sendRaw(t, tr, frame.AppendHeader(nil, maxPacket), maxPacket-1)
		until("long packet held", func() bool { return tr.long.Used() == i*maxPacket })
	}
	if got := tr.longPacketsRefused.Load(); got != 0 {
		t.Errorf("%d connections refused", got)
	}
}

// TestLongPacketMemoryConfig: the budget is Engine.EndpointReceiveMemory
// by default, and never below one packet of the largest size.
func TestLongPacketMemoryConfig(t *testing.T) {
	for _, tt := range []struct {
		memory int
		want   func(ec fastnet.Config) int
	}{
		{0, func(ec fastnet.Config) int { return ec.EndpointReceiveMemory }},
		{1, func(ec fastnet.Config) int { return ec.MaxPacketSize }},
		{5_000_000, func(fastnet.Config) int { return 5_000_000 }},
	} {
		tr, _, _ := longPacketServer(t, 0, tt.memory)
		if got, want := tr.long.Limit(), tt.want(tr.e.Config()); got != want {
			t.Errorf("LongPacketMemory %d: a budget of %d, want %d", tt.memory, got, want)
		}
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
