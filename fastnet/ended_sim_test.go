package fastnet_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/fastnet/fastnettest"
)

// N123: a client endpoint that closes its own connection (the server hears its
// "disconnect") and connects again from the same address at once is given
// a connection, as before N123: its old connection is gone, so a late
// retry could not be kept alive by it, and there is nothing to refuse.
// Endpoints that keep one socket for several connections (a Peer's Dial,
// a client endpoint that Connects again) reconnect from the same port.
func TestReconnectAfterOwnClose(t *testing.T) {
	n := fastnettest.NewNetwork(7)
	newValServer(t, n, fastnet.Config{MTU: fastnet.MTUConfig{Disabled: true}})
	cli := newClient(t, n, valClient, fastnet.Config{MTU: fastnet.MTUConfig{Disabled: true}})
	h, err := cli.Connect(n.Now(), valServer)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.RunUntilCond(func() bool { return countKind(n.Events(valServer), fastnet.EventConnected) == 1 }, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := cli.Close(n.Now(), h, "done"); err != nil {
		t.Fatal(err)
	}
	if err := n.RunUntilCond(func() bool { return countKind(n.Events(valServer), fastnet.EventDisconnected) == 1 }, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Connect(n.Now(), valServer); err != nil {
		t.Fatal(err)
	}
	if err := n.RunFor(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	if got := countKind(n.Events(valClient), fastnet.EventConnected); got != 2 {
		t.Fatalf("client events %v: want a second EventConnected", describeAll(n.Events(valClient)))
	}
}

// X19: a peer that was the client of a connection that ended early keeps
// no record of it (only server-role ends are kept, N123): a connect? from
// that address, the other peer now dialling it, opens a connection.
func TestPeerClientRoleEndNotRemembered(t *testing.T) {
	n := fastnettest.NewNetwork(8)
	aAddr := netip.MustParseAddrPort("10.0.0.5:4000")
	bAddr := netip.MustParseAddrPort("10.0.0.6:4000")
	pcfg := fastnet.Config{Role: fastnet.Peer, AcceptStrangers: true, MTU: fastnet.MTUConfig{Disabled: true}, Rand: n.Rand()}
	a, err := fastnet.NewEndpoint(pcfg)
	if err != nil {
		t.Fatal(err)
	}
	pcfg.Rand = n.Rand()
	b, err := fastnet.NewEndpoint(pcfg)
	if err != nil {
		t.Fatal(err)
	}
	n.Add(aAddr, a)
	n.Add(bAddr, b)
	// A is the client of A-B; B aborts it at once; A hears it.
	if _, err := a.Connect(n.Now(), bAddr); err != nil {
		t.Fatal(err)
	}
	if err := n.RunUntilCond(func() bool { return countKind(n.Events(bAddr), fastnet.EventConnected) == 1 }, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	bh := n.Events(bAddr)[0].Conn
	if err := b.Abort(n.Now(), bh, "bye"); err != nil {
		t.Fatal(err)
	}
	if err := n.RunUntilCond(func() bool { return countKind(n.Events(aAddr), fastnet.EventDisconnected) == 1 }, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	// Now B dials A: A, whose ended connection to B was client-role,
	// must take it.
	if _, err := b.Connect(n.Now(), aAddr); err != nil {
		t.Fatal(err)
	}
	if err := n.RunFor(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	if got := countKind(n.Events(aAddr), fastnet.EventConnected); got != 2 {
		t.Fatalf("A's events %v: want a second EventConnected", describeAll(n.Events(aAddr)))
	}
}

// N123, D25: a forged "connect?" naming a real client's address opens an unvalidated
// connection that nobody echoes; it ends silently at the validation
// timeout, long after any retry of a handshake it could belong to was sent
// (a client retries for ConnectTimeout, 5 s, from before the connect? came;
// the validation timeout is 10 s). The real client connecting afterwards
// is given a connection, as before N123, not refused "connection ended".
func TestForgedConnectDoesNotLockOutAddress(t *testing.T) {
	// Whatever the server's connect timeout (N141): a record of the
	// forged connection lasted as long as it, so that with a day the
	// client was refused for a day.
	for _, connectTimeout := range []time.Duration{0, time.Minute, 24 * time.Hour} {
		t.Run(connectTimeout.String(), func(t *testing.T) {
			n := fastnettest.NewNetwork(9)
			newValServer(t, n, fastnet.Config{MTU: fastnet.MTUConfig{Disabled: true}, ConnectTimeout: connectTimeout})
			cli := newClient(t, n, valClient, fastnet.Config{MTU: fastnet.MTUConfig{Disabled: true}})
			// The attacker sees nothing, and does not know the client's
			// "connected"; it sends one datagram naming the client's
			// address.
			n.Forger().Send(valClient, valServer, []byte("\xff\xffconnect?"))
			if err := n.RunFor(10*time.Second + 100*time.Millisecond); err != nil {
				t.Fatal(err)
			}
			if _, err := cli.Connect(n.Now(), valServer); err != nil {
				t.Fatal(err)
			}
			if err := n.RunFor(2 * time.Second); err != nil {
				t.Fatal(err)
			}
			if got := countKind(n.Events(valClient), fastnet.EventConnected); got != 1 {
				t.Fatalf("client events %v: want EventConnected", describeAll(n.Events(valClient)))
			}
		})
	}
}
