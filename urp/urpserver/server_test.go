package urpserver_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/urp"
	"github.com/fastnet-engine/fastnet/urp/internal/urptest"
	"github.com/fastnet-engine/fastnet/urp/urpclient"
	"github.com/fastnet-engine/fastnet/urp/urpserver"
)

// start starts a relay on loopback, closed at the end of the test.
var start = urptest.Relay

func testCtx(t testing.TB) context.Context { return urptest.Context(t, 30*time.Second) }

// dial connects a client to s, closed at the end of the test.
func dial(t testing.TB, s *urpserver.Server) *urpclient.Conn {
	t.Helper()
	c, err := urpclient.Dial(testCtx(t), s.Addr().String(), urpclient.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Abort() })
	return c
}

// group makes a group with n members.
func group(t testing.TB, s *urpserver.Server, n int) (*urpclient.Conn, []*urpclient.Conn) {
	t.Helper()
	ctx := testCtx(t)
	h := dial(t, s)
	gid, err := h.Make(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ms []*urpclient.Conn
	for range n {
		m := dial(t, s)
		if err := m.Join(ctx, gid, 0); err != nil {
			t.Fatal(err)
		}
		expect(t, h, urp.ClientEvent{Kind: urp.GotJoined, UID: m.UID()})
		ms = append(ms, m)
	}
	return h, ms
}

// expect receives the next event of c and checks it.
func expect(t testing.TB, c *urpclient.Conn, want urp.ClientEvent) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ev, err := c.Receive(ctx)
	if err != nil {
		t.Fatalf("user %d: %v, want %v", c.UID(), err, want.Kind)
	}
	if ev.Kind != want.Kind || ev.UID != want.UID || string(ev.Data) != string(want.Data) ||
		ev.Key != want.Key || ev.Value != want.Value || ev.Role != want.Role || ev.GID != want.GID {
		t.Fatalf("user %d got %+v, want %+v", c.UID(), ev, want)
	}
}

// quiet checks that c receives nothing for a moment: the relay handles a
// user's packets in order, so a marker broadcast after the packet that
// should have no effect reaches c first if nothing else was sent to it.
func quiet(t testing.TB, marker *urpclient.Conn, cs ...*urpclient.Conn) {
	t.Helper()
	if err := marker.Broadcast(testCtx(t), 0, []byte("marker")); err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		expect(t, c, urp.ClientEvent{Kind: urp.GotText, UID: marker.UID(), Data: []byte("marker")})
	}
}

func text(from *urpclient.Conn, s string) urp.ClientEvent {
	return urp.ClientEvent{Kind: urp.GotText, UID: from.UID(), Data: []byte(s)}
}

func TestWelcome(t *testing.T) {
	s := start(t, urpserver.Config{Relay: urp.Config{Brand: "test-brand"}})
	seen := map[uint32]bool{}
	for range 20 {
		c := dial(t, s)
		if v, r := c.Version(); v != 1 || r != 0 || c.Brand() != "test-brand" || c.Role() != urp.Connected {
			t.Errorf("version %d.%d, brand %q, role %v", v, r, c.Brand(), c.Role())
		}
		if c.UID() == 0 || seen[c.UID()] {
			t.Errorf("UID %d", c.UID())
		}
		seen[c.UID()] = true
	}
}

// TestMakeJoinQuit goes through the roles over TCP: make, join, every
// failed join, quit, and a host that quits.
func TestMakeJoinQuit(t *testing.T) {
	s := start(t, urpserver.Config{Relay: urp.Config{MaxGroups: 1}})
	ctx := testCtx(t)
	h, ms := group(t, s, 1)
	gid := h.GID()
	if h.Role() != urp.Host || ms[0].Role() != urp.Member || ms[0].GID() != gid {
		t.Fatalf("roles %v %v", h.Role(), ms[0].Role())
	}
	if _, err := h.Set(ctx, urp.Respond, urp.KeyGroupPass, 42); err != nil {
		t.Fatal(err)
	}
	other := dial(t, s)
	tests := []struct {
		name   string
		do     func() error
		status urp.Status
	}{
		{"wrong password", func() error { return other.Join(ctx, gid, 41) }, urp.StatPass},
		{"no such group", func() error { return other.Join(ctx, gid+1, 42) }, urp.StatPass},
		{"a second group", func() error { _, err := other.Make(ctx); return err }, urp.StatLimit},
	}
	for _, tt := range tests {
		err := tt.do()
		var me *urpclient.MadeError
		if !errors.As(err, &me) || me.Status != tt.status || !errors.Is(err, urpclient.ErrRefused) {
			t.Errorf("%s: %v, want status %v", tt.name, err, tt.status)
		}
	}
	if _, err := h.Set(ctx, urp.Respond, urp.KeyGroupFlags, urp.FlagLock); err != nil {
		t.Fatal(err)
	}
	if err := other.Join(ctx, gid, 42); err == nil || err.(*urpclient.MadeError).Status != urp.StatLock {
		t.Errorf("locked: %v", err)
	}
	if _, err := h.Set(ctx, urp.Respond, urp.KeyGroupFlags, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Set(ctx, urp.Respond, urp.KeyGroupMax, 2); err != nil {
		t.Fatal(err)
	}
	if err := other.Join(ctx, gid, 42); err == nil || err.(*urpclient.MadeError).Status != urp.StatFull {
		t.Errorf("full: %v", err)
	}
	if err := ms[0].Quit(ctx); err != nil || ms[0].Role() != urp.Connected {
		t.Fatalf("quit: %v, %v", err, ms[0].Role())
	}
	expect(t, h, urp.ClientEvent{Kind: urp.GotLeft, UID: ms[0].UID()})
	if err := other.Join(ctx, gid, 42); err != nil {
		t.Fatal(err)
	}
	expect(t, h, urp.ClientEvent{Kind: urp.GotJoined, UID: other.UID()})
	if err := h.Quit(ctx); err != nil {
		t.Fatal(err)
	}
	expect(t, other, urp.ClientEvent{Kind: urp.GotRole, Role: urp.Connected, GID: gid})
	if _, ok := s.Group(gid); ok {
		t.Error("the group is still open")
	}
	if _, err := ms[0].Make(ctx); err != nil {
		t.Errorf("make after the group closed: %v", err)
	}
}

// TestMessages checks broadcast and send with every flag, over TCP (U7).
func TestMessages(t *testing.T) {
	s := start(t, urpserver.Config{})
	ctx := testCtx(t)
	h, ms := group(t, s, 2)
	a, b := ms[0], ms[1]
	all := []*urpclient.Conn{h, a, b}

	a.Broadcast(ctx, 0, []byte("to all"))
	for _, c := range all {
		expect(t, c, text(a, "to all"))
	}
	a.Broadcast(ctx, a.UID(), []byte("to others"))
	expect(t, h, text(a, "to others"))
	expect(t, b, text(a, "to others"))
	a.Send(ctx, b.UID(), []byte("p2p"))
	expect(t, b, text(a, "p2p"))
	quiet(t, h, all...)

	for _, flags := range []uint32{urp.FlagNoBrod, urp.FlagNoSend, urp.FlagNoP2P} {
		if _, err := h.Set(ctx, urp.Notify|urp.Respond, urp.KeyGroupFlags, flags); err != nil {
			t.Fatal(err)
		}
		expect(t, a, urp.ClientEvent{Kind: urp.GotValue, Key: urp.KeyGroupFlags, Value: flags})
		expect(t, b, urp.ClientEvent{Kind: urp.GotValue, Key: urp.KeyGroupFlags, Value: flags})
		a.Broadcast(ctx, 0, []byte("b"))
		a.Send(ctx, b.UID(), []byte("m"))
		a.Send(ctx, h.UID(), []byte("h"))
		switch flags {
		case urp.FlagNoBrod:
			expect(t, b, text(a, "m"))
			expect(t, h, text(a, "h"))
		case urp.FlagNoSend:
			for _, c := range all {
				expect(t, c, text(a, "b"))
			}
		case urp.FlagNoP2P:
			for _, c := range all {
				expect(t, c, text(a, "b"))
			}
			expect(t, h, text(a, "h"))
		}
		// The host is never restricted.
		h.Broadcast(ctx, h.UID(), []byte("host"))
		expect(t, a, text(h, "host"))
		expect(t, b, text(h, "host"))
	}
	if st := s.Stats(); st.Ignored.Flags != 4 {
		t.Errorf("ignored %+v", st.Ignored)
	}
}

// TestSettings checks U2R_SETS and U2R_GETS over TCP (U8, U16, U19).
func TestSettings(t *testing.T) {
	s := start(t, urpserver.Config{Relay: urp.Config{MaxGroupSize: 33}})
	ctx := testCtx(t)
	h, ms := group(t, s, 1)
	m := ms[0]
	for _, k := range []urp.Key{urp.KeyGroupPass, urp.KeyGroupFlags, urp.KeyGroupMax} {
		v, err := h.Set(ctx, urp.Respond, k, uint32(k)*100)
		if err != nil || v != uint32(k)*100 {
			t.Errorf("set %v: %d, %v", k, v, err)
		}
		if v, err := m.Get(ctx, k); err != nil || v != uint32(k)*100 {
			t.Errorf("get %v: %d, %v", k, v, err)
		}
	}
	if _, err := h.Set(ctx, urp.Notify, urp.KeyGroupPass, 7); err != nil {
		t.Fatal(err)
	}
	expect(t, m, urp.ClientEvent{Kind: urp.GotValue, Key: urp.KeyGroupPass, Value: 7})
	if _, err := m.Set(ctx, urp.Respond, urp.KeyGroupPass, 1); !errors.Is(err, urp.ErrRole) {
		t.Errorf("set by a member: %v", err)
	}
	if _, err := m.Get(ctx, 9); !errors.Is(err, urp.ErrUnknownKey) {
		t.Errorf("unknown key: %v", err)
	}
	// Many gets in flight, answered in order.
	errs := make(chan error, 50)
	for range 50 {
		go func() {
			v, err := m.Get(ctx, urp.KeyGroupPass)
			if err == nil && v != 7 {
				err = errors.New("wrong value")
			}
			errs <- err
		}()
	}
	for range 50 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestKick: a kicked member is told, and the host hears it left; a host
// that kicks itself quits (U17).
func TestKick(t *testing.T) {
	s := start(t, urpserver.Config{})
	ctx := testCtx(t)
	h, ms := group(t, s, 2)
	gid := h.GID()
	if err := h.Kick(ctx, ms[0].UID()); err != nil {
		t.Fatal(err)
	}
	expect(t, ms[0], urp.ClientEvent{Kind: urp.GotRole, Role: urp.Connected, GID: gid})
	expect(t, h, urp.ClientEvent{Kind: urp.GotLeft, UID: ms[0].UID()})
	if err := h.Kick(ctx, ms[0].UID()); !errors.Is(err, urp.ErrNotMember) {
		t.Errorf("a second kick: %v", err)
	}
	if err := h.Kick(ctx, h.UID()); err != nil || h.Role() != urp.Connected {
		t.Fatalf("the host kicks itself: %v, %v", err, h.Role())
	}
	expect(t, ms[1], urp.ClientEvent{Kind: urp.GotRole, Role: urp.Connected, GID: gid})
}

// TestGetGivenUp: a Get the relay ignores because the user was kicked
// first fails with ErrLeft instead of waiting forever (U19).
func TestGetGivenUp(t *testing.T) {
	s := start(t, urpserver.Config{})
	ctx := testCtx(t)
	h, ms := group(t, s, 1)
	for range 20 {
		done := make(chan error, 1)
		go func() {
			_, err := ms[0].Get(ctx, urp.KeyGroupMax)
			done <- err
		}()
		h.Kick(ctx, ms[0].UID())
		// Answered before the kick, given up after it, or refused by
		// the client that already knows it was kicked.
		if err := <-done; err != nil && !errors.Is(err, urpclient.ErrLeft) && !errors.Is(err, urp.ErrRole) {
			t.Fatalf("get: %v", err)
		}
		expect(t, h, urp.ClientEvent{Kind: urp.GotLeft, UID: ms[0].UID()})
		for {
			ev, err := ms[0].Receive(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if ev.Kind == urp.GotRole {
				break
			}
		}
		if err := ms[0].Join(ctx, h.GID(), 0); err != nil {
			t.Fatal(err)
		}
		expect(t, h, urp.ClientEvent{Kind: urp.GotJoined, UID: ms[0].UID()})
	}
}

// TestDisconnects: a member that goes away leaves; a host that goes away
// closes its group.
func TestDisconnects(t *testing.T) {
	events := make(chan urpserver.Event, 100)
	s := start(t, urpserver.Config{Events: events})
	h, ms := group(t, s, 2)
	gid := h.GID()
	ms[0].Abort()
	expect(t, h, urp.ClientEvent{Kind: urp.GotLeft, UID: ms[0].UID()})
	h.Close()
	expect(t, ms[1], urp.ClientEvent{Kind: urp.GotRole, Role: urp.Connected, GID: gid})
	var kinds []urp.EventKind
	for len(events) > 0 {
		ev := <-events
		kinds = append(kinds, ev.Kind)
		if (ev.Kind == urp.EventConnected || ev.Kind == urp.EventDisconnected) && !ev.Addr.IsValid() {
			t.Errorf("%v without an address", ev.Kind)
		}
	}
	want := []urp.EventKind{
		urp.EventConnected, urp.EventMade, urp.EventConnected, urp.EventJoined, urp.EventConnected, urp.EventJoined,
		urp.EventLeft, urp.EventDisconnected, urp.EventDisbanded, urp.EventDisconnected,
	}
	if len(kinds) != len(want) {
		t.Fatalf("events %v, want %v", kinds, want)
	}
	for i := range want {
		if kinds[i] != want[i] {
			t.Fatalf("events %v, want %v", kinds, want)
		}
	}
}

// TestServerClose: closing the relay ends every client's connection.
func TestServerClose(t *testing.T) {
	s, err := urpserver.Listen(context.Background(), "127.0.0.1:0", urpserver.Config{})
	if err != nil {
		t.Fatal(err)
	}
	h, ms := group(t, s, 3)
	s.Close()
	for _, c := range append(ms, h) {
		select {
		case <-c.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("a client still connected")
		}
		if _, err := c.Receive(context.Background()); err == nil {
			t.Error("Receive after the relay closed")
		}
	}
	if _, err := net.Dial("tcp", s.Addr().String()); err == nil {
		t.Error("the relay still accepts")
	}
}

func TestConfig(t *testing.T) {
	for _, cfg := range []urpserver.Config{
		{Relay: urp.Config{MaxUsers: -1}},
		{ReadBuffer: 100},
		{Relay: urp.Config{Brand: string(make([]byte, 65))}},
	} {
		if _, err := urpserver.Listen(context.Background(), "127.0.0.1:0", cfg); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
	if _, err := urpserver.Listen(context.Background(), "127.0.0.1:99999", urpserver.Config{}); err == nil {
		t.Error("a bad port accepted")
	}
	s := start(t, urpserver.Config{Relay: urp.Config{MaxUsers: 7}})
	if s.Config().MaxUsers != 7 || s.Config().MaxGroups != 7 {
		t.Errorf("config %+v", s.Config())
	}
}
