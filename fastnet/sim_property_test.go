package fastnet_test

// The engine on the simulated network (package fastnettest): a harness of
// one client and one server, a ledger that checks every delivered message
// against what was sent, and the properties P1-P3 over random networks and
// workloads. The named scenarios, the soak and the sequence-wrap run in the
// other sim_*_test.go files build on the same pieces.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/fnv"
	"io"
	"net/netip"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/fastnet/fastnettest"
)

var (
	srvAddr = netip.MustParseAddrPort("10.0.0.1:7000")
	cliAddr = netip.MustParseAddrPort("10.0.0.2:50000")
)

// The two sides of a sim, as indexes.
const (
	cliSide = 0
	srvSide = 1
)

func sideName(side int) string { return [2]string{"client", "server"}[side] }

// simT is what the harness needs of a *testing.T or a *rapid.T.
type simT interface {
	Helper()
	Fatalf(format string, args ...any)
	Errorf(format string, args ...any)
	Logf(format string, args ...any)
}

// simSetup describes a sim: the configurations of the two endpoints (Role
// and Rand are filled in) and the link of each direction.
type simSetup struct {
	Seed     uint64
	Cli, Srv fastnet.Config
	// LiveReceivers, if positive, is how many receivers each connection
	// keeps before it parks idle ones (N25): 1 or 2 makes the few channels
	// of a workload park and revive all the time.
	LiveReceivers int
	Up            fastnettest.Link // client to server
	Down          fastnettest.Link // server to client
	Trace         io.Writer
	// KeepMessages records every delivered message in sim.got.
	KeepMessages bool
	// NoRuns turns off, on both sides, the runs of packets a bundle is
	// filled and taken apart with (N101).
	NoRuns bool
	// Batch makes the network hand the datagrams that arrive at a side
	// at one instant, or with ReadEvery since its last read, over
	// together (fastnettest.Network.Batch), through HandleDatagrams
	// (N102), or one by one with OneByOne.
	Batch, OneByOne bool
	ReadEvery       time.Duration
	// Drain, if positive, ends each drain of a side's datagrams after
	// that many (partialDrain), as a driver that writes them in batches
	// lets go of the endpoint between two; not with OneByOne.
	Drain int
	// Loose makes the ledgers check only that long messages are intact
	// (see ledger.loose).
	Loose bool
	// HoldResends, if positive, has each side hold its resends back
	// (Endpoint.HoldResends) after input, for up to that long at a time
	// (holdingResends, N130); not with OneByOne or Drain.
	HoldResends time.Duration
}

// received is one delivered message, as sim.got keeps it.
type received struct {
	at       clock.Time
	channel  int
	reliable bool
	data     []byte
}

// sim is a client and a server endpoint on a simulated network, with a
// ledger per direction that checks each delivered message, and a check of
// the memory limits after every step.
type sim struct {
	t     simT
	net   *fastnettest.Network
	ep    [2]*fastnet.Endpoint
	cfg   [2]fastnet.Config // with defaults, as the endpoints report them
	h     [2]fastnet.Handle // each side's handle of the connection
	led   [2]*ledger        // indexed by the receiving side
	ids   [2]uint32         // Connected event IDs
	ended [2]error          // the Err of each side's Disconnected event
	endAt [2]clock.Time
	got   [2][]received // with KeepMessages
	keep  bool
	err   error // the first violation seen inside a callback
	// phantoms counts connections a server opened for a stale "connect?"
	// after the client closed.
	phantoms int
	// corrupting is set when a link corrupts: a damaged "connected" that
	// escapes the checksum, if any, gives the client a wrong ID.
	corrupting bool
	holds      [2]*holdingResends // with HoldResends
}

func newSim(t simT, s simSetup) *sim {
	t.Helper()
	n := fastnettest.NewNetwork(s.Seed)
	n.DiscardEvents = true
	n.Trace = s.Trace
	s.Cli.Role, s.Srv.Role = fastnet.Client, fastnet.Server
	s.Cli.Rand, s.Srv.Rand = n.Rand(), n.Rand()
	sm := &sim{t: t, net: n, keep: s.KeepMessages,
		led: [2]*ledger{newLedger(s.Loose), newLedger(s.Loose)}, corrupting: s.Up.Corrupt > 0 || s.Down.Corrupt > 0}
	for side, cfg := range [2]fastnet.Config{s.Cli, s.Srv} {
		ep, err := fastnet.NewEndpoint(cfg)
		if err != nil {
			t.Fatalf("%s: %v", sideName(side), err)
		}
		if s.LiveReceivers > 0 {
			fastnet.SetLiveReceivers(ep, s.LiveReceivers)
		}
		if s.NoRuns {
			fastnet.SetRuns(ep, false)
		}
		sm.ep[side] = ep
		sm.cfg[side] = ep.Config()
	}
	n.Batch, n.ReadEvery = s.Batch, s.ReadEvery
	if s.OneByOne {
		n.Add(srvAddr, oneByOne{sm.ep[srvSide]})
		n.Add(cliAddr, oneByOne{sm.ep[cliSide]})
	} else if s.HoldResends > 0 {
		for side, addr := range [2]netip.AddrPort{cliAddr, srvAddr} {
			h := &holdingResends{Endpoint: sm.ep[side], max: s.HoldResends, rng: s.Seed + uint64(side)}
			sm.holds[side] = h
			n.Add(addr, h)
		}
	} else if s.Drain > 0 {
		n.Add(srvAddr, &partialDrain{Endpoint: sm.ep[srvSide], drain: s.Drain})
		n.Add(cliAddr, &partialDrain{Endpoint: sm.ep[cliSide], drain: s.Drain})
	} else {
		n.Add(srvAddr, sm.ep[srvSide])
		n.Add(cliAddr, sm.ep[cliSide])
	}
	n.SetLink(cliAddr, srvAddr, s.Up)
	n.SetLink(srvAddr, cliAddr, s.Down)
	n.OnEvent = sm.onEvent
	return sm
}

// oneByOne is an endpoint without HandleDatagrams, which the network then
// hands a batch one datagram at a time.
type oneByOne struct{ ep *fastnet.Endpoint }

func (o oneByOne) HandleDatagram(now clock.Time, from netip.AddrPort, b []byte) {
	o.ep.HandleDatagram(now, from, b)
}
func (o oneByOne) HandleTimeout(now clock.Time)     { o.ep.HandleTimeout(now) }
func (o oneByOne) NextDeadline() (clock.Time, bool) { return o.ep.NextDeadline() }
func (o oneByOne) PollEvent() (fastnet.Event, bool) { return o.ep.PollEvent() }
func (o oneByOne) PollTransmit(now clock.Time, buf []byte) (fastnet.Transmit, bool) {
	return o.ep.PollTransmit(now, buf)
}

// partialDrain is an endpoint whose PollTransmit reports nothing more
// after each drain datagrams in a row: the network takes the rest at its
// next step, as a driver that writes datagrams in batches, letting go of
// the endpoint between two, may see other calls come first. A packet
// polled for a bundle it did not fit then waits across the pause (N71).
// Its deadline is the instant of the cut until its next timeout, so that
// the network comes back for the rest at once.
type partialDrain struct {
	*fastnet.Endpoint
	drain, n int
	cut      clock.Time // of a drain cut short, 0 if none since the last timeout
}

func (p *partialDrain) PollTransmit(now clock.Time, buf []byte) (fastnet.Transmit, bool) {
	if p.n == p.drain {
		p.n, p.cut = 0, now
		return fastnet.Transmit{}, false
	}
	tx, ok := p.Endpoint.PollTransmit(now, buf)
	if ok {
		p.n++
	} else {
		p.n = 0
	}
	return tx, ok
}

func (p *partialDrain) NextDeadline() (clock.Time, bool) {
	if p.cut != 0 {
		return p.cut, true
	}
	return p.Endpoint.NextDeadline()
}

func (p *partialDrain) HandleTimeout(now clock.Time) {
	p.cut = 0
	p.Endpoint.HandleTimeout(now)
}

func (s *sim) fail(format string, args ...any) {
	if s.err == nil {
		s.err = fmt.Errorf("at %v: %s", s.elapsed(), fmt.Sprintf(format, args...))
	}
}

// elapsed returns the virtual time since the start.
func (s *sim) elapsed() time.Duration { return s.net.Now().Sub(clock.Epoch) }

func (s *sim) onEvent(at clock.Time, node netip.AddrPort, ev fastnet.Event) {
	side := cliSide
	if node == srvAddr {
		side = srvSide
	}
	switch ev.Kind {
	case fastnet.EventConnected:
		switch {
		case s.h[side] == 0:
			s.h[side], s.ids[side] = ev.Conn, ev.ID
		case side == srvSide && s.ended[side] != nil:
			// A "connect?" the client sent before it closed, delayed past
			// its "disconnect", opens a connection that only the server
			// knows; it times out (D15, D18).
			s.phantoms++
		default:
			s.fail("%s: second Connected event %+v while the first connection lives", sideName(side), ev)
		}
	case fastnet.EventMessage:
		if ev.Conn != s.h[side] {
			if side == srvSide && s.phantoms > 0 {
				// Stale packets of the closed connection, which a
				// phantom connection takes as its own: nothing tells
				// them apart (D15 names connections by address).
				return
			}
			s.fail("%s: message on unknown connection %d", sideName(side), ev.Conn)
			return
		}
		if err := s.led[side].deliver(ev.Channel, ev.Data, ev.Reliable); err != nil {
			s.fail("%s received: %v", sideName(side), err)
		}
		if s.keep {
			s.got[side] = append(s.got[side], received{at, ev.Channel, ev.Reliable, ev.Data})
		}
	case fastnet.EventDisconnected:
		if ev.Conn == s.h[side] && s.ended[side] == nil {
			s.ended[side], s.endAt[side] = ev.Err, at
		}
	case fastnet.EventConnectFailed, fastnet.EventRefused:
		s.ended[side], s.endAt[side] = ev.Err, at
	}
}

// connect runs the handshake; it fails the test unless both sides are
// connected, with the same ID, within limit.
func (s *sim) connect(limit time.Duration) {
	s.t.Helper()
	if err := s.tryConnect(limit); err != nil {
		s.t.Fatalf("%v", err)
	}
	if s.ids[0] != s.ids[1] && !s.corrupting {
		s.t.Fatalf("connection IDs differ: client %d, server %d", s.ids[0], s.ids[1])
	}
}

// tryConnect runs the handshake and says why it failed, if it did.
func (s *sim) tryConnect(limit time.Duration) error {
	s.t.Helper()
	if _, err := s.ep[cliSide].Connect(s.net.Now(), srvAddr); err != nil {
		s.t.Fatalf("Connect: %v", err)
	}
	ok := s.runUntil(func() bool { return s.h[cliSide] != 0 && s.h[srvSide] != 0 || s.ended[cliSide] != nil }, limit)
	if !ok || s.h[cliSide] == 0 || s.h[srvSide] == 0 {
		return fmt.Errorf("not connected after %v: client %v (%v), server %v", limit, s.h[cliSide], s.ended[cliSide], s.h[srvSide])
	}
	return nil
}

// send sends data from side on channel ch and records it in the ledger of
// the other side if Send accepts it.
func (s *sim) send(side, ch int, data []byte, reliable bool) error {
	err := s.ep[side].Send(s.net.Now(), s.h[side], ch, data, reliable)
	if err == nil {
		s.led[1-side].add(ch, data, reliable)
	}
	return err
}

// check is run after every step: the memory limits of D22 hold on both
// sides.
func (s *sim) check() {
	for side := range 2 {
		st, ok := s.ep[side].Stats(s.h[side])
		if !ok {
			continue
		}
		cfg := &s.cfg[side]
		switch {
		case st.ReceiveBytes > cfg.ConnReceiveMemory:
			s.fail("%s: ReceiveBytes %d above ConnReceiveMemory %d", sideName(side), st.ReceiveBytes, cfg.ConnReceiveMemory)
		case st.SendQueueBytes > cfg.SendQueueSize:
			s.fail("%s: SendQueueBytes %d above SendQueueSize %d", sideName(side), st.SendQueueBytes, cfg.SendQueueSize)
		case st.InFlightBytes > cfg.MaxInFlight+st.PayloadMTU:
			s.fail("%s: InFlightBytes %d above MaxInFlight %d plus one packet", sideName(side), st.InFlightBytes, cfg.MaxInFlight)
		case st.ReceiveBytes < 0 || st.SendQueueBytes < 0 || st.InFlightBytes < 0:
			s.fail("%s: negative counter in %+v", sideName(side), st)
		}
	}
}

// runUntil steps, checking after every step, until cond holds (true) or
// virtual time passes limit or nothing is left to happen (false). It fails
// the test on a violation or a livelock.
func (s *sim) runUntil(cond func() bool, limit time.Duration) bool {
	s.t.Helper()
	held := false
	err := s.net.RunUntilCond(func() bool {
		s.check()
		held = s.err == nil && cond()
		return s.err != nil || held
	}, limit)
	if s.err != nil {
		s.t.Fatalf("%v", s.err)
	}
	switch {
	case err == nil:
		return held
	case errors.Is(err, fastnettest.ErrTimeLimit), errors.Is(err, fastnettest.ErrIdle):
		return false
	}
	s.t.Fatalf("%v", err)
	return false
}

// run lets d of virtual time pass.
func (s *sim) run(d time.Duration) {
	s.t.Helper()
	s.runUntil(func() bool { return false }, d)
}

// stats returns side's statistics of the connection.
func (s *sim) stats(side int) fastnet.Stats {
	st, _ := s.ep[side].Stats(s.h[side])
	return st
}

// drained reports whether both sides have sent everything they queued and
// had every reliable packet acked.
func (s *sim) drained() bool {
	for side := range 2 {
		if st, ok := s.ep[side].Stats(s.h[side]); ok && (st.SendQueueBytes != 0 || st.InFlightBytes != 0) {
			return false
		}
	}
	return true
}

// settled reports whether the connection has done all it can: every
// reliable message delivered and acked, or the connection over.
func (s *sim) settled() bool {
	return s.ended[0] != nil || s.ended[1] != nil ||
		s.led[0].pendingRel == 0 && s.led[1].pendingRel == 0 && s.drained()
}

// closeAndIdle closes the connection gracefully from the client and runs
// the network until nothing is scheduled: both sides must have ended.
func (s *sim) closeAndIdle() {
	s.t.Helper()
	if s.h[cliSide] != 0 && s.ended[cliSide] == nil {
		if err := s.ep[cliSide].Close(s.net.Now(), s.h[cliSide], "done"); err != nil {
			s.t.Fatalf("Close: %v", err)
		}
	}
	if err := s.net.RunUntilIdle(10_000_000); err != nil {
		s.t.Fatalf("after Close: %v", err)
	}
	if s.err != nil {
		s.t.Fatalf("%v", s.err)
	}
	for side := range 2 {
		if s.h[side] != 0 && s.ended[side] == nil || s.ep[side].NumConns() != 0 {
			s.t.Fatalf("%s: network idle but the connection did not end (%d connections)", sideName(side), s.ep[side].NumConns())
		}
	}
}

// ledger checks the messages delivered to one side against those sent to
// it: per channel, the delivered messages must be the sent ones in order,
// each intact and at most once, with only unreliable ones missing (D7-D11).
// Messages are compared byte for byte.
type ledger struct {
	// loose, for runs where damaged datagrams reach the endpoint, checks
	// only that a delivered message of 16 bytes or more, which its MD5
	// checksum protects (D3), has the bytes of some message sent.
	loose      bool
	all        map[string]bool
	chans      map[int]*chanLedger
	pendingRel int // reliable messages sent and not yet delivered
	delivered  int
	unrel      int // unreliable messages delivered
}

type chanLedger struct {
	sent []sentMsg
	next int // the first sent message neither delivered nor passed over
}

type sentMsg struct {
	data     []byte
	reliable bool
}

func newLedger(loose bool) *ledger {
	return &ledger{loose: loose, all: make(map[string]bool), chans: make(map[int]*chanLedger)}
}

func (l *ledger) add(ch int, data []byte, reliable bool) {
	c := l.chans[ch]
	if c == nil {
		c = &chanLedger{}
		l.chans[ch] = c
	}
	c.sent = append(c.sent, sentMsg{bytes.Clone(data), reliable})
	if reliable {
		l.pendingRel++
	}
	if l.loose && len(data) >= 16 {
		l.all[string(data)] = true
	}
}

func kind(reliable bool) string {
	if reliable {
		return "reliable"
	}
	return "unreliable"
}

// deliver checks one delivered message: it must be the first message sent
// on its channel after the last one delivered, passing over unreliable
// messages only.
func (l *ledger) deliver(ch int, data []byte, reliable bool) error {
	if l.loose {
		l.delivered++
		if len(data) >= 16 && !l.all[string(data)] {
			return fmt.Errorf("%s message of %d bytes on channel %d (%.8x) was never sent", kind(reliable), len(data), ch, data)
		}
		return nil
	}
	c := l.chans[ch]
	if c == nil {
		return fmt.Errorf("%s message of %d bytes on channel %d, where nothing was sent", kind(reliable), len(data), ch)
	}
	for i := c.next; i < len(c.sent); i++ {
		m := &c.sent[i]
		if m.reliable == reliable && bytes.Equal(m.data, data) {
			for j := c.next; j <= i; j++ {
				c.sent[j].data = nil
			}
			c.next = i + 1
			l.delivered++
			if reliable {
				l.pendingRel--
			} else {
				l.unrel++
			}
			return nil
		}
		if m.reliable {
			return fmt.Errorf("channel %d: %s message of %d bytes (%.8x) delivered before reliable message #%d of %d bytes (%.8x): "+
				"corrupt, duplicated, reordered, or a reliable message lost",
				ch, kind(reliable), len(data), data, i, len(m.data), m.data)
		}
	}
	return fmt.Errorf("channel %d: %s message of %d bytes (%.8x) matches nothing sent after message #%d: corrupt, duplicated or reordered",
		ch, kind(reliable), len(data), data, c.next)
}

// firstMissing describes the first reliable message not delivered.
func (l *ledger) firstMissing() string {
	for ch, c := range l.chans {
		for i := c.next; i < len(c.sent); i++ {
			if c.sent[i].reliable {
				return fmt.Sprintf("channel %d message #%d (%d bytes) of %d", ch, i, len(c.sent[i].data), len(c.sent))
			}
		}
	}
	return "none"
}

// payload returns the message of size bytes numbered id: the id in its
// first four bytes, the rest a function of id, so that any two messages of
// 4 bytes or more differ.
func payload(id uint32, size int) []byte {
	b := make([]byte, size)
	x := uint64(id)*0x9e3779b97f4a7c15 | 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x >> 24)
	}
	if size >= 4 {
		binary.BigEndian.PutUint32(b, id)
	}
	return b
}

// The random sims of the properties.

// ms draws a whole number of milliseconds in [lo, hi].
func ms(t *rapid.T, lo, hi int, label string) time.Duration {
	return time.Duration(rapid.IntRange(lo, hi).Draw(t, label)) * time.Millisecond
}

// pct draws a probability in whole percent in [0, hi].
func pct(t *rapid.T, hi int, label string) float64 {
	return float64(rapid.IntRange(0, hi).Draw(t, label)) / 100
}

// drawLink draws one direction of a path of the given MTU: loss 0-50 %,
// delay 0-200 ms, jitter, reordering, duplication, and sometimes a
// bandwidth of 1-5 Mbit/s and corruption up to maxCorrupt percent.
func drawLink(t *rapid.T, label string, mtu, maxCorrupt int, udpChecksum bool) fastnettest.Link {
	l := fastnettest.Link{MTU: mtu}
	if rapid.IntRange(0, 3).Draw(t, label+".lossy") > 0 {
		l.Loss = pct(t, 50, label+".loss")
	}
	l.Delay = ms(t, 0, 200, label+".delay")
	l.Jitter = ms(t, 0, 50, label+".jitter")
	l.Dup = pct(t, 20, label+".dup")
	l.Reorder = pct(t, 20, label+".reorder")
	if rapid.IntRange(0, 3).Draw(t, label+".limited") == 0 {
		l.Bandwidth = rapid.IntRange(1, 5).Draw(t, label+".mbits") * 125_000
	}
	if maxCorrupt > 0 {
		l.Corrupt = pct(t, maxCorrupt, label+".corrupt")
		l.UDPChecksum = udpChecksum
	}
	return l
}

// maxMsg is the MaxMessageSize of the properties.
const maxMsg = 64 << 10

// drawConfig draws an endpoint configuration for a path of the given MTU:
// the payload MTU at its defaults (estimation from 32, D19), fixed at 32
// or fixed larger; and either the default limits or the tightest that
// Validate allows (D22).
func drawConfig(t *rapid.T, label string, pathMTU int) fastnet.Config {
	c := fastnet.Config{
		MaxMessageSize: maxMsg,
		Timeout:        300 * time.Second,
		ConnectTimeout: 60 * time.Second,
	}
	switch rapid.IntRange(0, 2).Draw(t, label+".mtu") {
	case 1:
		c.MTU.Disabled = true
	case 2:
		c.MTU.Disabled = true
		c.InitialPayloadMTU = rapid.IntRange(33, pathMTU-2).Draw(t, label+".payloadMTU")
	}
	if rapid.Bool().Draw(t, label+".fastResend") {
		c.MaxResendInterval = time.Second
	}
	if rapid.Bool().Draw(t, label+".tight") {
		// The limits that hold one message of maxMsg cut at the smallest
		// payload MTU a peer may send with, 32 (spec "Determining Payload
		// MTU"), whatever this side's own MTU (see
		// TestScenarioReceiveLimitsAtPeerMTU).
		mtu := fastnet.DefaultPayloadMTU
		encoded := maxMsg + 21
		packets := (encoded + mtu - 8) / (mtu - 7)
		c.ReceiveWindow = packets
		c.ChannelReceiveMemory = encoded + packets*fastnet.PacketMemoryOverhead
		c.ConnReceiveMemory = c.ChannelReceiveMemory * rapid.IntRange(1, 2).Draw(t, label+".connMemory")
		c.SendQueueSize = encoded
		c.MaxInFlight = 64 << 10
	}
	return c
}

// An op is one step of a workload: a burst of messages from one side, or a
// pause.
type op struct {
	wait     time.Duration // a pause, if not zero
	side     int
	channel  int
	reliable bool
	size     int
	n        int
}

func (o op) String() string {
	if o.wait > 0 {
		return fmt.Sprintf("wait %v", o.wait)
	}
	return fmt.Sprintf("%s sends %d %s of %dB on ch%d", sideName(o.side), o.n, kind(o.reliable), o.size, o.channel)
}

// opGen draws an op. Every draw is from a small range, which rapid draws
// close to uniformly (it favours small values of wide ranges), and is
// scaled from there.
var opGen = rapid.Custom(func(t *rapid.T) op {
	if rapid.IntRange(0, 9).Draw(t, "pause") < 3 {
		return op{wait: 50*time.Millisecond*time.Duration(rapid.IntRange(0, 60).Draw(t, "wait50ms")) + time.Millisecond}
	}
	o := op{
		side:     rapid.IntRange(0, 1).Draw(t, "side"),
		channel:  rapid.SampledFrom([]int{0, 1, 2, 3, fastnet.MaxChannel}).Draw(t, "channel"),
		reliable: rapid.Bool().Draw(t, "reliable"),
	}
	// A size class, then a point in it and an offset of up to 31 bytes.
	lo, hi, burst := 0, 0, 20
	switch rapid.IntRange(0, 19).Draw(t, "sizeClass") {
	case 0:
	case 1, 2, 3, 4:
		lo, hi = 1, 15
	case 5, 6, 7, 8, 9, 10:
		lo, hi = 16, 200
	case 11, 12, 13, 14, 15, 16:
		lo, hi, burst = 201, 3000, 5
	default:
		lo, hi, burst = 3001, 40000, 2
	}
	if hi > lo {
		o.size = lo + (hi-lo)*rapid.IntRange(0, 63).Draw(t, "sizeStep")/63
		o.size = min(hi, o.size+rapid.IntRange(0, 31).Draw(t, "sizeOffset"))
	}
	o.n = rapid.IntRange(1, burst).Draw(t, "n")
	return o
})

// runWorkload plays ops on s, numbering messages from *id.
func runWorkload(s *sim, ops []op) {
	s.t.Helper()
	id := uint32(1)
	for _, o := range ops {
		if o.wait > 0 {
			s.run(o.wait)
			continue
		}
		if s.ended[o.side] != nil {
			continue
		}
		for range o.n {
			err := s.send(o.side, o.channel, payload(id, o.size), o.reliable)
			id++
			if err != nil && !errors.Is(err, fastnet.ErrQueueFull) {
				s.t.Fatalf("%v: Send: %v", o, err)
			}
		}
	}
}

// hashWriter is an io.Writer that keeps only a hash of the bytes.
type hashWriter struct {
	h hash.Hash64
	n int
}

func (w *hashWriter) Write(p []byte) (int, error) {
	w.n += len(p)
	return w.h.Write(p)
}

func (w *hashWriter) String() string { return fmt.Sprintf("%d bytes, fnv %016x", w.n, w.h.Sum64()) }

// simCase is one drawn sim and workload.
type simCase struct {
	setup simSetup
	ops   []op
}

func drawCase(t *rapid.T, maxCorrupt, maxOps int, udpSum bool) simCase {
	// The path MTU bounds MTU estimation (D19), whose probes on a path
	// without one grow to 64 kB and make a run slow.
	mtu := rapid.SampledFrom([]int{576, 1500, 9000}).Draw(t, "pathMTU")
	c := simCase{setup: simSetup{
		Seed: rapid.Uint64().Draw(t, "seed"),
		Cli:  drawConfig(t, "client", mtu),
		Srv:  drawConfig(t, "server", mtu),
		Up:   drawLink(t, "up", mtu, maxCorrupt, udpSum),
		Down: drawLink(t, "down", mtu, maxCorrupt, udpSum),
		// Default, or receivers parked whenever idle (N25).
		LiveReceivers: rapid.SampledFrom([]int{0, 1}).Draw(t, "liveReceivers"),
	}}
	for range rapid.IntRange(1, maxOps).Draw(t, "ops") {
		c.ops = append(c.ops, opGen.Draw(t, "op"))
	}
	return c
}

// play runs a case: connect, the workload, then until every reliable
// message is delivered and acked (or the connection ends), then a
// graceful close until the network is idle. It returns the sim.
func play(t simT, c simCase) *sim {
	t.Helper()
	s := newSim(t, c.setup)
	s.connect(c.setup.Cli.ConnectTimeout)
	runWorkload(s, c.ops)
	if !s.runUntil(s.settled, 30*time.Minute) {
		t.Fatalf("not settled 30 minutes after the workload: %d client and %d server reliable messages missing (first %s / %s); stats client %+v server %+v",
			s.led[cliSide].pendingRel, s.led[srvSide].pendingRel, s.led[cliSide].firstMissing(), s.led[srvSide].firstMissing(),
			s.stats(cliSide), s.stats(srvSide))
	}
	return s
}

// P1: over any network without corruption (loss up to 50 % each way,
// delay, jitter, reordering, duplication, limited bandwidth) and any
// workload, every reliable message arrives exactly once, intact and in
// order per channel; every unreliable one at most once, intact and in
// order per channel (D7-D11: the ignore number only advances); the
// connection survives; memory stays within the limits after every step
// (D22); and a graceful close ends both sides (D18).
func TestPropertyDelivery(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := drawCase(t, 0, 30, false)
		s := play(t, c)
		for side := range 2 {
			if s.ended[side] != nil {
				t.Fatalf("%s: connection lost: %v (at %v)", sideName(side), s.ended[side], s.endAt[side].Sub(clock.Epoch))
			}
		}
		s.closeAndIdle()
		for side := range 2 {
			if !errors.Is(s.ended[side], fastnet.ErrClosed) && !errors.Is(s.ended[side], fastnet.ErrPeerClosed) &&
				!errors.Is(s.ended[side], fastnet.ErrTimeout) {
				t.Errorf("%s ended with %v after a graceful close", sideName(side), s.ended[side])
			}
		}
	})
}

// P1, replay: the same seed and workload give the same trace, byte for
// byte, events included (fastnettest's determinism carries through the
// endpoints, which draw only from Config.Rand).
func TestPropertyReplay(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := drawCase(t, 0, 8, false)
		var traces [2]*hashWriter
		for i := range traces {
			traces[i] = &hashWriter{h: fnv.New64a()}
			c.setup.Trace = traces[i]
			s := play(t, c)
			s.closeAndIdle()
		}
		if traces[0].String() != traces[1].String() || traces[0].n == 0 {
			t.Fatalf("same seed, different traces: %v and %v", traces[0], traces[1])
		}
	})
}

// P2, corruption: Fastnet checksums message payloads only (D3), so damage
// that reaches the endpoint elsewhere (channel ids, sequence numbers, flags,
// acks, handshake replies) cannot be detected and may misdeliver or stall a
// message; only an integrity extension would change that (N15). What the
// engine guarantees is held here, whatever arrives, and the message
// checksum's part by TestScenarioCorruptPayload.
//
// What the engine guarantees whatever damaged datagrams reach it, with UDP's
// checksum or without (D23, N15): no panic; memory within the limits after
// every step; no livelock; a delivered message of 16 bytes or more has the
// bytes of a message sent (its MD5 checksum holds); and after a close the
// network goes idle.
func TestPropertyCorruptionSafety(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := drawCase(t, 5, 12, rapid.Bool().Draw(t, "udpChecksum"))
		c.setup.Loose = true
		s := newSim(t, c.setup)
		if err := s.tryConnect(c.setup.Cli.ConnectTimeout); err == nil {
			// A damaged handshake reply can make the client give up
			// ("incompatible") or take a wrong ID: nothing protects
			// channel -1 but the transport.
			runWorkload(s, c.ops)
			s.run(30 * time.Second)
		}
		s.closeAndIdle()
	})
}

// P3: channels are independent (spec "Introduction and Goals": "the
// ability to use multiple train tracks at once"; D10, N10). While every
// packet of channel 1 is lost, a reliable message held up on it delays
// none of the messages sent after it on channel 2: they are all delivered
// before the loss ends, and the held-up message after it.
func TestPropertyChannelsIndependent(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		// Loss at most 10 %: the property asks every channel 2 message
		// to arrive within the hold, and before MTU estimation has run a
		// 2 KiB message is 70 packets of 32 bytes. At 20 % loss one of
		// them needed about 8 sends in one run seen (seed 0x54, hold
		// 11 s: delivered after 14 s of Fibonacci resends), which is
		// loss, not a channel waiting for another; at 10 % a packet
		// lost 7 times in a row is 128 times rarer.
		link := fastnettest.Link{
			MTU:     1500,
			Loss:    pct(t, 10, "loss"),
			Delay:   ms(t, 0, 100, "delay"),
			Jitter:  ms(t, 0, 20, "jitter"),
			Dup:     pct(t, 10, "dup"),
			Reorder: pct(t, 10, "reorder"),
		}
		// After the hold, every packet of the held message is resent at
		// most every MaxResendInterval (5 s, D14); at 20 % loss each way
		// a round fails for a packet 36 % of the time, so a one-minute
		// timeout after a 30 s hold ends about one run in a hundred
		// with ErrNotAcknowledging. Five minutes leaves no doubt.
		// Without bundles: the filter holds channel 1 by datagram.
		cfg := fastnet.Config{MaxMessageSize: maxMsg, Timeout: 5 * time.Minute, NoBundles: true}
		if rapid.Bool().Draw(t, "fixedMTU") {
			cfg.MTU.Disabled = true
			cfg.InitialPayloadMTU = rapid.SampledFrom([]int{32, 100, 1200}).Draw(t, "payloadMTU")
		}
		hold := time.Duration(rapid.IntRange(10, 30).Draw(t, "holdSeconds")) * time.Second
		s := newSim(t, simSetup{Seed: rapid.Uint64().Draw(t, "seed"), Cli: cfg, Srv: cfg, Up: link, Down: link, KeepMessages: true})
		s.connect(time.Minute)

		until := s.net.Now().Add(hold)
		s.net.Filter = func(from, to netip.AddrPort, b []byte) bool {
			return from != cliAddr || len(b) < 2 || binary.BigEndian.Uint16(b) != 1 || s.net.Now() >= until
		}
		held := payload(1, 1+rapid.IntRange(0, 63).Draw(t, "heldSize64")*64)
		s.send(cliSide, 1, held, true)
		// The first message on channel 2 is reliable, so something must
		// arrive; unreliable ones may be lost.
		n := rapid.IntRange(1, 20).Draw(t, "n")
		for i := range n {
			size := rapid.IntRange(0, 63).Draw(t, "size") * 40
			s.send(cliSide, 2, payload(uint32(2+i), size), i == 0 || rapid.Bool().Draw(t, "reliable"))
		}
		if !s.runUntil(s.settled, 10*time.Minute) {
			t.Fatalf("not settled: %s missing", s.led[srvSide].firstMissing())
		}
		if s.ended[0] != nil || s.ended[1] != nil {
			t.Fatalf("connection ended: %v, %v", s.ended[0], s.ended[1])
		}
		var heldAt clock.Time
		ch2 := 0
		for _, m := range s.got[srvSide] {
			switch m.channel {
			case 1:
				heldAt = m.at
			case 2:
				ch2++
				if m.at >= until {
					t.Fatalf("a channel 2 message arrived at %v, after channel 1 was let through at %v", m.at.Sub(clock.Epoch), until.Sub(clock.Epoch))
				}
			}
		}
		if heldAt < until {
			t.Fatalf("the held message arrived at %v, before channel 1 was let through at %v", heldAt.Sub(clock.Epoch), until.Sub(clock.Epoch))
		}
		if ch2 == 0 {
			t.Fatalf("no channel 2 message arrived")
		}
	})
}
