package fastnettest

import (
	"encoding/binary"
	"net/netip"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/fastnet"
)

// fake is a small Node for testing the network on its own: it can echo what
// it receives, send numbered datagrams on a timer, and emit an event per
// datagram. Once warmed up it allocates nothing unless asked to record.
type fake struct {
	echo       int  // datagrams left to echo back; negative: no limit
	record     bool // keep a copy of every datagram received in got
	emitOnRecv bool // emit an EventMessage per datagram received

	// A ticker: every `every`, while ticks != 0, send a datagram of size
	// (at least 4) numbered from 0 to tickTo.
	every   time.Duration
	tickTo  netip.AddrPort
	ticks   int // negative: no limit
	size    int
	nextSeq uint32

	deadline clock.Time
	out      []dgram // waiting for PollTransmit, from head on
	head     int
	free     [][]byte
	evs      []fastnet.Event
	evHead   int

	nGot      int
	got       []arrival
	timeouts  []clock.Time
	closed    []netip.AddrPort
	last      clock.Time
	backwards bool // an input came with an earlier now than the one before
}

type dgram struct {
	to netip.AddrPort
	b  []byte
}

type arrival struct {
	at   clock.Time
	from netip.AddrPort
	b    []byte
}

// seq returns the number a ticker wrote into b.
func seq(b []byte) uint32 { return binary.BigEndian.Uint32(b) }

func (f *fake) saw(now clock.Time) {
	if now < f.last {
		f.backwards = true
	}
	f.last = now
}

// send queues b for to.
func (f *fake) send(to netip.AddrPort, b []byte) {
	var c []byte
	if n := len(f.free); n > 0 {
		c = f.free[n-1]
		f.free = f.free[:n-1]
	}
	f.out = append(f.out, dgram{to, append(c[:0], b...)})
}

// startTicker arms the ticker to fire first at now.
func (f *fake) startTicker(now clock.Time, to netip.AddrPort, every time.Duration, ticks, size int) {
	f.tickTo, f.every, f.ticks, f.size = to, every, ticks, max(size, 4)
	f.deadline = now
}

func (f *fake) HandleDatagram(now clock.Time, from netip.AddrPort, b []byte) {
	f.saw(now)
	f.nGot++
	if f.record {
		f.got = append(f.got, arrival{now, from, append([]byte(nil), b...)})
	}
	if f.echo != 0 {
		f.send(from, b)
		f.echo--
	}
	if f.emitOnRecv {
		f.evs = append(f.evs, fastnet.Event{Kind: fastnet.EventMessage, Addr: from, Data: append([]byte(nil), b...)})
	}
}

func (f *fake) HandleTimeout(now clock.Time) {
	f.saw(now)
	if f.record {
		f.timeouts = append(f.timeouts, now)
	}
	if f.deadline == 0 || now < f.deadline {
		return
	}
	f.deadline = 0
	if f.ticks == 0 {
		return
	}
	var b [256]byte
	var buf []byte
	if f.size <= len(b) {
		buf = b[:f.size]
	} else {
		buf = make([]byte, f.size)
	}
	binary.BigEndian.PutUint32(buf, f.nextSeq)
	f.nextSeq++
	f.send(f.tickTo, buf)
	if f.ticks > 0 {
		f.ticks--
	}
	if f.ticks != 0 {
		f.deadline = now.Add(f.every)
	}
}

func (f *fake) HandleTransportClosed(now clock.Time, addr netip.AddrPort) {
	f.saw(now)
	f.closed = append(f.closed, addr)
}

func (f *fake) NextDeadline() (clock.Time, bool) { return f.deadline, f.deadline != 0 }

func (f *fake) PollTransmit(now clock.Time, buf []byte) (fastnet.Transmit, bool) {
	f.saw(now)
	if f.head == len(f.out) {
		f.out, f.head = f.out[:0], 0
		return fastnet.Transmit{}, false
	}
	d := f.out[f.head]
	f.head++
	n := copy(buf, d.b)
	f.free = append(f.free, d.b)
	return fastnet.Transmit{To: d.to, N: n}, true
}

func (f *fake) PollEvent() (fastnet.Event, bool) {
	if f.evHead == len(f.evs) {
		f.evs, f.evHead = f.evs[:0], 0
		return fastnet.Event{}, false
	}
	ev := f.evs[f.evHead]
	f.evs[f.evHead] = fastnet.Event{}
	f.evHead++
	return ev, true
}

// addr returns the test address 10.0.0.i:7000.
func addr(i byte) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, i}), 7000)
}

// at returns the instant d after the network's start.
func at(d time.Duration) clock.Time { return clock.Epoch.Add(d) }
