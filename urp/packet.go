package urp

import (
	"encoding/binary"
	"strconv"
)

// ID is a packet's identifier, its first byte. User to relay packets have
// the most significant bit set; relay to user packets have it clear.
type ID uint8

// User to relay packets (the specification's Table 2).
const (
	U2RMake ID = 0x80 // create a group and become its host
	U2RJoin ID = 0x81 // join a group as a member: GID, Password
	U2RQuit ID = 0x82 // leave the group
	U2RBrod ID = 0x83 // broadcast: UID (the user excluded), Data
	U2RSend ID = 0x84 // send: UID (the recipient), Data
	U2RSets ID = 0x85 // set a setting: Control, Key, Value
	U2RGets ID = 0x86 // get a setting: Key
	U2RKick ID = 0x87 // remove a member from the host's group: UID
)

// Relay to user packets (the specification's Table 3).
const (
	R2UWelc ID = 0x00 // welcome: Version, Revision, UID, Brand
	R2UText ID = 0x01 // a message: UID (the sender), Data
	R2UMade ID = 0x02 // answer to U2R_MAKE and U2R_JOIN: Status, GID (U1)
	R2UJoin ID = 0x03 // to the host: UID joined
	R2ULeft ID = 0x04 // to the host: UID left
	R2UStat ID = 0x05 // the user's new Role
	R2UVals ID = 0x06 // a setting: Key, Value (U2)
)

// ToRelay reports whether id is a user to relay identifier (its most
// significant bit is set).
func (id ID) ToRelay() bool { return id&0x80 != 0 }

// Known reports whether id names a packet of URP 1.0.
func (id ID) Known() bool { return id <= R2UVals || U2RMake <= id && id <= U2RKick }

var idNames = map[ID]string{
	U2RMake: "U2R_MAKE", U2RJoin: "U2R_JOIN", U2RQuit: "U2R_QUIT", U2RBrod: "U2R_BROD",
	U2RSend: "U2R_SEND", U2RSets: "U2R_SETS", U2RGets: "U2R_GETS", U2RKick: "U2R_KICK",
	R2UWelc: "R2U_WELC", R2UText: "R2U_TEXT", R2UMade: "R2U_MADE", R2UJoin: "R2U_JOIN",
	R2ULeft: "R2U_LEFT", R2UStat: "R2U_STAT", R2UVals: "R2U_VALS",
}

// String returns the specification's name of id, or its value in hex.
func (id ID) String() string {
	if s, ok := idNames[id]; ok {
		return s
	}
	return "ID(0x" + strconv.FormatUint(uint64(id), 16) + ")"
}

// Role is a user's state on the relay, which decides the packets it may
// send.
type Role uint8

// The three roles.
const (
	Connected Role = 0x01 // in no group
	Member    Role = 0x02 // a member of a group
	Host      Role = 0x03 // the host of a group
)

// String returns the specification's name of r.
func (r Role) String() string {
	switch r {
	case Connected:
		return "CONNECTED"
	case Member:
		return "MEMBER"
	case Host:
		return "HOST"
	}
	return "Role(" + strconv.Itoa(int(r)) + ")"
}

// Status is the code of an R2U_MADE packet.
type Status uint8

// The status codes of R2U_MADE.
const (
	StatMade  Status = 0x01 // the group was created
	StatJoin  Status = 0x02 // the group was joined
	StatPass  Status = 0x11 // no group with that GID and password (U4)
	StatLock  Status = 0x12 // the group is locked
	StatFull  Status = 0x13 // the group is full
	StatLimit Status = 0x14 // too many groups open on the relay
	StatFail  Status = 0x15 // any other error
)

// OK reports whether s says that a group was made or joined.
func (s Status) OK() bool { return s == StatMade || s == StatJoin }

// String returns the specification's name of s.
func (s Status) String() string {
	switch s {
	case StatMade:
		return "STAT_MADE"
	case StatJoin:
		return "STAT_JOIN"
	case StatPass:
		return "STAT_PASS"
	case StatLock:
		return "STAT_LOCK"
	case StatFull:
		return "STAT_FULL"
	case StatLimit:
		return "STAT_LIMIT"
	case StatFail:
		return "STAT_FAIL"
	}
	return "Status(0x" + strconv.FormatUint(uint64(s), 16) + ")"
}

// Key names a setting of U2R_SETS, U2R_GETS and R2U_VALS.
type Key uint32

// The settings of URP 1.0, all of them group settings.
const (
	KeyGroupPass  Key = 0x01 // the group's password
	KeyGroupFlags Key = 0x02 // the group's flags
	KeyGroupMax   Key = 0x03 // the group's member limit
)

// Known reports whether k is a setting of URP 1.0.
func (k Key) Known() bool { return KeyGroupPass <= k && k <= KeyGroupMax }

// String returns the specification's name of k.
func (k Key) String() string {
	switch k {
	case KeyGroupPass:
		return "GROUP_PASS"
	case KeyGroupFlags:
		return "GROUP_FLAGS"
	case KeyGroupMax:
		return "GROUP_MAX"
	}
	return "Key(" + strconv.FormatUint(uint64(k), 10) + ")"
}

// Control is the bit field of U2R_SETS that says who hears the new value.
type Control uint8

// The bits of Control; the others are reserved and ignored (U9).
const (
	Respond Control = 0x01 // send the new value to the sender
	Notify  Control = 0x02 // send the new value to the group's other users (U8)
)

// Group flags (the specification's Table 1). The relay acts on the first
// four; it stores every bit and returns it unchanged (U10).
const (
	FlagLock   uint32 = 0x01 // the group cannot be joined
	FlagNoSend uint32 = 0x02 // members cannot use U2R_SEND (U7)
	FlagNoBrod uint32 = 0x04 // members cannot use U2R_BROD (U7)
	FlagNoP2P  uint32 = 0x08 // members can U2R_SEND only to the host (U7)
	FlagBinary uint32 = 0x10 // the group carries binary data

	FlagsLoReserved uint32 = 0x000007E0 // reserved
	FlagsLoClient   uint32 = 0x0000F800 // for clients' own meanings
	FlagsHiReserved uint32 = 0x00FF0000 // reserved
	FlagsHiClient   uint32 = 0xFF000000 // for clients' own meanings
)

// Protocol version this package implements, as R2U_WELC carries it.
const (
	Version  = 1
	Revision = 0
)

// BrandSize is the size of R2U_WELC's brand field.
const BrandSize = 64

// Fixed sizes, identifier included.
const (
	headerSize  = 1
	messageHead = 1 + 4 + 4 // U2R_BROD, U2R_SEND, R2U_TEXT before the data
	welcSize    = 1 + 2 + 2 + 4 + BrandSize
	// MaxHeader is the longest packet without data, R2U_WELC: a Decoder
	// holds at most MaxHeader or the header and the data of one message.
	MaxHeader = welcSize
)

// Packet is any URP packet, as one flat value: ID says which, and the
// fields it uses are listed below; the others are zero. Data aliases the
// bytes it was parsed from.
//
//	U2R_MAKE, U2R_QUIT                  -
//	U2R_JOIN                            GID, Password
//	U2R_BROD                            UID (excluded, 0 for none), Data
//	U2R_SEND                            UID (recipient), Data
//	U2R_SETS                            Control, Key, Value
//	U2R_GETS                            Key
//	U2R_KICK                            UID
//	R2U_WELC                            Version, Revision, UID, Brand
//	R2U_TEXT                            UID (sender), Data
//	R2U_MADE                            Status, GID
//	R2U_JOIN, R2U_LEFT                  UID
//	R2U_STAT                            Role
//	R2U_VALS                            Key, Value
type Packet struct {
	ID       ID
	UID      uint32
	GID      uint32
	Password uint32
	Data     []byte
	Control  Control
	Key      Key
	Value    uint32
	Status   Status
	Role     Role
	Version  uint16
	Revision uint16
	// Brand is R2U_WELC's relay brand: up to BrandSize bytes, cut at the
	// first NUL when parsed; longer ones are cut when encoded.
	Brand string
}

// fixedSize returns the size of a packet with identifier id before its
// data (all of it if it has none), or 0 for an unknown identifier.
func fixedSize(id ID) int {
	switch id {
	case U2RMake, U2RQuit:
		return headerSize
	case U2RJoin:
		return headerSize + 8
	case U2RBrod, U2RSend, R2UText:
		return messageHead
	case U2RSets:
		return headerSize + 1 + 8
	case U2RGets, U2RKick, R2UJoin, R2ULeft:
		return headerSize + 4
	case R2UWelc:
		return welcSize
	case R2UMade:
		return headerSize + 1 + 4
	case R2UStat:
		return headerSize + 1
	case R2UVals:
		return headerSize + 8
	}
	return 0
}

// hasData reports whether packets with identifier id carry a message.
func hasData(id ID) bool { return id == U2RBrod || id == U2RSend || id == R2UText }

// EncodedLen returns the number of bytes Append adds for p, or 0 if p.ID
// is unknown.
func EncodedLen(p Packet) int {
	n := fixedSize(p.ID)
	if n != 0 && hasData(p.ID) {
		n += len(p.Data)
	}
	return n
}

var le = binary.LittleEndian

// Append appends the encoding of p to b, little-endian as the
// specification says, and returns the extended slice. It appends nothing
// for an unknown identifier. Encoding cannot fail: validating what is
// sent (roles, lengths) is the business of Relay and Client.
func Append(b []byte, p Packet) []byte {
	if fixedSize(p.ID) == 0 {
		return b
	}
	if hasData(p.ID) {
		return AppendMessage(b, p.ID, p.UID, p.Data)
	}
	b = append(b, byte(p.ID))
	switch p.ID {
	case U2RJoin:
		b = le.AppendUint32(b, p.GID)
		b = le.AppendUint32(b, p.Password)
	case U2RSets:
		b = append(b, byte(p.Control))
		b = le.AppendUint32(b, uint32(p.Key))
		b = le.AppendUint32(b, p.Value)
	case U2RGets:
		b = le.AppendUint32(b, uint32(p.Key))
	case U2RKick, R2UJoin, R2ULeft:
		b = le.AppendUint32(b, p.UID)
	case R2UWelc:
		b = le.AppendUint16(b, p.Version)
		b = le.AppendUint16(b, p.Revision)
		b = le.AppendUint32(b, p.UID)
		brand := p.Brand
		if len(brand) > BrandSize {
			brand = brand[:BrandSize]
		}
		b = append(b, brand...)
		for range BrandSize - len(brand) {
			b = append(b, 0)
		}
	case R2UMade:
		b = append(b, byte(p.Status))
		b = le.AppendUint32(b, p.GID)
	case R2UStat:
		b = append(b, byte(p.Role))
	case R2UVals:
		b = le.AppendUint32(b, uint32(p.Key))
		b = le.AppendUint32(b, p.Value)
	}
	return b
}

// AppendMessage appends a packet that carries a message (U2R_BROD,
// U2R_SEND or R2U_TEXT, by id) without building a Packet: the identifier,
// the user id, the length and the data.
//
//	+----+-----------+-----------+----------------+
//	| id | uid (u32) | len (u32) | data (len)     |
//	+----+-----------+-----------+----------------+
func AppendMessage(b []byte, id ID, uid uint32, data []byte) []byte {
	b = append(b, byte(id))
	b = le.AppendUint32(b, uid)
	b = le.AppendUint32(b, uint32(len(data)))
	return append(b, data...)
}

// Parse decodes the packet at the start of b, which must be of direction
// dir, with a message of at most maxData bytes. It returns the packet and
// its length. Errors:
//
//   - ErrShort: b holds only the start of a packet. n is then the length
//     b needs at least to go on: the whole packet's once its header is
//     there, so a caller can wait for exactly that much.
//   - ErrUnknownPacket: the first byte is no identifier of dir.
//   - ErrMessageTooLong: a message longer than maxData is announced; it is
//     found from the header alone, before any of the data is needed.
//
// p.Data aliases b.
func Parse(b []byte, dir Direction, maxData int) (p Packet, n int, err error) {
	if len(b) == 0 {
		return Packet{}, 1, ErrShort
	}
	id := ID(b[0])
	size := fixedSize(id)
	if size == 0 || id.ToRelay() != (dir == ToRelay) {
		return Packet{}, 0, ErrUnknownPacket
	}
	if len(b) < size {
		return Packet{}, size, ErrShort
	}
	p.ID = id
	switch id {
	case U2RJoin:
		p.GID = le.Uint32(b[1:])
		p.Password = le.Uint32(b[5:])
	case U2RBrod, U2RSend, R2UText:
		p.UID = le.Uint32(b[1:])
		length := uint64(le.Uint32(b[5:]))
		if length > uint64(max(maxData, 0)) {
			return Packet{}, 0, ErrMessageTooLong
		}
		size += int(length)
		if len(b) < size {
			return Packet{}, size, ErrShort
		}
		p.Data = b[messageHead:size:size]
	case U2RSets:
		p.Control = Control(b[1])
		p.Key = Key(le.Uint32(b[2:]))
		p.Value = le.Uint32(b[6:])
	case U2RGets:
		p.Key = Key(le.Uint32(b[1:]))
	case U2RKick, R2UJoin, R2ULeft:
		p.UID = le.Uint32(b[1:])
	case R2UWelc:
		p.Version = le.Uint16(b[1:])
		p.Revision = le.Uint16(b[3:])
		p.UID = le.Uint32(b[5:])
		brand := b[9:welcSize]
		for i, c := range brand {
			if c == 0 {
				brand = brand[:i]
				break
			}
		}
		p.Brand = string(brand)
	case R2UMade:
		p.Status = Status(b[1])
		p.GID = le.Uint32(b[2:])
	case R2UStat:
		p.Role = Role(b[1])
	case R2UVals:
		p.Key = Key(le.Uint32(b[1:]))
		p.Value = le.Uint32(b[5:])
	}
	return p, size, nil
}

// Direction says which way packets travel: the packets a relay reads are
// ToRelay, those a client reads ToUser.
type Direction uint8

// The two directions.
const (
	ToRelay Direction = iota // user to relay (U2R_*)
	ToUser                   // relay to user (R2U_*)
)
