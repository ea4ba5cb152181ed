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
// A [Bottleneck] ([Network.NewBottleneck]) is one narrow link that several
// links share: one FIFO queue with a tail-drop limit in bytes, one rate
// (which [Bottleneck.SetRate] changes mid-run) and a propagation delay, so
// that flows between different pairs of addresses compete for it as flows
// through a router's slow interface do; [Link.Bottleneck] routes a link
// through it, and [Bottleneck.Stats] counts what it offered, forwarded and
// dropped and how deep its queue grew.
//
// A [NAT] ([Network.AddNAT]) translates the addresses of the nodes put
// behind it ([Network.AddBehind]) as RFC 4787 describes: a mapping
// behaviour and a filtering behaviour (each endpoint-independent,
// address-dependent or address-and-port-dependent; [FullCone],
// [AddressRestricted], [PortRestricted] and [Symmetric] are presets), a
// mapping timeout, hairpinning on or off, and a port assignment. Nodes
// behind one NAT share a LAN; a NAT is also a pure state machine
// ([NAT.Outbound], [NAT.Inbound]) that a test can drive by itself. The
// hole punching these model is designed in docs/nat.md.
//
// Virtual time starts at clock.Epoch and moves only as the network steps:
// [Network.Step] jumps to the next arrival or node deadline, whichever is
// first, feeds it to its node, and drains that node's PollTransmit and
// PollEvent, as the endpoint contract requires. With [Network.Batch] a
// node is handed the datagrams that arrive at one instant, or with
// [Network.ReadEvery] since its last read, together, through
// HandleDatagrams if it is a [BatchNode], as a driver reading several at
// once does. A long test of hours of
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
// A test of two endpoints, in outline (the package Example runs it in
// full):
//
//	net := fastnettest.NewNetwork(1)
//	srv, _ := fastnet.NewEndpoint(fastnet.Config{Role: fastnet.Server, Rand: net.Rand()})
//	cli, _ := fastnet.NewEndpoint(fastnet.Config{Role: fastnet.Client, Rand: net.Rand()})
//	net.Add(srvAddr, srv)
//	net.Add(cliAddr, cli)
//	net.SetDefaultLink(fastnettest.Link{Loss: 0.2, Delay: 40 * time.Millisecond})
//
//	h, _ := cli.Connect(net.Now(), srvAddr)
//	connected := func() bool { return len(net.Events(cliAddr)) > 0 }
//	if err := net.RunUntilCond(connected, 10*time.Second); err != nil { ... }
//	cli.Send(net.Now(), h, 1, []byte("hello"), true)
//	if err := net.RunFor(time.Second); err != nil { ... }
//	evs := net.Events(srvAddr) // Connected, then Message "hello"
//
// Each link counts what it did to its datagrams ([Network.LinkStats]), and
// the Run methods return [ErrLivelock] rather than spin when virtual time
// stands still.
//
// Fastnet packets carry no checksum of their own: the specification leaves
// integrity to the transport, and UDP drops most damaged datagrams. A Link
// with Corrupt delivers damaged datagrams, as a transport without checksums
// would; with UDPChecksum as well, it drops those that UDP's checksum
// catches (every single-bit flip) and delivers only the few whose flips
// cancel out in it. An endpoint drops what it cannot parse and checks each
// message against its checksum (D3, N15 in docs/protocol.md), but nothing
// of Fastnet's covers channel ids, sequence numbers or acks: damage there
// that reaches an endpoint can misdirect or stall data.
package fastnettest
