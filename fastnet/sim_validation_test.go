package fastnet_test

// Address validation (D25) and restarted clients (D28) on the simulated
// network, with an off-path attacker (fastnettest.Forger) that forges
// source addresses and sees nothing.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/fastnet/fastnettest"
)

var (
	valServer = netip.MustParseAddrPort("10.0.0.1:7000")
	valClient = netip.MustParseAddrPort("10.0.0.2:50000")
)

// victim returns the i-th forged source address: hosts where no node
// lives, so whatever the server sends there is reflection.
func victim(i int) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{192, 0, 2, byte(i >> 8)}), uint16(1000+i&0xff))
}

func newValServer(t *testing.T, n *fastnettest.Network, cfg fastnet.Config) *fastnet.Endpoint {
	t.Helper()
	cfg.Role = fastnet.Server
	cfg.Rand = n.Rand()
	srv, err := fastnet.NewEndpoint(cfg)
	if err != nil {
		t.Fatal(err)
	}
	n.Add(valServer, srv)
	return srv
}

func countKind(evs []fastnet.Event, k fastnet.EventKind) int {
	n := 0
	for _, ev := range evs {
		if ev.Kind == k {
			n++
		}
	}
	return n
}

// D25: a forged "connect?" (and forged queries and heartbeats after it)
// draws at most 3 times its bytes onto the address it names, no MTU probe,
// no event; the connection ends silently after the validation timeout.
func TestValidationBoundsReflection(t *testing.T) {
	n := fastnettest.NewNetwork(1)
	srv := newValServer(t, n, fastnet.Config{}) // MTU estimation on
	probes := 0
	n.Filter = func(from, to netip.AddrPort, b []byte) bool {
		if from == valServer {
			if ch := int16(binary.BigEndian.Uint16(b)); ch == -3 {
				probes++
			}
		}
		return true
	}
	f := n.Forger()
	const victims = 40
	for i := range victims {
		v := victim(i)
		f.Send(v, valServer, []byte("\xff\xffquery:fastnet"))
		f.Send(v, valServer, []byte("\xff\xffconnect?"))
		// Blind heartbeats: a negative one (the server echoes those) and
		// a guess at the challenge.
		f.Send(v, valServer, []byte{0xff, 0xfe, 0x80, 0x00})
	}
	if err := n.RunFor(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	var forged, reflected uint64
	for i := range victims {
		v := victim(i)
		fb := f.Forged(v, valServer)
		rb, _ := f.Reflected(valServer, v)
		if rb > 3*fb {
			t.Errorf("victim %v: server sent %d bytes for %d forged, more than 3 times (D25)", v, rb, fb)
		}
		forged += fb
		reflected += rb
	}
	t.Logf("forged %d bytes from %d addresses, server sent them %d (%.2fx)", forged, victims, reflected, float64(reflected)/float64(forged))
	if probes != 0 {
		t.Errorf("server sent %d MTU probes to unvalidated addresses", probes)
	}
	if evs := n.Events(valServer); len(evs) != 0 {
		t.Errorf("application heard of unvalidated connections: %v", fastnettest.DescribeEvent(evs[0]))
	}
	if srv.NumConns() != 0 {
		t.Errorf("%d connections left after the validation timeout", srv.NumConns())
	}
	vs := srv.ValidationStats()
	if vs.Validated != 0 || vs.Expired+vs.Forged != victims {
		t.Errorf("validation stats %+v: want none validated, %d expired or forged", vs, victims)
	}
}

// D25: unvalidated connections do not count against MaxConnections and
// have their own bound, which drops the oldest: a flood of forged
// "connect?" does not keep a real client out.
func TestValidationFloodDoesNotFillServer(t *testing.T) {
	n := fastnettest.NewNetwork(2)
	srv := newValServer(t, n, fastnet.Config{MaxConnections: 1, MaxUnvalidated: 8, MTU: fastnet.MTUConfig{Disabled: true}})
	cli := newClient(t, n, valClient, fastnet.Config{MTU: fastnet.MTUConfig{Disabled: true}})
	f := n.Forger()
	for i := range 100 {
		f.Send(victim(i), valServer, []byte("\xff\xffconnect?"))
	}
	if err := n.RunFor(10 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if got := srv.NumConns(); got != 8 {
		t.Fatalf("%d connections after 100 forged connect?, want the bound, 8", got)
	}
	if vs := srv.ValidationStats(); vs.Evicted != 92 || vs.Unvalidated != 8 {
		t.Fatalf("validation stats %+v: want 92 evicted, 8 unvalidated", vs)
	}
	h, err := cli.Connect(n.Now(), valServer)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.RunUntilCond(func() bool { return len(n.Events(valServer)) > 0 }, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if ev := n.Events(valServer)[0]; ev.Kind != fastnet.EventConnected || ev.Addr != valClient {
		t.Fatalf("server event %v", fastnettest.DescribeEvent(ev))
	}
	if ev := n.Events(valClient)[0]; ev.Kind != fastnet.EventConnected || ev.Conn != h {
		t.Fatalf("client event %v", fastnettest.DescribeEvent(ev))
	}
	// Full now: a second real client is refused at once (D25).
	other := netip.MustParseAddrPort("10.0.0.3:50000")
	cli2 := newClient(t, n, other, fastnet.Config{MTU: fastnet.MTUConfig{Disabled: true}})
	if _, err := cli2.Connect(n.Now(), valServer); err != nil {
		t.Fatal(err)
	}
	if err := n.RunUntilCond(func() bool { return len(n.Events(other)) > 0 }, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if ev := n.Events(other)[0]; ev.Kind != fastnet.EventRefused {
		t.Fatalf("second client: %v, want Refused", fastnettest.DescribeEvent(ev))
	}
}

// D25: two clients start their handshakes while one place is free; the
// first validated takes it, the second is refused when it validates, and
// its application hears the refusal as the end of its connection.
func TestValidationRefusedWhenFullMeanwhile(t *testing.T) {
	n := fastnettest.NewNetwork(3)
	srv := newValServer(t, n, fastnet.Config{MaxConnections: 1, MTU: fastnet.MTUConfig{Disabled: true}})
	a := newClient(t, n, valClient, fastnet.Config{MTU: fastnet.MTUConfig{Disabled: true}})
	bAddr := netip.MustParseAddrPort("10.0.0.3:50000")
	b := newClient(t, n, bAddr, fastnet.Config{MTU: fastnet.MTUConfig{Disabled: true}})
	// B's "connect?" arrives before A's echo validates A.
	n.SetPath(bAddr, valServer, fastnettest.Link{Delay: 12 * time.Millisecond})
	n.SetPath(valClient, valServer, fastnettest.Link{Delay: 10 * time.Millisecond})
	if _, err := a.Connect(n.Now(), valServer); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Connect(n.Now(), valServer); err != nil {
		t.Fatal(err)
	}
	if err := n.RunFor(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	if got := countKind(n.Events(valServer), fastnet.EventConnected); got != 1 || srv.NumConns() != 1 {
		t.Fatalf("server: %d Connected, %d connections; want 1, 1", got, srv.NumConns())
	}
	// N67: the server's application hears the refusal at validation.
	var rejected []fastnet.Event
	for _, ev := range n.Events(valServer) {
		if ev.Kind == fastnet.EventRejected {
			rejected = append(rejected, ev)
		}
	}
	if len(rejected) != 1 || rejected[0].Addr != bAddr || !errors.Is(rejected[0].Err, fastnet.ErrRefused) {
		t.Fatalf("server's rejections: %v, want one of %v", describeAll(rejected), bAddr)
	}
	evs := n.Events(bAddr)
	if len(evs) != 2 || evs[0].Kind != fastnet.EventConnected || evs[1].Kind != fastnet.EventDisconnected || !errors.Is(evs[1].Err, fastnet.ErrRefused) {
		t.Fatalf("late client's events: %v", describeAll(evs))
	}
	if vs := srv.ValidationStats(); vs.Refused != 1 || vs.Validated != 2 {
		t.Fatalf("validation stats %+v", vs)
	}
}

func describeAll(evs []fastnet.Event) []string {
	var s []string
	for _, ev := range evs {
		s = append(s, fastnettest.DescribeEvent(ev))
	}
	return s
}

// D25: data a client sends before it is validated is kept and delivered,
// in order, right after EventConnected.
func TestValidationDeliversEarlyData(t *testing.T) {
	n := fastnettest.NewNetwork(4)
	newValServer(t, n, fastnet.Config{MTU: fastnet.MTUConfig{Disabled: true}})
	cli := newClient(t, n, valClient, fastnet.Config{MTU: fastnet.MTUConfig{Disabled: true}})
	// The client's first heartbeat echo is lost: validation waits for the
	// next challenge, while the client already sends.
	dropped := false
	n.Filter = func(from, to netip.AddrPort, b []byte) bool {
		if from == valClient && int16(binary.BigEndian.Uint16(b)) == wireHeartbeat && b[2]&0x80 == 0 && !dropped {
			dropped = true
			return false
		}
		return true
	}
	n.SetPath(valClient, valServer, fastnettest.Link{Delay: 5 * time.Millisecond})
	h, err := cli.Connect(n.Now(), valServer)
	if err != nil {
		t.Fatal(err)
	}
	sent := 0
	n.OnEvent = func(_ clock.Time, at netip.AddrPort, ev fastnet.Event) {
		if at == valClient && ev.Kind == fastnet.EventConnected {
			for i := range 5 {
				cli.Send(n.Now(), h, 3, fmt.Appendf(nil, "early %d", i), true)
				cli.Send(n.Now(), h, 4, fmt.Appendf(nil, "update %d", i), false)
				sent++
			}
		}
	}
	if err := n.RunFor(3 * time.Second); err != nil {
		t.Fatal(err)
	}
	if !dropped || sent != 5 {
		t.Fatalf("echo dropped %v, %d sent", dropped, sent)
	}
	evs := n.Events(valServer)
	if len(evs) == 0 || evs[0].Kind != fastnet.EventConnected {
		t.Fatalf("server events %v: want Connected first", describeAll(evs))
	}
	var rel []string
	unrel := 0
	for _, ev := range evs[1:] {
		if ev.Kind != fastnet.EventMessage {
			t.Fatalf("unexpected %v", fastnettest.DescribeEvent(ev))
		}
		if ev.Reliable {
			rel = append(rel, string(ev.Data))
		} else {
			unrel++
		}
	}
	want := []string{"early 0", "early 1", "early 2", "early 3", "early 4"}
	if fmt.Sprint(rel) != fmt.Sprint(want) || unrel != 5 {
		t.Fatalf("delivered %q and %d updates, want %q and 5", rel, unrel, want)
	}
}

// D28: a client that restarts on the same address is recognised at its
// first "connect?": the old connection ends as closed by a restarted peer,
// the new one gets a new ID, and its reliable messages, numbered from 0
// again, are delivered.
func TestRestartedClient(t *testing.T) {
	n := fastnettest.NewNetwork(5)
	newValServer(t, n, fastnet.Config{MTU: fastnet.MTUConfig{Disabled: true}})
	slot := &swapNode{}
	cfg := fastnet.Config{Role: fastnet.Client, MTU: fastnet.MTUConfig{Disabled: true}, Rand: n.Rand()}
	run := func(msg string) (uint32, error) {
		ep, err := fastnet.NewEndpoint(cfg)
		if err != nil {
			return 0, err
		}
		if slot.Endpoint == nil {
			slot.Endpoint = ep
			n.Add(valClient, slot)
		}
		slot.Endpoint = ep
		h, err := ep.Connect(n.Now(), valServer)
		if err != nil {
			return 0, err
		}
		if err := n.RunUntilCond(func() bool { id, ok := ep.ConnID(h); return ok && id != 0 }, 5*time.Second); err != nil {
			return 0, err
		}
		if err := ep.Send(n.Now(), h, 0, []byte(msg), true); err != nil {
			return 0, err
		}
		id, _ := ep.ConnID(h)
		return id, n.RunFor(2 * time.Second)
	}
	id1, err := run("first life")
	if err != nil {
		t.Fatal(err)
	}
	id2, err := run("second life") // the process restarts: new state, same address
	if err != nil {
		t.Fatal(err)
	}
	if id1 == id2 {
		t.Fatalf("restarted client got the old ID %d", id1)
	}
	var got []string
	var ended error
	for _, ev := range n.Events(valServer) {
		switch ev.Kind {
		case fastnet.EventMessage:
			got = append(got, string(ev.Data))
		case fastnet.EventDisconnected:
			ended = ev.Err
		}
	}
	if fmt.Sprint(got) != "[first life second life]" {
		t.Fatalf("server delivered %q", got)
	}
	if !errors.Is(ended, fastnet.ErrPeerRestarted) {
		t.Fatalf("old connection ended with %v, want ErrPeerRestarted", ended)
	}
}

// D28: a "connect?" of the original handshake, duplicated or delayed in
// the network, never ends a live connection while it could be a retry.
func TestDelayedConnectIsRetry(t *testing.T) {
	n := fastnettest.NewNetwork(6)
	srv := newValServer(t, n, fastnet.Config{MTU: fastnet.MTUConfig{Disabled: true}})
	cli := newClient(t, n, valClient, fastnet.Config{MTU: fastnet.MTUConfig{Disabled: true}})
	// Every connect? arrives twice: once at once, once 600 ms later.
	n.SetLink(valClient, valServer, fastnettest.Link{Delay: time.Millisecond})
	var pending [][]byte
	n.Filter = func(from, to netip.AddrPort, b []byte) bool {
		if from == valClient && string(b[2:]) == "connect?" {
			pending = append(pending, append([]byte(nil), b...))
		}
		return true
	}
	h, err := cli.Connect(n.Now(), valServer)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.RunFor(600 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if len(pending) == 0 {
		t.Fatal("no connect? seen")
	}
	f := n.Filter
	n.Filter = nil
	for _, b := range pending {
		n.Inject(valClient, valServer, b)
	}
	n.Filter = f
	if err := n.RunFor(3 * time.Second); err != nil {
		t.Fatal(err)
	}
	if got := countKind(n.Events(valServer), fastnet.EventDisconnected); got != 0 || srv.NumConns() != 1 {
		t.Fatalf("a late retry ended the connection: %v", describeAll(n.Events(valServer)))
	}
	if _, ok := cli.ConnID(h); !ok {
		t.Fatal("client lost its connection")
	}
}

// newClient adds a client endpoint at addr.
func newClient(t *testing.T, n *fastnettest.Network, addr netip.AddrPort, cfg fastnet.Config) *fastnet.Endpoint {
	t.Helper()
	cfg.Role = fastnet.Client
	cfg.Rand = n.Rand()
	ep, err := fastnet.NewEndpoint(cfg)
	if err != nil {
		t.Fatal(err)
	}
	n.Add(addr, ep)
	return ep
}

// swapNode is a place on the network whose endpoint can be replaced, as a
// process restarting on the same address and port replaces its state.
type swapNode struct{ *fastnet.Endpoint }

// N33: a client's early heartbeats, which give a validating server bytes to
// answer with, stop once the server's own come at their normal interval,
// which shows it validated the client: within about a second of
// connecting, not ValidationTimeout later.
func TestEarlyHeartbeatsStopOnceValidated(t *testing.T) {
	n := fastnettest.NewNetwork(33)
	n.SetDefaultLink(fastnettest.Link{Delay: 10 * time.Millisecond})
	newValServer(t, n, fastnet.Config{MTU: fastnet.MTUConfig{Disabled: true}})
	cli := newClient(t, n, valClient, fastnet.Config{MTU: fastnet.MTUConfig{Disabled: true}})
	if _, err := cli.Connect(n.Now(), valServer); err != nil {
		t.Fatal(err)
	}
	if err := n.RunFor(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	own := 0
	n.Filter = func(from, to netip.AddrPort, b []byte) bool {
		if from == valClient && len(b) == 4 && b[0] == 0xff && b[1] == 0xfe && b[2]&0x80 != 0 {
			own++
		}
		return true
	}
	if err := n.RunFor(4 * time.Second); err != nil {
		t.Fatal(err)
	}
	// Early heartbeats would be 20 in 4 s; normal ones 4, or fewer once
	// the echoes stand for them (N54).
	if own > 5 {
		t.Errorf("client originated %d heartbeats in 4 s after validation, want at most 5", own)
	}
}

// N68: a server that closes everything while a client is still proving its
// address tells that client, which hears the reason at once rather than
// after its timeout; the server's application never hears of it. Its
// established connections close gracefully as Close does.
func TestCloseAllTellsUnvalidated(t *testing.T) {
	n := fastnettest.NewNetwork(5)
	srv := newValServer(t, n, fastnet.Config{MTU: fastnet.MTUConfig{Disabled: true}})
	other := netip.MustParseAddrPort("10.0.0.3:50000")
	est := newClient(t, n, other, fastnet.Config{MTU: fastnet.MTUConfig{Disabled: true}})
	// Without bundles: the filter below reads one packet per datagram.
	cli := newClient(t, n, valClient, fastnet.Config{MTU: fastnet.MTUConfig{Disabled: true}, NoBundles: true})
	if _, err := est.Connect(n.Now(), valServer); err != nil {
		t.Fatal(err)
	}
	if err := n.RunFor(time.Second); err != nil {
		t.Fatal(err)
	}
	// valClient's echoes of the server's challenges never arrive, its own
	// heartbeats do: its connection stays unvalidated, and what it sends
	// is the room the server has to answer it (D25).
	n.Filter = func(from, to netip.AddrPort, b []byte) bool {
		return !(from == valClient && int16(binary.BigEndian.Uint16(b)) == wireHeartbeat && b[2]&0x80 == 0)
	}
	if _, err := cli.Connect(n.Now(), valServer); err != nil {
		t.Fatal(err)
	}
	if err := n.RunFor(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	if vs := srv.ValidationStats(); vs.Unvalidated != 1 {
		t.Fatalf("validation stats %+v, want one pending", vs)
	}
	before := len(n.Events(valServer))
	srv.CloseAll(n.Now(), "maintenance")
	if err := n.RunFor(500 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	for _, addr := range []netip.AddrPort{valClient, other} {
		evs := n.Events(addr)
		last := evs[len(evs)-1]
		// The unvalidated one's reason may be cut to what its address
		// may still be sent (D25, N33).
		var pc *fastnet.PeerClosedError
		if last.Kind != fastnet.EventDisconnected || !errors.As(last.Err, &pc) || pc.Reason == "" || !strings.HasPrefix("maintenance", pc.Reason) {
			t.Errorf("%v's last event %s, want closed by peer: maintenance", addr, fastnettest.DescribeEvent(last))
		}
	}
	for _, ev := range n.Events(valServer)[before:] {
		if ev.Kind != fastnet.EventDisconnected || ev.Addr != other {
			t.Errorf("server event %s: the application hears only of its established connection", fastnettest.DescribeEvent(ev))
		}
	}
	if srv.NumConns() != 0 {
		t.Errorf("%d connections left", srv.NumConns())
	}
}
