package fastnet

import (
	"net/netip"
)

// Handle names one connection of an endpoint. It is local to the endpoint and
// never reused while the endpoint lives: 64 bits, so that even a flood of
// forged "connect?", each of which opens an unvalidated connection, could
// not wrap them around (32 bits wrapped in about 12 hours at 100,000 a
// second, and a handle an application kept could then name another's
// connection, N143). It is not the Fastnet connection ID (see Event.ID and
// Endpoint.ConnID).
type Handle uint64

// EventKind says what happened.
type EventKind uint8

// Event kinds. The comment of each says which Event fields it sets; Conn and
// Addr are set for every kind.
const (
	_ EventKind = iota
	// EventConnected: the handshake completed. Sets ID (the Fastnet
	// connection ID, the same on both sides).
	EventConnected
	// EventRefused: the server answered "abort". Err is a *RefusedError.
	EventRefused
	// EventConnectFailed: the handshake did not complete. Err is ErrTimeout,
	// ErrIncompatible, ErrTransportClosed (a stream that closed first), or
	// a *LocalCloseError (Close or Abort during the handshake, or the end
	// of the introduction it belonged to).
	EventConnectFailed
	// EventMessage: a message arrived. Sets Channel, Reliable and Data; Data
	// belongs to the receiver.
	EventMessage
	// EventDisconnected: an established connection ended. Err says why:
	// ErrTimeout, a *PeerClosedError, a *LocalCloseError, a *ProtocolError,
	// ErrNotAcknowledging, ErrTransportClosed, ErrPeerRestarted (D28), or a
	// *RefusedError (the server refused it once it validated the address,
	// D25). Stats holds the
	// connection's final statistics (N59). The handle is dead after it:
	// Endpoint.Stats no longer knows it.
	EventDisconnected
	// EventMTUChanged: the payload MTU this endpoint sends with changed
	// (D19). Sets MTU.
	EventMTUChanged
	// EventWritable: the send queue, after refusing a Send with ErrQueueFull,
	// has room again.
	EventWritable
	// EventOutcome: what became of a message sent with SendTracked (N55,
	// N56). Sets Message and Outcome. Every tracked message gets exactly
	// one, and those of a connection come before its EventDisconnected.
	EventOutcome
	// EventQuality: the connection's quality over the last
	// Config.QualityInterval, reported every interval while it is
	// established (N57). Sets Quality.
	EventQuality
	// EventRejected: a server refused a client: it was full at the
	// client's "connect?" or at its address validation (D25), or
	// Config.Accept refused it. Addr is the client's address, Err a
	// *RefusedError with the reason the client was sent, and Conn is 0
	// (N67). Each "connect?" refused is one, a client's retries and
	// forged ones included.
	EventRejected
	// EventIntroduced: the introducer's go ("intro=") arrived for an
	// introduction this Peer asked for (Endpoint.Introduce) or consented
	// to (X6): Intro says with whom, and punching starts. Conn is the
	// connection to the introducer, Addr the other peer's reflexive
	// address.
	EventIntroduced
	// EventIntroFailed: an introduction this Peer asked for failed
	// before it gave a connection. Conn is the connection to the
	// introducer, Intro the introduction, Err an *IntroError that says
	// which step failed (X6, X7, X13).
	EventIntroFailed
	// EventRelayHost: the target found no direct path, and the introducer
	// named a URP relay (X13): the application hosts a group on
	// Intro.Relay with the password Intro.RelayPassword (as
	// urpdriver.Listen does, with Config.Password), then calls
	// Endpoint.RelayHosted with the group's id, or 0 if it could not.
	// Conn is the connection to the introducer.
	EventRelayHost
	// EventRelayJoin: the target hosts a relay group for an introduction
	// this Peer asked for (X13): the application joins group
	// Intro.RelayGroup on Intro.Relay with Intro.RelayPassword and
	// connects to its host (urpdriver.Dial), within RelayTimeout (5 s).
	// The introduction ends here at this side.
	EventRelayJoin
	// EventIntroduction: this introducer introduced two of its
	// connections (X6), or refused or failed to (X4, X7). Conn and Addr
	// are the initiator's connection, ID the target's connection id it
	// asked for; Err is nil when the introducer sent both its go
	// ("intro="), or an *IntroError with the code the initiator was sent.
	EventIntroduction
)

var eventKindNames = [...]string{
	EventConnected:     "Connected",
	EventRefused:       "Refused",
	EventConnectFailed: "ConnectFailed",
	EventMessage:       "Message",
	EventDisconnected:  "Disconnected",
	EventMTUChanged:    "MTUChanged",
	EventWritable:      "Writable",
	EventOutcome:       "Outcome",
	EventQuality:       "Quality",
	EventRejected:      "Rejected",
	EventIntroduced:    "Introduced",
	EventIntroFailed:   "IntroFailed",
	EventRelayHost:     "RelayHost",
	EventRelayJoin:     "RelayJoin",
	EventIntroduction:  "Introduction",
}

func (k EventKind) String() string {
	if int(k) < len(eventKindNames) && eventKindNames[k] != "" {
		return eventKindNames[k]
	}
	return "EventKind(?)"
}

// An Event is something the application must hear about, pulled with
// Endpoint.PollEvent or Endpoint.NextEvent. It is one flat value so that polling allocates nothing;
// the comment of each EventKind says which fields it sets.
//
// The fields of one byte and ID come first, together, so that the event
// takes 136 bytes with a Handle of 64 bits, as it did with one of 32.
type Event struct {
	Kind     EventKind
	Reliable bool    // EventMessage
	Outcome  Outcome // EventOutcome
	ID       uint32  // EventConnected: the Fastnet connection ID
	Conn     Handle
	Addr     netip.AddrPort // the peer
	Channel  int            // EventMessage
	Data     []byte         // EventMessage: owned by the receiver; small ones share 4 KiB blocks (N88), so a few kept long are better copied; lent, not owned, with Config.ReuseMessageBuffers (N103)
	Err      error          // EventRefused, EventConnectFailed, EventDisconnected, EventRejected
	MTU      int            // EventMTUChanged: the new payload MTU
	Message  MessageID      // EventOutcome: the message, as SendTracked returned it
	Quality  *Quality       // EventQuality: a value of its own, kept off the Event so that every other event stays small (N57)
	Stats    *Stats         // EventDisconnected: the connection's final statistics
	Intro    *Introduction  // EventIntroduced, EventIntroFailed: the introduction (X6)
}

// Transmit describes one datagram written by Endpoint.PollTransmit: send the
// first N bytes of the buffer to To, from the local address Local if it is
// valid. Local is the address the peer's datagrams were sent to
// (Incoming.Local): a server bound to an unspecified address on a host of
// several addresses must answer each client from the address the client
// sent to, or the client's socket, connected to that address, drops the
// answer (N149). It is the zero Addr where the driver gave none: the
// socket chooses.
type Transmit struct {
	To    netip.AddrPort // the destination
	Local netip.Addr     // the local address to send from, if valid
	N     int            // the datagram's length, at the start of the buffer
}
