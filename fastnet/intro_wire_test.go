package fastnet

import (
	"bytes"
	"encoding/hex"
	"net/netip"
	"strings"
	"testing"
	"time"
)

var (
	goldenID    = IntroID{1, 2, 3, 4, 5, 6, 7, 8}
	goldenToken = [16]byte{0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xab, 0xac, 0xad, 0xae, 0xaf}
	goldenV4    = netip.MustParseAddrPort("192.168.1.2:7000")  // c0a80102 1b58
	goldenV6    = netip.MustParseAddrPort("[fd00::1]:40000")   // fd00..01 9c40
	goldenPub   = netip.MustParseAddrPort("203.0.113.9:50001") // cb007109 c351
	goldenCands = candList{n: 2, a: [maxCands]netip.AddrPort{goldenV4, goldenV6}}
)

// goldenExt are the literals of X3-X13, each with its exact bytes (hex,
// spaces between fields for reading) and, for the punch packets, the mac
// keyed with goldenToken.
var goldenExt = []struct {
	name string
	m    extMsg
	hex  string
	size int // the payload's size the design gives, 0 if it depends on the fields
}{
	{"X4 intro? no cands", extMsg{kind: extIntroReq, req: 7, target: 0x01020304},
		"696e74726f3f 00000007 01020304 00", 15},
	{"X4 intro? v4 and v6 cands", extMsg{kind: extIntroReq, req: 7, target: 0x01020304, cands: goldenCands},
		"696e74726f3f 00000007 01020304 02 04c0a801021b58 06fd000000000000000000000000000001 9c40", 0},
	{"X5 intro>", extMsg{kind: extIntroOffer, id: goldenID, target: 9, addr: goldenPub, cands: candList{n: 1, a: [maxCands]netip.AddrPort{goldenV4}}},
		"696e74726f3e 0102030405060708 00000009 04cb007109c351 01 04c0a801021b58", 0},
	{"X5 intro+", extMsg{kind: extIntroAccept, id: goldenID},
		"696e74726f2b 0102030405060708 00", 15},
	{"X5 intro-", extMsg{kind: extIntroRefuse, id: goldenID, reason: "busy"},
		"696e74726f2d 0102030405060708 62757379", 0},
	{"X6 intro= no relay", extMsg{kind: extIntroGo, req: 7, id: goldenID, role: 0, token: goldenToken, ttl: 30000, target: 9, addr: goldenPub},
		"696e74726f3d 00000007 0102030405060708 00 a0a1a2a3a4a5a6a7a8a9aaabacadaeaf 00007530 00000009 04cb007109c351 00 00", 43 + 7 + 1 + 1},
	{"X6 intro= relay", extMsg{kind: extIntroGo, req: 0, id: goldenID, role: 1, token: goldenToken, ttl: 30000, target: 3, addr: goldenPub, relay: "r:1"},
		"696e74726f3d 00000000 0102030405060708 01 a0a1a2a3a4a5a6a7a8a9aaabacadaeaf 00007530 00000003 04cb007109c351 00 03723a31", 0},
	{"X6 intro! refused", extMsg{kind: extIntroFail, req: 7, code: 2, reason: "no"},
		"696e74726f21 00000007 02 6e6f", 0},
	{"X13 intro^", extMsg{kind: extIntroRelay, id: goldenID, gid: 42},
		"696e74726f5e 0102030405060708 0000002a", 18},
	{"X10 punch?", extMsg{kind: extPunchAsk, id: goldenID, role: 0, nonce: [8]byte{1, 1, 1, 1, 1, 1, 1, 1}},
		"70756e63683f 0102030405060708 00 0101010101010101 0000000000000000 ", punchAskLen},
	{"X10 punch!", extMsg{kind: extPunchAnswer, id: goldenID, role: 1, echo: [8]byte{1, 1, 1, 1, 1, 1, 1, 1}, nonce: [8]byte{2, 2, 2, 2, 2, 2, 2, 2}},
		"70756e636821 0102030405060708 01 0101010101010101 0202020202020202 ", punchAnswerLen},
	{"X10 punch.", extMsg{kind: extPunchAck, id: goldenID, role: 0, echo: [8]byte{2, 2, 2, 2, 2, 2, 2, 2}},
		"70756e63682e 0102030405060708 00 0202020202020202 ", punchAckLen},
}

// Golden vectors of X3-X13, both ways: each message encodes to its bytes
// and its bytes parse to it. A punch packet's bytes end with its mac,
// computed here from the token, and verify.
func TestExtGolden(t *testing.T) {
	for _, g := range goldenExt {
		want, err := hex.DecodeString(strings.ReplaceAll(g.hex, " ", ""))
		if err != nil {
			t.Fatalf("%s: %v", g.name, err)
		}
		m := g.m
		if m.kind >= extPunchAsk {
			m.mac = punchMAC(&goldenToken, want)
			want = append(want, m.mac[:]...)
		}
		got := appendExt(nil, &m, &goldenToken)
		if !bytes.Equal(got, want) {
			t.Errorf("%s: encoded\n got %x\nwant %x", g.name, got, want)
		}
		if g.size != 0 && len(got) != g.size {
			t.Errorf("%s: %d bytes, the design says %d", g.name, len(got), g.size)
		}
		back, err := parseExt(want)
		if err != nil {
			t.Errorf("%s: parse: %v", g.name, err)
			continue
		}
		if back != m {
			t.Errorf("%s: parsed\n got %+v\nwant %+v", g.name, back, m)
		}
		if m.kind >= extPunchAsk && !punchValid(&goldenToken, want) {
			t.Errorf("%s: mac does not verify", g.name)
		}
	}
	if punchAskLen != 47 || punchAnswerLen != 47 || punchAckLen != 39 {
		t.Errorf("punch sizes %d, %d, %d; X10 says 47, 47, 39", punchAskLen, punchAnswerLen, punchAckLen)
	}
}

// Malformed payloads of X3: lengths that do not add up, a family other
// than 4 or 6, a count above 4, port 0, an IPv4-mapped address sent as
// family 6, a reason above 64 bytes, a role other than 0 or 1, a code
// outside 1..5, non-zero padding, a relay with a space, req 0 in
// "intro?". Each is refused by the parser.
func TestExtMalformed(t *testing.T) {
	req := "696e74726f3f0000000701020304"
	for _, tt := range []struct{ name, hex string }{
		{"X3 literal alone", "696e74726f3f"},
		{"X3 one byte short", req},
		{"X3 one byte long", req + "0000"},
		{"X3 family 5", req + "01" + "05c0a801021b58"},
		{"X3 count 5", req + "05" + strings.Repeat("04c0a801021b58", 5)},
		{"X3 port 0", req + "01" + "04c0a8010200 00"},
		{"X3 IPv4-mapped as family 6", req + "01" + "0600000000000000000000ffffc0a80102 1b58"},
		{"X4 req 0", "696e74726f3f0000000001020304 00"},
		{"X3 reason of 65 bytes", "696e74726f2d0102030405060708" + strings.Repeat("61", 65)},
		{"X6 code 0", "696e74726f21 00000007 00"},
		{"X6 code 6", "696e74726f21 00000007 06"},
		{"X6 role 2", "696e74726f3d 00000007 0102030405060708 02 a0a1a2a3a4a5a6a7a8a9aaabacadaeaf 00007530 00000009 04cb007109c351 00 00"},
		{"X6 relay with a space", "696e74726f3d 00000007 0102030405060708 00 a0a1a2a3a4a5a6a7a8a9aaabacadaeaf 00007530 00000009 04cb007109c351 00 03722031"},
		{"X6 relay longer than the rest", "696e74726f3d 00000007 0102030405060708 00 a0a1a2a3a4a5a6a7a8a9aaabacadaeaf 00007530 00000009 04cb007109c351 00 09723a31"},
		{"X10 punch? padding not zero", "70756e63683f 0102030405060708 00 0101010101010101 0000000000000001" + strings.Repeat("00", 16)},
		{"X10 punch. short", "70756e63682e 0102030405060708 00 0202020202020202" + strings.Repeat("00", 15)},
		{"X3 unknown literal", "696e74726f7e 0102030405060708"},
	} {
		b, err := hex.DecodeString(strings.ReplaceAll(tt.hex, " ", ""))
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if m, err := parseExt(b); err == nil {
			t.Errorf("%s: parsed as %+v", tt.name, m)
		}
	}
}

// The literals are distinct from every 1.0 and D18/D24 literal and match
// none of the prefixes the 1.0 parser matches (X3).
func TestExtLiteralsDistinct(t *testing.T) {
	for k := extIntroReq; k <= extPunchAck; k++ {
		lit := extLiterals[k]
		for _, pfx := range []string{litAbort, litDisconnect, litConnected, litVersionPfx} {
			if strings.HasPrefix(lit, pfx) {
				t.Errorf("%q starts with %q", lit, pfx)
			}
		}
		if _, err := parseControl([]byte(lit)); err == nil {
			t.Errorf("%q parses as a 1.0 literal", lit)
		}
	}
}

// FuzzParseExt: any payload either fails to parse or parses to a message
// that encodes back to a payload parsing to the same message (its reason
// read again as N2 reads reasons), byte for byte when it carries no reason;
// no input panics.
func FuzzParseExt(f *testing.F) {
	for _, g := range goldenExt {
		b, _ := hex.DecodeString(strings.ReplaceAll(g.hex, " ", ""))
		if g.m.kind >= extPunchAsk {
			b = append(b, make([]byte, macLen)...)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		m, err := parseExt(p)
		if err != nil {
			return
		}
		b := appendExt(nil, &m, &goldenToken)
		if m.kind >= extPunchAsk {
			copy(b[len(b)-macLen:], m.mac[:]) // the mac as received
		}
		m2, err := parseExt(b)
		if err != nil {
			t.Fatalf("%x parsed, re-encoded %x fails: %v", p, b, err)
		}
		// A reason is read as N2 reads reasons (a trailing NUL dropped,
		// bad UTF-8 replaced), so it may change once more.
		if want := validText([]byte(cutTo(m.reason, maxExtText))); m2.reason != want {
			t.Fatalf("%x: reason %q re-parsed as %q", p, m.reason, m2.reason)
		}
		m2.reason = m.reason
		if m2 != m {
			t.Fatalf("%x: %+v re-parsed as %+v", p, m, m2)
		}
		if m.kind != extIntroRefuse && m.kind != extIntroFail && !bytes.Equal(b, p) {
			t.Fatalf("%x re-encoded as %x", p, b)
		}
	})
}

// The relay group's password of X13, for goldenToken: the first 4 bytes
// of HMAC-SHA256(token, "fastnet relay password"), big-endian.
func TestRelayPasswordGolden(t *testing.T) {
	if got := relayPassword(&goldenToken); got != 0x9c71a11a {
		t.Errorf("password %#x, want 0x9c71a11a", got)
	}
}

// FuzzExtEndpoint feeds arbitrary channel -1 payloads of the extension
// (each a length byte and that many bytes, after "intro" or "punch") to
// an introducer and to a Peer, each with a negotiated connection to the
// scripted other end, from that end and from a stranger, with time
// passing between them: nothing panics, every input is handled or
// counted, and the introductions held stay within their bounds.
func FuzzExtEndpoint(f *testing.F) {
	for _, g := range goldenExt {
		b, _ := hex.DecodeString(strings.ReplaceAll(g.hex, " ", ""))
		f.Add(append([]byte{byte(len(b) - 5)}, b[5:]...))
	}
	f.Add([]byte("\x0b?\x00\x00\x00\x01\x00\x00\x00\x07\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		intro := newTestEndpoint(t, introducerConfig(1))
		intro.connectServer()
		intro.recvControl(control{kind: ctlPunchYes})
		peer := newTestEndpoint(t, Config{Role: Peer, Rand: introducerConfig(2).Rand,
			Punch: PunchConfig{Consent: func(IntroOffer) error { return nil }}, MTU: MTUConfig{Disabled: true}})
		peer.connectClient(7)
		peer.recvControl(control{kind: ctlPunchYes})
		stranger := netip.MustParseAddrPort("192.0.2.9:9")
		for i := 0; len(data) > 0; i++ {
			n := min(int(data[0]), len(data)-1)
			body := data[1 : 1+n]
			data = data[1+n:]
			lit := "intro"
			if i%3 == 2 {
				lit = "punch"
			}
			p := append([]byte(lit), body...)
			for _, tc := range []*testEndpoint{intro, peer} {
				from := tc.peer
				if i%2 == 1 {
					from = stranger
				}
				tc.recvFrom(from, chControl, p)
				tc.advance(time.Duration(n) * 7 * time.Millisecond)
				tc.sent, tc.evs = tc.sent[:0], tc.evs[:0]
				if got := tc.ep.intros.n(); got > 64 {
					t.Fatalf("%d introductions held", got)
				}
			}
		}
	})
}
