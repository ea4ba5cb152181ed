package fastnettest

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/fastnet"
)

// endpoints returns a network with a server endpoint at addr(1) and a client
// endpoint at addr(2), both of transport tr.
func endpoints(t *testing.T, seed uint64, tr fastnet.Transport) (n *Network, srv, cli *fastnet.Endpoint) {
	t.Helper()
	n = NewNetwork(seed)
	var err error
	srv, err = fastnet.NewEndpoint(fastnet.Config{Role: fastnet.Server, Transport: tr, Rand: n.Rand()})
	if err != nil {
		t.Fatal(err)
	}
	cli, err = fastnet.NewEndpoint(fastnet.Config{Role: fastnet.Client, Transport: tr, Rand: n.Rand()})
	if err != nil {
		t.Fatal(err)
	}
	n.Add(addr(1), srv)
	n.Add(addr(2), cli)
	return n, srv, cli
}

// connect connects the client to the server and returns its handle.
func connect(t *testing.T, n *Network, cli *fastnet.Endpoint) fastnet.Handle {
	t.Helper()
	h, err := cli.Connect(n.Now(), addr(1))
	if err != nil {
		t.Fatal(err)
	}
	// Both ends: the server's once the client's echo validated the
	// connection (D25).
	connected := func() bool {
		return hasKind(n.Events(addr(2)), fastnet.EventConnected) && hasKind(n.Events(addr(1)), fastnet.EventConnected)
	}
	if err := n.RunUntilCond(connected, 30*time.Second); err != nil {
		t.Fatalf("connecting: %v; client events %v", err, n.Events(addr(2)))
	}
	return h
}

func hasKind(evs []fastnet.Event, k fastnet.EventKind) bool {
	for _, ev := range evs {
		if ev.Kind == k {
			return true
		}
	}
	return false
}

// messages returns the data of the message events in evs, per channel.
func messages(evs []fastnet.Event) map[int][]string {
	m := map[int][]string{}
	for _, ev := range evs {
		if ev.Kind == fastnet.EventMessage {
			m[ev.Channel] = append(m[ev.Channel], string(ev.Data))
		}
	}
	return m
}

// TestEndpointsOverImpairedLink runs real endpoints through the network:
// reliable messages arrive exactly once and in order per channel despite
// loss, duplication, reordering and jitter.
func TestEndpointsOverImpairedLink(t *testing.T) {
	n, _, cli := endpoints(t, 42, fastnet.Datagram)
	n.SetDefaultLink(Link{
		Loss: 0.2, Dup: 0.1, Reorder: 0.1,
		Delay: 20 * time.Millisecond, Jitter: 10 * time.Millisecond,
	})
	h := connect(t, n, cli)
	const count = 50
	var want []string
	for i := range count {
		msg := fmt.Sprintf("message %d", i)
		want = append(want, msg)
		if err := cli.Send(n.Now(), h, 7, []byte(msg), true); err != nil {
			t.Fatal(err)
		}
	}
	arrived := func() bool { return len(messages(n.Events(addr(1)))[7]) >= count }
	if err := n.RunUntilCond(arrived, time.Minute); err != nil {
		t.Fatalf("%v: server has %d messages", err, len(messages(n.Events(addr(1)))[7]))
	}
	// Let resends and duplicates drain: nothing more may be delivered.
	if err := n.RunFor(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	got := messages(n.Events(addr(1)))[7]
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("server got %q\nwant %q", got, want)
	}
	s := n.Stats()
	if s.Lost == 0 || s.Duplicated == 0 || s.Reordered == 0 {
		t.Errorf("the link did not impair: %+v", s)
	}
	checkAccounting(t, n)
}

// TestEndpointsCorruption: a corrupting link breaks packets. Fastnet has
// no packet checksum (the specification leaves that to the transport), so
// endpoints either drop a damaged packet (D23), or, for a reliable message
// that no longer decodes, end the connection as a protocol violation (D11);
// an altered message is never delivered.
func TestEndpointsCorruption(t *testing.T) {
	ended := 0
	for seed := range uint64(20) {
		n, _, cli := endpoints(t, seed, fastnet.Datagram)
		n.SetDefaultLink(Link{Delay: 5 * time.Millisecond})
		h := connect(t, n, cli)
		n.SetDefaultLink(Link{Delay: 5 * time.Millisecond, Corrupt: 0.05})
		payload := bytes.Repeat([]byte("fastnet!"), 64)
		for range 20 {
			if err := cli.Send(n.Now(), h, 1, payload, true); err != nil {
				t.Fatal(err)
			}
		}
		if err := n.RunFor(20 * time.Second); err != nil {
			t.Fatal(err)
		}
		if n.Stats().Corrupted == 0 {
			t.Fatal("nothing was corrupted")
		}
		got := 0
		var end error
		for _, ev := range n.Events(addr(1)) {
			switch ev.Kind {
			case fastnet.EventMessage:
				got++
				if !bytes.Equal(ev.Data, payload) {
					t.Fatalf("seed %d: altered message delivered: %q", seed, ev.Data)
				}
			case fastnet.EventDisconnected:
				end = ev.Err
			}
		}
		switch {
		case end != nil && errors.Is(end, fastnet.ErrProtocol):
			ended++
		case end != nil:
			t.Errorf("seed %d: disconnected by %v", seed, end)
		case got != 20:
			t.Errorf("seed %d: server got %d messages and is still connected, want 20", seed, got)
		}
	}
	t.Logf("%d of 20 connections ended as protocol violations", ended)
}

// TestEndpointsDeterministic: two runs of real endpoints from one seed give
// byte-identical traces.
func TestEndpointsDeterministic(t *testing.T) {
	trace := func(seed uint64) string {
		var buf bytes.Buffer
		n, _, cli := endpoints(t, seed, fastnet.Datagram)
		n.Trace = &buf
		n.SetDefaultLink(Link{Loss: 0.1, Dup: 0.05, Reorder: 0.05, Corrupt: 0.02, Delay: 15 * time.Millisecond, Jitter: 5 * time.Millisecond})
		h := connect(t, n, cli)
		for i := range 30 {
			cli.Send(n.Now(), h, i%3, bytes.Repeat([]byte{byte(i)}, 100+20*i), i%2 == 0)
		}
		if err := n.RunFor(3 * time.Second); err != nil {
			t.Fatal(err)
		}
		return buf.String()
	}
	a, b, c := trace(5), trace(5), trace(6)
	if a != b {
		t.Error("same seed, different traces")
	}
	if a == c {
		t.Error("different seeds, same trace")
	}
}

// TestEndpointsStreamPipe runs Stream endpoints over a Reliable link, as over
// TCP, and cuts the transport.
func TestEndpointsStreamPipe(t *testing.T) {
	n, _, cli := endpoints(t, 1, fastnet.Stream)
	n.SetPath(addr(1), addr(2), Link{Reliable: true, Delay: 10 * time.Millisecond, Jitter: 10 * time.Millisecond, Bandwidth: 1 << 20})
	h := connect(t, n, cli)
	big := bytes.Repeat([]byte{0xab}, 200_000) // one packet on a stream (D4, D20)
	for i := range 10 {
		msg := big
		if i%2 == 0 {
			msg = []byte(fmt.Sprint(i))
		}
		if err := cli.Send(n.Now(), h, 3, msg, true); err != nil {
			t.Fatal(err)
		}
	}
	arrived := func() bool { return len(messages(n.Events(addr(1)))[3]) == 10 }
	if err := n.RunUntilCond(arrived, time.Minute); err != nil {
		t.Fatal(err)
	}
	for i, m := range messages(n.Events(addr(1)))[3] {
		if i%2 == 0 && m != fmt.Sprint(i) || i%2 == 1 && m != string(big) {
			t.Fatalf("message %d: %d bytes", i, len(m))
		}
	}
	n.CloseTransport(addr(1), addr(2))
	if err := n.RunFor(time.Second); err != nil {
		t.Fatal(err)
	}
	for _, a := range []netip.AddrPort{addr(1), addr(2)} {
		if !hasKind(n.Events(a), fastnet.EventDisconnected) {
			t.Errorf("%v did not report the cut: %v", a, n.Events(a))
		}
	}
}

// TestEndpointsOnEvent: a server that echoes every message from OnEvent.
func TestEndpointsOnEvent(t *testing.T) {
	n, srv, cli := endpoints(t, 9, fastnet.Datagram)
	n.SetDefaultLink(Link{Delay: 25 * time.Millisecond, Loss: 0.05})
	n.OnEvent = func(now clock.Time, node netip.AddrPort, ev fastnet.Event) {
		if node == addr(1) && ev.Kind == fastnet.EventMessage {
			srv.Send(now, ev.Conn, ev.Channel, ev.Data, true)
		}
	}
	h := connect(t, n, cli)
	for i := range 10 {
		cli.Send(n.Now(), h, 0, []byte{byte(i)}, true)
	}
	echoed := func() bool { return len(messages(n.Events(addr(2)))[0]) == 10 }
	if err := n.RunUntilCond(echoed, time.Minute); err != nil {
		t.Fatal(err)
	}
}

// A node whose endpoint lends its messages' buffers (ReuseMessageBuffers,
// N103) has its events kept with Data of their own: a message kept by
// the network stays whole while many more arrive after it.
func TestKeptEventsOfLendingNode(t *testing.T) {
	n := NewNetwork(7)
	// Messages whole in their packets, which the arena holds.
	mtu := fastnet.MTUConfig{Disabled: true}
	srv, err := fastnet.NewEndpoint(fastnet.Config{Role: fastnet.Server, Rand: n.Rand(), InitialPayloadMTU: 1200, MTU: mtu, ReuseMessageBuffers: true})
	if err != nil {
		t.Fatal(err)
	}
	cli, err := fastnet.NewEndpoint(fastnet.Config{Role: fastnet.Client, Rand: n.Rand(), InitialPayloadMTU: 1200, MTU: mtu})
	if err != nil {
		t.Fatal(err)
	}
	n.Add(addr(1), srv)
	n.Add(addr(2), cli)
	n.SetDefaultLink(Link{Delay: time.Millisecond})
	h := connect(t, n, cli)
	var want []string
	for i := range 3000 {
		msg := fmt.Sprintf("message %d %s", i, bytes.Repeat([]byte{'a' + byte(i%26)}, i%40))
		want = append(want, msg)
		if err := cli.Send(n.Now(), h, 1, []byte(msg), true); err != nil {
			t.Fatal(err)
		}
		if i%30 == 29 {
			if err := n.RunFor(time.Millisecond); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := n.RunFor(time.Second); err != nil {
		t.Fatal(err)
	}
	got := messages(n.Events(addr(1)))[1]
	if len(got) != len(want) {
		t.Fatalf("%d of %d messages", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("message %d kept as %q, want %q", i, got[i], want[i])
		}
	}
}
