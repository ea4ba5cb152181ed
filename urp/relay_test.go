package urp

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// relayTest drives a Relay the way a driver does, and reads what it
// queued for each user back as packets.
type relayTest struct {
	t *testing.T
	r *Relay
}

func newRelayTest(t *testing.T, cfg Config) *relayTest {
	t.Helper()
	r, err := NewRelay(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &relayTest{t: t, r: r}
}

// connect connects a user and checks its welcome: "A new UID number is
// assigned. The CONNECTED role is assigned. A R2U_WELC packet is sent. A
// R2U_STAT packet is sent."
func (rt *relayTest) connect() uint32 {
	rt.t.Helper()
	uid, err := rt.r.Connect()
	if err != nil {
		rt.t.Fatalf("Connect: %v", err)
	}
	if uid == 0 {
		rt.t.Fatal("Connect gave UID 0")
	}
	rt.want("welcome", uid,
		Packet{ID: R2UWelc, Version: Version, Revision: Revision, UID: uid, Brand: rt.r.Config().Brand},
		Packet{ID: R2UStat, Role: Connected})
	return uid
}

// send hands the relay the packets from uid, in one read.
func (rt *relayTest) send(uid uint32, ps ...Packet) {
	var b []byte
	for _, p := range ps {
		b = Append(b, p)
	}
	rt.r.HandleBytes(uid, b)
}

// output takes what the relay queued for uid and decodes it.
func (rt *relayTest) output(uid uint32) []Packet {
	rt.t.Helper()
	b := rt.r.TakeOutput(uid, nil)
	d := NewDecoder(ToUser, 1<<30)
	ps, _, err := decodeChunks(d, [][]byte{b})
	if err == nil {
		err = d.End()
	}
	if err != nil {
		rt.t.Fatalf("the relay's output to %d: %v", uid, err)
	}
	return ps
}

// want checks that uid got exactly the packets want, in order.
func (rt *relayTest) want(why string, uid uint32, want ...Packet) {
	rt.t.Helper()
	if diff := cmp.Diff(want, rt.output(uid), equateEmpty); diff != "" {
		rt.t.Errorf("%s: to %d (-want +got):\n%s", why, uid, diff)
	}
}

// idle checks that the users got nothing.
func (rt *relayTest) idle(why string, uids ...uint32) {
	rt.t.Helper()
	for _, u := range uids {
		if got := rt.output(u); len(got) > 0 {
			rt.t.Errorf("%s: %d got %v, want nothing", why, u, got)
		}
	}
}

// events drains the relay's events.
func (rt *relayTest) events() []Event {
	var evs []Event
	for {
		ev, ok := rt.r.PollEvent()
		if !ok {
			return evs
		}
		evs = append(evs, ev)
	}
}

// make makes a group hosted by a new user and checks the answer: "The
// relay responds to this packet with the R2U_MAKE and R2U_STAT packet"
// (U1).
func (rt *relayTest) make() (host, gid uint32) {
	rt.t.Helper()
	host = rt.connect()
	rt.send(host, Packet{ID: U2RMake})
	out := rt.output(host)
	if len(out) != 2 || out[0].ID != R2UMade || out[0].Status != StatMade || out[0].GID == 0 {
		rt.t.Fatalf("make: got %v", out)
	}
	if diff := cmp.Diff(Packet{ID: R2UStat, Role: Host}, out[1]); diff != "" {
		rt.t.Fatalf("make: (-want +got):\n%s", diff)
	}
	return host, out[0].GID
}

// join connects a user that joins gid with password, and checks the
// answers to it and to the host.
func (rt *relayTest) join(host, gid, password uint32) uint32 {
	rt.t.Helper()
	u := rt.connect()
	rt.send(u, Packet{ID: U2RJoin, GID: gid, Password: password})
	rt.want("join", u, Packet{ID: R2UMade, Status: StatJoin, GID: gid}, Packet{ID: R2UStat, Role: Member})
	rt.want("join, the host", host, Packet{ID: R2UJoin, UID: u})
	return u
}

// group makes a group with n members besides the host.
func (rt *relayTest) group(n int) (host, gid uint32, members []uint32) {
	rt.t.Helper()
	host, gid = rt.make()
	for range n {
		members = append(members, rt.join(host, gid, 0))
	}
	rt.events()
	return host, gid, members
}

func text(from uint32, s string) Packet { return Packet{ID: R2UText, UID: from, Data: []byte(s)} }

// TestRelayWelcome: every user is welcomed with a UID that is not 0 and
// is not given twice (drawn at random, U3).
func TestRelayWelcome(t *testing.T) {
	rt := newRelayTest(t, Config{Brand: "test relay"})
	seen := map[uint32]bool{}
	for range 100 {
		uid := rt.connect()
		if seen[uid] {
			t.Fatalf("UID %d given twice", uid)
		}
		seen[uid] = true
	}
	if s := rt.r.Stats(); s.Users != 100 || s.Connects != 100 {
		t.Errorf("stats %+v", s)
	}
	evs := rt.events()
	if len(evs) != 100 || evs[0].Kind != EventConnected {
		t.Errorf("events %v", evs[:1])
	}
}

func TestRelayMake(t *testing.T) {
	rt := newRelayTest(t, Config{MaxGroupSize: 5})
	host, gid := rt.make()
	// "The flags and password attributes are set to 0x00000000" (U12 for
	// the limit).
	g, ok := rt.r.Group(gid)
	want := GroupInfo{GID: gid, Host: host, Members: []uint32{host}, Max: 5}
	if diff := cmp.Diff(want, g); !ok || diff != "" {
		t.Errorf("the new group (-want +got):\n%s", diff)
	}
	if u, _ := rt.r.User(host); u.Role != Host || u.GID != gid {
		t.Errorf("the host: %+v", u)
	}
	// "allowed for clients with the CONNECTED role, otherwise ignored":
	// a host cannot make a second group.
	rt.send(host, Packet{ID: U2RMake})
	rt.idle("a second make", host)
	if s := rt.r.Stats(); s.Groups != 1 || s.Ignored.Role != 1 {
		t.Errorf("stats %+v", s)
	}
	if evs := rt.events(); evs[len(evs)-1] != (Event{Kind: EventMade, UID: host, GID: gid}) {
		t.Errorf("events %v", evs)
	}
}

// TestRelayMakeLimit: "If an error occurs during the handling of the
// U2R_MAKE packet the R2U_MAKE packet is still send but with a
// non-successful status"; no R2U_STAT follows, since the role is
// unchanged (U4).
func TestRelayMakeLimit(t *testing.T) {
	rt := newRelayTest(t, Config{MaxGroups: 1})
	rt.make()
	u := rt.connect()
	rt.send(u, Packet{ID: U2RMake})
	rt.want("make beyond MaxGroups", u, Packet{ID: R2UMade, Status: StatLimit})
	if evs := rt.events(); evs[len(evs)-1] != (Event{Kind: EventMakeFailed, UID: u, Status: StatLimit}) {
		t.Errorf("events %v", evs)
	}
}

// TestRelayJoinFailures: "If an error occurs during the handling of the
// U2R_JOIN packet (invalid GID, invalid password, group locked, or any
// other) the R2U_MAKE packet is still send but with a non-successful
// status" (U4: the GID asked for, no R2U_STAT; an unknown GID is
// STAT_PASS like a wrong password).
func TestRelayJoinFailures(t *testing.T) {
	tests := []struct {
		name     string
		setup    []Packet // from the host, after making the group
		gid      func(gid uint32) uint32
		password uint32
		want     Status
	}{
		{"wrong password", []Packet{{ID: U2RSets, Key: KeyGroupPass, Value: 77}}, nil, 78, StatPass},
		{"unknown GID", nil, func(gid uint32) uint32 { return gid + 1 }, 0, StatPass},
		{"GID 0", nil, func(uint32) uint32 { return 0 }, 0, StatPass},
		{"locked", []Packet{{ID: U2RSets, Key: KeyGroupFlags, Value: FlagLock}}, nil, 0, StatLock},
		{"locked, wrong password", []Packet{{ID: U2RSets, Key: KeyGroupFlags, Value: FlagLock}, {ID: U2RSets, Key: KeyGroupPass, Value: 1}}, nil, 0, StatPass},
		{"full by GROUP_MAX, the host counted", []Packet{{ID: U2RSets, Key: KeyGroupMax, Value: 1}}, nil, 0, StatFull},
		{"GROUP_MAX 0", []Packet{{ID: U2RSets, Key: KeyGroupMax, Value: 0}}, nil, 0, StatFull},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			guard := &budgetGuard{each: 1}
			rt := newRelayTest(t, Config{JoinGuard: guard})
			host, gid := rt.make()
			rt.send(host, tt.setup...)
			rt.idle("settings without RESPOND", host)
			asked := gid
			if tt.gid != nil {
				asked = tt.gid(gid)
			}
			u := rt.connect()
			rt.send(u, Packet{ID: U2RJoin, GID: asked, Password: tt.password})
			rt.want("join", u, Packet{ID: R2UMade, Status: tt.want, GID: asked})
			rt.idle("a failed join, the host", host)
			if info, _ := rt.r.User(u); info.Role != Connected {
				t.Errorf("the user is %v", info.Role)
			}
			evs := rt.events()
			if ev := evs[len(evs)-1]; ev != (Event{Kind: EventJoinFailed, UID: u, GID: asked, Status: tt.want}) {
				t.Errorf("event %+v", ev)
			}
			// Only a wrong GID or password is a guess that failed
			// (U26): a lock or a full group shows the pair was right.
			if want := tt.want == StatPass; guard.failed[u] != b2i(want) || guard.asked[u] != 1 {
				t.Errorf("the guard was asked %d times and told of %d failures; want 1 and %d", guard.asked[u], guard.failed[u], b2i(want))
			}
		})
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// budgetGuard is a JoinGuard that lets each user fail each joins, and
// counts what the relay asked and told it.
type budgetGuard struct {
	each          int
	asked, failed map[uint32]int
}

func (g *budgetGuard) MayFail(uid uint32) bool {
	if g.asked == nil {
		g.asked, g.failed = map[uint32]int{}, map[uint32]int{}
	}
	g.asked[uid]++
	return g.failed[uid] < g.each
}

func (g *budgetGuard) Failed(uid uint32) { g.failed[uid]++ }

// TestRelayJoinGuard: a user may fail as many joins as its JoinGuard
// lets it; the next join closes it before it is checked, so that it
// tells the user nothing even when its GID and password are right, and
// the rest of what the user sent is not handled (U26). Joins that
// succeed cost nothing.
func TestRelayJoinGuard(t *testing.T) {
	// Users who may fail two joins each.
	guard := &budgetGuard{each: 2}
	rt := newRelayTest(t, Config{JoinGuard: guard})
	host, gid := rt.make()
	rt.send(host, Packet{ID: U2RSets, Key: KeyGroupPass, Value: 5})
	u, v := rt.connect(), rt.connect()
	rt.events()
	// The answers to u's failures go with it: a user closed has its
	// output dropped.
	rt.send(u,
		Packet{ID: U2RJoin, GID: gid, Password: 1},
		Packet{ID: U2RJoin, GID: gid + 1, Password: 5},
		Packet{ID: U2RJoin, GID: gid, Password: 5}, // right, but past the budget
		Packet{ID: U2RMake})
	rt.idle("the host, of the guessing user", host)
	if _, ok := rt.r.User(u); ok {
		t.Error("the guessing user is still connected")
	}
	want := []Event{
		{Kind: EventJoinFailed, UID: u, GID: gid, Status: StatPass},
		{Kind: EventJoinFailed, UID: u, GID: gid + 1, Status: StatPass},
		{Kind: EventDisconnected, UID: u, Err: ErrGuessing},
	}
	if diff := cmp.Diff(want, rt.events(), cmp.Comparer(func(a, b error) bool { return a == b })); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if s := rt.r.Stats(); s.Guessing != 1 || s.Groups != 1 {
		t.Errorf("stats %+v", s)
	}
	// The other fails one and joins: it still has one failure left, and
	// as a member sends no join the guard would be asked of.
	rt.send(v, Packet{ID: U2RJoin, GID: gid, Password: 4})
	rt.want("one failure", v, Packet{ID: R2UMade, Status: StatPass, GID: gid})
	rt.send(v, Packet{ID: U2RJoin, GID: gid, Password: 5})
	rt.want("a join", v, Packet{ID: R2UMade, Status: StatJoin, GID: gid}, Packet{ID: R2UStat, Role: Member})
	if guard.asked[u] != 3 || guard.failed[u] != 2 || guard.asked[v] != 2 || guard.failed[v] != 1 {
		t.Errorf("guard asked %d and %d times, told of %d and %d failures; want 3, 2, 2, 1",
			guard.asked[u], guard.asked[v], guard.failed[u], guard.failed[v])
	}
}

// TestRelayJoinFullByRelay: "The actual maximum number of users is a
// minimum of this value and of a implementation defined group size
// limit" (U12).
func TestRelayJoinFullByRelay(t *testing.T) {
	rt := newRelayTest(t, Config{MaxGroupSize: 3})
	host, gid := rt.make()
	rt.send(host, Packet{ID: U2RSets, Key: KeyGroupMax, Value: 1000})
	rt.join(host, gid, 0)
	rt.join(host, gid, 0)
	u := rt.connect()
	rt.send(u, Packet{ID: U2RJoin, GID: gid})
	rt.want("the fourth user of a group of 3", u, Packet{ID: R2UMade, Status: StatFull, GID: gid})
	// Lowering the limit removes nobody.
	rt.send(host, Packet{ID: U2RSets, Control: Respond, Key: KeyGroupMax, Value: 1})
	rt.want("GROUP_MAX 1", host, Packet{ID: R2UVals, Key: KeyGroupMax, Value: 1})
	if g, _ := rt.r.Group(gid); len(g.Members) != 3 {
		t.Errorf("members %v", g.Members)
	}
}

// TestRelayJoinRole: U2R_JOIN is "allowed for clients with the CONNECTED
// role, otherwise ignored".
func TestRelayJoinRole(t *testing.T) {
	rt := newRelayTest(t, Config{})
	host, gid, m := rt.group(1)
	host2, gid2 := rt.make()
	for _, u := range []uint32{host, m[0]} {
		rt.send(u, Packet{ID: U2RJoin, GID: gid2})
	}
	rt.idle("joins from a host and a member", host, m[0], host2)
	if s := rt.r.Stats(); s.Ignored.Role != 2 {
		t.Errorf("ignored %+v", s.Ignored)
	}
	if g, _ := rt.r.Group(gid); len(g.Members) != 2 {
		t.Errorf("the first group: %v", g.Members)
	}
}

// TestRelayQuit: "The relay responds to this packet with the R2U_STAT
// packet. ... If a member user does leave the group the group's host is
// notified of that fact with the R2U_LEFT packet. If the user who issued
// the U2R_QUIT packet was the host of the group then the group is
// disbanded and all members who were in that group at the time are issued
// the R2U_STAT packet."
func TestRelayQuit(t *testing.T) {
	rt := newRelayTest(t, Config{})
	host, gid, m := rt.group(3)
	rt.send(m[1], Packet{ID: U2RQuit})
	rt.want("a member quits", m[1], Packet{ID: R2UStat, Role: Connected})
	rt.want("a member quits, the host", host, Packet{ID: R2ULeft, UID: m[1]})
	rt.idle("a member quits, the others", m[0], m[2])
	if evs := rt.events(); len(evs) != 1 || evs[0] != (Event{Kind: EventLeft, UID: m[1], GID: gid}) {
		t.Errorf("events %v", evs)
	}
	// "allowed for clients with the MEMBER and HOST role, otherwise
	// ignored ... nothing is send back".
	rt.send(m[1], Packet{ID: U2RQuit})
	rt.idle("a quit while CONNECTED", m[1], host)

	rt.send(host, Packet{ID: U2RQuit})
	for _, u := range []uint32{host, m[0], m[2]} {
		rt.want("the host quits (U21)", u, Packet{ID: R2UStat, Role: Connected})
	}
	if _, ok := rt.r.Group(gid); ok || rt.r.Stats().Groups != 0 {
		t.Error("the group is still open")
	}
	if evs := rt.events(); len(evs) != 1 || evs[0] != (Event{Kind: EventDisbanded, UID: host, GID: gid, Members: 2}) {
		t.Errorf("events %v", evs)
	}
	// Its users are free to go on.
	rt.send(m[0], Packet{ID: U2RMake})
	out := rt.output(m[0])
	if len(out) != 2 || out[0].Status != StatMade {
		t.Fatalf("a member of a disbanded group makes one: %v", out)
	}
	rt.send(host, Packet{ID: U2RJoin, GID: out[0].GID})
	rt.want("the old host joins", host, Packet{ID: R2UMade, Status: StatJoin, GID: out[0].GID}, Packet{ID: R2UStat, Role: Member})
}

// TestRelayBroadcast: "the relay sends a R2U_TEXT packet with a copy of
// the broadcast message to all group members except for the excluded
// one" (U7: the host is one, and so is the sender).
func TestRelayBroadcast(t *testing.T) {
	tests := []struct {
		name    string
		from    int // index into host, m0, m1, m2
		exclude int // index, or -1 for UID 0, or -2 for a UID of nobody
		flags   uint32
		want    []int // who gets it
	}{
		{"to everyone, the sender too", 1, -1, 0, []int{0, 1, 2, 3}},
		{"excluding the sender", 1, 1, 0, []int{0, 2, 3}},
		{"excluding another", 1, 2, 0, []int{0, 1, 3}},
		{"excluding the host", 2, 0, 0, []int{1, 2, 3}},
		{"excluding nobody known", 3, -2, 0, []int{0, 1, 2, 3}},
		{"from the host", 0, 0, 0, []int{1, 2, 3}},
		{"NOBROD stops a member", 1, -1, FlagNoBrod, nil},
		{"NOBROD does not stop the host", 0, -1, FlagNoBrod, []int{0, 1, 2, 3}},
		{"NOSEND and NOP2P do not stop it", 1, -1, FlagNoSend | FlagNoP2P, []int{0, 1, 2, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := newRelayTest(t, Config{})
			host, _, m := rt.group(3)
			users := append([]uint32{host}, m...)
			rt.send(host, Packet{ID: U2RSets, Key: KeyGroupFlags, Value: tt.flags})
			var exclude uint32
			switch tt.exclude {
			case -1:
			case -2:
				exclude = 12345
			default:
				exclude = users[tt.exclude]
			}
			from := users[tt.from]
			rt.send(from, Packet{ID: U2RBrod, UID: exclude, Data: []byte("storm")})
			gets := map[int]bool{}
			for _, i := range tt.want {
				gets[i] = true
			}
			for i, u := range users {
				if gets[i] {
					rt.want("broadcast", u, text(from, "storm"))
				} else {
					rt.idle("broadcast", u)
				}
			}
			if ign := rt.r.Stats().Ignored.Flags; (ign == 1) != (len(tt.want) == 0) {
				t.Errorf("ignored for flags: %d", ign)
			}
		})
	}
}

// TestRelaySend: "the relay sends a R2U_TEXT packet with a copy of the
// ... message to the recipient group member", unless NOSEND, or NOP2P and
// the recipient is not the host (U7).
func TestRelaySend(t *testing.T) {
	tests := []struct {
		name     string
		from, to int // index into host, m0, m1; 3 is a user outside, 4 nobody
		flags    uint32
		ok       bool
		reason   string // the Ignored counter
	}{
		{"member to member", 1, 2, 0, true, ""},
		{"member to host", 1, 0, 0, true, ""},
		{"host to member", 0, 2, 0, true, ""},
		{"to oneself", 1, 1, 0, true, ""},
		{"NOSEND, member to host", 1, 0, FlagNoSend, false, "flags"},
		{"NOSEND, host to member", 0, 1, FlagNoSend, true, ""},
		{"NOP2P, member to member", 1, 2, FlagNoP2P, false, "flags"},
		{"NOP2P, member to host", 1, 0, FlagNoP2P, true, ""},
		{"NOP2P, host to member", 0, 2, FlagNoP2P, true, ""},
		{"NOBROD does not stop it", 1, 2, FlagNoBrod, true, ""},
		{"to a user outside the group", 1, 3, 0, false, "target"},
		{"to nobody", 0, 4, 0, false, "target"},
		{"from outside", 3, 0, 0, false, "role"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := newRelayTest(t, Config{})
			host, _, m := rt.group(2)
			users := append([]uint32{host}, m...)
			users = append(users, rt.connect(), 99)
			rt.send(host, Packet{ID: U2RSets, Key: KeyGroupFlags, Value: tt.flags})
			from, to := users[tt.from], users[tt.to]
			rt.send(from, Packet{ID: U2RSend, UID: to, Data: []byte("p2p")})
			for i, u := range users[:4] {
				if tt.ok && i == tt.to {
					rt.want("send", u, text(from, "p2p"))
				} else {
					rt.idle("send", u)
				}
			}
			ign := rt.r.Stats().Ignored
			got := map[string]uint64{"flags": ign.Flags, "target": ign.Target, "role": ign.Role}
			for k, n := range got {
				if (k == tt.reason) != (n == 1) {
					t.Errorf("ignored %+v, want one for %q", ign, tt.reason)
				}
			}
		})
	}
}

// TestRelaySettings: "After receiving the packet the relay sends a
// R2U_VALS packet with a value of the requested state to all users
// specified by the control bit field" (U8, U9, U10).
func TestRelaySettings(t *testing.T) {
	tests := []struct {
		name       string
		ctl        Control
		host, rest bool // who hears R2U_VALS
	}{
		{"neither", 0, false, false},
		{"RESPOND", Respond, true, false},
		{"NOTIFY", Notify, false, true},
		{"both, each once", Respond | Notify, true, true},
		{"reserved bits ignored", 0xfc | Respond, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := newRelayTest(t, Config{})
			host, gid, m := rt.group(2)
			outsider := rt.connect()
			rt.events()
			flags := FlagBinary | FlagsHiClient | FlagsLoReserved
			rt.send(host, Packet{ID: U2RSets, Control: tt.ctl, Key: KeyGroupFlags, Value: flags})
			vals := Packet{ID: R2UVals, Key: KeyGroupFlags, Value: flags}
			for _, c := range []struct {
				u    uint32
				gets bool
			}{{host, tt.host}, {m[0], tt.rest}, {m[1], tt.rest}, {outsider, false}} {
				if c.gets {
					rt.want("set", c.u, vals)
				} else {
					rt.idle("set", c.u)
				}
			}
			if g, _ := rt.r.Group(gid); g.Flags != flags {
				t.Errorf("flags %#x, want every bit kept", g.Flags)
			}
			if evs := rt.events(); len(evs) != 1 || evs[0] != (Event{Kind: EventSet, UID: host, GID: gid, Key: KeyGroupFlags, Value: flags}) {
				t.Errorf("events %v", evs)
			}
		})
	}
}

// TestRelaySettingsRoles: "Each state key can impose it's own
// restrictions on the senders role ... if those requirements are not met,
// or an error occurs the packet should be ignored" (U14, U16).
func TestRelaySettingsRoles(t *testing.T) {
	rt := newRelayTest(t, Config{MaxGroupSize: 9})
	host, gid, m := rt.group(1)
	outsider := rt.connect()
	rt.send(host, Packet{ID: U2RSets, Key: KeyGroupPass, Value: 5})
	for _, u := range []uint32{m[0], outsider} {
		rt.send(u, Packet{ID: U2RSets, Control: Respond | Notify, Key: KeyGroupPass, Value: 6})
	}
	rt.send(host, Packet{ID: U2RSets, Control: Respond, Key: 4, Value: 1})
	rt.idle("sets refused", host, m[0], outsider)
	if g, _ := rt.r.Group(gid); g.Password != 5 {
		t.Errorf("password %d, want 5", g.Password)
	}
	for _, u := range []uint32{host, m[0]} {
		rt.send(u, Packet{ID: U2RGets, Key: KeyGroupPass}, Packet{ID: U2RGets, Key: KeyGroupFlags}, Packet{ID: U2RGets, Key: KeyGroupMax})
		rt.want("gets", u, Packet{ID: R2UVals, Key: KeyGroupPass, Value: 5}, Packet{ID: R2UVals, Key: KeyGroupFlags}, Packet{ID: R2UVals, Key: KeyGroupMax, Value: 9})
	}
	rt.send(outsider, Packet{ID: U2RGets, Key: KeyGroupPass})
	rt.send(host, Packet{ID: U2RGets, Key: 0})
	rt.idle("gets refused", host, outsider)
	want := Ignored{Role: 3, Key: 2}
	if got := rt.r.Stats().Ignored; got != want {
		t.Errorf("ignored %+v, want %+v", got, want)
	}
}

// TestRelayKick: "From the outside a group host using the U2R_KICK is no
// different from the user quitting by it's own ... If the UID of the user
// to kick is equal to the UID of the group host the packet should be
// handled the same way as if the host sent a U2R_QUIT packet" (U17).
func TestRelayKick(t *testing.T) {
	rt := newRelayTest(t, Config{})
	host, gid, m := rt.group(2)
	other, _, om := rt.group(1)
	rt.send(host, Packet{ID: U2RKick, UID: m[0]})
	rt.want("kick", m[0], Packet{ID: R2UStat, Role: Connected})
	rt.want("kick, the host", host, Packet{ID: R2ULeft, UID: m[0]})
	if evs := rt.events(); len(evs) != 1 || evs[0] != (Event{Kind: EventLeft, UID: m[0], GID: gid, Kicked: true}) {
		t.Errorf("events %v", evs)
	}
	// Ignored: a kick of a user of another group, of one who left, by a
	// member.
	rt.send(host, Packet{ID: U2RKick, UID: om[0]}, Packet{ID: U2RKick, UID: m[0]})
	rt.send(m[1], Packet{ID: U2RKick, UID: host})
	rt.idle("kicks ignored", host, m[0], m[1], other, om[0])
	if ign := rt.r.Stats().Ignored; ign.Target != 2 || ign.Role != 1 {
		t.Errorf("ignored %+v", ign)
	}
	rt.send(host, Packet{ID: U2RKick, UID: host})
	rt.want("the host kicks itself", host, Packet{ID: R2UStat, Role: Connected})
	rt.want("the host kicks itself, a member", m[1], Packet{ID: R2UStat, Role: Connected})
	if _, ok := rt.r.Group(gid); ok {
		t.Error("the group is still open")
	}
}

// TestRelayDisconnect checks that a user whose stream ends leaves as if
// it had quit, and nobody writes to it again.
func TestRelayDisconnect(t *testing.T) {
	rt := newRelayTest(t, Config{})
	host, gid, m := rt.group(2)
	rt.r.Disconnect(m[0], nil)
	rt.want("a member is gone, the host", host, Packet{ID: R2ULeft, UID: m[0]})
	if _, ok := rt.r.User(m[0]); ok {
		t.Error("the user is still known")
	}
	// Half a packet, then the end: the user is gone, counted.
	rt.r.HandleBytes(host, []byte{byte(U2RSend), 1, 2})
	rt.r.Disconnect(host, nil)
	rt.want("the host is gone", m[1], Packet{ID: R2UStat, Role: Connected})
	evs := rt.events()
	want := []Event{
		{Kind: EventLeft, UID: m[0], GID: gid},
		{Kind: EventDisconnected, UID: m[0], GID: gid},
		{Kind: EventDisbanded, UID: host, GID: gid, Members: 1},
		{Kind: EventDisconnected, UID: host, GID: gid, Err: ErrTruncated},
	}
	if diff := cmp.Diff(want, evs, cmp.Comparer(func(a, b error) bool { return a == b })); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if s := rt.r.Stats(); s.Truncated != 1 || s.Users != 1 || s.Groups != 0 {
		t.Errorf("stats %+v", s)
	}
	rt.r.Disconnect(host, nil) // twice: nothing
	rt.r.HandleBytes(host, []byte{byte(U2RMake)})
	if rt.r.TakeOutput(host, nil) != nil {
		t.Error("output for a user that is gone")
	}
}

// TestRelayBadInput checks that bad bytes close the user who sent them,
// and nobody else (U5, U6).
func TestRelayBadInput(t *testing.T) {
	tests := []struct {
		name  string
		bytes []byte
		err   error
	}{
		{"unknown id", []byte{0x99}, ErrUnknownPacket},
		{"a relay's packet", Append(nil, Packet{ID: R2UStat, Role: Host}), ErrUnknownPacket},
		{"after a good packet", append(Append(nil, Packet{ID: U2RGets, Key: KeyGroupPass}), 0x88), ErrUnknownPacket},
		{"message above the limit", Append(nil, Packet{ID: U2RBrod, Data: make([]byte, 101)})[:9], ErrMessageTooLong},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := newRelayTest(t, Config{MaxMessage: 100})
			host, gid, m := rt.group(2)
			rt.r.HandleBytes(m[0], tt.bytes)
			if _, ok := rt.r.User(m[0]); ok {
				t.Fatal("the user is still connected")
			}
			rt.idle("closed", m[0])
			rt.want("a member closed, the host", host, Packet{ID: R2ULeft, UID: m[0]})
			evs := rt.events()
			if ev := evs[len(evs)-1]; ev.Kind != EventDisconnected || ev.UID != m[0] || ev.GID != gid || ev.Err != tt.err {
				t.Errorf("event %+v", ev)
			}
			// The others go on.
			rt.send(m[1], Packet{ID: U2RBrod, Data: []byte("still here")})
			rt.want("after", host, text(m[1], "still here"))
			rt.want("after", m[1], text(m[1], "still here"))
			s := rt.r.Stats()
			if s.UnknownPacket+s.TooLong != 1 {
				t.Errorf("stats %+v", s)
			}
		})
	}
}

// TestRelayFull: beyond MaxUsers Connect refuses (U13).
func TestRelayFull(t *testing.T) {
	rt := newRelayTest(t, Config{MaxUsers: 2})
	a := rt.connect()
	rt.connect()
	rt.events()
	if _, err := rt.r.Connect(); err != ErrRelayFull {
		t.Fatalf("third Connect: %v", err)
	}
	if evs := rt.events(); len(evs) != 1 || evs[0] != (Event{Kind: EventRefused, Err: ErrRelayFull}) {
		t.Errorf("events %v", evs)
	}
	rt.r.Disconnect(a, nil)
	rt.connect()
	if s := rt.r.Stats(); s.Refused != 1 || s.Users != 2 {
		t.Errorf("stats %+v", s)
	}
}

// TestRelaySlowReader checks U11: a user that lets MaxOutput pile up is
// closed, the others are not, and a reader that keeps up is never closed.
func TestRelaySlowReader(t *testing.T) {
	rt := newRelayTest(t, Config{MaxMessage: 100, MaxOutput: 1000})
	host, gid, m := rt.group(2)
	slow := m[0]
	msg := Packet{ID: U2RBrod, Data: make([]byte, 91)} // 100 bytes as R2U_TEXT
	for range 9 {
		rt.send(m[1], msg)
		rt.output(host)
		rt.output(m[1])
	}
	if _, ok := rt.r.User(slow); !ok {
		t.Fatal("closed at 900 bytes")
	}
	rt.send(m[1], msg) // 1000: the limit
	rt.output(host)
	rt.output(m[1])
	rt.send(m[1], msg) // 1100: above
	if _, ok := rt.r.User(slow); ok {
		t.Fatal("the slow reader is still connected")
	}
	rt.want("the slow reader closed, the host", host, Packet{ID: R2UText, UID: m[1], Data: make([]byte, 91)}, Packet{ID: R2ULeft, UID: slow})
	evs := rt.events()
	if ev := evs[len(evs)-1]; ev.Kind != EventDisconnected || ev.UID != slow || ev.Err != ErrOutputFull || ev.GID != gid {
		t.Errorf("event %+v", ev)
	}
	// A slow host disbands its group: 1000 bytes fit, not 1100.
	for range 10 {
		rt.send(m[1], msg)
		rt.output(m[1])
	}
	if _, ok := rt.r.Group(gid); !ok {
		t.Fatal("the group closed early")
	}
	rt.send(m[1], msg)
	if _, ok := rt.r.Group(gid); ok {
		t.Fatal("a slow host's group is still open")
	}
	rt.want("the member after its host overflowed", m[1], Packet{ID: R2UText, UID: m[1], Data: make([]byte, 91)}, Packet{ID: R2UStat, Role: Connected})
	// 10 broadcasts to 3, one to 2 (the slow member overflowed), 10 to
	// 2, one to 1 (the host overflowed).
	if s := rt.r.Stats(); s.Overflow != 2 || s.Messages != 10*3+2+10*2+1 {
		t.Errorf("stats %+v", s)
	}
}

// TestRelayHeld checks U11's holds: while a user of a group has more than
// HighWater bytes waiting, every user of the group is held, and all are
// named to PollResume when none has.
func TestRelayHeld(t *testing.T) {
	rt := newRelayTest(t, Config{MaxMessage: 100, MaxOutput: 1000, HighWater: 300})
	host, _, m := rt.group(2)
	outsider := rt.connect()
	held := func() []bool {
		var h []bool
		for _, u := range []uint32{host, m[0], m[1], outsider} {
			h = append(h, rt.r.Held(u))
		}
		return h
	}
	msg := Packet{ID: U2RSend, UID: m[1], Data: make([]byte, 91)}
	for range 3 {
		rt.send(m[0], msg)
	}
	if h := held(); h[0] || h[1] {
		t.Fatalf("held at 300 bytes: %v", h)
	}
	rt.send(m[0], msg)
	if diff := cmp.Diff([]bool{true, true, true, false}, held()); diff != "" {
		t.Fatalf("held (-want +got):\n%s", diff)
	}
	if uid, ok := rt.r.PollResume(); ok {
		t.Fatalf("resumed %d while held", uid)
	}
	rt.output(m[1])
	if h := held(); h[0] || h[1] || h[2] {
		t.Fatalf("held after the output was taken: %v", h)
	}
	resumed := map[uint32]bool{}
	for uid, ok := rt.r.PollResume(); ok; uid, ok = rt.r.PollResume() {
		resumed[uid] = true
	}
	if len(resumed) != 3 || !resumed[host] || !resumed[m[0]] || !resumed[m[1]] {
		t.Errorf("resumed %v", resumed)
	}
	// A congested user that leaves releases the group; one that joins
	// holds it.
	for range 4 {
		rt.send(m[0], msg)
	}
	rt.send(m[1], Packet{ID: U2RQuit})
	if h := held(); h[0] || h[1] || h[2] {
		t.Fatalf("held after the congested user left: %v", h)
	}
	rt.send(m[1], Packet{ID: U2RJoin, GID: rt.r.groups[rt.r.users[host].group.gid].gid})
	if h := held(); !h[0] || !h[2] {
		t.Fatalf("not held after a congested user joined: %v", h)
	}
	rt.send(host, Packet{ID: U2RQuit})
	if h := held(); h[0] || h[1] || h[2] {
		t.Fatalf("held after the group closed: %v", h)
	}
}

// TestRelayOrder checks that each recipient gets the messages of each
// sender once, in the order sent, whatever their interleaving.
func TestRelayOrder(t *testing.T) {
	rt := newRelayTest(t, Config{})
	host, _, m := rt.group(2)
	var b0, b1 []byte
	for i := range 50 {
		b0 = Append(b0, Packet{ID: U2RBrod, Data: []byte{0, byte(i)}})
		b1 = Append(b1, Packet{ID: U2RSend, UID: host, Data: []byte{1, byte(i)}})
	}
	// Interleave reads of odd sizes from the two senders.
	for i := 0; i < len(b0) || i < len(b1); i += 7 {
		rt.r.HandleBytes(m[0], b0[min(i, len(b0)):min(i+7, len(b0))])
		rt.r.HandleBytes(m[1], b1[min(i, len(b1)):min(i+7, len(b1))])
	}
	next := [2]byte{}
	for _, p := range rt.output(host) {
		s := p.Data[0]
		if p.Data[1] != next[s] {
			t.Fatalf("from %d: message %d, want %d", s, p.Data[1], next[s])
		}
		next[s]++
	}
	if next != [2]byte{50, 50} {
		t.Errorf("got %v messages", next)
	}
}

// TestRelayPollWrite checks that PollWrite names each user with output
// once, and again once it has more.
func TestRelayPollWrite(t *testing.T) {
	rt := newRelayTest(t, Config{})
	a, _ := rt.r.Connect()
	b, _ := rt.r.Connect()
	got := map[uint32]int{}
	for {
		uid, ok := rt.r.PollWrite()
		if !ok {
			break
		}
		got[uid]++
	}
	if len(got) != 2 || got[a] != 1 || got[b] != 1 {
		t.Errorf("PollWrite named %v", got)
	}
	rt.r.TakeOutput(a, nil)
	rt.send(a, Packet{ID: U2RMake})
	if uid, ok := rt.r.PollWrite(); !ok || uid != a {
		t.Errorf("after a make: %d, %v", uid, ok)
	}
	rt.r.Disconnect(b, nil)
	rt.send(a, Packet{ID: U2RGets, Key: KeyGroupMax})
	rt.r.Disconnect(a, nil)
	if uid, ok := rt.r.PollWrite(); ok {
		t.Errorf("PollWrite named %d, which is gone", uid)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string // in the error, "" for none
	}{
		{"zero", Config{}, ""},
		{"small", Config{MaxUsers: 1, MaxMessage: 1, MaxOutput: 10}, ""},
		{"negative users", Config{MaxUsers: -1}, "MaxUsers"},
		{"too many users", Config{MaxUsers: 1 << 25}, "MaxUsers"},
		{"more groups than users", Config{MaxUsers: 10, MaxGroups: 11}, "MaxGroups"},
		{"negative groups", Config{MaxGroups: -1}, "MaxGroups"},
		{"group above users", Config{MaxUsers: 10, MaxGroupSize: 11}, "MaxGroupSize"},
		{"negative message", Config{MaxMessage: -1}, "MaxMessage"},
		{"message above 1 GiB", Config{MaxMessage: 1<<30 + 1, MaxOutput: 1<<31 - 1}, "MaxMessage"},
		{"output below a message", Config{MaxMessage: 100, MaxOutput: 108}, "MaxOutput"},
		{"output negative", Config{MaxOutput: -1}, "MaxOutput"},
		{"long brand", Config{Brand: strings.Repeat("x", 65)}, "Brand"},
		{"brand of 64", Config{Brand: strings.Repeat("x", 64)}, ""},
		{"NUL in brand", Config{Brand: "a\x00b"}, "NUL"},
		{"partial below a message", Config{MaxMessage: 100, MaxPartial: 108}, "MaxPartial"},
		{"partial of a message", Config{MaxMessage: 100, MaxPartial: 109}, ""},
		{"partial negative", Config{MaxPartial: -1}, "MaxPartial"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			_, nerr := NewRelay(tt.cfg)
			if (err == nil) != (nerr == nil) {
				t.Errorf("Validate %v, NewRelay %v", err, nerr)
			}
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Validate: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Validate: %v, want an error about %s", err, tt.want)
			}
		})
	}
	if err := (ClientConfig{MaxMessage: -1}).Validate(); err == nil {
		t.Error("ClientConfig with a negative MaxMessage is valid")
	}
	if _, err := NewClient(ClientConfig{MaxMessage: 1<<30 + 1}); err == nil {
		t.Error("NewClient with MaxMessage above 1 GiB")
	}
	if err := (ClientConfig{MaxMembers: -1}).Validate(); err == nil || !strings.Contains(err.Error(), "MaxMembers") {
		t.Errorf("ClientConfig with a negative MaxMembers: %v", err)
	}
	if _, err := NewClient(ClientConfig{MaxMembers: -1}); err == nil {
		t.Error("NewClient with a negative MaxMembers")
	}
	if !errors.Is(&VersionError{Version: 2}, ErrBadWelcome) {
		t.Error("VersionError does not match ErrBadWelcome")
	}
}

// partialBrod is all of a U2R_BROD of n bytes of data but its last byte.
func partialBrod(n int) []byte {
	b := Append(nil, Packet{ID: U2RBrod, Data: make([]byte, n)})
	return b[:len(b)-1]
}

// TestRelayIgnoredMessageHeldNot: a CONNECTED user's U2R_BROD is ignored
// (U14), and the relay holds none of its data meanwhile, however long
// the user takes to send its last byte; once it has, it is counted.
func TestRelayIgnoredMessageHeldNot(t *testing.T) {
	rt := newRelayTest(t, Config{MaxMessage: 1 << 20})
	u := rt.connect()
	rt.r.HandleBytes(u, partialBrod(1<<20))
	if rt.r.partial != 0 || rt.r.users[u].dec.Buffered() != 0 {
		t.Fatalf("held %d bytes (%d in all) of an ignored message", rt.r.users[u].dec.Buffered(), rt.r.partial)
	}
	if !rt.r.InPacket(u) {
		t.Error("InPacket = false inside the ignored message")
	}
	rt.r.HandleBytes(u, []byte{0})
	if got := rt.r.Stats().Ignored.Role; got != 1 {
		t.Errorf("Ignored.Role = %d, want 1", got)
	}
	if rt.r.InPacket(u) {
		t.Error("InPacket = true after the message")
	}
	rt.idle("after an ignored message", u)
}

// TestRelayPartialBudget: what the relay holds of packets partly
// received, all users together, is bounded by MaxPartial (U23): the user
// whose packet takes it past the bound is closed, and counted; what the
// others hold is not touched, and a user that finishes its packet, or is
// gone, gives its part back.
func TestRelayPartialBudget(t *testing.T) {
	const msg = 1000
	rt := newRelayTest(t, Config{MaxMessage: msg, MaxPartial: 2*(msg+messageHead) + 100})
	var hosts []uint32
	for range 4 {
		h, _ := rt.make()
		hosts = append(hosts, h)
	}
	rt.events()
	rt.r.HandleBytes(hosts[0], partialBrod(msg))
	rt.r.HandleBytes(hosts[1], partialBrod(msg))
	if got := rt.r.partial; got != 2*(msg+messageHead-1) {
		t.Fatalf("holding %d bytes, want %d", got, 2*(msg+messageHead-1))
	}
	rt.r.HandleBytes(hosts[2], partialBrod(msg))
	if _, ok := rt.r.User(hosts[2]); ok {
		t.Fatal("the user past MaxPartial is still connected")
	}
	if ev := rt.events(); len(ev) == 0 || ev[len(ev)-1].Kind != EventDisconnected || ev[len(ev)-1].Err != ErrPartialFull {
		t.Errorf("events %v, want the user disconnected with ErrPartialFull", ev)
	}
	if got := rt.r.Stats().PartialFull; got != 1 {
		t.Errorf("PartialFull = %d, want 1", got)
	}
	for _, h := range hosts[:2] {
		if _, ok := rt.r.User(h); !ok {
			t.Fatal("a user within the budget was closed")
		}
	}
	// One finishes its message, one goes: the budget is free again.
	rt.r.HandleBytes(hosts[0], []byte{0})
	rt.r.Disconnect(hosts[1], nil)
	if rt.r.partial != 0 {
		t.Fatalf("holding %d bytes with no packet under way", rt.r.partial)
	}
	rt.r.HandleBytes(hosts[3], partialBrod(msg))
	if _, ok := rt.r.User(hosts[3]); !ok {
		t.Error("closed within a budget given back")
	}
}

// TestRelayHeldAfterQuit: a user that joins and quits a group in turn
// queues R2U_JOIN and R2U_LEFT for its host each time; while that host
// has more than HighWater waiting, the user is held as the group's users
// are (U11), and resumed with them, rather than read on until the host's
// output overflows and its group is disbanded.
func TestRelayHeldAfterQuit(t *testing.T) {
	rt := newRelayTest(t, Config{MaxMessage: 100, MaxOutput: 1000, HighWater: 300})
	host, gid, _ := rt.group(0)
	u := rt.connect()
	var batch []byte
	for range 10 {
		batch = Append(batch, Packet{ID: U2RJoin, GID: gid})
		batch = Append(batch, Packet{ID: U2RQuit})
	}
	reads, held := 0, false
	for ; reads < 100 && !held; reads++ {
		rt.r.HandleBytes(u, batch) // the host reads nothing
		rt.r.TakeOutput(u, nil)
		held = rt.r.Held(u)
	}
	if !held {
		t.Fatalf("not held after %d reads; host's output %d bytes", reads, len(rt.r.users[host].out))
	}
	if _, ok := rt.r.User(host); !ok || rt.r.Stats().Overflow != 0 {
		t.Fatal("the host overflowed")
	}
	if uid, ok := rt.r.PollResume(); ok {
		t.Fatalf("resumed %d while the host is behind", uid)
	}
	rt.output(host) // the host reads
	if rt.r.Held(u) {
		t.Error("held once the host read")
	}
	resumed := map[uint32]bool{}
	for uid, ok := rt.r.PollResume(); ok; uid, ok = rt.r.PollResume() {
		resumed[uid] = true
	}
	if !resumed[u] {
		t.Errorf("resumed %v, not the user held", resumed)
	}
	// Held again, then gone: nothing of it is kept by the group.
	for reads = 0; reads < 100 && !rt.r.Held(u); reads++ {
		rt.r.HandleBytes(u, batch)
	}
	rt.r.Disconnect(u, nil)
	if g := rt.r.groups[gid]; len(g.waiters) != 0 {
		t.Errorf("the group keeps %d waiters after the user left", len(g.waiters))
	}
}
