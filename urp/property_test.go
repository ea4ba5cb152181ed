package urp

import (
	stdcmp "cmp"
	"encoding/binary"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// The relay against a model of the specification, written separately and
// as plainly as possible: random users make, join, quit, kick, broadcast,
// send, set and get, disconnect and send garbage, their packets cut at
// random places, and after every step each user's output must be exactly
// what the model says, packet for packet. That proves, among the rest,
// that a message reaches exactly the users the rules allow, once each, in
// the order its sender sent it; that UIDs and GIDs are unique and non-zero;
// and that every role change a user hears follows the specification's
// graph.

// model is the specification's view of a relay.
type model struct {
	cfg    Config
	users  map[uint32]*mUser
	groups map[uint32]*mGroup
	out    map[uint32][]Packet // what each user should have been sent
}

type mUser struct {
	role Role
	gid  uint32
}

type mGroup struct {
	host    uint32
	members []uint32 // the host first, then in the order they joined
	pass    uint32
	flags   uint32
	max     uint32
}

func (m *model) emit(uid uint32, p Packet) { m.out[uid] = append(m.out[uid], p) }

func (m *model) in(uid, gid uint32) bool { return slices.Contains(m.groups[gid].members, uid) }

// leave: a member leaves (quit, kick, gone); gone users are not told.
func (m *model) leave(uid uint32, gone bool) {
	u := m.users[uid]
	g := m.groups[u.gid]
	g.members = slices.DeleteFunc(g.members, func(x uint32) bool { return x == uid })
	if !gone {
		m.emit(uid, Packet{ID: R2UStat, Role: Connected})
	}
	m.emit(g.host, Packet{ID: R2ULeft, UID: uid})
	u.role, u.gid = Connected, 0
}

// disband: the host leaves; every user of the group, host first, is told.
func (m *model) disband(gid uint32, gone uint32) {
	g := m.groups[gid]
	for _, x := range g.members {
		if x != gone {
			m.emit(x, Packet{ID: R2UStat, Role: Connected})
		}
		m.users[x].role, m.users[x].gid = Connected, 0
	}
	delete(m.groups, gid)
}

func (m *model) gone(uid uint32) {
	u := m.users[uid]
	switch u.role {
	case Member:
		m.leave(uid, true)
	case Host:
		m.disband(u.gid, uid)
	}
	delete(m.users, uid)
	delete(m.out, uid)
}

// handle is the model of one packet from uid. made is the GID the relay
// gave a successful U2R_MAKE, which the model cannot draw.
func (m *model) handle(uid uint32, p Packet, made uint32) {
	u := m.users[uid]
	g := m.groups[u.gid]
	switch p.ID {
	case U2RMake:
		if u.role != Connected {
			return
		}
		if len(m.groups) >= m.cfg.MaxGroups {
			m.emit(uid, Packet{ID: R2UMade, Status: StatLimit})
			return
		}
		m.groups[made] = &mGroup{host: uid, members: []uint32{uid}, max: uint32(m.cfg.MaxGroupSize)}
		u.role, u.gid = Host, made
		m.emit(uid, Packet{ID: R2UMade, Status: StatMade, GID: made})
		m.emit(uid, Packet{ID: R2UStat, Role: Host})
	case U2RJoin:
		if u.role != Connected {
			return
		}
		t := m.groups[p.GID]
		fail := func(s Status) { m.emit(uid, Packet{ID: R2UMade, Status: s, GID: p.GID}) }
		switch {
		case t == nil || t.pass != p.Password:
			fail(StatPass)
		case t.flags&FlagLock != 0:
			fail(StatLock)
		case uint64(len(t.members)) >= min(uint64(t.max), uint64(m.cfg.MaxGroupSize)):
			fail(StatFull)
		default:
			t.members = append(t.members, uid)
			u.role, u.gid = Member, p.GID
			m.emit(uid, Packet{ID: R2UMade, Status: StatJoin, GID: p.GID})
			m.emit(uid, Packet{ID: R2UStat, Role: Member})
			m.emit(t.host, Packet{ID: R2UJoin, UID: uid})
		}
	case U2RQuit:
		switch u.role {
		case Member:
			m.leave(uid, false)
		case Host:
			m.disband(u.gid, 0)
		}
	case U2RBrod:
		if u.role == Connected || u.role == Member && g.flags&FlagNoBrod != 0 {
			return
		}
		for _, x := range g.members {
			if x != p.UID {
				m.emit(x, Packet{ID: R2UText, UID: uid, Data: p.Data})
			}
		}
	case U2RSend:
		if u.role == Connected || !m.in(p.UID, u.gid) {
			return
		}
		if u.role == Member && (g.flags&FlagNoSend != 0 || g.flags&FlagNoP2P != 0 && p.UID != g.host) {
			return
		}
		m.emit(p.UID, Packet{ID: R2UText, UID: uid, Data: p.Data})
	case U2RSets:
		if !p.Key.Known() || u.role != Host {
			return
		}
		switch p.Key {
		case KeyGroupPass:
			g.pass = p.Value
		case KeyGroupFlags:
			g.flags = p.Value
		case KeyGroupMax:
			g.max = p.Value
		}
		v := Packet{ID: R2UVals, Key: p.Key, Value: p.Value}
		if p.Control&Respond != 0 {
			m.emit(uid, v)
		}
		if p.Control&Notify != 0 {
			for _, x := range g.members {
				if x != uid {
					m.emit(x, v)
				}
			}
		}
	case U2RGets:
		if !p.Key.Known() || u.role == Connected {
			return
		}
		v := map[Key]uint32{KeyGroupPass: g.pass, KeyGroupFlags: g.flags, KeyGroupMax: g.max}[p.Key]
		m.emit(uid, Packet{ID: R2UVals, Key: p.Key, Value: v})
	case U2RKick:
		switch {
		case u.role != Host:
		case p.UID == uid:
			m.disband(u.gid, 0)
		case m.in(p.UID, u.gid):
			m.leave(p.UID, false)
		}
	}
}

// relayProp runs the relay beside the model.
type relayProp struct {
	r     *Relay
	m     *model
	live  []uint32        // connected users, in the order they came
	heard map[uint32]Role // the role each user last heard of
	seq   uint32
}

func newRelayProp(t *rapid.T) *relayProp {
	cfg := Config{
		MaxUsers:   rapid.IntRange(1, 12).Draw(t, "maxUsers"),
		MaxMessage: 64,
		MaxOutput:  1 << 20,
		Brand:      "prop",
	}
	cfg.MaxGroups = rapid.IntRange(1, cfg.MaxUsers).Draw(t, "maxGroups")
	cfg.MaxGroupSize = rapid.IntRange(1, cfg.MaxUsers).Draw(t, "maxGroupSize")
	r, err := NewRelay(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &relayProp{
		r:     r,
		m:     &model{cfg: r.Config(), users: map[uint32]*mUser{}, groups: map[uint32]*mGroup{}, out: map[uint32][]Packet{}},
		heard: map[uint32]Role{},
	}
}

func (s *relayProp) user(t *rapid.T) uint32 {
	return rapid.SampledFrom(s.live).Draw(t, "user")
}

// anyUID draws a UID of a member of uid's group (most often), of any
// user, uid itself, 0 or one of nobody.
func (s *relayProp) anyUID(t *rapid.T, uid uint32) uint32 {
	if g := s.m.groups[s.m.users[uid].gid]; g != nil && rapid.IntRange(0, 3).Draw(t, "member?") > 0 {
		return rapid.SampledFrom(g.members).Draw(t, "member")
	}
	return rapid.SampledFrom(append([]uint32{0, 77, uid}, s.live...)).Draw(t, "uid")
}

// feed hands the relay the packet from uid cut in two at a random place,
// and the model the packet.
func (s *relayProp) feed(t *rapid.T, uid uint32, p Packet) {
	b := Append(nil, p)
	cut := rapid.IntRange(0, len(b)).Draw(t, "cut")
	s.r.HandleBytes(uid, b[:cut])
	s.r.HandleBytes(uid, b[cut:])
	var made uint32
	if p.ID == U2RMake {
		made = s.peekMade(t, uid)
	}
	s.m.handle(uid, p, made)
}

// peekMade returns the GID in the relay's answer to a U2R_MAKE, checking
// that it is new and not 0.
func (s *relayProp) peekMade(t *rapid.T, uid uint32) uint32 {
	info, _ := s.r.User(uid)
	if info.Role != Host || s.m.users[uid].role != Connected {
		return 0
	}
	if info.GID == 0 || s.m.groups[info.GID] != nil {
		t.Fatalf("GID %d given to a new group", info.GID)
	}
	return info.GID
}

func (s *relayProp) drop(uid uint32) {
	s.live = slices.DeleteFunc(s.live, func(x uint32) bool { return x == uid })
	delete(s.heard, uid)
	s.m.gone(uid)
}

// action is one kind of step, drawn in proportion to its weight.
type action struct {
	name   string
	weight int
	do     func(*rapid.T)
}

func (s *relayProp) actions() []action {
	return []action{
		{"connect", 3, s.connect},
		{"disconnect", 1, func(t *rapid.T) {
			uid := s.user(t)
			s.r.Disconnect(uid, nil)
			s.drop(uid)
		}},
		{"garbage", 1, func(t *rapid.T) {
			uid := s.user(t)
			bad := rapid.SampledFrom([]byte{0x00, 0x06, 0x7f, 0x88, 0xff}).Draw(t, "bad")
			s.r.HandleBytes(uid, []byte{bad, 1, 2, 3})
			s.drop(uid)
		}},
		{"make", 2, func(t *rapid.T) { s.feed(t, s.user(t), Packet{ID: U2RMake}) }},
		{"join", 4, func(t *rapid.T) {
			uid := s.user(t)
			gid, pass := uint32(5), uint32(rapid.IntRange(0, 2).Draw(t, "password"))
			var gids []uint32
			for g := range s.m.groups {
				gids = append(gids, g)
			}
			slices.Sort(gids)
			if len(gids) > 0 && rapid.IntRange(0, 4).Draw(t, "open group?") > 0 {
				gid = rapid.SampledFrom(gids).Draw(t, "gid")
				if rapid.IntRange(0, 4).Draw(t, "right password?") > 0 {
					pass = s.m.groups[gid].pass
				}
			}
			s.feed(t, uid, Packet{ID: U2RJoin, GID: gid, Password: pass})
		}},
		{"quit", 1, func(t *rapid.T) { s.feed(t, s.user(t), Packet{ID: U2RQuit}) }},
		{"kick", 1, func(t *rapid.T) {
			uid := s.user(t)
			s.feed(t, uid, Packet{ID: U2RKick, UID: s.anyUID(t, uid)})
		}},
		{"broadcast", 3, func(t *rapid.T) {
			uid := s.user(t)
			s.feed(t, uid, Packet{ID: U2RBrod, UID: s.anyUID(t, uid), Data: s.payload(uid)})
		}},
		{"send", 3, func(t *rapid.T) {
			uid := s.user(t)
			s.feed(t, uid, Packet{ID: U2RSend, UID: s.anyUID(t, uid), Data: s.payload(uid)})
		}},
		{"set", 3, func(t *rapid.T) {
			uid := s.user(t)
			key := Key(rapid.IntRange(0, 4).Draw(t, "key"))
			v := uint32(rapid.IntRange(0, 6).Draw(t, "value"))
			if key == KeyGroupFlags {
				v = uint32(rapid.IntRange(0, 0x1f).Draw(t, "flags"))
			}
			ctl := Control(rapid.Byte().Draw(t, "control"))
			s.feed(t, uid, Packet{ID: U2RSets, Control: ctl, Key: key, Value: v})
		}},
		{"get", 1, func(t *rapid.T) {
			uid := s.user(t)
			s.feed(t, uid, Packet{ID: U2RGets, Key: Key(rapid.IntRange(0, 4).Draw(t, "key"))})
		}},
	}
}

func (s *relayProp) connect(t *rapid.T) {
	uid, err := s.r.Connect()
	if len(s.m.users) >= s.m.cfg.MaxUsers {
		if err != ErrRelayFull {
			t.Fatalf("Connect beyond MaxUsers: %v", err)
		}
		return
	}
	if err != nil || uid == 0 || s.m.users[uid] != nil {
		t.Fatalf("Connect = %d, %v", uid, err)
	}
	s.m.users[uid] = &mUser{role: Connected}
	s.m.emit(uid, Packet{ID: R2UWelc, Version: Version, UID: uid, Brand: "prop"})
	s.m.emit(uid, Packet{ID: R2UStat, Role: Connected})
	s.live = append(s.live, uid)
}

// run draws and carries out steps, checking after each.
func (s *relayProp) run(t *rapid.T) {
	acts := s.actions()
	var names []string
	for i, a := range acts {
		for range a.weight {
			names = append(names, acts[i].name)
		}
	}
	byName := map[string]func(*rapid.T){}
	for _, a := range acts {
		byName[a.name] = a.do
	}
	steps := rapid.IntRange(1, 300).Draw(t, "steps")
	for range steps {
		name := rapid.SampledFrom(names).Draw(t, "action")
		if len(s.live) == 0 {
			name = "connect"
		}
		byName[name](t)
		s.check(t)
	}
}

// payload is a message that names its sender and its number.
func (s *relayProp) payload(uid uint32) []byte {
	s.seq++
	return binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, uid), s.seq)
}

// check compares every user's output and the relay's state with the
// model, and checks the role changes each user heard.
func (s *relayProp) check(t *rapid.T) {
	for {
		uid, ok := s.r.PollWrite()
		if !ok {
			break
		}
		if s.m.users[uid] == nil {
			t.Fatalf("output for %d, who is gone", uid)
		}
	}
	for _, uid := range s.live {
		d := NewDecoder(ToUser, 1<<20)
		got, _, err := decodeChunks(d, [][]byte{s.r.TakeOutput(uid, nil)})
		if err != nil || d.End() != nil {
			t.Fatalf("output to %d: %v", uid, err)
		}
		if diff := cmp.Diff(s.m.out[uid], got, equateEmpty); diff != "" {
			t.Fatalf("output to %d (-model +relay):\n%s", uid, diff)
		}
		s.m.out[uid] = nil
		for _, p := range got {
			if p.ID != R2UStat {
				continue
			}
			from, seen := s.heard[uid]
			ok := !seen && p.Role == Connected ||
				from == Connected && (p.Role == Member || p.Role == Host) ||
				(from == Member || from == Host) && p.Role == Connected
			if !ok {
				t.Fatalf("%d heard its role go from %v to %v", uid, from, p.Role)
			}
			s.heard[uid] = p.Role
		}
	}
	var want []UserInfo
	for uid, u := range s.m.users {
		want = append(want, UserInfo{UID: uid, Role: u.role, GID: u.gid})
	}
	slices.SortFunc(want, func(a, b UserInfo) int { return stdcmp.Compare(a.UID, b.UID) })
	if diff := cmp.Diff(want, s.r.Users(), equateEmpty); diff != "" {
		t.Fatalf("users (-model +relay):\n%s", diff)
	}
	var wantG []GroupInfo
	for gid, g := range s.m.groups {
		wantG = append(wantG, GroupInfo{GID: gid, Host: g.host, Members: g.members, Password: g.pass, Flags: g.flags, Max: g.max})
	}
	slices.SortFunc(wantG, func(a, b GroupInfo) int { return stdcmp.Compare(a.GID, b.GID) })
	if diff := cmp.Diff(wantG, s.r.Groups(), equateEmpty); diff != "" {
		t.Fatalf("groups (-model +relay):\n%s", diff)
	}
	for s.drainEvent(t) {
	}
}

// drainEvent takes one event and checks the closes of garbage senders.
func (s *relayProp) drainEvent(t *rapid.T) bool {
	ev, ok := s.r.PollEvent()
	if ok && ev.Kind == EventDisconnected && ev.Err != nil && ev.Err != ErrUnknownPacket {
		t.Fatalf("%d closed: %v", ev.UID, ev.Err)
	}
	return ok
}

func TestRelayModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		newRelayProp(t).run(t)
	})
}
