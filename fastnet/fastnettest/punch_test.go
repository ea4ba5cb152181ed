package fastnettest_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/fastnet/fastnettest"
)

// The hole punching of docs/nat.md, modelled at the UDP level over the
// simulator's NATs, without the engine: an introducer S that peers A and B
// register with (keeping their mappings alive once a second, as the
// heartbeats of D16 do), the introduction that gives each the other's
// reflexive address and local candidates (X6, X9), the checks of X11
// (punch?, punch!, punch. with per-address nonces), the handshake of X12
// reduced to a connect and its answer, and B's deadline of X13. Tokens and
// macs are left out: every datagram in these networks is genuine, and
// what is checked is which paths the NATs let open, and when.

// The timers of X11-X13.
const (
	checkEvery    = 100 * time.Millisecond // to a reflexive candidate
	punchTimeout  = 3 * time.Second
	punchGrace    = time.Second // once, if an address is proved by then
	connectRetry  = 200 * time.Millisecond
	answerSpacing = 10 * time.Millisecond
	maxPrflx      = 4
)

// The schedule of checks to a local candidate: at 0, 100, 200, 400 and
// 800 ms.
var localChecks = []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond}

// udpNode is the plumbing of a test node: datagrams waiting to be sent,
// and timers.
type udpNode struct {
	out    []outgoing
	timers []timer
}

type outgoing struct {
	to netip.AddrPort
	b  []byte
}

type timer struct {
	at clock.Time
	f  func(now clock.Time)
}

func (u *udpNode) send(to netip.AddrPort, b []byte) { u.out = append(u.out, outgoing{to, b}) }

func (u *udpNode) after(now clock.Time, d time.Duration, f func(clock.Time)) {
	u.timers = append(u.timers, timer{now.Add(d), f})
}

func (u *udpNode) HandleTimeout(now clock.Time) {
	for {
		i := slices.IndexFunc(u.timers, func(t timer) bool { return t.at <= now })
		if i < 0 {
			return
		}
		t := u.timers[i]
		u.timers = slices.Delete(u.timers, i, i+1)
		t.f(now)
	}
}

func (u *udpNode) NextDeadline() (clock.Time, bool) {
	var d clock.Time
	for _, t := range u.timers {
		if d == 0 || t.at < d {
			d = t.at
		}
	}
	return d, d != 0
}

func (u *udpNode) PollTransmit(now clock.Time, buf []byte) (fastnet.Transmit, bool) {
	if len(u.out) == 0 {
		return fastnet.Transmit{}, false
	}
	o := u.out[0]
	u.out = u.out[1:]
	return fastnet.Transmit{To: o.to, N: copy(buf, o.b)}, true
}

func (u *udpNode) PollEvent() (fastnet.Event, bool) { return fastnet.Event{}, false }

// The datagrams of the model. Registration and introduction are text;
// punches are a kind byte and two 8-byte fields (nonce, echo).
const (
	kindRegister = 'R' // peer to S: "R<name> <local>,<local>"
	kindIntro    = 'I' // S to peer: "I<role> <reflexive> <local>,<local>"
	kindAsk      = '?' // punch?: nonce
	kindAnswer   = '!' // punch!: nonce, echo
	kindConfirm  = '.' // punch.: echo
	kindConnect  = 'C' // the initiator's connect?
	kindAccepted = 'K' // the target's connected
	kindBeat     = 'H' // a heartbeat on the direct path
	kindData     = 'D' // data on the direct path
)

// introducer is S: it records where each peer registers from, and
// introduces A to B when the test says.
type introducer struct {
	udpNode
	refl   map[string]netip.AddrPort
	locals map[string]string
}

func (s *introducer) HandleDatagram(now clock.Time, from netip.AddrPort, b []byte) {
	if len(b) < 2 || b[0] != kindRegister {
		return
	}
	name, locals, _ := strings.Cut(string(b[1:]), " ")
	s.refl[name] = from
	s.locals[name] = locals
}

// introduce sends both peers the go of X6.
func (s *introducer) introduce() {
	s.send(s.refl["A"], fmt.Appendf(nil, "%c0 %v %s", kindIntro, s.refl["B"], s.locals["B"]))
	s.send(s.refl["B"], fmt.Appendf(nil, "%c1 %v %s", kindIntro, s.refl["A"], s.locals["A"]))
}

// punchPeer is A (role 0) or B (role 1).
type punchPeer struct {
	udpNode
	name    string
	s       netip.AddrPort   // the introducer
	locals  []netip.AddrPort // reported to S
	rng     *rand.Rand
	beats   bool // once connected, a heartbeat to the peer every second
	gotData bool

	role    int
	active  bool // an introduction is live
	started clock.Time
	nonces  map[netip.AddrPort]uint64 // mine, per remote address
	prflx   int
	answers map[netip.AddrPort]clock.Time // last punch! sent to each
	proved  []netip.AddrPort
	target  netip.AddrPort            // A: where the handshake goes
	echo    map[netip.AddrPort]uint64 // A: the nonce to confirm, per address

	connected   bool // A: got the accept; B: sent it
	connectedAt clock.Time
	gaveUp      bool // B: fell back (X13)
	extended    bool
}

func (p *punchPeer) start(now clock.Time) {
	p.register(now)
}

func (p *punchPeer) register(now clock.Time) {
	var l []string
	for _, a := range p.locals {
		l = append(l, a.String())
	}
	// Registering again every second keeps the mapping to S alive, as
	// the heartbeats of the connection to S do.
	p.send(p.s, fmt.Appendf(nil, "%c%s %s", kindRegister, p.name, strings.Join(l, ",")))
	p.after(now, time.Second, p.register)
}

func (p *punchPeer) isProved(a netip.AddrPort) bool { return slices.Contains(p.proved, a) }

func (p *punchPeer) nonce(a netip.AddrPort) uint64 {
	n, ok := p.nonces[a]
	if !ok {
		n = p.rng.Uint64()
		p.nonces[a] = n
	}
	return n
}

func punch(kind byte, a, b uint64) []byte {
	out := []byte{kind}
	out = binary.BigEndian.AppendUint64(out, a)
	return binary.BigEndian.AppendUint64(out, b)
}

// ask sends punch? to a while the punch goes on: for A until its
// handshake starts, for B until it accepts a connect or gives up. A proved
// address is asked again, so that each answer draws a new punch., which
// the other side may still need to prove the path (X11).
func (p *punchPeer) ask(now clock.Time, a netip.AddrPort) {
	if !p.active || p.target.IsValid() || now >= p.started.Add(punchTimeout) {
		return
	}
	p.send(a, punch(kindAsk, p.nonce(a), 0))
}

func (p *punchPeer) HandleDatagram(now clock.Time, from netip.AddrPort, b []byte) {
	if len(b) == 0 {
		return
	}
	switch b[0] {
	case kindIntro:
		p.intro(now, string(b[1:]))
		return
	case kindAccepted:
		if p.role == 0 && !p.connected && from == p.target {
			p.connected, p.connectedAt = true, now
			p.active = false
			p.beat(now)
		}
		return
	case kindData:
		p.gotData = p.connected && from == p.target
		return
	case kindBeat:
		return
	case kindConnect:
		// B takes a connect only from a proved address of a live
		// introduction (X12), and answers repeats once connected.
		if p.role == 1 && (p.active && p.isProved(from) || p.connected && from == p.target) {
			if !p.connected {
				p.connected, p.connectedAt, p.target = true, now, from
				p.active = false
				p.beat(now)
			}
			p.send(from, []byte{kindAccepted})
		}
		return
	}
	if !p.active || len(b) != 17 {
		return
	}
	first := binary.BigEndian.Uint64(b[1:])
	second := binary.BigEndian.Uint64(b[9:])
	switch b[0] {
	case kindAsk:
		if _, known := p.nonces[from]; !known {
			if p.prflx >= maxPrflx {
				return
			}
			p.prflx++
		}
		if last, ok := p.answers[from]; ok && now < last.Add(answerSpacing) {
			return
		}
		p.answers[from] = now
		p.send(from, punch(kindAnswer, p.nonce(from), first))
	case kindAnswer:
		if n, ok := p.nonces[from]; ok && second == n {
			// A punch. answers; the handshake that proving may start
			// sends it first itself.
			p.echo[from] = first
			if !p.prove(now, from) {
				p.send(from, punch(kindConfirm, first, 0))
			}
		}
	case kindConfirm:
		if n, ok := p.nonces[from]; ok && first == n {
			p.prove(now, from)
		}
	}
}

// intro starts the punch of X11 on S's go.
func (p *punchPeer) intro(now clock.Time, msg string) {
	f := strings.Fields(msg)
	p.role = int(f[0][0] - '0')
	p.active, p.started = true, now
	cands := []netip.AddrPort{netip.MustParseAddrPort(f[1])}
	if len(f) > 2 {
		for _, s := range strings.Split(f[2], ",") {
			cands = append(cands, netip.MustParseAddrPort(s))
		}
	}
	for i, c := range cands {
		if i == 0 {
			var tick func(clock.Time)
			tick = func(now clock.Time) {
				p.ask(now, c)
				if p.active && !p.target.IsValid() && now < p.started.Add(punchTimeout) {
					p.after(now, checkEvery, tick)
				}
			}
			tick(now)
			continue
		}
		for _, d := range localChecks {
			p.after(now, d, func(now clock.Time) { p.ask(now, c) })
		}
	}
	if p.role == 1 {
		p.after(now, punchTimeout, p.deadline)
	}
}

// prove records a as proved, and reports whether that started A's
// handshake to it.
func (p *punchPeer) prove(now clock.Time, a netip.AddrPort) bool {
	if p.isProved(a) {
		return false
	}
	p.proved = append(p.proved, a)
	if p.role == 0 && !p.target.IsValid() {
		p.target = a
		p.handshake(now)
		return true
	}
	return false
}

// handshake is A's D15 handshake to the proved address, its punch.
// repeated before each retry (X12).
func (p *punchPeer) handshake(now clock.Time) {
	if !p.active || p.connected {
		return
	}
	p.send(p.target, punch(kindConfirm, p.echo[p.target], 0))
	p.send(p.target, []byte{kindConnect})
	p.after(now, connectRetry, p.handshake)
}

// beat sends a heartbeat on the direct path every second, if asked to.
func (p *punchPeer) beat(now clock.Time) {
	if p.beats {
		p.send(p.target, []byte{kindBeat})
		p.after(now, time.Second, p.beat)
	}
}

// deadline is B's decision of X13.
func (p *punchPeer) deadline(now clock.Time) {
	if p.connected {
		return
	}
	if len(p.proved) > 0 && !p.extended {
		p.extended = true
		p.after(now, punchGrace, p.deadline)
		return
	}
	p.active, p.gaveUp = false, true
}

// A side of a scenario: where a peer sits.
type side struct {
	nat     fastnettest.NATType // 0: no NAT
	private netip.AddrPort      // behind a NAT
	public  netip.AddrPort      // without one
}

// scenario is one run of the model.
type scenario struct {
	a, b      fastnettest.NATType // 0: no NAT
	sameNAT   bool                // both behind one NAT of type a
	hairpin   bool
	noLocals  bool // peers report no local candidates
	beats     bool // once connected, heartbeats on the path every second
	loss      float64
	delays    [3]time.Duration // A-S, B-S, A-B one way; zero: the defaults below
	seed      uint64
	mapTimout time.Duration
}

type outcome struct {
	direct   bool
	after    time.Duration // from S's introduction to A's connection
	fellBack bool          // B gave up (X13)
}

var (
	sAddr   = netip.MustParseAddrPort("198.51.100.1:7000")
	aPublic = netip.MustParseAddrPort("198.51.100.10:5000")
	bPublic = netip.MustParseAddrPort("198.51.100.20:5000")
	aLAN    = netip.MustParseAddrPort("192.168.1.10:5000")
	bLAN    = netip.MustParseAddrPort("192.168.2.10:5000")
	bSame   = netip.MustParseAddrPort("192.168.1.11:5000")
)

// One-way delays of the model: A to S 30 ms, B to S 40 ms, A to B 25 ms,
// on one LAN 1 ms.
const (
	delayAS  = 30 * time.Millisecond
	delayBS  = 40 * time.Millisecond
	delayAB  = 25 * time.Millisecond
	delayLAN = time.Millisecond
)

func (sc scenario) run(t *testing.T) outcome {
	t.Helper()
	_, _, _, o := sc.start(t)
	return o
}

// start builds the network of sc, lets the peers register for a second,
// has S introduce them, and runs until A is connected or B gives up.
func (sc scenario) start(t *testing.T) (*fastnettest.Network, *punchPeer, *punchPeer, outcome) {
	t.Helper()
	n := fastnettest.NewNetwork(sc.seed)
	s := &introducer{refl: map[string]netip.AddrPort{}, locals: map[string]string{}}
	n.Add(sAddr, s)
	rng := rand.New(rand.NewPCG(sc.seed, 1))
	a := &punchPeer{name: "A", s: sAddr, rng: rng, beats: sc.beats}
	b := &punchPeer{name: "B", s: sAddr, rng: rng, beats: sc.beats}
	for _, p := range []*punchPeer{a, b} {
		p.nonces = map[netip.AddrPort]uint64{}
		p.answers = map[netip.AddrPort]clock.Time{}
		p.echo = map[netip.AddrPort]uint64{}
	}
	natCfg := func(typ fastnettest.NATType) fastnettest.NATConfig {
		c := typ.Config()
		c.Hairpinning = sc.hairpin
		c.MappingTimeout = sc.mapTimout
		return c
	}
	var aAddr, bAddr netip.AddrPort
	switch {
	case sc.sameNAT:
		nat := n.AddNAT(netip.MustParseAddr("203.0.113.1"), natCfg(sc.a))
		aAddr, bAddr = aLAN, bSame
		n.AddBehind(nat, aAddr, a)
		n.AddBehind(nat, bAddr, b)
	default:
		aAddr, bAddr = aPublic, bPublic
		if sc.a != 0 {
			aAddr = aLAN
			n.AddBehind(n.AddNAT(netip.MustParseAddr("203.0.113.1"), natCfg(sc.a)), aAddr, a)
		} else {
			n.Add(aAddr, a)
		}
		if sc.b != 0 {
			bAddr = bLAN
			n.AddBehind(n.AddNAT(netip.MustParseAddr("203.0.113.2"), natCfg(sc.b)), bAddr, b)
		} else {
			n.Add(bAddr, b)
		}
	}
	if !sc.noLocals {
		if aAddr.Addr().IsPrivate() {
			a.locals = []netip.AddrPort{aAddr}
		}
		if bAddr.Addr().IsPrivate() {
			b.locals = []netip.AddrPort{bAddr}
		}
	}
	// The legs to S are lossless: the design repeats each of their
	// messages until answered (X7), which the model leaves out. Loss
	// applies between the peers.
	d := sc.delays
	if d == ([3]time.Duration{}) {
		d = [3]time.Duration{delayAS, delayBS, delayAB}
		if sc.sameNAT {
			d[2] = delayLAN
		}
	}
	n.SetPath(aAddr, sAddr, fastnettest.Link{Delay: d[0]})
	n.SetPath(bAddr, sAddr, fastnettest.Link{Delay: d[1]})
	n.SetPath(aAddr, bAddr, fastnettest.Link{Delay: d[2], Loss: sc.loss})
	n.DiscardEvents = true
	a.start(n.Now())
	b.start(n.Now())
	if err := n.RunFor(time.Second); err != nil {
		t.Fatal(err)
	}
	t0 := n.Now()
	s.introduce()
	done := func() bool { return a.connected || b.gaveUp }
	if err := n.RunUntilCond(done, 30*time.Second); err != nil {
		t.Fatalf("%+v: neither a connection nor a fallback: %v", sc, err)
	}
	if a.connected {
		return n, a, b, outcome{direct: true, after: a.connectedAt.Sub(t0)}
	}
	return n, a, b, outcome{fellBack: true, after: n.Now().Sub(t0)}
}

func typeName(t fastnettest.NATType) string {
	if t == 0 {
		return "no NAT"
	}
	return t.String()
}

var kinds = []fastnettest.NATType{0, fastnettest.FullCone, fastnettest.AddressRestricted, fastnettest.PortRestricted, fastnettest.Symmetric}

// opens is X23's rule for two different NATs.
var opens = fastnettest.OpensDirectPath

// X23: every ordered pair of NAT types, on a lossless network, gives the
// outcome X23 reasons out, and the time printed in docs/nat.md's table.
func TestPunchMatrix(t *testing.T) {
	want := map[[2]fastnettest.NATType]time.Duration{}
	for _, a := range kinds {
		for _, b := range kinds {
			sc := scenario{a: a, b: b, seed: 1}
			got := sc.run(t)
			if got.direct != opens(a, b) {
				t.Errorf("A %s, B %s: direct %v, want %v", typeName(a), typeName(b), got.direct, opens(a, b))
			}
			if got.direct && got.after > 500*time.Millisecond {
				t.Errorf("A %s, B %s: direct after %v", typeName(a), typeName(b), got.after)
			}
			// Without a path B falls back PunchTimeout after its go,
			// which reaches it delayBS after S sends it (X13).
			if !got.direct && got.after != punchTimeout+delayBS {
				t.Errorf("A %s, B %s: fell back after %v, want %v", typeName(a), typeName(b), got.after, punchTimeout+delayBS)
			}
			want[[2]fastnettest.NATType{a, b}] = got.after
		}
	}
	var sb strings.Builder
	sb.WriteString("| A \\ B |")
	for _, b := range kinds {
		fmt.Fprintf(&sb, " %s |", typeName(b))
	}
	sb.WriteString("\n| --- |")
	for range kinds {
		sb.WriteString(" --- |")
	}
	for _, a := range kinds {
		fmt.Fprintf(&sb, "\n| %s |", typeName(a))
		for _, b := range kinds {
			d := want[[2]fastnettest.NATType{a, b}]
			if opens(a, b) {
				fmt.Fprintf(&sb, " direct, %d ms |", d.Milliseconds())
			} else {
				fmt.Fprintf(&sb, " relay at %.2f s |", d.Seconds())
			}
		}
	}
	// The table of docs/nat.md is this one.
	doc, err := os.ReadFile("../../docs/nat.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range strings.Split(sb.String(), "\n") {
		if !bytes.Contains(doc, []byte("  "+row+"\n")) {
			t.Errorf("docs/nat.md (X23) lacks the row\n%s", row)
		}
	}
	t.Logf("\n%s", sb.String())
}

// X23, two peers behind one NAT: their local candidates open a LAN path
// whatever the NAT; without them, only hairpinning through an
// endpoint-independent mapping does.
func TestPunchSameNAT(t *testing.T) {
	for _, typ := range kinds[1:] {
		for _, hp := range []bool{false, true} {
			for _, noLocals := range []bool{false, true} {
				got := scenario{a: typ, sameNAT: true, hairpin: hp, noLocals: noLocals, seed: 1}.run(t)
				want := !noLocals || hp && typ != fastnettest.Symmetric
				if got.direct != want {
					t.Errorf("%s, hairpinning %v, local candidates %v: direct %v, want %v", typ, hp, !noLocals, got.direct, want)
				}
				t.Logf("%s, hairpinning %v, local candidates %v: direct %v after %v", typ, hp, !noLocals, got.direct, got.after)
			}
		}
	}
}

// Mappings that lapse (X19): two peers behind port-restricted NATs with
// 30-second mappings open a direct path, then go quiet for a minute. With
// heartbeats every second on the path, a datagram sent after the minute
// arrives; without them both NATs have forgotten the path and drop it.
func TestPunchMappingTimeout(t *testing.T) {
	for _, keep := range []bool{true, false} {
		sc := scenario{a: fastnettest.PortRestricted, b: fastnettest.PortRestricted, mapTimout: 30 * time.Second, seed: 1, beats: keep}
		n, a, b, got := sc.start(t)
		if !got.direct {
			t.Fatalf("heartbeats %v: no direct path", keep)
		}
		if err := n.RunFor(time.Minute); err != nil {
			t.Fatal(err)
		}
		a.send(a.target, []byte{kindData})
		if err := n.RunFor(time.Second); err != nil {
			t.Fatal(err)
		}
		if b.gotData != keep {
			t.Errorf("heartbeats %v: data after a quiet minute arrived: %v", keep, b.gotData)
		}
	}
}

// Random NAT types, loss between the peers and delays: every run ends
// within a bound, in a direct path exactly when X23 says one opens, and
// otherwise in B's fallback at its deadline; never in a hang.
func TestPunchProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 23))
	runs := 300
	if testing.Short() {
		runs = 60
	}
	for i := range runs {
		ms := func(lo, hi int) time.Duration { return time.Duration(lo+rng.IntN(hi-lo+1)) * time.Millisecond }
		sc := scenario{
			a:      kinds[rng.IntN(len(kinds))],
			b:      kinds[rng.IntN(len(kinds))],
			loss:   rng.Float64() * 0.3,
			delays: [3]time.Duration{ms(5, 150), ms(5, 150), ms(5, 150)},
			seed:   uint64(i),
		}
		got := sc.run(t)
		if got.direct != opens(sc.a, sc.b) {
			t.Errorf("run %d, %+v: direct %v", i, sc, got.direct)
		}
		// B gives up PunchTimeout after its go, plus the grace when a
		// path was proved; A is connected by then or never.
		if bound := sc.delays[1] + punchTimeout + punchGrace; got.after > bound {
			t.Errorf("run %d, %+v: ended after %v, beyond %v", i, sc, got.after, bound)
		}
	}
}
