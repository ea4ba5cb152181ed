package fastnet

import (
	"errors"
	"fmt"
)

// Errors returned to the caller for misuse. They leave the endpoint's state
// unchanged. Test for them with errors.Is.
var (
	// ErrQueueFull is returned by Send when the connection's send queue has
	// no room for the message. Wait for an EventWritable on the connection
	// and try again.
	ErrQueueFull = errors.New("fastnet: send queue full")
	// ErrMessageTooLarge is returned by Send for a message above
	// Config.MaxMessageSize.
	ErrMessageTooLarge = errors.New("fastnet: message too large")
	// ErrBadChannel is returned for a channel outside 0..32767.
	ErrBadChannel = errors.New("fastnet: channel out of range 0..32767")
	// ErrUnknownConn is returned for a handle that names no live connection.
	ErrUnknownConn = errors.New("fastnet: unknown connection")
	// ErrStreamPause is returned by SetReceivePaused on a Stream
	// transport, where the driver pauses by not reading the stream.
	ErrStreamPause = errors.New("fastnet: a Stream connection pauses by not reading its stream")
	// ErrNotConnected is returned by Send before the handshake completes.
	ErrNotConnected = errors.New("fastnet: not connected")
	// ErrClosed is returned for a connection that is closing or closed; it is
	// also the Err of a Disconnected event for a connection closed locally.
	ErrClosed = errors.New("fastnet: connection closed")
	// ErrWrongRole is returned when a client-only or server-only method is
	// called on an endpoint of the other role.
	ErrWrongRole = errors.New("fastnet: wrong endpoint role")
	// ErrAlreadyConnected is returned by Connect for an address this
	// endpoint already has a connection with.
	ErrAlreadyConnected = errors.New("fastnet: already connected to that address")
	// ErrTooManyHandshakes is returned by Connect when
	// Config.MaxPendingHandshakes connections are still connecting.
	ErrTooManyHandshakes = errors.New("fastnet: too many pending handshakes")
)

// Reasons a connection ends or never starts, carried in the Err of
// Disconnected, Refused and ConnectFailed events. Test for them with
// errors.Is; errors.As extracts *RefusedError, *PeerClosedError and
// *ProtocolError for their text.
var (
	// ErrRefused: the server answered "abort" (see RefusedError).
	ErrRefused = errors.New("fastnet: connection refused")
	// ErrTimeout: no heartbeat within Config.Timeout, or no answer to the
	// handshake within Config.ConnectTimeout.
	// ErrNotAcknowledging and ErrPathMTU match it too: the peer went
	// away, whichever timer noticed (N65).
	ErrTimeout = errors.New("fastnet: timed out")
	// ErrIncompatible: the server speaks another version of Fastnet, or is
	// not a Fastnet server.
	ErrIncompatible = errors.New("fastnet: incompatible protocol version")
	// ErrPeerClosed: the peer closed the connection (see PeerClosedError).
	ErrPeerClosed = errors.New("fastnet: closed by peer")
	// ErrProtocol: the peer broke the protocol (see ProtocolError).
	ErrProtocol = errors.New("fastnet: protocol violation")
	// ErrNotAcknowledging: a reliable packet stayed unacknowledged for
	// Config.Timeout (D14). It matches ErrTimeout: a peer that went away
	// is noticed by whichever timer runs out first, and errors.Is(err,
	// ErrTimeout) asks for both (N65).
	ErrNotAcknowledging = fmt.Errorf("%w: peer is not acknowledging", ErrTimeout)
	// ErrPathMTU: reliable packets cut larger than the path now carries
	// stayed unacknowledged for Config.Timeout. They cannot be cut again
	// without new sequence numbers (D12), so the connection ends (N16).
	// It matches ErrNotAcknowledging and ErrTimeout.
	ErrPathMTU = fmt.Errorf("%w (path MTU shrank below reliable packets in flight)", ErrNotAcknowledging)
	// ErrTransportClosed: a connection-based transport reported the
	// connection dropped.
	ErrTransportClosed = errors.New("fastnet: transport connection lost")
	// ErrPeerRestarted: a "connect?" came from the peer's address too
	// long after its handshake to be a retry of it: the client restarted
	// on the same address and port, and its new connection replaces this
	// one (D28).
	ErrPeerRestarted = errors.New("fastnet: closed by a restarted peer")
)

// RefusedError is the reason a server gave in its "abort" reply.
type RefusedError struct {
	Reason string
}

func (e *RefusedError) Error() string {
	if e.Reason == "" {
		return "fastnet: connection refused"
	}
	return "fastnet: connection refused: " + e.Reason
}

// Is reports whether target is ErrRefused.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

// PeerClosedError is the reason a peer gave in its "disconnect" (D18).
type PeerClosedError struct {
	Reason string
}

func (e *PeerClosedError) Error() string {
	if e.Reason == "" {
		return "fastnet: closed by peer"
	}
	return "fastnet: closed by peer: " + e.Reason
}

// Is reports whether target is ErrPeerClosed.
func (e *PeerClosedError) Is(target error) bool { return target == ErrPeerClosed }

// ProtocolError says how the peer broke the protocol (D11, D22, D23).
type ProtocolError struct {
	Reason string
}

func (e *ProtocolError) Error() string { return "fastnet: protocol violation: " + e.Reason }

// Is reports whether target is ErrProtocol.
func (e *ProtocolError) Is(target error) bool { return target == ErrProtocol }

// ErrLingerExpired: a graceful close (D18) ran out of its linger with
// messages still unsent or unacknowledged; the peer may not have them
// (see LocalCloseError).
var ErrLingerExpired = errors.New("fastnet: linger expired with data unacknowledged")

// LocalCloseError is the Err of the Disconnected event for a connection this
// endpoint closed, with the reason it gave. It matches ErrClosed, and also
// ErrLingerExpired if Unacknowledged is set.
type LocalCloseError struct {
	Reason string
	// Unacknowledged says that a graceful close ended at its linger
	// (Config.Linger) with data still unsent or unacknowledged (N65).
	Unacknowledged bool
}

func (e *LocalCloseError) Error() string {
	s := "fastnet: connection closed"
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	if e.Unacknowledged {
		s += " (linger expired with data unacknowledged)"
	}
	return s
}

// Is reports whether target is ErrClosed, or ErrLingerExpired for a close
// that left data unacknowledged.
func (e *LocalCloseError) Is(target error) bool {
	return target == ErrClosed || (e.Unacknowledged && target == ErrLingerExpired)
}
