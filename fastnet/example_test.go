package fastnet_test

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/fastnet"
)

// An echo server that drives the engine from its own loop over a UDP
// socket: read or wait until the next deadline, feed the endpoint, then
// drain its events (answering messages) and the datagrams they produced.
func Example_echoServer() {
	sock, err := net.ListenUDP("udp", &net.UDPAddr{Port: 7000})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	defer sock.Close()
	ep, err := fastnet.NewEndpoint(fastnet.Config{Role: fastnet.Server})
	if err != nil {
		fmt.Fprintln(os.Stderr, err) // a Config out of its bounds
		return
	}
	clk := clock.NewReal()
	in, out := make([]byte, 65536), make([]byte, 65536)
	var ev fastnet.Event
	for {
		deadline := time.Time{}
		if d, ok := ep.NextDeadline(); ok {
			deadline = clk.Deadline(d)
		}
		sock.SetReadDeadline(deadline)
		n, from, err := sock.ReadFromUDPAddrPort(in)
		now := clk.Now()
		switch {
		case err == nil:
			ep.HandleDatagram(now, netip.AddrPortFrom(from.Addr().Unmap(), from.Port()), in[:n])
		case errors.Is(err, os.ErrDeadlineExceeded):
			ep.HandleTimeout(now)
		default:
			fmt.Fprintln(os.Stderr, err)
			return
		}
		for ep.NextEvent(&ev) { // or ev, ok := ep.PollEvent(), which copies more
			if ev.Kind != fastnet.EventMessage {
				continue
			}
			// ErrQueueFull when the send queue is full: this server
			// drops the echo; one that must not waits for EventWritable.
			if err := ep.Send(now, ev.Conn, ev.Channel, ev.Data, ev.Reliable); err != nil {
				fmt.Fprintln(os.Stderr, "echo:", err)
			}
		}
		for {
			t, ok := ep.PollTransmit(now, out)
			if !ok {
				break
			}
			// A datagram that fails to go is lost, as on the network:
			// the engine resends what must arrive.
			if _, err := sock.WriteToUDPAddrPort(out[:t.N], t.To); err != nil {
				fmt.Fprintln(os.Stderr, "write:", err)
			}
		}
	}
}

// Two endpoints joined in memory and driven in virtual time: the loop of
// Example_echoServer with a slice for a network and a manual clock.
func Example_virtualTime() {
	clk := clock.NewManual(0)
	cli, _ := fastnet.NewEndpoint(fastnet.Config{Role: fastnet.Client})
	srv, _ := fastnet.NewEndpoint(fastnet.Config{Role: fastnet.Server})
	cliAddr := netip.MustParseAddrPort("192.0.2.1:5000")
	srvAddr := netip.MustParseAddrPort("192.0.2.2:7000")
	h, _ := cli.Connect(clk.Now(), srvAddr)
	buf := make([]byte, 65536)
	sent := false
	for step := 0; step < 100; step++ {
		now := clk.Now()
		for t, ok := cli.PollTransmit(now, buf); ok; t, ok = cli.PollTransmit(now, buf) {
			srv.HandleDatagram(now, cliAddr, buf[:t.N])
		}
		for t, ok := srv.PollTransmit(now, buf); ok; t, ok = srv.PollTransmit(now, buf) {
			cli.HandleDatagram(now, srvAddr, buf[:t.N])
		}
		for ev, ok := cli.PollEvent(); ok; ev, ok = cli.PollEvent() {
			fmt.Println("client:", ev.Kind)
			if ev.Kind == fastnet.EventConnected && !sent {
				cli.Send(now, h, 5, []byte("hello, server"), true)
				sent = true
			}
		}
		for ev, ok := srv.PollEvent(); ok; ev, ok = srv.PollEvent() {
			if ev.Kind == fastnet.EventMessage {
				fmt.Printf("server: channel %d: %s\n", ev.Channel, ev.Data)
				return
			}
			fmt.Println("server:", ev.Kind)
		}
		clk.Advance(time.Millisecond)
		cli.HandleTimeout(clk.Now())
		srv.HandleTimeout(clk.Now())
	}
	// Output:
	// client: Connected
	// server: Connected
	// server: channel 5: hello, server
}
