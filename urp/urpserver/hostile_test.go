package urpserver_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/urp"
	"github.com/fastnet-engine/fastnet/urp/urpclient"
	"github.com/fastnet-engine/fastnet/urp/urpserver"
)

// raw is a user speaking URP from a plain socket, byte by byte.
type raw struct {
	t   testing.TB
	nc  net.Conn
	dec *urp.Decoder
	buf []byte
	uid uint32
}

// dialRaw connects to s and reads the welcome.
func dialRaw(t testing.TB, s *urpserver.Server) *raw {
	t.Helper()
	nc, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	return welcomed(t, nc)
}

// welcomed is a raw user of connection nc, once it has read the welcome.
func welcomed(t testing.TB, nc net.Conn) *raw {
	t.Helper()
	t.Cleanup(func() { nc.Close() })
	r := &raw{t: t, nc: nc, dec: urp.NewDecoder(urp.ToUser, 1<<21), buf: make([]byte, 4096)}
	w := r.next()
	if w.ID != urp.R2UWelc || r.next().ID != urp.R2UStat {
		t.Fatalf("welcome %v", w)
	}
	r.uid = w.UID
	return r
}

func (r *raw) write(b []byte) {
	r.t.Helper()
	if _, err := r.nc.Write(b); err != nil {
		r.t.Fatal(err)
	}
}

func (r *raw) send(ps ...urp.Packet) {
	r.t.Helper()
	var b []byte
	for _, p := range ps {
		b = urp.Append(b, p)
	}
	r.write(b)
}

// next reads the next packet, its data copied.
func (r *raw) next() urp.Packet {
	r.t.Helper()
	r.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		p, ok, err := r.dec.Next()
		if err != nil {
			r.t.Fatal(err)
		}
		if ok {
			p.Data = bytes.Clone(p.Data)
			return p
		}
		n, err := r.nc.Read(r.buf)
		if err != nil {
			r.t.Fatalf("reading: %v", err)
		}
		r.dec.Feed(r.buf[:n])
	}
}

// closedByRelay reads until the relay closes the connection.
func (r *raw) closedByRelay() bool {
	r.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := io.Copy(io.Discard, r.nc)
	return err == nil // EOF, or a reset reads as an error
}

// dialSlow connects a user with a small socket buffer that never reads,
// a member of h's group.
func dialSlow(t testing.TB, s *urpserver.Server, h *urpclient.Conn) *raw {
	t.Helper()
	r := dialRaw(t, s)
	if tc, ok := r.nc.(*net.TCPConn); ok {
		tc.SetReadBuffer(4096)
	}
	r.join(h)
	return r
}

// join makes r a member of h's group.
func (r *raw) join(h *urpclient.Conn) {
	r.t.Helper()
	r.send(urp.Packet{ID: urp.U2RJoin, GID: h.GID()})
	if p := r.next(); p.ID != urp.R2UMade || p.Status != urp.StatJoin {
		r.t.Fatalf("join: %+v", p)
	}
	r.next() // R2U_STAT
	expect(r.t, h, urp.ClientEvent{Kind: urp.GotJoined, UID: r.uid})
}

// TestHostileInput: bytes that break the protocol close the user who sent
// them, and nobody else (U5, U6).
func TestHostileInput(t *testing.T) {
	tests := []struct {
		name  string
		bytes []byte
		count func(urp.Stats) uint64
	}{
		{"unknown id", []byte{0x99, 1, 2, 3}, func(s urp.Stats) uint64 { return s.UnknownPacket }},
		{"a relay's packet", urp.Append(nil, urp.Packet{ID: urp.R2UText, Data: []byte("x")}), func(s urp.Stats) uint64 { return s.UnknownPacket }},
		{"good, then garbage", append(urp.Append(nil, urp.Packet{ID: urp.U2RGets, Key: 1}), 0xff), func(s urp.Stats) uint64 { return s.UnknownPacket }},
		{"a message above the limit", urp.Append(nil, urp.Packet{ID: urp.U2RBrod, Data: make([]byte, 1025)}), func(s urp.Stats) uint64 { return s.TooLong }},
		{"4 GiB announced", []byte{0x84, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}, func(s urp.Stats) uint64 { return s.TooLong }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			events := make(chan urpserver.Event, 100)
			s := start(t, urpserver.Config{Relay: urp.Config{MaxMessage: 1024}, Events: events})
			h, ms := group(t, s, 1)
			bad := dialRaw(t, s)
			bad.join(h)
			bad.write(tt.bytes)
			if !bad.closedByRelay() {
				t.Error("the relay did not close the connection")
			}
			expect(t, h, urp.ClientEvent{Kind: urp.GotLeft, UID: bad.uid})
			ctx := testCtx(t)
			ms[0].Broadcast(ctx, 0, []byte("fine"))
			expect(t, h, text(ms[0], "fine"))
			expect(t, ms[0], text(ms[0], "fine"))
			if n := tt.count(s.Stats().Stats); n != 1 {
				t.Errorf("counted %d", n)
			}
			for ev := range events {
				if ev.Kind == urp.EventDisconnected {
					if ev.UID != bad.uid || ev.Err == nil {
						t.Errorf("event %+v", ev)
					}
					break
				}
			}
		})
	}
}

// TestGarbageStorm: many connections sending random bytes while a group
// exchanges messages; the group loses nothing, and the relay ends up with
// only the group's users.
func TestGarbageStorm(t *testing.T) {
	s := start(t, urpserver.Config{Relay: urp.Config{MaxMessage: 4096}})
	ctx := testCtx(t)
	h, ms := group(t, s, 2)
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			nc, err := net.Dial("tcp", s.Addr().String())
			if err != nil {
				return
			}
			defer nc.Close()
			rng := rand.New(rand.NewPCG(uint64(i), 1))
			b := make([]byte, 2000)
			for range 20 {
				for j := range b {
					b[j] = byte(rng.Uint32())
				}
				if _, err := nc.Write(b); err != nil {
					return
				}
			}
			io.Copy(io.Discard, nc)
		})
	}
	for i := range 200 {
		ms[0].Send(ctx, ms[1].UID(), []byte{byte(i)})
	}
	for i := range 200 {
		expect(t, ms[1], urp.ClientEvent{Kind: urp.GotText, UID: ms[0].UID(), Data: []byte{byte(i)}})
	}
	wg.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for s.Stats().Users != 3 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if st := s.Stats(); st.Users != 3 || st.Groups != 1 {
		t.Errorf("stats %+v", st)
	}
	quiet(t, h, h, ms[0], ms[1])
}

// TestRelayFull: a connection beyond MaxUsers is closed before any
// welcome (U13).
func TestRelayFull(t *testing.T) {
	events := make(chan urpserver.Event, 10)
	s := start(t, urpserver.Config{Relay: urp.Config{MaxUsers: 2}, Events: events})
	dial(t, s)
	dial(t, s)
	nc, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := nc.Read(make([]byte, 10)); n != 0 || err == nil {
		t.Errorf("read %d bytes, %v", n, err)
	}
	_, err = urpclient.Dial(testCtx(t), s.Addr().String(), urpclient.Config{})
	if !errors.Is(err, urpclient.ErrNoWelcome) {
		t.Errorf("a third client: %v", err)
	}
	if st := s.Stats(); st.Refused != 2 || st.Users != 2 {
		t.Errorf("stats %+v", st)
	}
	for ev := range events {
		if ev.Kind == urp.EventRefused {
			if !ev.Addr.IsValid() || ev.Err != urp.ErrRelayFull {
				t.Errorf("event %+v", ev)
			}
			break
		}
	}
}

// TestSlowReader: with holds off (HighWater = MaxOutput), a member that
// does not read is closed when its output reaches MaxOutput, and the rest
// of the group gets everything (U11).
func TestSlowReader(t *testing.T) {
	events := make(chan urpserver.Event, 100)
	s := start(t, urpserver.Config{Relay: urp.Config{MaxMessage: 16 << 10, MaxOutput: 64 << 10, HighWater: 64 << 10}, Events: events, WriteTimeout: -1})
	ctx := testCtx(t)
	h, ms := group(t, s, 1)
	slow := dialSlow(t, s, h)
	msg := make([]byte, 16<<10)
	sent := 0
	for ; sent < 10000; sent++ {
		// In lockstep with the member that reads: only the slow one
		// lets output pile up.
		if err := h.Broadcast(ctx, h.UID(), msg); err != nil {
			t.Fatal(err)
		}
		if ev, err := ms[0].Receive(ctx); err != nil || ev.Kind != urp.GotText {
			t.Fatalf("the reader: %v, %v", ev.Kind, err)
		}
		if st := s.Stats(); st.Overflow > 0 {
			break
		}
	}
	expect(t, h, urp.ClientEvent{Kind: urp.GotLeft, UID: slow.uid})
	if st := s.Stats(); st.Overflow != 1 || st.Users != 2 {
		t.Errorf("stats %+v", st)
	}
	for ev := range events {
		if ev.Kind == urp.EventDisconnected {
			if ev.UID != slow.uid || ev.Err != urp.ErrOutputFull {
				t.Errorf("event %+v", ev)
			}
			break
		}
	}
}

// TestSlowReaderHolds: a member that reads slowly holds its group to its
// pace, and neither it nor anyone else loses anything (U11).
func TestSlowReaderHolds(t *testing.T) {
	s := start(t, urpserver.Config{Relay: urp.Config{MaxMessage: 16 << 10, MaxOutput: 256 << 10}, WriteTimeout: 5 * time.Second})
	ctx := testCtx(t)
	h, ms := group(t, s, 2)
	fast, slow := ms[0], ms[1]
	const n = 400 // 6.4 MB, many times the limit
	sent := make(chan error, 1)
	go func() {
		msg := make([]byte, 16<<10)
		for i := range n {
			msg[0] = byte(i)
			if err := h.Broadcast(ctx, h.UID(), msg); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	read := func(c *urpclient.Conn, pause time.Duration) error {
		for i := range n {
			time.Sleep(pause)
			ev, err := c.Receive(ctx)
			if err != nil {
				return err
			}
			if ev.Kind != urp.GotText || ev.Data[0] != byte(i) {
				return fmt.Errorf("message %d: %v %d", i, ev.Kind, ev.Data[0])
			}
		}
		return nil
	}
	fastDone := make(chan error, 1)
	go func() { fastDone <- read(fast, 0) }()
	start := time.Now()
	if err := read(slow, 500*time.Microsecond); err != nil {
		t.Fatalf("the slow reader: %v", err)
	}
	if err := <-fastDone; err != nil {
		t.Fatalf("the fast reader: %v", err)
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Overflow != 0 || st.WriteTimeouts != 0 || st.Users != 3 {
		t.Errorf("stats %+v", st)
	}
	t.Logf("%d messages of 16 KiB in %v", n, time.Since(start))
}

// TestStalledWriter: a user whose socket takes nothing for WriteTimeout is
// closed, before its output reaches the limit.
func TestStalledWriter(t *testing.T) {
	s := start(t, urpserver.Config{Relay: urp.Config{MaxMessage: 64 << 10, MaxOutput: 64 << 20}, WriteTimeout: 200 * time.Millisecond})
	ctx := testCtx(t)
	h, _ := group(t, s, 0)
	slow := dialSlow(t, s, h)
	left := make(chan struct{})
	go func() {
		defer close(left)
		for {
			ev, err := h.Receive(ctx)
			if err != nil || ev.Kind == urp.GotLeft {
				return
			}
		}
	}()
	msg := make([]byte, 64<<10)
	for i := 0; i < 500; i++ {
		select {
		case <-left:
			i = 500
			continue
		default:
		}
		h.Send(ctx, slow.uid, msg)
	}
	select {
	case <-left:
	case <-time.After(10 * time.Second):
		t.Fatal("the stalled user was not closed")
	}
	if st := s.Stats(); st.WriteTimeouts != 1 || st.Overflow != 0 {
		t.Errorf("stats %+v", st)
	}
}

// TestVanishingUsers: users that go away mid-packet, before their
// welcome, or without a word leave their groups cleanly.
func TestVanishingUsers(t *testing.T) {
	s := start(t, urpserver.Config{})
	h, ms := group(t, s, 1)
	half := dialRaw(t, s)
	half.join(h)
	half.write([]byte{byte(urp.U2RBrod), 0, 0, 0, 0, 10, 0, 0, 0, 'a', 'b'})
	half.nc.Close()
	expect(t, h, urp.ClientEvent{Kind: urp.GotLeft, UID: half.uid})

	for range 20 {
		nc, err := net.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		nc.Close()
	}
	hostRaw := dialRaw(t, s)
	hostRaw.send(urp.Packet{ID: urp.U2RMake})
	made := hostRaw.next()
	hostRaw.next()
	joiner := dial(t, s)
	if err := joiner.Join(testCtx(t), made.GID, 0); err != nil {
		t.Fatal(err)
	}
	hostRaw.nc.(*net.TCPConn).SetLinger(0)
	hostRaw.nc.Close() // a reset
	expect(t, joiner, urp.ClientEvent{Kind: urp.GotRole, Role: urp.Connected, GID: made.GID})
	deadline := time.Now().Add(5 * time.Second)
	for s.Stats().Users != 3 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if st := s.Stats(); st.Truncated != 1 || st.Users != 3 || st.Groups != 1 {
		t.Errorf("stats %+v", st)
	}
	quiet(t, h, h, ms[0])
	if err := joiner.Err(); err != nil {
		t.Errorf("the joiner: %v", err)
	}
	if errors.Is(context.Canceled, urpclient.ErrLeft) {
		t.Error("unreachable")
	}
}

// TestPacketTimeout: a user that sends part of a packet and none of the
// rest for PacketTimeout is closed, and counted (U23); one that sends
// nothing at all between packets is not, and neither is one whose long
// message comes slowly but keeps coming.
func TestPacketTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	s, err := urpserver.Listen(context.Background(), "127.0.0.1:0", urpserver.Config{PacketTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	host := func() *raw {
		r := dialRaw(t, s)
		r.send(urp.Packet{ID: urp.U2RMake})
		if p := r.next(); p.ID != urp.R2UMade || p.Status != urp.StatMade {
			t.Fatalf("make: %+v", p)
		}
		r.next() // R2U_STAT
		return r
	}
	stuck, idle, slow := host(), host(), host()
	msg := urp.Append(nil, urp.Packet{ID: urp.U2RBrod, Data: make([]byte, 1000)})
	stuck.write(msg[:500])
	// The slow one sends a piece every third of the timeout: over a
	// whole timeout and more, with the message never complete.
	for i := range 6 {
		slow.write(msg[i*10 : i*10+10])
		time.Sleep(timeout / 3)
	}
	if !stuck.closedByRelay() {
		t.Error("the user with a packet left unfinished was not closed")
	}
	if got := s.Stats().PacketTimeouts; got != 1 {
		t.Errorf("PacketTimeouts = %d, want 1", got)
	}
	// The slow one finishes: its broadcast comes back to it.
	slow.write(msg[60:])
	if p := slow.next(); p.ID != urp.R2UText || len(p.Data) != 1000 {
		t.Errorf("the slow user's broadcast: %+v", p)
	}
	idle.send(urp.Packet{ID: urp.U2RGets, Key: urp.KeyGroupMax})
	if p := idle.next(); p.ID != urp.R2UVals {
		t.Errorf("the idle user's answer: %+v", p)
	}
}
