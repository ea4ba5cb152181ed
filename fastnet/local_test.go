package fastnet

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
)

// localLink joins a client endpoint and a server endpoint that learns
// the local address of each datagram (Incoming.Local), as a server bound
// to an unspecified address on a host of several addresses does (N149).
// to is the server's local address the client's datagrams arrive at; sent
// records the Local of every datagram the server sends.
type localLink struct {
	t        *testing.T
	now      clock.Time
	cli, srv *Endpoint
	to       netip.Addr
	sent     []netip.Addr
	buf      []byte
	srvEvs   []Event
}

func newLocalLink(t *testing.T, to netip.Addr) *localLink {
	l := &localLink{t: t, now: clock.Epoch, to: to, buf: make([]byte, 1<<16)}
	var err error
	if l.cli, err = NewEndpoint(Config{Role: Client}); err != nil {
		t.Fatal(err)
	}
	if l.srv, err = NewEndpoint(Config{Role: Server}); err != nil {
		t.Fatal(err)
	}
	return l
}

// flush moves every datagram both ways until neither side has more, then
// moves the clock on by d and runs the timers due.
func (l *localLink) flush(d time.Duration) {
	for moved := true; moved; {
		moved = false
		for {
			tr, ok := l.cli.PollTransmit(l.now, l.buf)
			if !ok {
				break
			}
			moved = true
			l.srv.HandleDatagrams(l.now, []Incoming{{From: clientAddr, Local: l.to, Data: l.buf[:tr.N]}})
		}
		for {
			tr, ok := l.srv.PollTransmit(l.now, l.buf)
			if !ok {
				break
			}
			moved = true
			l.sent = append(l.sent, tr.Local)
			l.cli.HandleDatagram(l.now, serverAddr, l.buf[:tr.N])
		}
		var ev Event
		for l.srv.NextEvent(&ev) {
			l.srvEvs = append(l.srvEvs, ev)
		}
		for l.cli.NextEvent(&ev) {
		}
	}
	l.now = l.now.Add(d)
	for _, ep := range []*Endpoint{l.cli, l.srv} {
		if dl, ok := ep.NextDeadline(); ok && dl <= l.now {
			ep.HandleTimeout(l.now)
		}
	}
}

// sentFrom reports whether every datagram the server sent since the last
// call went from want, and forgets them.
func (l *localLink) sentFrom(want netip.Addr) bool {
	l.t.Helper()
	ok := len(l.sent) > 0
	for _, a := range l.sent {
		if a != want {
			l.t.Errorf("the server sent a datagram from %v, want %v", a, want)
			ok = false
		}
	}
	l.sent = l.sent[:0]
	return ok
}

// TestAnswersFromLocalAddress: a server answers a client from the local
// address the client's datagrams arrive at, through its handshake, its
// validation (D25) and its data; a query is answered from the address it
// was sent to; and once the client proved its address, a datagram with
// its address sent to another of the server's addresses (a forgery: a
// client's socket sends to one) no longer moves where the server answers
// from (N149).
func TestAnswersFromLocalAddress(t *testing.T) {
	a, b := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("198.51.100.7")
	l := newLocalLink(t, a)
	h, err := l.cli.Connect(l.now, serverAddr)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50 && l.cli.conns[h] != nil && !l.cli.conns[h].established(); i++ {
		l.flush(10 * time.Millisecond)
	}
	var sh Handle
	for i := 0; i < 200 && sh == 0; i++ {
		l.flush(10 * time.Millisecond)
		for _, ev := range l.srvEvs {
			if ev.Kind == EventConnected {
				sh = ev.Conn
			}
		}
	}
	if sh == 0 {
		t.Fatal("the server never validated the client")
	}
	if !l.sentFrom(a) {
		t.Fatal("the handshake's answers")
	}
	if err := l.cli.Send(l.now, h, 1, []byte("hello"), true); err != nil {
		t.Fatal(err)
	}
	if err := l.srv.Send(l.now, sh, 1, []byte("hello back"), true); err != nil {
		t.Fatal(err)
	}
	l.flush(10 * time.Millisecond)
	if !l.sentFrom(a) {
		t.Fatal("the data and acks")
	}

	// A heartbeat with the client's address sent to b: the connection
	// answers from a still.
	hb := []byte{0xff, 0xfe, 0, 1} // channel -2, a heartbeat value
	l.srv.HandleDatagrams(l.now, []Incoming{{From: clientAddr, Local: b, Data: hb}})
	if err := l.srv.Send(l.now, sh, 1, []byte("after"), true); err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		tr, ok := l.srv.PollTransmit(l.now, l.buf)
		if !ok {
			break
		}
		if n++; tr.Local != a {
			t.Errorf("after a forged datagram to %v, the server sent from %v, want %v", b, tr.Local, a)
		}
	}
	if n == 0 {
		t.Error("the server sent nothing")
	}

	// A query from a stranger, to b, is answered from b; one handed
	// over without its local address, from the socket's choice.
	stranger := netip.MustParseAddrPort("203.0.113.9:4000")
	query := append([]byte{0xff, 0xff}, litQueryFastnet...)
	l.srv.HandleDatagrams(l.now, []Incoming{{From: stranger, Local: b, Data: query}})
	l.srv.HandleDatagram(l.now, stranger, query)
	var got []netip.Addr
	for {
		tr, ok := l.srv.PollTransmit(l.now, l.buf)
		if !ok {
			break
		}
		if tr.To == stranger {
			got = append(got, tr.Local)
		}
	}
	if want := []netip.Addr{b, {}}; len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("the query's answers went from %v, want %v", got, want)
	}
}

// TestUnvalidatedFollowsLatestLocal: until its client proves its address
// (D25), a server's connection answers from where the client's latest
// datagram went, so that a forged "connect?" sent to another of the
// server's addresses before the client's own is undone by the client's
// next datagram (N149).
func TestUnvalidatedFollowsLatestLocal(t *testing.T) {
	a, b := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("198.51.100.7")
	l := newLocalLink(t, a)
	// The forgery comes first: a "connect?" with the client's address,
	// to b.
	connect := append([]byte{0xff, 0xff}, litConnect...)
	l.srv.HandleDatagrams(l.now, []Incoming{{From: clientAddr, Local: b, Data: connect}})
	for {
		tr, ok := l.srv.PollTransmit(l.now, l.buf)
		if !ok {
			break
		}
		if tr.Local != b {
			t.Errorf("the forged connect? was answered from %v, want %v", tr.Local, b)
		}
	}
	if _, err := l.cli.Connect(l.now, serverAddr); err != nil {
		t.Fatal(err)
	}
	validated := false
	for i := 0; i < 200 && !validated; i++ {
		l.flush(10 * time.Millisecond)
		for _, ev := range l.srvEvs {
			validated = validated || ev.Kind == EventConnected
		}
	}
	if !validated {
		t.Fatal("the server never validated the client")
	}
	l.sent = l.sent[:0]
	for _, c := range l.srv.conns {
		if c.local != a {
			t.Errorf("the validated connection answers from %v, want %v", c.local, a)
		}
	}
}

// TestLocalPerDatagramOfBatch: in a batch of several datagrams, each is
// answered from the local address it went to, and what the endpoint sends
// after the batch on its own account (a Connect's handshake, even to the
// sender of the batch's last datagram) goes from the socket's choice, the
// zero Addr: the local address of the last datagram handled is forgotten
// (N149).
func TestLocalPerDatagramOfBatch(t *testing.T) {
	a, b := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("198.51.100.7")
	ep, err := NewEndpoint(Config{Role: Peer})
	if err != nil {
		t.Fatal(err)
	}
	now := clock.Epoch
	s1, s2 := netip.MustParseAddrPort("203.0.113.9:4000"), netip.MustParseAddrPort("203.0.113.10:4000")
	query := append([]byte{0xff, 0xff}, litQueryFastnet...)
	ep.HandleDatagrams(now, []Incoming{{From: s1, Local: a, Data: query}, {From: s2, Local: b, Data: query}})
	h, err := ep.Connect(now, s2)
	if err != nil {
		t.Fatal(err)
	}
	// s1 gets its answer from a; s2 its answer from b, then the
	// Connect's queries from the socket's choice.
	want := map[netip.AddrPort][]netip.Addr{s1: {a}, s2: {b, {}, {}}}
	got := map[netip.AddrPort][]netip.Addr{}
	buf := make([]byte, 1<<16)
	for {
		tr, ok := ep.PollTransmit(now, buf)
		if !ok {
			break
		}
		got[tr.To] = append(got[tr.To], tr.Local)
	}
	for to, w := range want {
		if !slices.Equal(got[to], w) {
			t.Errorf("sent to %v from %v, want from %v", to, got[to], w)
		}
	}
	if c := ep.conns[h]; c == nil || c.local.IsValid() {
		t.Errorf("a Connect made after a batch was handled sends from %v, want the socket's choice", c.local)
	}
}
