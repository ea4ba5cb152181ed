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

// Two clients send to one server through one shared bottleneck of
// 20 Mbit/s (2.5 MB/s) with a 40 ms round trip and a queue of one
// bandwidth-delay product, whose rate halves during the transfer; the
// server's answers come back through a bottleneck of their own.
func ExampleNetwork_NewBottleneck() {
	net := fastnettest.NewNetwork(1)
	srvAddr := netip.MustParseAddrPort("10.0.0.1:7000")
	srv, err := fastnet.NewEndpoint(fastnet.Config{Role: fastnet.Server, Rand: net.Rand()})
	if err != nil {
		panic(err)
	}
	net.Add(srvAddr, srv)
	bn := fastnettest.BottleneckConfig{Rate: 2_500_000, Delay: 20 * time.Millisecond, QueueLimit: 100_000, Overhead: 28}
	up, down := net.NewBottleneck(bn), net.NewBottleneck(bn)

	received := 0
	net.OnEvent = func(now clock.Time, node netip.AddrPort, ev fastnet.Event) {
		if node == srvAddr && ev.Kind == fastnet.EventMessage {
			received++
		}
	}
	for i := range 2 {
		cliAddr := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 1, byte(i)}), 7000)
		cli, err := fastnet.NewEndpoint(fastnet.Config{Role: fastnet.Client, Rand: net.Rand()})
		if err != nil {
			panic(err)
		}
		net.Add(cliAddr, cli)
		net.SetLink(cliAddr, srvAddr, fastnettest.Link{Bottleneck: up})
		net.SetLink(srvAddr, cliAddr, fastnettest.Link{Bottleneck: down})
		h, err := cli.Connect(net.Now(), srvAddr)
		if err != nil {
			panic(err)
		}
		if err := net.RunUntilCond(func() bool { return len(net.Events(cliAddr)) > 0 }, 10*time.Second); err != nil {
			panic(err)
		}
		for range 10 {
			if err := cli.Send(net.Now(), h, 1, make([]byte, 1000), true); err != nil {
				panic(err)
			}
		}
	}
	if err := net.RunFor(100 * time.Millisecond); err != nil {
		panic(err)
	}
	up.SetRate(up.Rate() / 2)
	if err := net.RunUntilCond(func() bool { return received == 20 }, 10*time.Second); err != nil {
		panic(err)
	}
	st := up.Stats()
	fmt.Println("messages received:", received)
	fmt.Println("rate now:", up.Rate(), "B/s")
	fmt.Println("queue within its limit:", st.MaxQueuedBytes <= up.QueueLimit())
	fmt.Println("every datagram accounted for:", st.Offered == st.Forwarded+st.Dropped+uint64(st.Queued))
	// Output:
	// messages received: 20
	// rate now: 1250000 B/s
	// queue within its limit: true
	// every datagram accounted for: true
}
