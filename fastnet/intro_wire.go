package fastnet

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"net/netip"
	"unicode/utf8"
)

// The channel -1 literals of the punch extension (X3-X13, docs/nat.md).
// Each starts with 6 ASCII bytes and goes on in binary, big-endian (D1):
//
//	"intro?" | req u32 | target id u32 | cands                          (X4)
//	"intro>" | intro id | initiator id u32 | addr | cands              (X5)
//	"intro+" | intro id | cands                                        (X5)
//	"intro-" | intro id | reason                                       (X5)
//	"intro=" | req u32 | intro id | role u8 | token (16) | ttl u32 (ms)
//	         | peer id u32 | addr | cands | relay                      (X6)
//	"intro!" | req u32 | code u8 | reason                              (X6)
//	"intro^" | intro id | gid u32                                      (X13)
//	"punch?" | intro id | role u8 | nonce (8) | zero (8) | mac (16)    (X10)
//	"punch!" | intro id | role u8 | echo (8)  | nonce (8) | mac (16)   (X10)
//	"punch." | intro id | role u8 | echo (8)  | mac (16)               (X10)
//
// addr is a family (u8, 4 or 6), the IP (4 or 16 bytes) and a port (u16,
// not 0), an IPv4-mapped IPv6 address travelling as family 4; cands a
// count (0..4) and that many addr; reason the rest of the payload, UTF-8,
// at most 64 bytes; relay a u8 length and that many ASCII bytes, 0 for
// none; intro id 8 bytes; mac the first 16 bytes of HMAC-SHA256 keyed
// with the token over every byte before it. A payload whose lengths do not
// add up, or with any field out of range, is malformed (X3).

// extKind says which literal of the extension a payload is.
type extKind uint8

const (
	extIntroReq    extKind = iota + 1 // "intro?"
	extIntroOffer                     // "intro>"
	extIntroAccept                    // "intro+"
	extIntroRefuse                    // "intro-"
	extIntroGo                        // "intro="
	extIntroFail                      // "intro!"
	extIntroRelay                     // "intro^"
	extPunchAsk                       // "punch?"
	extPunchAnswer                    // "punch!"
	extPunchAck                       // "punch."
)

var extLiterals = [...]string{
	extIntroReq:    "intro?",
	extIntroOffer:  "intro>",
	extIntroAccept: "intro+",
	extIntroRefuse: "intro-",
	extIntroGo:     "intro=",
	extIntroFail:   "intro!",
	extIntroRelay:  "intro^",
	extPunchAsk:    "punch?",
	extPunchAnswer: "punch!",
	extPunchAck:    "punch.",
}

const (
	extLitLen   = 6
	maxCands    = 4  // X3, X9
	maxExtText  = 64 // a reason's bytes (X3)
	maxRelayLen = 255
	macLen      = 16
	// punchAskLen, punchAnswerLen and punchAckLen are the sizes of the
	// punch packets' payloads (X10, X14).
	punchAskLen    = extLitLen + 8 + 1 + 8 + 8 + macLen
	punchAnswerLen = punchAskLen
	punchAckLen    = extLitLen + 8 + 1 + 8 + macLen
)

// IntroID names one introduction: 8 random bytes drawn by the introducer
// (X3).
type IntroID [8]byte

// candList is up to maxCands addresses.
type candList struct {
	n int
	a [maxCands]netip.AddrPort
}

func (l *candList) add(a netip.AddrPort) bool {
	if l.n == maxCands {
		return false
	}
	l.a[l.n] = a
	l.n++
	return true
}

func (l *candList) slice() []netip.AddrPort { return l.a[:l.n:l.n] }

// extMsg is a parsed literal of the extension; kind says which fields are
// set.
type extMsg struct {
	kind   extKind
	req    uint32 // intro?, intro=, intro!
	target uint32 // intro?: the target's id; intro>, intro=: the other peer's id
	id     IntroID
	role   uint8 // intro=, punch*
	code   uint8 // intro!
	token  [16]byte
	ttl    uint32 // ms
	gid    uint32 // intro^
	addr   netip.AddrPort
	cands  candList
	relay  string // intro=
	reason string // intro-, intro!
	nonce  [8]byte
	echo   [8]byte
	mac    [macLen]byte
}

// errBadExt is the error of every malformed literal of the extension.
var errBadExt = errors.New("fastnet: malformed introduction or punch packet")

// extKindOf returns the kind of literal p starts with, 0 if none of the
// extension's.
func extKindOf(p []byte) extKind {
	if len(p) < extLitLen || (string(p[:5]) != "intro" && string(p[:5]) != "punch") {
		return 0
	}
	for k := extIntroReq; k <= extPunchAck; k++ {
		if string(p[:extLitLen]) == extLiterals[k] {
			return k
		}
	}
	return 0
}

// extReader consumes a payload; any short read sets bad.
type extReader struct {
	p   []byte
	bad bool
}

func (r *extReader) take(n int) []byte {
	if r.bad || len(r.p) < n {
		r.bad = true
		return make([]byte, n)
	}
	b := r.p[:n]
	r.p = r.p[n:]
	return b
}

func (r *extReader) u8() uint8   { return r.take(1)[0] }
func (r *extReader) u32() uint32 { return binary.BigEndian.Uint32(r.take(4)) }

func (r *extReader) addr() netip.AddrPort {
	var ip netip.Addr
	switch r.u8() {
	case 4:
		ip = netip.AddrFrom4([4]byte(r.take(4)))
	case 6:
		ip = netip.AddrFrom16([16]byte(r.take(16)))
		if ip.Is4In6() {
			r.bad = true // sent as family 4 (X3)
		}
	default:
		r.bad = true
		return netip.AddrPort{}
	}
	port := binary.BigEndian.Uint16(r.take(2))
	if port == 0 {
		r.bad = true
	}
	return netip.AddrPortFrom(ip, port)
}

func (r *extReader) cands() (l candList) {
	n := int(r.u8())
	if n > maxCands {
		r.bad = true
		return
	}
	for range n {
		l.add(r.addr())
	}
	return
}

// text reads the rest of the payload as a reason of at most maxExtText
// bytes, its bad UTF-8 replaced as N2 reads reasons.
func (r *extReader) text() string {
	if len(r.p) > maxExtText {
		r.bad = true
		return ""
	}
	s := validText(r.p)
	r.p = nil
	return s
}

// parseExt parses a payload that extKindOf recognized.
func parseExt(p []byte) (extMsg, error) {
	m := extMsg{kind: extKindOf(p)}
	if m.kind == 0 {
		return extMsg{}, errBadExt
	}
	r := extReader{p: p[extLitLen:]}
	switch m.kind {
	case extIntroReq:
		m.req, m.target, m.cands = r.u32(), r.u32(), r.cands()
		if m.req == 0 {
			r.bad = true
		}
	case extIntroOffer:
		m.id = IntroID(r.take(8))
		m.target, m.addr, m.cands = r.u32(), r.addr(), r.cands()
	case extIntroAccept:
		m.id = IntroID(r.take(8))
		m.cands = r.cands()
	case extIntroRefuse:
		m.id = IntroID(r.take(8))
		m.reason = r.text()
	case extIntroGo:
		m.req = r.u32()
		m.id = IntroID(r.take(8))
		m.role = r.u8()
		m.token = [16]byte(r.take(16))
		m.ttl, m.target, m.addr, m.cands = r.u32(), r.u32(), r.addr(), r.cands()
		relay := r.take(int(r.u8()))
		for _, c := range relay {
			if c < 0x21 || c > 0x7e {
				r.bad = true
			}
		}
		m.relay = string(relay)
		if m.role > 1 {
			r.bad = true
		}
	case extIntroFail:
		m.req, m.code, m.reason = r.u32(), r.u8(), r.text()
		if m.code < 1 || m.code > 5 {
			r.bad = true
		}
	case extIntroRelay:
		m.id = IntroID(r.take(8))
		m.gid = r.u32()
	case extPunchAsk, extPunchAnswer, extPunchAck:
		m.id = IntroID(r.take(8))
		m.role = r.u8()
		switch m.kind {
		case extPunchAsk:
			m.nonce = [8]byte(r.take(8))
			if [8]byte(r.take(8)) != ([8]byte{}) {
				r.bad = true
			}
		case extPunchAnswer:
			m.echo, m.nonce = [8]byte(r.take(8)), [8]byte(r.take(8))
		case extPunchAck:
			m.echo = [8]byte(r.take(8))
		}
		m.mac = [macLen]byte(r.take(macLen))
		if m.role > 1 {
			r.bad = true
		}
	}
	if r.bad || len(r.p) != 0 {
		return extMsg{}, errBadExt
	}
	return m, nil
}

func appendAddr(b []byte, a netip.AddrPort) []byte {
	ip := a.Addr().Unmap()
	if ip.Is4() {
		b = append(b, 4)
		b = append(b, ip.AsSlice()...)
	} else {
		b = append(b, 6)
		b = append(b, ip.AsSlice()...)
	}
	return binary.BigEndian.AppendUint16(b, a.Port())
}

func appendCands(b []byte, l *candList) []byte {
	b = append(b, byte(l.n))
	for _, a := range l.slice() {
		b = appendAddr(b, a)
	}
	return b
}

// appendExt appends the payload of m. The mac of a punch packet is
// computed with token; other kinds ignore it.
func appendExt(b []byte, m *extMsg, token *[16]byte) []byte {
	start := len(b)
	b = append(b, extLiterals[m.kind]...)
	switch m.kind {
	case extIntroReq:
		b = binary.BigEndian.AppendUint32(b, m.req)
		b = binary.BigEndian.AppendUint32(b, m.target)
		b = appendCands(b, &m.cands)
	case extIntroOffer:
		b = append(b, m.id[:]...)
		b = binary.BigEndian.AppendUint32(b, m.target)
		b = appendCands(appendAddr(b, m.addr), &m.cands)
	case extIntroAccept:
		b = appendCands(append(b, m.id[:]...), &m.cands)
	case extIntroRefuse:
		b = append(append(b, m.id[:]...), cutTo(m.reason, maxExtText)...)
	case extIntroGo:
		b = binary.BigEndian.AppendUint32(b, m.req)
		b = append(b, m.id[:]...)
		b = append(b, m.role)
		b = append(b, m.token[:]...)
		b = binary.BigEndian.AppendUint32(b, m.ttl)
		b = binary.BigEndian.AppendUint32(b, m.target)
		b = appendCands(appendAddr(b, m.addr), &m.cands)
		b = append(append(b, byte(len(m.relay))), m.relay...)
	case extIntroFail:
		b = binary.BigEndian.AppendUint32(b, m.req)
		b = append(append(b, m.code), cutTo(m.reason, maxExtText)...)
	case extIntroRelay:
		b = binary.BigEndian.AppendUint32(append(b, m.id[:]...), m.gid)
	case extPunchAsk, extPunchAnswer, extPunchAck:
		b = append(append(b, m.id[:]...), m.role)
		switch m.kind {
		case extPunchAsk:
			b = append(append(b, m.nonce[:]...), make([]byte, 8)...)
		case extPunchAnswer:
			b = append(append(b, m.echo[:]...), m.nonce[:]...)
		case extPunchAck:
			b = append(b, m.echo[:]...)
		}
		mac := punchMAC(token, b[start:])
		b = append(b, mac[:]...)
	default:
		panic("fastnet: internal: unknown extension literal")
	}
	return b
}

// punchMAC returns the first 16 bytes of HMAC-SHA256 keyed with token over
// p (X10).
func punchMAC(token *[16]byte, p []byte) (mac [macLen]byte) {
	h := hmac.New(sha256.New, token[:])
	h.Write(p)
	copy(mac[:], h.Sum(nil))
	return mac
}

// punchValid reports whether the mac of the punch packet p verifies with
// token.
func punchValid(token *[16]byte, p []byte) bool {
	if len(p) < macLen {
		return false
	}
	want := punchMAC(token, p[:len(p)-macLen])
	return hmac.Equal(want[:], p[len(p)-macLen:])
}

// validRelay reports whether s can be named as a relay in "intro=": at
// most 255 printable ASCII bytes without spaces (X6).
func validRelay(s string) bool {
	if len(s) > maxRelayLen || !utf8.ValidString(s) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
