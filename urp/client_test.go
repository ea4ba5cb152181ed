package urp

import (
	"errors"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// memNet connects Clients to a Relay in memory: flush carries the bytes
// each way until nothing moves.
type memNet struct {
	t       *testing.T
	r       *Relay
	clients map[uint32]*Client // by the relay's UID
}

func newMemNet(t *testing.T, cfg Config) *memNet {
	t.Helper()
	r, err := NewRelay(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &memNet{t: t, r: r, clients: map[uint32]*Client{}}
}

// add connects a client and returns it welcomed.
func (n *memNet) add() *Client {
	n.t.Helper()
	uid, err := n.r.Connect()
	if err != nil {
		n.t.Fatal(err)
	}
	c, err := NewClient(ClientConfig{})
	if err != nil {
		n.t.Fatal(err)
	}
	n.clients[uid] = c
	n.flush()
	if ev := n.events(c); len(ev) != 1 || ev[0].Kind != GotWelcome || c.UID() != uid {
		n.t.Fatalf("welcome: %v", ev)
	}
	return c
}

func (n *memNet) flush() {
	n.t.Helper()
	for moved := true; moved; {
		moved = false
		for uid, c := range n.clients {
			if out := c.TakeOutput(nil); len(out) > 0 {
				n.r.HandleBytes(uid, out)
				moved = true
			}
		}
		for {
			uid, ok := n.r.PollWrite()
			if !ok {
				break
			}
			if c := n.clients[uid]; c != nil {
				if err := c.HandleBytes(n.r.TakeOutput(uid, nil)); err != nil {
					n.t.Fatalf("client %d: %v", uid, err)
				}
				moved = true
			}
		}
		for {
			ev, ok := n.r.PollEvent()
			if !ok {
				break
			}
			if ev.Kind == EventDisconnected {
				delete(n.clients, ev.UID)
			}
		}
	}
}

func (n *memNet) events(c *Client) []ClientEvent {
	var evs []ClientEvent
	for {
		ev, ok := c.PollEvent()
		if !ok {
			return evs
		}
		evs = append(evs, ev)
	}
}

// want checks the events of c.
func (n *memNet) want(why string, c *Client, want ...ClientEvent) {
	n.t.Helper()
	if diff := cmp.Diff(want, n.events(c), equateEmpty); diff != "" {
		n.t.Errorf("%s (-want +got):\n%s", why, diff)
	}
}

// must fails the test on an error.
func (n *memNet) must(err error) {
	n.t.Helper()
	if err != nil {
		n.t.Fatal(err)
	}
	n.flush()
}

// hostAnd makes a group hosted by a new client, joined by members more.
func (n *memNet) hostAnd(members int) (*Client, []*Client) {
	n.t.Helper()
	h := n.add()
	n.must(h.Make())
	n.events(h)
	var ms []*Client
	for range members {
		m := n.add()
		n.must(m.Join(h.GID(), 0))
		n.events(m)
		n.events(h)
		ms = append(ms, m)
	}
	return h, ms
}

// TestClientMake: a successful R2U_MADE changes the role, and the R2U_STAT
// that follows confirms it (U1).
func TestClientMake(t *testing.T) {
	n := newMemNet(t, Config{Brand: "b"})
	h := n.add()
	if h.Brand() != "b" || h.Role() != Connected {
		t.Errorf("brand %q role %v", h.Brand(), h.Role())
	}
	if v, r := h.RelayVersion(); v != 1 || r != 0 {
		t.Errorf("version %d.%d", v, r)
	}
	n.must(h.Make())
	if h.Role() != Host || h.GID() == 0 {
		t.Fatalf("after make: %v in %d", h.Role(), h.GID())
	}
	n.want("make", h, ClientEvent{Kind: GotMade, Status: StatMade, GID: h.GID(), Role: Host})
	m := n.add()
	n.must(m.Join(h.GID(), 0))
	n.want("join", m, ClientEvent{Kind: GotMade, Status: StatJoin, GID: h.GID(), Role: Member})
	n.want("join, the host", h, ClientEvent{Kind: GotJoined, UID: m.UID()})
	if got := h.Members(); !slices.Equal(got, []uint32{m.UID()}) {
		t.Errorf("members %v", got)
	}
	if h.Ignored() != 0 || m.Ignored() != 0 {
		t.Errorf("ignored %d, %d", h.Ignored(), m.Ignored())
	}
}

// TestClientJoinFails: a failed join leaves the role as it was (U4).
func TestClientJoinFails(t *testing.T) {
	n := newMemNet(t, Config{})
	h, _ := n.hostAnd(0)
	n.must(h.Set(0, KeyGroupPass, 9))
	m := n.add()
	n.must(m.Join(h.GID(), 8))
	n.want("wrong password", m, ClientEvent{Kind: GotMade, Status: StatPass, GID: h.GID(), Role: Connected})
	n.must(m.Join(h.GID(), 9))
	n.want("right password", m, ClientEvent{Kind: GotMade, Status: StatJoin, GID: h.GID(), Role: Member})
}

// TestClientMisuse checks the requests refused in each state, which send
// nothing.
func TestClientMisuse(t *testing.T) {
	n := newMemNet(t, Config{})
	fresh, _ := NewClient(ClientConfig{})
	h, ms := n.hostAnd(1)
	m := ms[0]
	c := n.add()
	tests := []struct {
		name string
		err  error
		do   func() error
	}{
		{"make before the welcome", ErrNotWelcomed, fresh.Make},
		{"make while hosting", ErrRole, h.Make},
		{"join while a member", ErrRole, func() error { return m.Join(1, 1) }},
		{"quit outside a group", ErrRole, c.Quit},
		{"broadcast outside a group", ErrRole, func() error { return c.Broadcast(0, nil) }},
		{"send outside a group", ErrRole, func() error { return c.Send(h.UID(), nil) }},
		{"send too long", ErrMessageTooLong, func() error { return m.Send(h.UID(), make([]byte, DefaultMaxMessage+1)) }},
		{"set by a member", ErrRole, func() error { return m.Set(Respond, KeyGroupFlags, 1) }},
		{"set of an unknown key", ErrUnknownKey, func() error { return h.Set(Respond, 4, 1) }},
		{"get outside a group", ErrRole, func() error { return c.Get(KeyGroupPass) }},
		{"get of an unknown key", ErrUnknownKey, func() error { return m.Get(0) }},
		{"kick by a member", ErrRole, func() error { return m.Kick(h.UID()) }},
		{"kick of a stranger", ErrNotMember, func() error { return h.Kick(c.UID()) }},
	}
	for _, tt := range tests {
		if err := tt.do(); err != tt.err {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.err)
		}
	}
	for _, cl := range []*Client{fresh, h, m, c} {
		if cl.Buffered() != 0 {
			t.Errorf("a refused request queued %d bytes", cl.Buffered())
		}
	}
	// Once R2U_MADE has come, the client is a host: no longer busy, and
	// not allowed to join.
	n.must(c.Make())
	if err := c.Join(1, 1); err != ErrRole {
		t.Errorf("join after make answered: %v", err)
	}
	d := n.add()
	if err := d.Make(); err != nil {
		t.Fatal(err)
	}
	if err := d.Join(1, 1); err != ErrBusy {
		t.Errorf("join while a make waits: %v", err)
	}
}

// TestClientValues: answers are matched to requests by key, in order, and
// a notification is not an answer (U19).
func TestClientValues(t *testing.T) {
	n := newMemNet(t, Config{MaxGroupSize: 7})
	h, ms := n.hostAnd(1)
	m := ms[0]
	n.must(h.Set(Respond|Notify, KeyGroupFlags, FlagNoP2P))
	n.want("set, the host", h, ClientEvent{Kind: GotValue, Key: KeyGroupFlags, Value: FlagNoP2P, Answer: true})
	n.want("set, the member", m, ClientEvent{Kind: GotValue, Key: KeyGroupFlags, Value: FlagNoP2P})
	n.must(m.Get(KeyGroupMax))
	n.want("get", m, ClientEvent{Kind: GotValue, Key: KeyGroupMax, Value: 7, Answer: true})
	// A get the relay will ignore: the member is kicked before it is
	// handled. The STAT comes first and ends the wait.
	if err := m.Get(KeyGroupPass); err != nil {
		t.Fatal(err)
	}
	if err := h.Kick(m.UID()); err != nil {
		t.Fatal(err)
	}
	n.r.HandleBytes(h.UID(), h.TakeOutput(nil)) // the kick first
	n.flush()
	n.want("kicked", m, ClientEvent{Kind: GotRole, Role: Connected, GID: h.GID()})
	n.want("kicked, the host", h, ClientEvent{Kind: GotLeft, UID: m.UID()})
	if len(m.pending) != 0 || len(h.Members()) != 0 {
		t.Errorf("pending %v, members %v", m.pending, h.Members())
	}
}

// TestClientMessages checks text both ways and the host's view of its
// members.
func TestClientMessages(t *testing.T) {
	n := newMemNet(t, Config{})
	h, ms := n.hostAnd(2)
	n.must(ms[0].Broadcast(0, []byte("all")))
	for _, c := range []*Client{h, ms[0], ms[1]} {
		n.want("broadcast", c, ClientEvent{Kind: GotText, UID: ms[0].UID(), Data: []byte("all")})
	}
	n.must(h.Send(ms[1].UID(), []byte("you")))
	n.want("send", ms[1], ClientEvent{Kind: GotText, UID: h.UID(), Data: []byte("you")})
	n.must(ms[1].Quit())
	n.want("quit", ms[1], ClientEvent{Kind: GotRole, Role: Connected, GID: h.GID()})
	n.want("quit, the host", h, ClientEvent{Kind: GotLeft, UID: ms[1].UID()})
	gid := h.GID()
	n.must(h.Kick(h.UID())) // U17
	n.want("the host kicks itself", h, ClientEvent{Kind: GotRole, Role: Connected, GID: gid})
	n.want("its member", ms[0], ClientEvent{Kind: GotRole, Role: Connected, GID: gid})
}

// TestClientWelcome checks what the client accepts as a welcome (U15).
func TestClientWelcome(t *testing.T) {
	welc := func(v, r uint16) []byte {
		return Append(nil, Packet{ID: R2UWelc, Version: v, Revision: r, UID: 3, Brand: "x"})
	}
	tests := []struct {
		name string
		b    []byte
		err  error
	}{
		{"1.0", welc(1, 0), nil},
		{"1.12, a later revision", welc(1, 12), nil},
		{"2.0", welc(2, 0), ErrBadWelcome},
		{"0.9", welc(0, 9), ErrBadWelcome},
		{"a STAT first", Append(nil, Packet{ID: R2UStat, Role: Connected}), ErrBadWelcome},
		{"an unknown id", []byte{0x07}, ErrUnknownPacket},
		{"a user's packet", []byte{0x80}, ErrUnknownPacket},
		{"text too long", append(welc(1, 0), Append(nil, Packet{ID: R2UText, Data: make([]byte, 11)})...), ErrMessageTooLong},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := NewClient(ClientConfig{MaxMessage: 10})
			err := c.HandleBytes(tt.b)
			if !errors.Is(err, tt.err) {
				t.Fatalf("HandleBytes = %v, want %v", err, tt.err)
			}
			if err == nil {
				return
			}
			if c.Err() != err || c.Make() != ErrClosed || c.HandleBytes(welc(1, 0)) != err {
				t.Errorf("the client goes on after %v", err)
			}
		})
	}
	var ve *VersionError
	c, _ := NewClient(ClientConfig{})
	if err := c.HandleBytes(welc(2, 3)); !errors.As(err, &ve) || ve.Version != 2 || ve.Error() != "urp: relay speaks URP 2.3, this client 1.0" {
		t.Errorf("%v", err)
	}
}

// TestClientIgnores: packets that make no sense in the client's state are
// ignored and counted (U15), the stream going on.
func TestClientIgnores(t *testing.T) {
	c, _ := NewClient(ClientConfig{})
	var b []byte
	for _, p := range []Packet{
		{ID: R2UWelc, Version: 1, UID: 3},
		{ID: R2UWelc, Version: 1, UID: 4},
		{ID: R2UMade, Status: StatMade, GID: 5},
		{ID: R2UStat, Role: 9},
		{ID: R2UJoin, UID: 6},
		{ID: R2ULeft, UID: 6},
		{ID: R2UStat, Role: Connected},
		{ID: R2UText, UID: 7, Data: []byte("ok")},
	} {
		b = Append(b, p)
	}
	if err := c.HandleBytes(b); err != nil {
		t.Fatal(err)
	}
	if c.Ignored() != 5 || c.UID() != 3 || c.Role() != Connected {
		t.Errorf("ignored %d, uid %d, role %v", c.Ignored(), c.UID(), c.Role())
	}
	var kinds []ClientEventKind
	for ev, ok := c.PollEvent(); ok; ev, ok = c.PollEvent() {
		kinds = append(kinds, ev.Kind)
	}
	if !slices.Equal(kinds, []ClientEventKind{GotWelcome, GotText}) {
		t.Errorf("events %v", kinds)
	}
}

// TestClientNoGroupWithoutMade checks that a relay cannot make the client
// a host without a group: a successful R2U_MADE with GID 0 is a failure,
// and an R2U_STAT to MEMBER or HOST without R2U_MADE is ignored (U1, U15;
// the fuzz corpus's made-with-gid-0).
func TestClientNoGroupWithoutMade(t *testing.T) {
	c, _ := NewClient(ClientConfig{})
	b := Append(nil, Packet{ID: R2UWelc, Version: 1, UID: 3})
	b = Append(b, Packet{ID: R2UStat, Role: Host})
	if err := c.HandleBytes(b); err != nil || c.Role() != Connected || c.Ignored() != 1 {
		t.Fatalf("%v: role %v, ignored %d", err, c.Role(), c.Ignored())
	}
	c.Make()
	if err := c.HandleBytes(Append(nil, Packet{ID: R2UMade, Status: StatMade})); err != nil || c.Role() != Connected {
		t.Fatalf("%v: role %v", err, c.Role())
	}
	var got []ClientEvent
	for ev, ok := c.PollEvent(); ok; ev, ok = c.PollEvent() {
		got = append(got, ev)
	}
	if ev := got[len(got)-1]; ev.Kind != GotMade || ev.Status != StatFail || ev.Role != Connected {
		t.Errorf("event %+v", ev)
	}
}

// TestClientEnd checks HandleEnd at and inside a packet.
func TestClientEnd(t *testing.T) {
	welc := Append(nil, Packet{ID: R2UWelc, Version: 1})
	for _, tt := range []struct {
		b   []byte
		err error
	}{{welc, nil}, {welc[:10], ErrTruncated}} {
		c, _ := NewClient(ClientConfig{})
		c.HandleBytes(tt.b)
		if err := c.HandleEnd(); err != tt.err {
			t.Errorf("HandleEnd after %d bytes = %v, want %v", len(tt.b), err, tt.err)
		}
		if c.Make() != ErrClosed {
			t.Error("the client takes requests after the end")
		}
	}
}

// TestClientMaxMembers: a relay that announces members beyond
// ClientConfig.MaxMembers ends the client with ErrTooManyMembers (U24);
// a member announced again, or one that left and came back, is not one
// more. Before, every R2U_JOIN of a new UID added a member, without
// bound.
func TestClientMaxMembers(t *testing.T) {
	for _, tt := range []struct {
		name string
		max  int
		uids []uint32 // joined, in order; 0: the last one left
		err  error
	}{
		{"at the limit", 3, []uint32{1, 2, 3}, nil},
		{"beyond it", 3, []uint32{1, 2, 3, 4}, ErrTooManyMembers},
		{"announced again", 3, []uint32{1, 2, 3, 3, 1}, nil},
		{"left and replaced", 3, []uint32{1, 2, 3, 0, 4}, nil},
		{"one of one", 1, []uint32{1, 2}, ErrTooManyMembers},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := NewClient(ClientConfig{MaxMembers: tt.max})
			if err != nil {
				t.Fatal(err)
			}
			c.HandleBytes(Append(nil, Packet{ID: R2UWelc, Version: 1, UID: 100}))
			c.Make()
			b := Append(nil, Packet{ID: R2UMade, Status: StatMade, GID: 5})
			var last uint32
			for _, uid := range tt.uids {
				if uid == 0 {
					b = Append(b, Packet{ID: R2ULeft, UID: last})
					continue
				}
				b = Append(b, Packet{ID: R2UJoin, UID: uid})
				last = uid
			}
			if err := c.HandleBytes(b); err != tt.err {
				t.Fatalf("HandleBytes = %v, want %v", err, tt.err)
			}
			if n := len(c.Members()); tt.max > 0 && n > tt.max {
				t.Errorf("%d members, above %d", n, tt.max)
			}
			if tt.err != nil && (c.Err() != tt.err || c.Kick(1) != ErrClosed) {
				t.Errorf("the client goes on after %v", tt.err)
			}
		})
	}
	// The default: a relay that announces a new UID at each R2U_JOIN is
	// stopped at DefaultMaxMembers.
	c, _ := NewClient(ClientConfig{})
	c.HandleBytes(Append(nil, Packet{ID: R2UWelc, Version: 1, UID: 100}))
	c.Make()
	c.HandleBytes(Append(nil, Packet{ID: R2UMade, Status: StatMade, GID: 5}))
	var err error
	for uid := uint32(1); err == nil && uid < 1<<20; uid++ {
		err = c.HandleBytes(Append(nil, Packet{ID: R2UJoin, UID: uid + 1000}))
	}
	if err != ErrTooManyMembers || len(c.Members()) != DefaultMaxMembers {
		t.Errorf("after new UIDs: %v, %d members", err, len(c.Members()))
	}
}
