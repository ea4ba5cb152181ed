package fastnet

import (
	"encoding/binary"
	"errors"
	"unicode/utf8"
)

// The protocol's channels (spec "Basic Packet Format"; D15-D19). Channels
// 0..32767 carry messages.
const (
	chControl   int16 = -1 // queries, handshake and disconnect (D15, D18)
	chHeartbeat int16 = -2 // heartbeats (D16)
	chMTUServer int16 = -3 // the server's MTU estimation (D19)
	chMTUClient int16 = -4 // the client's MTU estimation (D19)
	chAck       int16 = -5 // acknowledgements (D13)
	chBundle    int16 = -6 // bundles of packets, once negotiated (D24)
	// MaxChannel is the highest message channel.
	MaxChannel = 32767
)

// Wire errors of the packets this package parses. They are preallocated:
// the peer controls how often they occur.
var (
	errShortPacket  = errors.New("fastnet: packet shorter than its channel id")
	errBadControl   = errors.New("fastnet: unknown channel -1 payload")
	errBadHeartbeat = errors.New("fastnet: heartbeat is not 2 bytes")
)

// A basic packet (spec "Basic Packet Format", D1):
//
//	 0               1
//	+-------+-------+---------------------------
//	| channel (i16) | payload ...
//	+-------+-------+---------------------------

// appendPacketHeader appends the 2-byte channel id of a packet.
func appendPacketHeader(b []byte, ch int16) []byte {
	return binary.BigEndian.AppendUint16(b, uint16(ch))
}

// parsePacket splits a datagram into its channel id and payload.
func parsePacket(b []byte) (ch int16, payload []byte, err error) {
	if len(b) < 2 {
		return 0, nil, errShortPacket
	}
	return int16(binary.BigEndian.Uint16(b)), b[2:], nil
}

// controlKind says which channel -1 literal a payload is (D15, D18).
type controlKind uint8

const (
	ctlQueryFastnet controlKind = iota + 1 // "query:fastnet"
	ctlFastnetYes                          // "query:fastnet=yes"
	ctlQueryVersion                        // "query:version"
	ctlVersion                             // "query:version=" + version
	ctlConnect                             // "connect?"
	ctlConnected                           // "connected" + u32 id
	ctlAbort                               // "abort" + UTF-8 reason
	ctlDisconnect                          // "disconnect" + UTF-8 reason (D18)
	ctlQueryBundle                         // "query:ext:bundle" (D24)
	ctlBundleYes                           // "query:ext:bundle=yes" (D24)
	ctlQueryPunch                          // "query:ext:punch" (X2, docs/nat.md)
	ctlPunchYes                            // "query:ext:punch=yes" (X2)
	ctlExt                                 // a literal of the punch extension, encoded in raw (X3)
)

// The channel -1 literals, exactly as they travel (ASCII, no terminator).
const (
	litQueryFastnet = "query:fastnet"
	litFastnetYes   = "query:fastnet=yes"
	litQueryVersion = "query:version"
	litVersionPfx   = "query:version="
	litConnect      = "connect?"
	litConnected    = "connected"
	litAbort        = "abort"
	litDisconnect   = "disconnect"
	litQueryBundle  = "query:ext:bundle"
	litBundleYes    = "query:ext:bundle=yes"
	litQueryPunch   = "query:ext:punch"
	litPunchYes     = "query:ext:punch=yes"

	// Version is the protocol version this package speaks.
	Version = "1.0"
)

// maxReason bounds the reason text this endpoint sends in "abort" and
// "disconnect"; longer reasons are cut at a rune boundary.
const maxReason = 512

// control is a parsed channel -1 payload.
type control struct {
	kind controlKind
	id   uint32 // ctlConnected
	text string // ctlVersion: the version; ctlAbort, ctlDisconnect: the reason
	raw  []byte // ctlExt: the whole payload
}

// parseControl parses a channel -1 payload. Reasons that are not valid UTF-8
// have their bad bytes replaced, so the application always gets valid text.
func parseControl(p []byte) (control, error) {
	switch string(p) { // compiled to comparisons; does not allocate
	case litQueryFastnet:
		return control{kind: ctlQueryFastnet}, nil
	case litFastnetYes:
		return control{kind: ctlFastnetYes}, nil
	case litQueryVersion:
		return control{kind: ctlQueryVersion}, nil
	case litConnect:
		return control{kind: ctlConnect}, nil
	case litQueryBundle:
		return control{kind: ctlQueryBundle}, nil
	case litBundleYes:
		return control{kind: ctlBundleYes}, nil
	case litQueryPunch:
		return control{kind: ctlQueryPunch}, nil
	case litPunchYes:
		return control{kind: ctlPunchYes}, nil
	}
	switch {
	case len(p) == len(litConnected)+4 && string(p[:len(litConnected)]) == litConnected:
		return control{kind: ctlConnected, id: binary.BigEndian.Uint32(p[len(litConnected):])}, nil
	case hasPrefix(p, litVersionPfx):
		return control{kind: ctlVersion, text: validText(p[len(litVersionPfx):])}, nil
	case hasPrefix(p, litDisconnect):
		return control{kind: ctlDisconnect, text: validText(p[len(litDisconnect):])}, nil
	case hasPrefix(p, litAbort):
		return control{kind: ctlAbort, text: validText(p[len(litAbort):])}, nil
	}
	return control{}, errBadControl
}

func hasPrefix(p []byte, s string) bool {
	return len(p) >= len(s) && string(p[:len(s)]) == s
}

// validText returns p as a string with invalid UTF-8 replaced and a
// trailing NUL (which the specification forbids but a sloppy peer may send)
// removed.
func validText(p []byte) string {
	if n := len(p); n > 0 && p[n-1] == 0 {
		p = p[:n-1]
	}
	if utf8.Valid(p) {
		return string(p)
	}
	return string([]rune(string(p))) // replaces each bad byte with U+FFFD
}

// appendControl appends the payload of a channel -1 literal.
func appendControl(b []byte, c control) []byte {
	switch c.kind {
	case ctlQueryFastnet:
		return append(b, litQueryFastnet...)
	case ctlFastnetYes:
		return append(b, litFastnetYes...)
	case ctlQueryVersion:
		return append(b, litQueryVersion...)
	case ctlVersion:
		return append(append(b, litVersionPfx...), c.text...)
	case ctlConnect:
		return append(b, litConnect...)
	case ctlConnected:
		return binary.BigEndian.AppendUint32(append(b, litConnected...), c.id)
	case ctlAbort:
		return append(append(b, litAbort...), cutReason(c.text)...)
	case ctlDisconnect:
		return append(append(b, litDisconnect...), cutReason(c.text)...)
	case ctlQueryBundle:
		return append(b, litQueryBundle...)
	case ctlBundleYes:
		return append(b, litBundleYes...)
	case ctlQueryPunch:
		return append(b, litQueryPunch...)
	case ctlPunchYes:
		return append(b, litPunchYes...)
	case ctlExt:
		return append(b, c.raw...)
	}
	panic("fastnet: internal: unknown control kind")
}

// cutReason shortens s to at most maxReason bytes at a rune boundary.
func cutReason(s string) string {
	return cutTo(s, maxReason)
}

// A heartbeat (D16) is exactly one i16.
func appendHeartbeat(b []byte, v int16) []byte {
	return binary.BigEndian.AppendUint16(b, uint16(v))
}

func parseHeartbeat(p []byte) (int16, error) {
	if len(p) != 2 {
		return 0, errBadHeartbeat
	}
	return int16(binary.BigEndian.Uint16(p)), nil
}
