package fuzz

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/fastnet-engine/fastnet/channel"
	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/coalesce"
	"github.com/fastnet-engine/fastnet/fastnet"
)

// FuzzReuse checks that lending message buffers (Config.ReuseMessageBuffers,
// N103) changes nothing an application that keeps to the promise can
// observe. Two server endpoints, alike in everything but that one lends
// its buffers and the other gives them, with the same seed for
// Config.Rand, are connected to one client through the same handshake
// and then fed the same inputs: the client's datagrams (bundles, D24, of
// the many small messages it is told to send, which the lending server
// carves out of the blocks it reuses), garbage and hand-made bundles,
// time steps, in HandleDatagram and HandleDatagrams calls. After each
// input both must send the same datagrams, keep the same statistics and,
// for the events polled, of which the input says how many so that some
// stay queued across inputs, report the same events with the same Data.
// And every Data polled from the lending server since its last input
// must still hold the bytes it was polled with when its next input comes:
// the promise of N103.
//
// The input is a sequence of operations, at most reuseMaxOps, each one
// byte op then its arguments; "poll p" is a byte that says how many
// events to poll from each server after each input of the operation: all
// if p>>5 == 7; if p>>5 == 6, as many as leave p&31 messages queued;
// else p&31.
//   - op&7 == 0, then count, size, flags: the client sends count%64+1
//     messages (at most reuseMaxMsgs in all), the i-th of (size+37*i)%257
//     bytes, 200 more if flags&16, on channel flags&7, reliable if
//     flags&8.
//   - op&7 == 1, then mode, poll: the datagrams the client has to send go
//     to both servers, in one HandleDatagrams call if mode&1, else one at
//     a time; in reverse order if mode&2, each twice if mode&4, and the
//     i-th dropped if bit i%5 of mode>>3 is set.
//   - op&7 == 2, then mask: the datagrams the servers sent go to the
//     client, the i-th dropped if bit i%8 of mask is set.
//   - op&7 == 3, then poll: time passes, (op>>3)² × 4 ms, and all three
//     endpoints handle their timeouts.
//   - op&7 == 4, then n, n bytes, poll: a datagram of those bytes from
//     the address op>>3&3 (0 is the client's), after the channel -6 id
//     if op&32.
//   - op&7 == 5, then n, 3 bytes for each of n%16+1 packets, poll: a
//     bundle from the client of packets each holding one whole message:
//     bytes a, b, c give channel a&7, reliable if a&8, R a>>4, sequence
//     number b, and c bytes.
//   - op&7 == 6, then poll: only polls.
//   - op&7 == 7, then poll: up to four round trips, each the client's
//     datagrams to the servers in one call and the servers' to the client.
//
// The end polls every event left, and every Data the giving server
// reported must be as it was polled. Every message of 16 bytes or more
// polled must also be one of those made (reuseMsgData), whole: a
// datagram the fuzzer makes up cannot forge its MD5 checksum (D3), so
// this holds whatever the input, and catches what would change both
// servers' messages alike.
func FuzzReuse(f *testing.F) {
	var (
		send  = func(count, size, flags byte) []byte { return []byte{0, count, size, flags} }
		toSrv = func(mode, poll byte) []byte { return []byte{1, mode, poll} }
		toCli = func(mask byte) []byte { return []byte{2, mask} }
		wait  = func(k, poll byte) []byte { return []byte{3 | k<<3, poll} }
		poll  = func(p byte) []byte { return []byte{6, p} }
		flush = func(p byte) []byte { return []byte{7, p} }
		seed  = func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	)
	// Many unreliable messages of about 100 bytes, delivered in batches
	// and polled a few at a time.
	f.Add(seed(send(59, 90, 1), flush(5), send(63, 100, 1), flush(7), send(63, 60, 2), toSrv(1, 3), poll(4),
		send(63, 120, 1), toSrv(0, 2), toCli(0), wait(2, 9), send(50, 30, 1), flush(1), poll(reuseAll)))
	// Reliable messages on several channels, one datagram at a time,
	// with acks and time passing.
	f.Add(seed(send(63, 40, 8), send(63, 200, 9), send(31, 255, 10), toSrv(0, 3), toCli(0), wait(3, 6),
		send(63, 10, 11), toSrv(0, 1), poll(2), toCli(0), wait(2, 0), toSrv(1, 4), toCli(0), wait(5, reuseAll)))
	// Losses, duplicates and reordering, and messages past the arena's
	// largest.
	f.Add(seed(send(63, 128, 8), send(63, 250, 24), toSrv(2|4|0x28, 5), toCli(0x11), wait(4, 3),
		toSrv(1|2, 2), toCli(0), wait(6, 7), toSrv(1, 1), toCli(0), wait(6, 2), flush(reuseAll)))
	// Garbage and hand-made bundles between the client's.
	f.Add(seed(send(63, 70, 0), toSrv(1, 6), []byte{4, 6, 0xff, 0xff, 'h', 'e', 'l', 'l', 3},
		[]byte{5, 3, 0x01, 0, 100, 0x1a, 0, 50, 0x12, 1, 200, 2}, send(63, 70, 0), flush(3),
		[]byte{4 | 32, 4, 0, 3, 1, 2, 5}, send(40, 180, 2), flush(4), poll(reuseAll)))
	// A connection that times out with messages unpolled.
	f.Add(seed(send(63, 33, 3), toSrv(1, 2), wait(31, 1), wait(31, 1), wait(31, 1), wait(31, 1),
		wait(31, 1), wait(31, 1), send(63, 33, 3), flush(reuseAll)))
	// Polls that leave one, two, then no messages queued as blocks
	// fill, the client's datagrams one at a time.
	f.Add(seed(send(63, 90, 1), toSrv(0, 0xc1), send(63, 140, 2), toSrv(0, 0xc2), send(63, 60, 9), toSrv(1, 0xc1),
		toCli(0), wait(3, 0xc0), send(63, 200, 1), toSrv(0, 0xc1), poll(0xc0)))
	// A block filled while one of its buffers is not yet polled: it may
	// not be carved again before that one is.
	f.Add(seed(send(63, 66, 1), toSrv(1, reuseAll), send(63, 33, 16), toSrv(0, 0)))
	// Small messages between larger ones, which have buffers of their
	// own, polled a few at a time: the messages lent from one block are
	// not all consecutive events.
	f.Add(seed(send(58, 48, 0x30), flush(3), send(56, 48, 0x41), toSrv(0, 4)))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		runReuse(t, data)
	})
}

const (
	reuseMaxOps  = 200  // operations of one input
	reuseMaxMsgs = 3000 // messages the client sends in one input
)

var reuseServerAddr = netip.MustParseAddrPort("10.0.0.9:9")

// reuseRun is the state of one FuzzReuse input.
type reuseRun struct {
	t          *testing.T
	now        clock.Time
	cli        *fastnet.Endpoint
	ch         fastnet.Handle // the client's handle of its connection
	give       *fastnet.Endpoint
	lend       *fastnet.Endpoint // the same, with ReuseMessageBuffers
	sh         fastnet.Handle    // the servers' handle of the connection
	buf        []byte
	toCli      [][]byte    // the servers' datagrams not yet given to the client
	lent       []reuseData // Data polled from lend since its last input
	given      []reuseData // Data polled from give
	msgs       int         // messages made, each different (reuseMsgData)
	inputs     int         // inputs to the servers
	polled     int         // events polled from each server
	polledMsgs int         // message events among them
}

// reuseData is a message's Data as polled, and a copy of its bytes then.
type reuseData struct {
	data, want []byte
	input      int // inputs to the servers before it was polled
}

func reuseServer(lend bool) fastnet.Config {
	cfg := bundleServer()
	cfg.InitialPayloadMTU = 1200
	cfg.MTU = fastnet.MTUConfig{Disabled: true}
	cfg.Rand = rand.New(rand.NewPCG(7, 103))
	cfg.ReuseMessageBuffers = lend
	return cfg
}

// reuseMsgData is the i-th message made: its index, then bytes that
// depend on it, n bytes in all.
func reuseMsgData(i, n int) []byte {
	b := make([]byte, n)
	var idx [4]byte
	binary.BigEndian.PutUint32(idx[:], uint32(i))
	copy(b, idx[:])
	for j := 4; j < n; j++ {
		b[j] = byte(i*7 + j*3)
	}
	return b
}

// reuseMsgMade reports whether b is one of the messages made, the
// reuseMsgData of its first four bytes.
func reuseMsgMade(b []byte, made int) bool {
	if len(b) < 4 {
		return false
	}
	i := int(binary.BigEndian.Uint32(b))
	if i >= made {
		return false
	}
	for j := 4; j < len(b); j++ {
		if b[j] != byte(i*7+j*3) {
			return false
		}
	}
	return true
}

func runReuse(t *testing.T, data []byte) {
	r := &reuseRun{t: t, now: clock.Epoch, buf: make([]byte, 65536)}
	var err error
	if r.give, err = fastnet.NewEndpoint(reuseServer(false)); err != nil {
		t.Fatal(err)
	}
	if r.lend, err = fastnet.NewEndpoint(reuseServer(true)); err != nil {
		t.Fatal(err)
	}
	r.cli, err = fastnet.NewEndpoint(fastnet.Config{
		Role:              fastnet.Client,
		MaxMessageSize:    4096,
		InitialPayloadMTU: 1200,
		MTU:               fastnet.MTUConfig{Disabled: true},
		Congestion:        fastnet.CongestionConfig{Disabled: true},
		Rand:              rand.New(rand.NewPCG(1, 2)),
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.ch, err = r.cli.Connect(r.now, reuseServerAddr); err != nil {
		t.Fatal(err)
	}
	// The handshake, its validation (D25) and the bundle query.
	for i := 0; i < 20 && r.roundTrip(reuseAll) > 0; i++ {
	}
	if r.sh == 0 {
		t.Fatal("not connected")
	}

	in := reuseInput(data)
	for ops := 0; ops < reuseMaxOps && len(in) > 0; ops++ {
		op := in.byte()
		switch op & 7 {
		case 0:
			count, size, flags := int(in.byte())%64+1, int(in.byte()), in.byte()
			for i := 0; i < count && r.msgs < reuseMaxMsgs; i++ {
				n := (size + 37*i) % 257
				if flags&16 != 0 {
					n += 200
				}
				r.cli.Send(r.now, r.ch, int(flags&7), reuseMsgData(r.msgs, n), flags&8 != 0)
				r.msgs++
			}
		case 1:
			mode, p := in.byte(), in.byte()
			ds := r.fromClient()
			if mode&2 != 0 {
				for i, j := 0, len(ds)-1; i < j; i, j = i+1, j-1 {
					ds[i], ds[j] = ds[j], ds[i]
				}
			}
			var kept []fastnet.Incoming
			for i, d := range ds {
				if mode>>3&(1<<(i%5)) != 0 {
					continue
				}
				kept = append(kept, d)
				if mode&4 != 0 {
					kept = append(kept, d)
				}
			}
			if mode&1 != 0 {
				if len(kept) > 0 {
					r.input(p, func(ep *fastnet.Endpoint) { ep.HandleDatagrams(r.now, kept) })
				}
				break
			}
			for _, d := range kept {
				r.input(p, func(ep *fastnet.Endpoint) { ep.HandleDatagram(r.now, d.From, d.Data) })
			}
		case 2:
			r.toClient(in.byte())
		case 3:
			k := time.Duration(op >> 3)
			r.now = r.now.Add(k * k * 4 * time.Millisecond)
			p := in.byte()
			r.cli.HandleTimeout(r.now)
			r.clientEvents()
			r.input(p, func(ep *fastnet.Endpoint) { ep.HandleTimeout(r.now) })
		case 4:
			d := in.bytes(int(in.byte()))
			if op&32 != 0 {
				d = append([]byte{0xff, 0xfa}, d...)
			}
			from := fuzzAddrs[op>>3&3]
			r.input(in.byte(), func(ep *fastnet.Endpoint) { ep.HandleDatagram(r.now, from, d) })
		case 5:
			d := []byte{0xff, 0xfa} // a bundle (D24): packets, each after its length
			for n := int(in.byte())%16 + 1; n > 0; n-- {
				a, b, c := in.byte(), in.byte(), in.byte()
				reliable := a&8 != 0
				p := binary.BigEndian.AppendUint16(nil, uint16(a&7))
				p = channel.Header{Reliable: reliable, Start: true, Seq: channel.Seq(b), Rel: channel.Seq(a >> 4)}.Append(p)
				p = coalesce.AppendMessage(p, reuseMsgData(r.msgs, int(c)), reliable)
				r.msgs++
				d = binary.BigEndian.AppendUint16(d, uint16(len(p)))
				d = append(d, p...)
			}
			r.input(in.byte(), func(ep *fastnet.Endpoint) { ep.HandleDatagram(r.now, fuzzAddrs[0], d) })
		case 6:
			r.poll(in.byte())
		case 7:
			p := in.byte()
			for i := 0; i < 4 && r.roundTrip(p) > 0; i++ {
			}
		}
	}
	r.poll(reuseAll)
	for _, g := range r.given {
		if !bytes.Equal(g.data, g.want) {
			t.Fatalf("a message given (not lent), polled after input %d, changed by the end (%d inputs): %x, want %x", g.input, r.inputs, g.data, g.want)
		}
	}
}

// reuseAll, as a poll byte, polls every event.
const reuseAll = 0xff

// reuseInput is what is left of a FuzzReuse input; past its end, every
// byte reads as 0.
type reuseInput []byte

func (in *reuseInput) byte() byte {
	if len(*in) == 0 {
		return 0
	}
	b := (*in)[0]
	*in = (*in)[1:]
	return b
}

func (in *reuseInput) bytes(n int) []byte {
	n = min(n, len(*in))
	b := (*in)[:n]
	*in = (*in)[n:]
	return b
}

// fromClient returns the datagrams the client has to send now.
func (r *reuseRun) fromClient() []fastnet.Incoming {
	var ds []fastnet.Incoming
	for i := 0; ; i++ {
		if i > 1<<16 {
			r.t.Fatal("the client's PollTransmit never returns false")
		}
		tr, ok := r.cli.PollTransmit(r.now, r.buf)
		if !ok {
			break
		}
		ds = append(ds, fastnet.Incoming{From: fuzzAddrs[0], Data: bytes.Clone(r.buf[:tr.N])})
	}
	return ds
}

// toClient gives the client the servers' datagrams, but for the i-th if
// bit i%8 of drop is set.
func (r *reuseRun) toClient(drop byte) {
	for i, d := range r.toCli {
		if drop&(1<<(i%8)) == 0 {
			r.cli.HandleDatagram(r.now, reuseServerAddr, d)
		}
	}
	r.toCli = r.toCli[:0]
	r.clientEvents()
}

// roundTrip moves the client's datagrams to the servers in one input
// and the servers' answers to the client; it returns how many datagrams
// the client sent.
func (r *reuseRun) roundTrip(p byte) int {
	ds := r.fromClient()
	if len(ds) > 0 {
		r.input(p, func(ep *fastnet.Endpoint) { ep.HandleDatagrams(r.now, ds) })
	}
	r.toClient(0)
	return len(ds)
}

func (r *reuseRun) clientEvents() {
	for {
		if _, ok := r.cli.PollEvent(); !ok {
			return
		}
	}
}

// input makes both servers handle the same input, checking first that
// the lending one's promise held, then compares what they send and their
// statistics, and polls events as p says.
func (r *reuseRun) input(p byte, handle func(ep *fastnet.Endpoint)) {
	t := r.t
	t.Helper()
	handle(r.give)
	for _, l := range r.lent {
		if !bytes.Equal(l.data, l.want) {
			t.Fatalf("before input %d, a message lent and polled after input %d changed: %x, want %x (N103)", r.inputs+1, l.input, l.data, l.want)
		}
	}
	r.lent = r.lent[:0]
	handle(r.lend)
	r.inputs++
	for i := 0; ; i++ {
		if i > 1<<16 {
			t.Fatal("PollTransmit never returns false")
		}
		tg, okg := r.give.PollTransmit(r.now, r.buf)
		var dg []byte
		if okg {
			dg = bytes.Clone(r.buf[:tg.N])
		}
		tl, okl := r.lend.PollTransmit(r.now, r.buf)
		if okg != okl {
			t.Fatalf("input %d: a datagram from the server that gives: %v, from the one that lends: %v", r.inputs, okg, okl)
		}
		if !okg {
			break
		}
		if tg.To != tl.To || !bytes.Equal(dg, r.buf[:tl.N]) {
			t.Fatalf("input %d: the server that gives sent %v %x, the one that lends %v %x", r.inputs, tg.To, dg, tl.To, r.buf[:tl.N])
		}
		if tg.To == fuzzAddrs[0] {
			r.toCli = append(r.toCli, dg)
		}
	}
	if mg, ml := r.give.ReceiveMemory(), r.lend.ReceiveMemory(); mg != ml {
		t.Fatalf("input %d: receive memory %d when giving, %d when lending", r.inputs, mg, ml)
	}
	if eg, el := r.give.EndpointStats(), r.lend.EndpointStats(); eg != el {
		t.Fatalf("input %d: different endpoint statistics (-giving +lending):\n%s", r.inputs, cmp.Diff(eg, el))
	}
	if r.sh != 0 {
		sg, okg := r.give.Stats(r.sh)
		sl, okl := r.lend.Stats(r.sh)
		if okg != okl {
			t.Fatalf("input %d: connection alive: %v when giving, %v when lending", r.inputs, okg, okl)
		}
		if sg != sl {
			if d := cmp.Diff(sg, sl, cmpopts.EquateNaNs()); d != "" {
				t.Fatalf("input %d: different statistics (-giving +lending):\n%s", r.inputs, d)
			}
		}
	}
	r.poll(p)
}

// poll polls the same number of events from both servers, as p says, and
// compares them.
func (r *reuseRun) poll(p byte) {
	t := r.t
	t.Helper()
	n, leave := int(p&31), -1
	switch p >> 5 {
	case 7:
		n = 1 << 30
	case 6:
		n, leave = 1<<30, int(p&31)
	}
	for ; n > 0; n-- {
		if leave >= 0 && int(r.give.EndpointStats().MessagesDelivered)-r.polledMsgs <= leave {
			return
		}
		eg, okg := r.give.PollEvent()
		el, okl := r.lend.PollEvent()
		if okg != okl {
			t.Fatalf("after input %d: an event from the server that gives: %v, from the one that lends: %v", r.inputs, okg, okl)
		}
		if !okg {
			return
		}
		r.polled++
		sg, sl := reuseEventOf(eg), reuseEventOf(el)
		if sg != sl {
			if d := cmp.Diff(sg.String(), sl.String()); d != "" {
				t.Fatalf("after input %d, event %d: different events (-giving +lending):\n%s", r.inputs, r.polled, d)
			}
		}
		if !bytes.Equal(eg.Data, el.Data) {
			t.Fatalf("after input %d, event %d (%v on channel %d, reliable %v, %d bytes): the server that gives reported %x, the one that lends %x",
				r.inputs, r.polled, eg.Kind, eg.Channel, eg.Reliable, len(eg.Data), eg.Data, el.Data)
		}
		if eg.Kind == fastnet.EventConnected && r.sh == 0 {
			r.sh = eg.Conn
		}
		if eg.Kind == fastnet.EventMessage && len(eg.Data) >= 16 && !reuseMsgMade(eg.Data, r.msgs) {
			t.Fatalf("after input %d, event %d: a message (on channel %d, reliable %v) not made: %x", r.inputs, r.polled, eg.Channel, eg.Reliable, eg.Data)
		}
		if eg.Kind == fastnet.EventMessage {
			r.polledMsgs++
			r.given = append(r.given, reuseData{eg.Data, bytes.Clone(eg.Data), r.inputs})
			r.lent = append(r.lent, reuseData{el.Data, bytes.Clone(el.Data), r.inputs})
		}
	}
}

// reuseEvent is what an event says but its Data, comparable with ==.
type reuseEvent struct {
	Kind     fastnet.EventKind
	Conn     fastnet.Handle
	Addr     netip.AddrPort
	ID       uint32
	Reliable bool
	Outcome  fastnet.Outcome
	Channel  int
	MTU      int
	Message  fastnet.MessageID
	err      string
	stats    fastnet.Stats
	quality  fastnet.Quality
	intro    bool
}

func reuseEventOf(ev fastnet.Event) reuseEvent {
	r := reuseEvent{Kind: ev.Kind, Conn: ev.Conn, Addr: ev.Addr, ID: ev.ID, Reliable: ev.Reliable,
		Outcome: ev.Outcome, Channel: ev.Channel, MTU: ev.MTU, Message: ev.Message, intro: ev.Intro != nil}
	if ev.Err != nil {
		r.err = ev.Err.Error()
	}
	if ev.Stats != nil {
		r.stats = *ev.Stats
	}
	if ev.Quality != nil {
		r.quality = *ev.Quality
	}
	return r
}

func (r reuseEvent) String() string {
	return fmt.Sprintf("%v conn %d %v id %d ch %d reliable %v err %q mtu %d message %d outcome %v stats %+v quality %+v",
		r.Kind, r.Conn, r.Addr, r.ID, r.Channel, r.Reliable, r.err, r.MTU, r.Message, r.Outcome, r.stats, r.quality)
}
