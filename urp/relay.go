package urp

import (
	"cmp"
	"slices"

	"github.com/fastnet-engine/fastnet/internal/fifo"
)

// Relay is the state machine of a URP relay: its users, their roles and
// its groups. It reads nothing and writes nothing itself: a driver tells
// it of new users (Connect), of the bytes each sends (HandleBytes) and of
// the ends of their streams (Disconnect), and takes from it the bytes to
// write to each user (PollWrite, TakeOutput) and what happened
// (PollEvent). See the package documentation for the procedure.
//
// A Relay must not be used from more than one goroutine at a time.
type Relay struct {
	cfg     Config
	users   map[uint32]*user
	groups  map[uint32]*group
	ready   []uint32 // users whose output grew since PollWrite last said so
	resumed []uint32 // users no longer held since PollResume last said so
	events  fifo.Queue[Event]
	doomed  []*user // users to close once the packet being handled is done
	scratch []byte
	stats   Stats
	// partial is the bytes the users' decoders hold of packets not yet
	// complete, all users together (Config.MaxPartial).
	partial int
}

// user is one connected user.
type user struct {
	uid   uint32
	role  Role
	group *group
	dec   Decoder
	out   []byte // encoded packets waiting for TakeOutput
	ready bool   // in Relay.ready
	// congested: more than HighWater bytes wait in out; it holds its
	// group (U11).
	congested bool
	// doomed: its output overflowed; it is closed once the current
	// packet is handled. closed: it is gone.
	doomed, closed bool
	// partial is what dec held of a packet not yet complete when last
	// counted in Relay.partial.
	partial int
	// left is the group the user last left of its own accord (U2R_QUIT):
	// its host heard R2U_LEFT of it, and while the group is held, the
	// user is held too (Held). waitOn is the group among whose waiters
	// the user is, to be named to PollResume with its users, or nil.
	left, waitOn *group
}

// group is one open group.
type group struct {
	gid      uint32
	host     *user
	members  []*user // in the order they joined, the host first
	password uint32
	flags    uint32
	max      uint32 // GROUP_MAX as set; the limit is min(max, MaxGroupSize)
	// congested counts the users of the group over HighWater: while it
	// is not 0, the group's users are held (U11).
	congested int
	// waiters are the users held for having left the group (user.left),
	// named to PollResume with its users when it is no longer held.
	waiters []*user
}

// EventKind says what an Event reports.
type EventKind uint8

// The kinds of Event, with the fields each sets.
const (
	// EventConnected: a user connected (UID).
	EventConnected EventKind = iota + 1
	// EventDisconnected: a user is gone (UID, GID of the group it was in
	// or 0, Err: why). The driver closes its connection if it has not.
	EventDisconnected
	// EventMade: a user made a group and hosts it (UID, GID).
	EventMade
	// EventMakeFailed: a U2R_MAKE was answered with a failure (UID,
	// Status).
	EventMakeFailed
	// EventJoined: a user joined a group (UID, GID).
	EventJoined
	// EventJoinFailed: a U2R_JOIN was answered with a failure (UID, GID
	// asked for, Status).
	EventJoinFailed
	// EventLeft: a member left its group (UID, GID; Kicked if the host
	// kicked it).
	EventLeft
	// EventDisbanded: a host left its group, which is closed (UID of the
	// host, GID, Members: how many members went back to CONNECTED with
	// it).
	EventDisbanded
	// EventSet: a host changed a setting of its group (UID, GID, Key,
	// Value).
	EventSet
	// EventRefused: Connect refused a connection, the relay being full
	// (Err: ErrRelayFull, U13).
	EventRefused
)

// String returns the kind's name.
func (k EventKind) String() string {
	switch k {
	case EventConnected:
		return "connected"
	case EventDisconnected:
		return "disconnected"
	case EventMade:
		return "made"
	case EventMakeFailed:
		return "make-failed"
	case EventJoined:
		return "joined"
	case EventJoinFailed:
		return "join-failed"
	case EventLeft:
		return "left"
	case EventDisbanded:
		return "disbanded"
	case EventSet:
		return "set"
	case EventRefused:
		return "refused"
	}
	return "EventKind(?)"
}

// Event is something that happened to the relay's users and groups, for
// the driver to act on (EventDisconnected) or to log. The fields each
// kind sets are listed with the kinds.
type Event struct {
	Kind    EventKind
	UID     uint32
	GID     uint32
	Status  Status
	Key     Key
	Value   uint32
	Kicked  bool
	Members int
	Err     error
}

// Stats are a relay's counters.
type Stats struct {
	// Users and Groups are those connected and open now.
	Users, Groups int
	// Connects counts the users ever connected, Refused the connections
	// Connect turned away (U13).
	Connects, Refused uint64
	// Why users were closed by the relay: an unknown packet identifier
	// (U5), a message above MaxMessage (U6), output above MaxOutput
	// (U11), a packet partly received past MaxPartial, all users
	// together (U23). Truncated counts streams that ended inside a
	// packet.
	UnknownPacket, TooLong, Overflow, PartialFull, Truncated uint64
	// Guessing counts the users closed for a join their
	// Config.JoinGuard did not let fail (U26).
	Guessing uint64
	// Messages and MessageBytes count the R2U_TEXT packets queued for
	// users, and their data.
	Messages, MessageBytes uint64
	// Ignored counts the packets the relay ignored, by reason (U14).
	Ignored Ignored
}

// Ignored counts packets a relay ignores, as the specification says it
// must, by reason (U14).
type Ignored struct {
	// Role: the packet is not allowed in the sender's role.
	Role uint64
	// Flags: the group's NOSEND, NOBROD or NOP2P forbids it.
	Flags uint64
	// Target: U2R_SEND or U2R_KICK names a user not in the group.
	Target uint64
	// Key: U2R_SETS or U2R_GETS names a key URP 1.0 does not define.
	Key uint64
}

// UserInfo describes a connected user.
type UserInfo struct {
	UID  uint32 // the user's id
	Role Role   // its role
	GID  uint32 // its group, or 0
	// Queued is the bytes waiting for TakeOutput.
	Queued int
}

// GroupInfo describes an open group.
type GroupInfo struct {
	GID  uint32 // the group's id
	Host uint32 // its host's UID
	// Members lists the users of the group in the order they joined, the
	// host first.
	Members  []uint32
	Password uint32 // GROUP_PASS
	Flags    uint32 // GROUP_FLAGS, every bit as set (U10)
	// Max is GROUP_MAX as set; the group takes at most
	// min(Max, Config.MaxGroupSize) users.
	Max uint32
}

// NewRelay returns a relay with no users, or the error of an invalid
// config.
func NewRelay(cfg Config) (*Relay, error) {
	cfg, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	return &Relay{
		cfg:    cfg,
		users:  make(map[uint32]*user),
		groups: make(map[uint32]*group),
	}, nil
}

// Config returns the relay's configuration with its defaults filled in.
func (r *Relay) Config() Config { return r.cfg }

// Connect adds a user for a new connection: it draws its UID, gives it
// the CONNECTED role and queues R2U_WELC and R2U_STAT for it. With
// MaxUsers users connected it returns ErrRelayFull and the driver closes
// the connection (U13).
func (r *Relay) Connect() (uint32, error) {
	if len(r.users) >= r.cfg.MaxUsers {
		r.stats.Refused++
		r.event(Event{Kind: EventRefused, Err: ErrRelayFull})
		return 0, ErrRelayFull
	}
	uid := r.drawID(func(id uint32) bool { return r.users[id] != nil })
	u := &user{uid: uid, role: Connected}
	u.dec = Decoder{dir: ToRelay, maxData: r.cfg.MaxMessage}
	// A CONNECTED user's U2R_BROD and U2R_SEND are ignored (U14), and
	// only the user's own packets change its role from CONNECTED:
	// their data are skipped, never held.
	u.dec.SetIgnore(func(ID) bool { return u.role == Connected })
	r.users[uid] = u
	r.stats.Connects++
	r.send(u, Packet{ID: R2UWelc, Version: Version, Revision: Revision, UID: uid, Brand: r.cfg.Brand})
	r.send(u, Packet{ID: R2UStat, Role: Connected})
	r.event(Event{Kind: EventConnected, UID: uid})
	return uid, nil
}

// drawID draws a non-zero 32-bit id that used does not report (U3). The
// ids in use are at most MaxUsers, a tiny part of the space, so a draw
// rarely repeats.
func (r *Relay) drawID(used func(uint32) bool) uint32 {
	for {
		id := r.cfg.Rand.Uint32()
		if id != 0 && !used(id) {
			return id
		}
	}
}

// HandleBytes handles the bytes that user uid sent, the next part of its
// stream, in any cut. Bytes of an unknown (or closed) user are ignored.
// A user whose bytes break the protocol is closed (U5, U6), and nobody
// else. b is not kept after HandleBytes returns.
func (r *Relay) HandleBytes(uid uint32, b []byte) {
	u := r.users[uid]
	if u == nil {
		return
	}
	u.dec.Feed(b)
	for !u.closed {
		p, ok, err := u.dec.Next()
		if err != nil {
			r.close(u, err)
			break
		}
		if !ok {
			break
		}
		r.handle(u, p)
		r.settle()
	}
	u.dec.in = nil // a closed user's stream is not read further
	if u.closed {
		return
	}
	// What the user's packet not yet complete holds, against the
	// relay's budget: the user whose packet takes it past MaxPartial is
	// closed.
	r.partial += u.dec.Buffered() - u.partial
	u.partial = u.dec.Buffered()
	if r.partial > r.cfg.MaxPartial {
		r.close(u, ErrPartialFull)
		r.settle()
	}
}

// InPacket reports whether user uid's stream is inside a packet: some
// of it has come and not all. A driver may bound how long it waits for
// the rest (urpserver's PacketTimeout).
func (r *Relay) InPacket(uid uint32) bool {
	u := r.users[uid]
	return u != nil && u.dec.InPacket()
}

// Disconnect reports that user uid's stream ended or broke, or that the
// driver closed it: reason says why (nil for a clean end of stream). A
// stream that ended inside a packet is counted as truncated. The user
// leaves its group (a host disbands it) and is forgotten; its output is
// dropped. A user already closed is ignored.
func (r *Relay) Disconnect(uid uint32, reason error) {
	u := r.users[uid]
	if u == nil {
		return
	}
	if err := u.dec.End(); err != nil && reason == nil {
		reason = err
	}
	r.close(u, reason)
	r.settle()
}

// PollWrite returns a user whose output grew since PollWrite last returned
// it, or false when there is none: the driver then takes that output with
// TakeOutput. A user it returns may have been closed since.
func (r *Relay) PollWrite() (uint32, bool) {
	for len(r.ready) > 0 {
		uid := r.ready[len(r.ready)-1]
		r.ready = r.ready[:len(r.ready)-1]
		if u := r.users[uid]; u != nil && u.ready {
			u.ready = false
			return uid, true
		}
	}
	return 0, false
}

// TakeOutput returns the bytes waiting to be written to user uid, in
// order, and gives the relay spare (emptied) to queue the next ones in:
// the returned slice is the caller's, and spare is the relay's. It
// returns nil for an unknown user. Bytes taken are no longer counted
// against MaxOutput, so a driver holds at most one MaxOutput more per
// user than the relay does (U11).
func (r *Relay) TakeOutput(uid uint32, spare []byte) []byte {
	u := r.users[uid]
	if u == nil {
		return nil
	}
	out := u.out
	u.out = spare[:0]
	r.decongest(u)
	return out
}

// Held reports whether the driver should not read user uid's stream for
// now: a user of its group has more than Config.HighWater bytes waiting
// (U11). The driver asks before each read and, when the answer is yes,
// waits until PollResume names the user.
func (r *Relay) Held(uid uint32) bool {
	u := r.users[uid]
	switch {
	case u == nil:
		return false
	case u.group != nil:
		return u.group.congested > 0
	case u.left != nil && u.left.congested > 0:
		// It left a group whose host it keeps busy: every U2R_JOIN
		// and U2R_QUIT of a user that comes and goes queues output
		// for the host, and a user out of the group was never held,
		// so joining and quitting in turn took a slow host past its
		// MaxOutput and disbanded its group (U11).
		if u.waitOn == nil {
			u.waitOn = u.left
			u.left.waiters = append(u.left.waiters, u)
		}
		return true
	}
	return false
}

// PollResume returns a user that Held stopped holding, or false when there
// is none. A user it returns may be held again or gone since.
func (r *Relay) PollResume() (uint32, bool) {
	if len(r.resumed) == 0 {
		return 0, false
	}
	uid := r.resumed[len(r.resumed)-1]
	r.resumed = r.resumed[:len(r.resumed)-1]
	return uid, true
}

// decongest marks u no longer congested if its output is under HighWater,
// and releases its group if it was the last one holding it.
func (r *Relay) decongest(u *user) {
	if !u.congested || len(u.out) > r.cfg.HighWater {
		return
	}
	u.congested = false
	if g := u.group; g != nil {
		r.unhold(g)
	}
}

// unhold takes one congested user off g's count, and names g's users to
// PollResume when none is left.
func (r *Relay) unhold(g *group) {
	g.congested--
	if g.congested > 0 {
		return
	}
	for _, m := range g.members {
		r.resumed = append(r.resumed, m.uid)
	}
	for _, w := range g.waiters {
		w.waitOn = nil
		r.resumed = append(r.resumed, w.uid)
	}
	clear(g.waiters)
	g.waiters = g.waiters[:0]
}

// PollEvent returns the next event, or false when there is none.
func (r *Relay) PollEvent() (Event, bool) { return r.events.Take() }

// Stats returns the relay's counters.
func (r *Relay) Stats() Stats {
	s := r.stats
	s.Users, s.Groups = len(r.users), len(r.groups)
	return s
}

// User describes the connected user uid.
func (r *Relay) User(uid uint32) (UserInfo, bool) {
	u := r.users[uid]
	if u == nil {
		return UserInfo{}, false
	}
	return u.info(), true
}

func (u *user) info() UserInfo {
	i := UserInfo{UID: u.uid, Role: u.role, Queued: len(u.out)}
	if u.group != nil {
		i.GID = u.group.gid
	}
	return i
}

// Users describes every connected user, by UID.
func (r *Relay) Users() []UserInfo {
	us := make([]UserInfo, 0, len(r.users))
	for _, u := range r.users {
		us = append(us, u.info())
	}
	slices.SortFunc(us, func(a, b UserInfo) int { return cmp.Compare(a.UID, b.UID) })
	return us
}

// Group describes the open group gid.
func (r *Relay) Group(gid uint32) (GroupInfo, bool) {
	g := r.groups[gid]
	if g == nil {
		return GroupInfo{}, false
	}
	return g.info(), true
}

func (g *group) info() GroupInfo {
	i := GroupInfo{GID: g.gid, Host: g.host.uid, Password: g.password, Flags: g.flags, Max: g.max}
	for _, m := range g.members {
		i.Members = append(i.Members, m.uid)
	}
	return i
}

// Groups describes every open group, by GID.
func (r *Relay) Groups() []GroupInfo {
	gs := make([]GroupInfo, 0, len(r.groups))
	for _, g := range r.groups {
		gs = append(gs, g.info())
	}
	slices.SortFunc(gs, func(a, b GroupInfo) int { return cmp.Compare(a.GID, b.GID) })
	return gs
}

func (r *Relay) event(ev Event) { r.events.Push(ev) }

// send queues p for u.
func (r *Relay) send(u *user, p Packet) {
	r.scratch = Append(r.scratch[:0], p)
	r.deliver(u, r.scratch)
}

// deliver queues the encoded packets b for u. If they would take u's
// output above MaxOutput, u is doomed instead: it gets nothing more and
// is closed once the packet being handled is done (U11).
func (r *Relay) deliver(u *user, b []byte) {
	if u.closed || u.doomed {
		return
	}
	if len(u.out)+len(b) > r.cfg.MaxOutput {
		u.doomed = true
		r.doomed = append(r.doomed, u)
		return
	}
	if !u.ready {
		u.ready = true
		r.ready = append(r.ready, u.uid)
	}
	u.out = append(u.out, b...)
	if !u.congested && len(u.out) > r.cfg.HighWater {
		u.congested = true
		if u.group != nil {
			u.group.congested++
		}
	}
}

// settle closes the users whose output overflowed. Closing one can queue
// packets for others (a host's members), so it goes on until none is left.
func (r *Relay) settle() {
	for i := 0; i < len(r.doomed); i++ {
		r.close(r.doomed[i], ErrOutputFull)
	}
	clear(r.doomed)
	r.doomed = r.doomed[:0]
}

// close removes u: it leaves its group (a host disbands it) without
// hearing of it, its output is dropped, and an EventDisconnected tells the
// driver.
func (r *Relay) close(u *user, reason error) {
	if u.closed {
		return
	}
	u.closed = true
	var gid uint32
	if g := u.group; g != nil {
		gid = g.gid
		if u.role == Host {
			r.disband(g)
		} else {
			r.leave(u, false)
		}
	}
	r.partial -= u.partial
	u.partial = 0
	if g := u.waitOn; g != nil {
		if i := slices.Index(g.waiters, u); i >= 0 {
			g.waiters = slices.Delete(g.waiters, i, i+1)
		}
	}
	u.left, u.waitOn = nil, nil
	switch reason {
	case ErrPartialFull:
		r.stats.PartialFull++
	case ErrUnknownPacket:
		r.stats.UnknownPacket++
	case ErrMessageTooLong:
		r.stats.TooLong++
	case ErrOutputFull:
		r.stats.Overflow++
	case ErrTruncated:
		r.stats.Truncated++
	case ErrGuessing:
		r.stats.Guessing++
	}
	delete(r.users, u.uid)
	u.out = nil
	r.event(Event{Kind: EventDisconnected, UID: u.uid, GID: gid, Err: reason})
}

// handle carries out one packet from u.
func (r *Relay) handle(u *user, p Packet) {
	switch p.ID {
	case U2RMake:
		r.make(u)
	case U2RJoin:
		r.join(u, p.GID, p.Password)
	case U2RQuit:
		if u.role == Connected {
			r.stats.Ignored.Role++
			return
		}
		r.quit(u)
	case U2RBrod:
		r.broadcast(u, p.UID, p.Data)
	case U2RSend:
		r.sendTo(u, p.UID, p.Data)
	case U2RSets:
		r.set(u, p.Control, p.Key, p.Value)
	case U2RGets:
		r.get(u, p.Key)
	case U2RKick:
		r.kick(u, p.UID)
	}
}

// quit takes u, a member or a host, out of its group.
func (r *Relay) quit(u *user) {
	if u.role == Host {
		r.disband(u.group)
		return
	}
	g := u.group
	r.leave(u, false)
	u.left = g
}

// make carries out U2R_MAKE: u becomes the host of a new group, answered
// R2U_MADE then R2U_STAT (U1), or R2U_MADE alone with STAT_LIMIT (U4).
func (r *Relay) make(u *user) {
	if u.role != Connected {
		r.stats.Ignored.Role++
		return
	}
	if len(r.groups) >= r.cfg.MaxGroups {
		r.send(u, Packet{ID: R2UMade, Status: StatLimit})
		r.event(Event{Kind: EventMakeFailed, UID: u.uid, Status: StatLimit})
		return
	}
	gid := r.drawID(func(id uint32) bool { return r.groups[id] != nil })
	g := &group{gid: gid, host: u, members: []*user{u}, max: uint32(r.cfg.MaxGroupSize)}
	r.groups[gid] = g
	u.role, u.group = Host, g
	if u.congested {
		g.congested++
	}
	r.send(u, Packet{ID: R2UMade, Status: StatMade, GID: gid})
	r.send(u, Packet{ID: R2UStat, Role: Host})
	r.event(Event{Kind: EventMade, UID: u.uid, GID: gid})
}

// join carries out U2R_JOIN (U4), within the failures the JoinGuard
// allows (U26).
func (r *Relay) join(u *user, gid, password uint32) {
	if u.role != Connected {
		r.stats.Ignored.Role++
		return
	}
	guard := r.cfg.JoinGuard
	if guard != nil && !guard.MayFail(u.uid) {
		r.close(u, ErrGuessing)
		return
	}
	g := r.groups[gid]
	var status Status
	switch {
	case g == nil || g.password != password:
		status = StatPass
	case g.flags&FlagLock != 0:
		status = StatLock
	case len(g.members) >= g.limit(r.cfg.MaxGroupSize):
		status = StatFull
	}
	if status == StatPass && guard != nil {
		guard.Failed(u.uid)
	}
	if status != 0 {
		r.send(u, Packet{ID: R2UMade, Status: status, GID: gid})
		r.event(Event{Kind: EventJoinFailed, UID: u.uid, GID: gid, Status: status})
		return
	}
	g.members = append(g.members, u)
	u.role, u.group = Member, g
	if u.congested {
		g.congested++
	}
	r.send(u, Packet{ID: R2UMade, Status: StatJoin, GID: gid})
	r.send(u, Packet{ID: R2UStat, Role: Member})
	r.send(g.host, Packet{ID: R2UJoin, UID: u.uid})
	r.event(Event{Kind: EventJoined, UID: u.uid, GID: gid})
}

// limit returns the most users g may hold (U12).
func (g *group) limit(relayMax int) int {
	return int(min(uint64(g.max), uint64(relayMax)))
}

// leave takes member u out of its group: it hears R2U_STAT (unless it is
// gone), the host R2U_LEFT.
func (r *Relay) leave(u *user, kicked bool) {
	g := u.group
	if i := slices.Index(g.members, u); i >= 0 {
		g.members = slices.Delete(g.members, i, i+1)
	}
	u.role, u.group = Connected, nil
	if u.congested {
		r.unhold(g)
	}
	r.send(u, Packet{ID: R2UStat, Role: Connected})
	r.send(g.host, Packet{ID: R2ULeft, UID: u.uid})
	r.event(Event{Kind: EventLeft, UID: u.uid, GID: g.gid, Kicked: kicked})
}

// disband closes g, whose host leaves: every user of it, the host first,
// goes back to CONNECTED and hears R2U_STAT (unless it is gone).
func (r *Relay) disband(g *group) {
	delete(r.groups, g.gid)
	if g.congested > 0 {
		g.congested = 1
		r.unhold(g)
	}
	for _, m := range g.members {
		m.role, m.group = Connected, nil
		r.send(m, Packet{ID: R2UStat, Role: Connected})
	}
	r.event(Event{Kind: EventDisbanded, UID: g.host.uid, GID: g.gid, Members: len(g.members) - 1})
	g.members = nil
}

// broadcast carries out U2R_BROD: every user of the group but exclude,
// the sender included, gets the message (U7).
func (r *Relay) broadcast(u *user, exclude uint32, data []byte) {
	g := u.group
	switch {
	case u.role == Connected:
		r.stats.Ignored.Role++
		return
	case u.role == Member && g.flags&FlagNoBrod != 0:
		r.stats.Ignored.Flags++
		return
	}
	r.scratch = AppendMessage(r.scratch[:0], R2UText, u.uid, data)
	for _, m := range g.members {
		if m.uid != exclude {
			r.text(m, len(data))
		}
	}
}

// text queues the R2U_TEXT in r.scratch, of n bytes of data, for u.
func (r *Relay) text(u *user, n int) {
	if u.closed || u.doomed {
		return
	}
	r.deliver(u, r.scratch)
	if !u.doomed {
		r.stats.Messages++
		r.stats.MessageBytes += uint64(n)
	}
}

// sendTo carries out U2R_SEND (U7).
func (r *Relay) sendTo(u *user, to uint32, data []byte) {
	g := u.group
	switch {
	case u.role == Connected:
		r.stats.Ignored.Role++
		return
	case u.role == Member && g.flags&FlagNoSend != 0,
		u.role == Member && g.flags&FlagNoP2P != 0 && to != g.host.uid:
		r.stats.Ignored.Flags++
		return
	}
	t := r.users[to]
	if t == nil || t.group != g {
		r.stats.Ignored.Target++
		return
	}
	r.scratch = AppendMessage(r.scratch[:0], R2UText, u.uid, data)
	r.text(t, len(data))
}

// value returns the setting k of g.
func (g *group) value(k Key) uint32 {
	switch k {
	case KeyGroupPass:
		return g.password
	case KeyGroupFlags:
		return g.flags
	}
	return g.max
}

// set carries out U2R_SETS (U8, U9, U10, U12).
func (r *Relay) set(u *user, ctl Control, k Key, v uint32) {
	switch {
	case !k.Known():
		r.stats.Ignored.Key++
		return
	case u.role != Host:
		r.stats.Ignored.Role++
		return
	}
	g := u.group
	switch k {
	case KeyGroupPass:
		g.password = v
	case KeyGroupFlags:
		g.flags = v
	case KeyGroupMax:
		g.max = v
	}
	r.event(Event{Kind: EventSet, UID: u.uid, GID: g.gid, Key: k, Value: v})
	r.scratch = Append(r.scratch[:0], Packet{ID: R2UVals, Key: k, Value: v})
	if ctl&Respond != 0 {
		r.deliver(u, r.scratch)
	}
	if ctl&Notify != 0 {
		for _, m := range g.members {
			if m != u {
				r.deliver(m, r.scratch)
			}
		}
	}
}

// get carries out U2R_GETS.
func (r *Relay) get(u *user, k Key) {
	switch {
	case !k.Known():
		r.stats.Ignored.Key++
		return
	case u.role == Connected:
		r.stats.Ignored.Role++
		return
	}
	r.send(u, Packet{ID: R2UVals, Key: k, Value: u.group.value(k)})
}

// kick carries out U2R_KICK: the member leaves as if it had quit; the
// host kicking itself quits (U17).
func (r *Relay) kick(u *user, target uint32) {
	if u.role != Host {
		r.stats.Ignored.Role++
		return
	}
	if target == u.uid {
		r.disband(u.group)
		return
	}
	t := r.users[target]
	if t == nil || t.group != u.group {
		r.stats.Ignored.Target++
		return
	}
	r.leave(t, true)
}
