package fastnet

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
)

// N123: a "connect?" from the address of a server's connection that
// ended while its handshake's retries could still come is answered with
// "abort", not with a new connection; once they could not, or from an
// address whose connection ended later in its life, it opens one as
// before (D15, N18, N34).
func TestLateRetryOfEndedConnection(t *testing.T) {
	for _, tc := range []struct {
		name string
		// heard is how long the client's heartbeats were heard before
		// the end; after is when the "connect?" comes after it.
		heard, after time.Duration
		refused      bool
	}{
		{"just after the end", 0, time.Millisecond, true},
		{"within the retry window", 500 * time.Millisecond, 400 * time.Millisecond, true},
		{"at the retry window's end", 500 * time.Millisecond, 500 * time.Millisecond, false},
		{"past the retry window", 500 * time.Millisecond, 600 * time.Millisecond, false},
		{"ended past its retry window", 2 * time.Second, time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			se := newTestEndpoint(t, Config{Role: Server, MTU: MTUConfig{Disabled: true}})
			h, _ := se.connectServer()
			se.advance(tc.heard)
			se.recv(chHeartbeat, appendHeartbeat(nil, 1)) // heard, before the end
			if err := se.ep.Abort(se.now, h, "bye"); err != nil {
				t.Fatal(err)
			}
			se.drain()
			se.sent, se.evs = nil, nil
			se.advance(tc.after)
			se.sent, se.evs = nil, nil
			se.recvControl(control{kind: ctlConnect})
			st := se.ep.EndpointStats()
			if tc.refused {
				se.wantControl("a late retry", control{kind: ctlAbort, text: errConnEnded.Error()})
				if len(se.ep.conns) != 0 || st.LateRetriesRefused != 1 || st.ConnectionsRefused != 0 {
					t.Fatalf("%d connections, %d late retries refused, %d refused: want 0, 1 and 0", len(se.ep.conns), st.LateRetriesRefused, st.ConnectionsRefused)
				}
				se.wantNoEvent("a late retry")
				return
			}
			if len(se.sent) == 0 {
				t.Fatal("no answer")
			}
			if m, err := parseControl(se.sent[0].payload); err != nil || m.kind != ctlConnected {
				t.Fatalf("answered %q, want connected", se.sent[0].payload)
			}
			if len(se.ep.conns) != 1 || st.LateRetriesRefused != 0 {
				t.Fatalf("%d connections, %d late retries refused: want 1 and 0", len(se.ep.conns), st.LateRetriesRefused)
			}
		})
	}
}

// N123, end to end: a server aborts a connection, its "abort" is lost,
// and a "connect?" the network held back since the handshake comes. The
// client's connection ends, refused, where a new server connection would
// have had its challenge echoed by the old client one, and the two kept
// each other alive with heartbeats for ever.
func TestLateRetryEndsOldClient(t *testing.T) {
	cfg := Config{MTU: MTUConfig{Disabled: true}}
	p := newPair(t, cfg, cfg)
	var held []byte // the client's "connect?", as the network might hold it back
	held = appendControl(appendPacketHeader(nil, chControl), control{kind: ctlConnect})
	if err := p.srv.Abort(p.now, p.sh, "bye"); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<16)
	for { // lost
		if _, ok := p.srv.PollTransmit(p.now, buf); !ok {
			break
		}
	}
	p.now = p.now.Add(10 * time.Millisecond)
	p.srv.HandleDatagram(p.now, clientAddr, held)
	p.flush()
	p.advance(5 * time.Second)
	var ended error
	for _, ev := range p.cliEvs {
		if ev.Kind == EventDisconnected {
			ended = ev.Err
		}
	}
	var refused *RefusedError
	if !errors.As(ended, &refused) || refused.Reason != errConnEnded.Error() {
		t.Fatalf("client's connection ended with %v, want refused: %v", ended, errConnEnded)
	}
	if n := len(p.srv.conns); n != 0 {
		t.Fatalf("server has %d connections, want none", n)
	}
}

// endedConns forgets addresses once their time is over, and the oldest
// first past maxEnded.
func TestEndedConnsBounded(t *testing.T) {
	var m endedConns
	addr := func(i int) netip.AddrPort {
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 9)
	}
	now := clock.Epoch
	for i := range maxEnded + 10 {
		m.add(addr(i), now, now.Add(time.Second))
	}
	if len(m.until) != maxEnded || m.retry(addr(9), now) || !m.retry(addr(10), now) || !m.retry(addr(maxEnded+9), now) {
		t.Fatalf("%d kept; the 10th %v, the 11th %v, the last %v: want %d, false, true, true",
			len(m.until), m.retry(addr(9), now), m.retry(addr(10), now), m.retry(addr(maxEnded+9), now), maxEnded)
	}
	later := now.Add(time.Second)
	if m.retry(addr(maxEnded+9), later) || len(m.until) != 0 || len(m.order)-m.head != 0 {
		t.Fatalf("past their time: %d kept, %d in order", len(m.until), len(m.order)-m.head)
	}
	// An address that ends again is kept to its later time.
	m.add(addr(1), later, later.Add(time.Second))
	m.add(addr(1), later.Add(500*time.Millisecond), later.Add(2*time.Second))
	if !m.retry(addr(1), later.Add(1500*time.Millisecond)) {
		t.Fatal("an address that ended twice forgotten at its first time")
	}
}

// One record that lasts long at the front of the list keeps none of the
// records behind it past maxEnded (N141): the list is in the order the
// connections ended, not that of their times, and bounding only the
// addresses let a day's record from one address keep a record for each
// connection that ended meanwhile, from however few addresses (20,000
// for 20,000 connections from one address, with a connect timeout of a
// day).
func TestEndedConnsListBounded(t *testing.T) {
	var m endedConns
	now := clock.Epoch
	first := netip.MustParseAddrPort("192.0.2.99:4000")
	client := netip.MustParseAddrPort("198.51.100.7:40000")
	m.add(first, now, now.Add(24*time.Hour))
	for range 5 * maxEnded {
		now = now.Add(1100 * time.Millisecond)
		m.add(client, now, now.Add(time.Second))
	}
	if n := len(m.order) - m.head; n > maxEnded || cap(m.order) > 4*maxEnded {
		t.Errorf("%d records listed (capacity %d) for %d addresses; want at most %d", n, cap(m.order), len(m.until), maxEnded)
	}
	if !m.retry(client, now) {
		t.Error("the latest record forgotten")
	}
}

// Over a long run where entries always remain, order stays within a
// small multiple of maxEnded (the compaction of forgetOldest).
func TestEndedConnsOrderCompacted(t *testing.T) {
	var m endedConns
	now := clock.Epoch
	for i := range 100 * maxEnded {
		a := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 9)
		now = now.Add(time.Millisecond)
		m.add(a, now, now.Add(2*time.Second))
	}
	if cap(m.order) > 4*maxEnded {
		t.Fatalf("order holds %d (cap %d) for %d addresses", len(m.order), cap(m.order), len(m.until))
	}
}

// The window counts 4 RTTs when they exceed 1 s (N34): a retry 1.5 s
// after the first heartbeat of a connection with an RTT of 500 ms may
// still be one.
func TestLateRetryWindowUsesRTT(t *testing.T) {
	se := newTestEndpoint(t, Config{Role: Server, MTU: MTUConfig{Disabled: true}})
	h, _ := se.connectServer()
	se.recv(chHeartbeat, appendHeartbeat(nil, 1))
	c := se.ep.conns[h]
	c.hb.srtt = 500 * time.Millisecond // window: 2 s
	se.advance(1200 * time.Millisecond)
	if err := se.ep.Abort(se.now, h, "bye"); err != nil {
		t.Fatal(err)
	}
	se.drain()
	se.advance(300 * time.Millisecond)
	se.sent, se.evs = nil, nil
	se.recvControl(control{kind: ctlConnect})
	se.wantControl("a late retry", control{kind: ctlAbort, text: errConnEnded.Error()})
}

// An unvalidated connection nobody's heartbeat reached, ended (here by
// the validation timeout), is remembered while its client could still
// be retrying.
func TestLateRetryAfterUnvalidatedExpiry(t *testing.T) {
	se := newTestEndpoint(t, Config{Role: Server, MTU: MTUConfig{Disabled: true}, ValidationTimeout: time.Second})
	se.recvControl(control{kind: ctlConnect})
	if se.ep.NumConns() != 1 {
		t.Fatal("no connection")
	}
	se.advance(1100 * time.Millisecond)
	if se.ep.NumConns() != 0 {
		t.Fatal("not expired")
	}
	se.sent, se.evs = nil, nil
	se.recvControl(control{kind: ctlConnect})
	se.wantControl("a late retry", control{kind: ctlAbort, text: errConnEnded.Error()})
}

// Close, CloseAll and Abort bring the endpoint's clock up to the time
// they are given, as Send does: the end that N123 times its window from
// is then not earlier than the call. Here an unvalidated connection ended
// by CloseAll, or by Abort, 900 ms after its opening, with nothing handled
// in between, is remembered until 5.9 s after the opening (the end plus
// ConnectTimeout, within the opening plus ConnectTimeout and a second);
// timed from the endpoint's last time, the opening, its record would
// have ended at 5 s.
func TestEndTimedFromCall(t *testing.T) {
	for _, tt := range []struct {
		name string
		end  func(ep *Endpoint, now clock.Time, h Handle) error
	}{
		{"CloseAll", func(ep *Endpoint, now clock.Time, _ Handle) error { ep.CloseAll(now, "bye"); return nil }},
		{"Abort", func(ep *Endpoint, now clock.Time, h Handle) error { return ep.Abort(now, h, "bye") }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			se := newTestEndpoint(t, Config{Role: Server, MTU: MTUConfig{Disabled: true}})
			opened := se.now
			se.recvControl(control{kind: ctlConnect})
			var h Handle
			for k := range se.ep.conns {
				h = k
			}
			if se.ep.NumConns() != 1 {
				t.Fatal("no connection")
			}
			se.now = opened.Add(900 * time.Millisecond)
			if err := tt.end(se.ep, se.now, h); err != nil {
				t.Fatal(err)
			}
			se.drain()
			if se.ep.NumConns() != 0 {
				t.Fatal("not ended")
			}
			se.advance(4600 * time.Millisecond) // 5.5 s after the opening
			se.sent, se.evs = nil, nil
			se.recvControl(control{kind: ctlConnect})
			se.wantControl("a late retry", control{kind: ctlAbort, text: errConnEnded.Error()})
			se.advance(500 * time.Millisecond) // 6 s: past the record
			se.sent, se.evs = nil, nil
			se.recvControl(control{kind: ctlConnect})
			if se.ep.NumConns() != 1 {
				t.Fatal("a connect? past the record was refused")
			}
		})
	}
}

// Close given a time behind the endpoint's acts at the endpoint's time, as
// Send does: its linger is counted from the later of the two, not cut
// short by the gap.
func TestCloseLingerFromEndpointTime(t *testing.T) {
	se := newTestEndpoint(t, Config{Role: Server, MTU: MTUConfig{Disabled: true}})
	h, _ := se.connectServer()
	if err := se.ep.Send(se.now, h, 0, make([]byte, 100), true); err != nil {
		t.Fatal(err)
	}
	se.drain()
	se.advance(time.Second) // the packet is never acked: the close lingers
	se.sent, se.evs = nil, nil
	late := se.now
	if err := se.ep.Close(late.Add(-time.Second), h, "bye"); err != nil {
		t.Fatal(err)
	}
	se.drain()
	se.advance(DefaultLinger - 500*time.Millisecond)
	for _, ev := range se.evs {
		if ev.Kind == EventDisconnected {
			t.Fatalf("ended %v after the endpoint's time, before its linger of %v", se.now.Sub(late), DefaultLinger)
		}
	}
	se.advance(time.Second)
	ended := false
	for _, ev := range se.evs {
		ended = ended || ev.Kind == EventDisconnected
	}
	if !ended {
		t.Fatalf("not ended %v after the endpoint's time, past its linger", se.now.Sub(late))
	}
}

// A record kept behind an older one that lasts longer (expire forgets
// them in the order they ended) refuses a late retry until its own end
// and not at it.
func TestEndedRecordEndsOnTime(t *testing.T) {
	var m endedConns
	a, b := netip.MustParseAddrPort("192.0.2.1:1000"), netip.MustParseAddrPort("192.0.2.2:1000")
	t0 := clock.Epoch.Add(time.Second)
	m.add(a, t0, t0.Add(5*time.Second))
	m.add(b, t0, t0.Add(time.Second))
	if !m.retry(b, t0.Add(time.Second-1)) {
		t.Error("a retry a nanosecond before the record's end was not taken as one")
	}
	if m.retry(b, t0.Add(time.Second)) {
		t.Error("a retry at the record's end was taken as one")
	}
	if !m.retry(a, t0.Add(time.Second)) {
		t.Error("the older record, which lasts longer, was forgotten")
	}
}

// Over a Stream nothing is remembered (N123): a "connect?" is never
// duplicated there, so one from the address of a connection just ended
// opens a new connection.
func TestStreamEndNotRemembered(t *testing.T) {
	se := newTestEndpoint(t, Config{Role: Server, Transport: Stream})
	se.recvControl(control{kind: ctlConnect})
	ev := se.wantEvent("connected", EventConnected)
	se.recv(chHeartbeat, appendHeartbeat(nil, 1)) // heard
	if err := se.ep.Abort(se.now, ev.Conn, "bye"); err != nil {
		t.Fatal(err)
	}
	se.drain()
	se.advance(time.Millisecond)
	se.sent, se.evs = nil, nil
	se.recvControl(control{kind: ctlConnect})
	if se.ep.NumConns() != 1 || se.ep.EndpointStats().LateRetriesRefused != 0 {
		t.Fatalf("%d connections, %d late retries refused: want 1 and 0", se.ep.NumConns(), se.ep.EndpointStats().LateRetriesRefused)
	}
}

// A client that waits longer than the specification's 5 s, connected
// only after 6.4 s because the server's answers were lost, whose
// connection the server ends while it is still unvalidated, its abort
// lost: a late duplicate of its "connect?" is still answered with abort
// (N123), with a validation timeout that covers such a wait (N141).
func TestLateRetryLongConnectTimeout(t *testing.T) {
	cfg := Config{MTU: MTUConfig{Disabled: true}, ConnectTimeout: 30 * time.Second, ValidationTimeout: 30 * time.Second}
	cli, srv := cfg, cfg
	cli.Role, srv.Role = Client, Server
	c, err := NewEndpoint(cli)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewEndpoint(srv)
	if err != nil {
		t.Fatal(err)
	}
	now := clock.Epoch
	if _, err := c.Connect(now, serverAddr); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<16)
	connected := false
	var ev Event
	for !connected {
		now = now.Add(10 * time.Millisecond)
		if now.Sub(clock.Epoch) > 20*time.Second {
			t.Fatal("the client never connected")
		}
		for _, ep := range []*Endpoint{c, s} {
			if d, ok := ep.NextDeadline(); ok && d <= now {
				ep.HandleTimeout(now)
			}
		}
		for {
			tx, ok := c.PollTransmit(now, buf)
			if !ok {
				break
			}
			s.HandleDatagram(now, clientAddr, buf[:tx.N])
		}
		open := len(s.conns) > 0
		for {
			tx, ok := s.PollTransmit(now, buf)
			if !ok {
				break
			}
			if !open || now.Sub(clock.Epoch) >= 6400*time.Millisecond { // answers lost until 6.4 s
				c.HandleDatagram(now, serverAddr, buf[:tx.N])
			}
		}
		for c.NextEvent(&ev) {
			if ev.Kind == EventConnected {
				connected = true
			}
		}
	}
	s.CloseAll(now, "bye")
	for { // the abort is lost
		if _, ok := s.PollTransmit(now, buf); !ok {
			break
		}
	}
	now = now.Add(10 * time.Millisecond)
	s.HandleDatagram(now, clientAddr, appendControl(appendPacketHeader(nil, chControl), control{kind: ctlConnect})) // a late duplicate
	if n := len(s.conns); n != 0 || s.EndpointStats().LateRetriesRefused != 1 {
		t.Errorf("the late retry of the connected client opened %d connection(s) (late retries refused: %d); want it answered with abort", n, s.EndpointStats().LateRetriesRefused)
	}
}
