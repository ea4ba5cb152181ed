package fastnettest_test

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/fastnet/fastnettest"
)

// Two endpoints exchange messages over a lossy, slow link: the server
// answers each message from OnEvent, and the test waits for the answers.
func Example() {
	net := fastnettest.NewNetwork(1)
	srvAddr := netip.MustParseAddrPort("10.0.0.1:7000")
	cliAddr := netip.MustParseAddrPort("10.0.0.2:7000")
	srv, err := fastnet.NewEndpoint(fastnet.Config{Role: fastnet.Server, Rand: net.Rand()})
	if err != nil {
		panic(err)
	}
	cli, err := fastnet.NewEndpoint(fastnet.Config{Role: fastnet.Client, Rand: net.Rand()})
	if err != nil {
		panic(err)
	}
	net.Add(srvAddr, srv)
	net.Add(cliAddr, cli)
	net.SetDefaultLink(fastnettest.Link{Loss: 0.2, Delay: 40 * time.Millisecond, Jitter: 10 * time.Millisecond})

	net.OnEvent = func(now clock.Time, node netip.AddrPort, ev fastnet.Event) {
		if node == srvAddr && ev.Kind == fastnet.EventMessage {
			srv.Send(now, ev.Conn, ev.Channel, append([]byte("re: "), ev.Data...), true)
		}
	}

	h, err := cli.Connect(net.Now(), srvAddr)
	if err != nil {
		panic(err)
	}
	connected := func() bool { return len(net.Events(cliAddr)) > 0 }
	if err := net.RunUntilCond(connected, 10*time.Second); err != nil {
		panic(err)
	}
	fmt.Println("client:", net.TakeEvents(cliAddr)[0].Kind)

	for _, msg := range []string{"hello", "world"} {
		if err := cli.Send(net.Now(), h, 1, []byte(msg), true); err != nil {
			panic(err)
		}
	}
	answered := func() bool { return len(net.Events(cliAddr)) == 2 }
	if err := net.RunUntilCond(answered, 10*time.Second); err != nil {
		panic(err)
	}
	for _, ev := range net.Events(cliAddr) {
		fmt.Printf("client: %s on channel %d: %s\n", ev.Kind, ev.Channel, ev.Data)
	}
	// Output:
	// client: Connected
	// client: Message on channel 1: re: hello
	// client: Message on channel 1: re: world
}
