package urp

import (
	"errors"
	"strconv"
)

// What a peer did wrong, found while decoding its stream. Each ends that
// peer's connection: a relay closes the user (U5, U6), a client its
// connection to the relay. They are preallocated values, since a peer
// controls how often they happen.
var (
	// ErrUnknownPacket: a byte where a packet starts is not an identifier
	// of the packets that may travel that way (U5).
	ErrUnknownPacket = errors.New("urp: unknown packet identifier")
	// ErrMessageTooLong: a message announces more bytes than the limit
	// (Config.MaxMessage, ClientConfig.MaxMessage).
	ErrMessageTooLong = errors.New("urp: message longer than the limit")
	// ErrPartialFull: the user's packet partly received took what the
	// relay holds of such packets, all users together, past
	// Config.MaxPartial (U23).
	ErrPartialFull = errors.New("urp: too much held of packets partly received")
	// ErrTruncated: the stream ended inside a packet.
	ErrTruncated = errors.New("urp: stream ended inside a packet")
	// ErrShort is Parse's answer for bytes that begin a packet without
	// holding all of it. A Decoder never returns it.
	ErrShort = errors.New("urp: incomplete packet")
	// ErrBadWelcome: the relay's first packet is not R2U_WELC (U15).
	ErrBadWelcome = errors.New("urp: the relay did not begin with R2U_WELC")
	// ErrTooManyMembers: the relay announced a new member (R2U_JOIN) to
	// a host that has ClientConfig.MaxMembers already (U24).
	ErrTooManyMembers = errors.New("urp: relay announced more members than the limit")
)

// Why a relay ends a user's connection, beyond the decoding errors above.
var (
	// ErrRelayFull: Connect found Config.MaxUsers users connected (U13).
	ErrRelayFull = errors.New("urp: too many users on the relay")
	// ErrOutputFull: the user did not read what the relay had for it,
	// and it reached Config.MaxOutput (U11).
	ErrOutputFull = errors.New("urp: user does not read: output limit reached")
	// ErrGuessing: the user sent a U2R_JOIN that Config.JoinGuard did
	// not let fail, having failed too many already (U26).
	ErrGuessing = errors.New("urp: too many failed joins")
)

// Misuse of a Client, returned at once with its state unchanged.
var (
	// ErrNotWelcomed: the relay's R2U_WELC has not arrived yet.
	ErrNotWelcomed = errors.New("urp: not welcomed by the relay yet")
	// ErrRole: the request is not allowed in the user's role (a Make
	// while in a group, a Broadcast outside one, a Kick by a member, ...).
	ErrRole = errors.New("urp: not allowed in this role")
	// ErrBusy: a Make or Join is still waiting for its R2U_MADE.
	ErrBusy = errors.New("urp: a make or join is waiting for its answer")
	// ErrNotMember: Kick of a user that is not in the host's group.
	ErrNotMember = errors.New("urp: not a member of the group")
	// ErrUnknownKey: a setting URP 1.0 does not define (U16).
	ErrUnknownKey = errors.New("urp: unknown setting key")
	// ErrClosed: the client's connection has failed; it takes nothing
	// more.
	ErrClosed = errors.New("urp: connection closed")
)

// VersionError is a relay's R2U_WELC with a version this package does not
// speak: another major version, or a revision below ours (U15). It
// matches ErrBadWelcome with errors.Is.
type VersionError struct {
	Version, Revision uint16
}

// Error says which version the relay speaks.
func (e *VersionError) Error() string {
	return "urp: relay speaks URP " + strconv.Itoa(int(e.Version)) + "." + strconv.Itoa(int(e.Revision)) +
		", this client " + strconv.Itoa(Version) + "." + strconv.Itoa(Revision)
}

// Is reports whether target is ErrBadWelcome.
func (e *VersionError) Is(target error) bool { return target == ErrBadWelcome }
