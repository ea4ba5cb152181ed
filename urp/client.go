package urp

import (
	"slices"

	"github.com/fastnet-engine/fastnet/internal/fifo"
)

// Client is the state machine of a URP user: what the relay said (its
// welcome, the user's role and group, a host's members), and the requests
// the user may make in that state. Like Relay it does no I/O: the driver
// feeds it the relay's bytes (HandleBytes), takes the bytes to write
// (TakeOutput) and what arrived (PollEvent).
//
// Requests (Make, Join, Broadcast, ...) check the role the client knows
// and queue the packet, or return an error and change nothing (ErrRole,
// ErrBusy, ...). The relay may have moved the user on in the meantime (a
// kick, a host that left): it then ignores the request, as the
// specification says, and the client learns the new role from the R2U_STAT
// on its way.
//
// A Client must not be used from more than one goroutine at a time.
type Client struct {
	cfg    ClientConfig
	dec    Decoder
	out    []byte
	events fifo.Queue[ClientEvent]
	err    error

	welcomed bool
	uid      uint32
	version  uint16
	revision uint16
	brand    string
	role     Role
	gid      uint32
	making   bool            // a Make or Join waits for R2U_MADE
	pending  map[Key]int     // Gets and Sets with Respond waiting for R2U_VALS (U19)
	members  map[uint32]bool // a host's members, itself excluded; at most MaxMembers (U24)
	ignored  uint64          // packets that made no sense in the state (U15)
}

// ClientEventKind says what a ClientEvent reports.
type ClientEventKind uint8

// The kinds of ClientEvent, with the fields each sets.
const (
	// GotWelcome: the relay's R2U_WELC (UID: this user's, Version,
	// Revision, Brand).
	GotWelcome ClientEventKind = iota + 1
	// GotMade: the answer to Make or Join (Status, GID, Role: the role
	// now). With a successful Status the role changed with it, and the
	// R2U_STAT that follows is taken as its confirmation (U1).
	GotMade
	// GotRole: the user is back to CONNECTED (Role, GID: the group it
	// left): a Quit, a kick, a host that left. Only GotMade makes it a
	// member or a host.
	GotRole
	// GotText: a message (UID: its sender, Data: its bytes, the
	// receiver's to keep).
	GotText
	// GotJoined: a member joined this host's group (UID).
	GotJoined
	// GotLeft: a member left this host's group (UID).
	GotLeft
	// GotValue: an R2U_VALS (Key, Value; Answer if it answers a Get or a
	// Set with Respond of this client, U19).
	GotValue
)

// String returns the kind's name.
func (k ClientEventKind) String() string {
	switch k {
	case GotWelcome:
		return "welcome"
	case GotMade:
		return "made"
	case GotRole:
		return "role"
	case GotText:
		return "text"
	case GotJoined:
		return "joined"
	case GotLeft:
		return "left"
	case GotValue:
		return "value"
	}
	return "ClientEventKind(?)"
}

// ClientEvent is something the relay told the client. The fields each
// kind sets are listed with the kinds.
type ClientEvent struct {
	Kind     ClientEventKind
	UID      uint32
	GID      uint32
	Data     []byte
	Status   Status
	Role     Role
	Key      Key
	Value    uint32
	Answer   bool
	Version  uint16
	Revision uint16
	Brand    string
}

// NewClient returns a client waiting for the relay's welcome, or the
// error of an invalid config.
func NewClient(cfg ClientConfig) (*Client, error) {
	cfg, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	return &Client{cfg: cfg, dec: Decoder{dir: ToUser, maxData: cfg.MaxMessage}, pending: make(map[Key]int)}, nil
}

// HandleBytes handles the next bytes of the relay's stream, in any cut. It
// returns an error if they break the protocol (ErrUnknownPacket,
// ErrMessageTooLong, ErrBadWelcome, a *VersionError) or the client's
// limits (ErrTooManyMembers, U24): the client is then dead, and the
// driver closes the connection. b is not kept.
func (c *Client) HandleBytes(b []byte) error {
	if c.err != nil {
		return c.err
	}
	c.dec.Feed(b)
	for {
		p, ok, err := c.dec.Next()
		if err == nil && ok {
			err = c.handle(p)
		}
		if err != nil {
			c.err = err
			c.dec.in = nil
			return err
		}
		if !ok {
			return nil
		}
	}
}

// HandleEnd reports that the relay's stream ended, and returns nil if it
// ended at a packet boundary, ErrTruncated inside a packet, or the error
// that broke it before. The client takes no more requests.
func (c *Client) HandleEnd() error {
	err := c.dec.End()
	if c.err != nil {
		err = c.err
	}
	if c.err == nil {
		c.err = ErrClosed
	}
	return err
}

func (c *Client) handle(p Packet) error {
	if !c.welcomed {
		if p.ID != R2UWelc {
			return ErrBadWelcome
		}
		if p.Version != Version || p.Revision < Revision {
			return &VersionError{Version: p.Version, Revision: p.Revision}
		}
		c.welcomed = true
		c.uid, c.version, c.revision, c.brand = p.UID, p.Version, p.Revision, p.Brand
		c.role = Connected
		c.event(ClientEvent{Kind: GotWelcome, UID: p.UID, Version: p.Version, Revision: p.Revision, Brand: p.Brand})
		return nil
	}
	switch p.ID {
	case R2UText:
		c.event(ClientEvent{Kind: GotText, UID: p.UID, Data: slices.Clone(p.Data)})
		return nil
	case R2UMade:
		if !c.making {
			break
		}
		c.making = false
		if p.Status.OK() && p.GID == 0 {
			p.Status = StatFail // a group has a GID (U15)
		}
		switch p.Status {
		case StatMade:
			c.role, c.gid, c.members = Host, p.GID, make(map[uint32]bool)
		case StatJoin:
			c.role, c.gid = Member, p.GID
		}
		c.event(ClientEvent{Kind: GotMade, Status: p.Status, GID: p.GID, Role: c.role})
		return nil
	case R2UJoin:
		if c.role != Host {
			break
		}
		// A broken relay, or one whose groups are larger than this
		// host takes: either way the host's members stay bounded (U24).
		if !c.members[p.UID] && len(c.members) >= c.cfg.MaxMembers {
			return ErrTooManyMembers
		}
		c.members[p.UID] = true
		c.event(ClientEvent{Kind: GotJoined, UID: p.UID})
		return nil
	case R2ULeft:
		if c.role != Host || !c.members[p.UID] {
			break
		}
		delete(c.members, p.UID)
		c.event(ClientEvent{Kind: GotLeft, UID: p.UID})
		return nil
	case R2UStat:
		if p.Role < Connected || p.Role > Host {
			break
		}
		if p.Role == c.role {
			return nil // the confirmation of a GotMade (U1)
		}
		if p.Role != Connected {
			break // only R2U_MADE makes a member or a host (U1, U15)
		}
		// The relay answers in order: a value asked before the role
		// changed came before this; one asked after is ignored, and
		// will never come (U19).
		left := c.gid
		c.role, c.gid, c.members = Connected, 0, nil
		clear(c.pending)
		c.event(ClientEvent{Kind: GotRole, Role: Connected, GID: left})
		return nil
	case R2UVals:
		answer := c.pending[p.Key] > 0
		if answer {
			c.pending[p.Key]--
		}
		c.event(ClientEvent{Kind: GotValue, Key: p.Key, Value: p.Value, Answer: answer})
		return nil
	}
	c.ignored++ // U15
	return nil
}

func (c *Client) event(ev ClientEvent) { c.events.Push(ev) }

// PollEvent returns the next event, or false when there is none.
func (c *Client) PollEvent() (ClientEvent, bool) { return c.events.Take() }

// TakeOutput returns the bytes waiting to be written to the relay, and
// gives the client spare (emptied) to queue the next ones in: the returned
// slice is the caller's.
func (c *Client) TakeOutput(spare []byte) []byte {
	out := c.out
	c.out = spare[:0]
	return out
}

// Buffered returns the number of bytes waiting for TakeOutput.
func (c *Client) Buffered() int { return len(c.out) }

// Welcomed reports whether the relay's R2U_WELC has arrived.
func (c *Client) Welcomed() bool { return c.welcomed }

// UID returns the user's id, from R2U_WELC.
func (c *Client) UID() uint32 { return c.uid }

// RelayVersion returns the relay's protocol version and revision.
func (c *Client) RelayVersion() (version, revision uint16) { return c.version, c.revision }

// Brand returns the relay's brand.
func (c *Client) Brand() string { return c.brand }

// Role returns the user's role as the client knows it.
func (c *Client) Role() Role { return c.role }

// GID returns the group the user is in, or 0.
func (c *Client) GID() uint32 { return c.gid }

// Members returns a host's members, itself excluded, by UID.
func (c *Client) Members() []uint32 {
	var ms []uint32
	for m := range c.members {
		ms = append(ms, m)
	}
	slices.Sort(ms)
	return ms
}

// Ignored returns the number of packets the client ignored because they
// made no sense in its state (U15).
func (c *Client) Ignored() uint64 { return c.ignored }

// Err returns the error that ended the client, or nil.
func (c *Client) Err() error { return c.err }

func (c *Client) ready() error {
	switch {
	case c.err != nil:
		return ErrClosed
	case !c.welcomed:
		return ErrNotWelcomed
	}
	return nil
}

func (c *Client) queue(p Packet) { c.out = Append(c.out, p) }

// Make asks the relay for a new group, with this user as its host. The
// answer is a GotMade event.
func (c *Client) Make() error {
	if err := c.joinable(); err != nil {
		return err
	}
	c.making = true
	c.queue(Packet{ID: U2RMake})
	return nil
}

// Join asks to join group gid with password. The answer is a GotMade
// event.
func (c *Client) Join(gid, password uint32) error {
	if err := c.joinable(); err != nil {
		return err
	}
	c.making = true
	c.queue(Packet{ID: U2RJoin, GID: gid, Password: password})
	return nil
}

func (c *Client) joinable() error {
	if err := c.ready(); err != nil {
		return err
	}
	if c.making {
		return ErrBusy
	}
	if c.role != Connected {
		return ErrRole
	}
	return nil
}

// Quit leaves the group: a GotRole event follows. A host's group closes.
func (c *Client) Quit() error {
	if err := c.grouped(); err != nil {
		return err
	}
	c.queue(Packet{ID: U2RQuit})
	return nil
}

func (c *Client) grouped() error {
	if err := c.ready(); err != nil {
		return err
	}
	if c.role == Connected {
		return ErrRole
	}
	return nil
}

// Broadcast sends data to every user of the group but exclude (0: none,
// this user included, U7).
func (c *Client) Broadcast(exclude uint32, data []byte) error {
	return c.message(U2RBrod, exclude, data)
}

// Send sends data to user to of the group.
func (c *Client) Send(to uint32, data []byte) error {
	return c.message(U2RSend, to, data)
}

func (c *Client) message(id ID, uid uint32, data []byte) error {
	if err := c.grouped(); err != nil {
		return err
	}
	if len(data) > c.cfg.MaxMessage {
		return ErrMessageTooLong
	}
	c.out = AppendMessage(c.out, id, uid, data)
	return nil
}

// Set sets a setting of the host's group; ctl says who hears the new
// value (Respond: this client, as a GotValue with Answer; Notify: the
// group's other users).
func (c *Client) Set(ctl Control, k Key, v uint32) error {
	if err := c.ready(); err != nil {
		return err
	}
	if !k.Known() {
		return ErrUnknownKey
	}
	if c.role != Host {
		return ErrRole
	}
	c.queue(Packet{ID: U2RSets, Control: ctl, Key: k, Value: v})
	if ctl&Respond != 0 {
		c.pending[k]++
	}
	return nil
}

// Get asks for a setting of the group; the answer is a GotValue event
// with Answer set.
func (c *Client) Get(k Key) error {
	if err := c.grouped(); err != nil {
		return err
	}
	if !k.Known() {
		return ErrUnknownKey
	}
	c.queue(Packet{ID: U2RGets, Key: k})
	c.pending[k]++
	return nil
}

// Kick removes member uid from the host's group; the host hears GotLeft.
// A host that kicks itself quits (U17).
func (c *Client) Kick(uid uint32) error {
	if err := c.ready(); err != nil {
		return err
	}
	if c.role != Host {
		return ErrRole
	}
	if uid != c.uid && !c.members[uid] {
		return ErrNotMember
	}
	c.queue(Packet{ID: U2RKick, UID: uid})
	return nil
}
