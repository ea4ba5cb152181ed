package fastnettest_test

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/fastnet/fastnettest"
)

// A Fastnet client behind a port-restricted NAT connects to a public
// server, which knows it by the NAT's external address; a datagram that a
// stranger sends to that address is filtered by the NAT.
func ExampleNetwork_AddNAT() {
	net := fastnettest.NewNetwork(1)
	srvAddr := netip.MustParseAddrPort("198.51.100.1:7000")
	cliAddr := netip.MustParseAddrPort("192.168.1.10:5000")
	srv, err := fastnet.NewEndpoint(fastnet.Config{Role: fastnet.Server, Rand: net.Rand()})
	if err != nil {
		panic(err)
	}
	cli, err := fastnet.NewEndpoint(fastnet.Config{Role: fastnet.Client, Rand: net.Rand()})
	if err != nil {
		panic(err)
	}
	home := net.AddNAT(netip.MustParseAddr("203.0.113.1"), fastnettest.PortRestricted.Config())
	net.Add(srvAddr, srv)
	net.AddBehind(home, cliAddr, cli)
	net.SetPath(cliAddr, srvAddr, fastnettest.Link{Delay: 20 * time.Millisecond})

	if _, err := cli.Connect(net.Now(), srvAddr); err != nil {
		panic(err)
	}
	// The server reports the connection once the client has proved its
	// address (D25), a round trip after the client's own event.
	connected := func() bool { return len(net.Events(cliAddr)) > 0 && len(net.Events(srvAddr)) > 0 }
	if err := net.RunUntilCond(connected, 10*time.Second); err != nil {
		panic(err)
	}
	fmt.Println("client:", net.Events(cliAddr)[0].Kind)
	fmt.Println("server sees the client at", net.Events(srvAddr)[0].Addr)

	stranger := netip.MustParseAddrPort("198.51.100.2:7000")
	net.Inject(stranger, net.Events(srvAddr)[0].Addr, []byte{0xff, 0xff, 'h', 'i'})
	if err := net.RunFor(time.Second); err != nil {
		panic(err)
	}
	fmt.Println("filtered:", home.Stats().Filtered)
	// Output:
	// client: Connected
	// server sees the client at 203.0.113.1:20000
	// filtered: 1
}
