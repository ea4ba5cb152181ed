// Package fastnettest is a deterministic simulated network for Fastnet
// endpoints, in virtual time.
//
// A [Network] holds nodes (anything with the five methods of [Node], such as
// *fastnet.Endpoint) at addresses, and a [Link] for each direction between
// two addresses, which can lose, duplicate, reorder and corrupt datagrams,
// delay them, drop those above an MTU and queue them behind a bandwidth
// limit. A Reliable link is a lossless, ordered pipe for endpoints on the
// Stream transport; [Network.CloseTransport] cuts it.
//
// Virtual time starts at clock.Epoch and moves only as the network steps:
// [Network.Step] jumps to the next arrival or node deadline, whichever is
// first, feeds it to its node, and drains that node's PollTransmit and
// PollEvent, as the endpoint contract requires. A long test of hours of
// protocol time and millions of datagrams runs in seconds. Every random
// draw comes from one PCG seeded by [NewNetwork], and every tie is broken by
// the order things were sent or added, so a run replays exactly from its
// seed; a [Network.Trace] shows it line by line.
//
// A test drives the nodes itself between steps, passing [Network.Now] as
// their now, or reacts to events from [Network.OnEvent]. The network
// starts no goroutines and never sleeps; a Network and its nodes belong to
// one goroutine.
//
// Two endpoints exchanging a message:
//
//	net := fastnettest.NewNetwork(1)
//	srvAddr := netip.MustParseAddrPort("10.0.0.1:7000")
//	cliAddr := netip.MustParseAddrPort("10.0.0.2:7000")
//	srv, _ := fastnet.NewEndpoint(fastnet.Config{Role: fastnet.Server})
//	cli, _ := fastnet.NewEndpoint(fastnet.Config{Role: fastnet.Client})
//	net.Add(srvAddr, srv)
//	net.Add(cliAddr, cli)
//	net.SetDefaultLink(fastnettest.Link{Delay: 20 * time.Millisecond, Loss: 0.1})
//
//	h, _ := cli.Connect(net.Now(), srvAddr)
//	connected := func() bool { return len(net.Events(cliAddr)) > 0 }
//	if err := net.RunUntilCond(connected, 10*time.Second); err != nil { ... }
//	cli.Send(net.Now(), h, 1, []byte("hello"), true)
//	received := func() bool { return len(net.Events(srvAddr)) >= 2 } // Connected, Message
//	if err := net.RunUntilCond(received, 10*time.Second); err != nil { ... }
//
// Links and nodes are set up before the run; the statistics of each link
// ([Network.LinkStats]) count what the network did to the datagrams.
package fastnettest
