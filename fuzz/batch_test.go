package fuzz

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fastnet-engine/fastnet/channel"
	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/coalesce"
	"github.com/fastnet-engine/fastnet/fastnet"
)

// FuzzBatch feeds two identical server connections that negotiated
// bundles (D24) the same datagrams, arbitrary bundles and packets cut from
// the input: one in a single HandleDatagrams call, the other one datagram
// at a time. Whatever the datagrams hold, the two must answer with the same
// datagrams, report the same events and count the same statistics (N102).
func FuzzBatch(f *testing.F) {
	// Bundles of whole messages on one and two channels, in two and three
	// datagrams, a corrupt checksum, and an inner packet cut short.
	seq := channel.Seq(0)
	packet := func(ch int16, reliable bool, size int, rel channel.Seq) []byte {
		b := binary.BigEndian.AppendUint16(nil, uint16(ch))
		b = channel.Header{Reliable: reliable, Start: true, Seq: seq, Rel: rel}.Append(b)
		seq++
		msg := bytes.Repeat([]byte{byte(size)}, size)
		return coalesce.AppendMessage(b, msg, reliable)
	}
	// A bundle's payload (D24) and the fuzz input alike are pieces each
	// after its 16-bit length.
	framed := func(pieces ...[]byte) []byte {
		var b []byte
		for _, p := range pieces {
			b = binary.BigEndian.AppendUint16(b, uint16(len(p)))
			b = append(b, p...)
		}
		return b
	}
	bundle, input := framed, framed
	seq = 0
	d1 := bundle(packet(1, false, 64, 0), packet(1, false, 64, 0), packet(1, false, 64, 0))
	d2 := bundle(packet(1, false, 64, 0), packet(1, false, 64, 0))
	f.Add(input(d1, d2))
	seq = 0
	r1 := bundle(packet(2, true, 40, 1), packet(2, true, 40, 2))
	r2 := bundle(packet(2, true, 40, 3), packet(3, false, 100, 0), packet(2, true, 40, 4))
	r3 := bundle(packet(2, true, 40, 5))
	f.Add(input(r1, r2, r3))
	bad := bytes.Clone(r2)
	bad[len(bad)-1] ^= 1
	f.Add(input(r1, bad, r3))
	f.Add(input(r1, r2[:len(r2)-3], r3))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		runBatch(t, data)
	})
}

// batchSide is one of FuzzBatch's two endpoints and what it did.
type batchSide struct {
	ep  *fastnet.Endpoint
	h   fastnet.Handle
	out bytes.Buffer // every datagram sent and event reported, in order
}

// newBatchSide returns a side with an endpoint of cfg that has had a
// "connect?" from from at now, drained.
func newBatchSide(t *testing.T, cfg fastnet.Config, from netip.AddrPort, now clock.Time, drain func(*batchSide)) *batchSide {
	t.Helper()
	ep, err := fastnet.NewEndpoint(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := &batchSide{ep: ep}
	ep.HandleDatagram(now, from, []byte("\xff\xffconnect?"))
	drain(s)
	return s
}

func runBatch(t *testing.T, data []byte) {
	cfg := bundleServer()
	from := fuzzAddrs[0]
	now := clock.Epoch
	buf := make([]byte, 65536)
	var sides [2]*batchSide
	drain := func(s *batchSide) { s.drain(t, now, buf) }
	for i := range sides {
		s := newBatchSide(t, cfg, from, now, drain)
		sides[i] = s
		ep := s.ep
		// The challenge, a 4-byte heartbeat, echoed validates (D25).
		var beat []byte
		for _, l := range bytes.Split(s.out.Bytes(), []byte("\n")) {
			var to string
			var b []byte
			if n, _ := fmt.Sscanf(string(l), "send %s %x", &to, &b); n == 2 && len(b) == 4 && b[0] == 0xff && b[1] == 0xfe {
				beat = b
			}
		}
		if beat == nil {
			t.Fatal("no challenge")
		}
		ep.HandleDatagram(now, from, beat)
		ep.HandleDatagram(now, from, []byte("\xff\xffquery:ext:bundle"))
		drain(s)
		if s.h == 0 {
			t.Fatal("not connected")
		}
	}
	// The input: datagrams, each a 16-bit length then its bytes, sent as a
	// bundle (channel -6) unless its first byte is odd; a last length that
	// does not fit takes what is left.
	var ds []fastnet.Incoming
	for len(data) >= 2 && len(ds) < 8 {
		n := min(int(binary.BigEndian.Uint16(data)), len(data)-2)
		d := data[2 : 2+n]
		data = data[2+n:]
		if len(d) > 0 && d[0]&1 == 1 {
			d = d[1:]
		} else {
			d = append([]byte{0xff, 0xfa}, d...)
		}
		ds = append(ds, fastnet.Incoming{From: from, Data: d})
	}
	a := batchAndOneByOne(t, now, ds, sides, drain)
	if m := a.ep.ReceiveMemory(); m > cfg.EndpointReceiveMemory {
		t.Fatalf("receive memory %d above the limit %d", m, cfg.EndpointReceiveMemory)
	}
}

// drain writes into s.out every datagram s's endpoint has to send at now
// (through buf) and every event it reports, and notes the connection
// that the first EventConnected names.
func (s *batchSide) drain(t *testing.T, now clock.Time, buf []byte) {
	t.Helper()
	for i := 0; ; i++ {
		if i > 1<<16 {
			t.Fatal("PollTransmit never returns false")
		}
		tr, ok := s.ep.PollTransmit(now, buf)
		if !ok {
			break
		}
		fmt.Fprintf(&s.out, "send %v %x\n", tr.To, buf[:tr.N])
	}
	var ev fastnet.Event
	for s.ep.NextEvent(&ev) {
		if ev.Kind == fastnet.EventConnected {
			s.h = ev.Conn
		}
		fmt.Fprintf(&s.out, "event %v %d %d %v %x %v\n", ev.Kind, ev.Conn, ev.Channel, ev.Reliable, ev.Data, ev.Err)
	}
}

// batchAndOneByOne hands sides[0] ds in one HandleDatagrams call and
// sides[1] one datagram at a time, drains both, and fails unless both
// wrote the same datagrams and events and count the same statistics. It
// returns sides[0].
func batchAndOneByOne(t *testing.T, now clock.Time, ds []fastnet.Incoming, sides [2]*batchSide, drain func(*batchSide)) *batchSide {
	t.Helper()
	a, b := sides[0], sides[1]
	a.out.Reset()
	b.out.Reset()
	a.ep.HandleDatagrams(now, ds)
	for _, d := range ds {
		b.ep.HandleDatagram(now, d.From, d.Data)
	}
	drain(a)
	drain(b)
	if d := cmp.Diff(b.out.String(), a.out.String()); d != "" {
		t.Fatalf("in one batch and one at a time, different output (-one at a time +batch):\n%s", d)
	}
	sa, oka := a.ep.Stats(a.h)
	sb, okb := b.ep.Stats(b.h)
	if oka != okb {
		t.Fatalf("connection alive: %v in a batch, %v one at a time", oka, okb)
	}
	if d := cmp.Diff(sb, sa); d != "" {
		t.Fatalf("in one batch and one at a time, different statistics (-one at a time +batch):\n%s", d)
	}
	return a
}
