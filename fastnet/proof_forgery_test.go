package fastnet_test

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/fastnet/fastnettest"
)

// A blind forger that knows the client's address and roughly how old its
// connection is (a minute) forges "query:ext:bundle=yes" and then echoes
// of the first 100 negative heartbeat values, 100 datagrams of 4 bytes:
// the client's heartbeats count down from -1, about one every 2 s, so its
// proof is among them. The client bundles to a server that takes no
// bundles, and the connection ends as "peer is not acknowledging", as it
// did before N156 with the answer alone.
func TestForgedProofEchoToStrictPeer(t *testing.T) {
	cli, srv := fixedMTU(1200), fixedMTU(1200)
	srv.NoBundles = true
	link := fastnettest.Link{Delay: 10 * time.Millisecond}
	s := newSim(t, simSetup{Cli: cli, Srv: srv, Up: link, Down: link})
	s.connect(5 * time.Second)
	s.run(time.Minute)
	s.net.Inject(srvAddr, cliAddr, []byte("\xff\xffquery:ext:bundle=yes"))
	s.run(15 * time.Millisecond) // the client's proof has gone
	for v := -1; v >= -100; v-- {
		b := binary.BigEndian.AppendUint16([]byte{0xff, 0xfe}, uint16(int16(v)))
		s.net.Inject(srvAddr, cliAddr, b)
	}
	s.run(50 * time.Millisecond)
	if to, _ := fastnet.BundlesNegotiated(s.ep[cliSide], s.h[cliSide]); to {
		t.Errorf("the client bundles to a server that takes no bundles, after 1 forged answer and 100 forged echoes")
	}
	for i := range 40 {
		for ch := range 3 {
			if err := s.send(cliSide, ch, []byte{byte(i), byte(ch)}, true); err != nil {
				t.Fatal(err)
			}
		}
		s.run(20 * time.Millisecond)
	}
	s.runUntil(s.settled, time.Minute)
	s.checkIntact(t)
}

// The server's count starts at a random value (D25), 15 bits: a blind
// forger echoes every positive value, 32,767 datagrams of 4 bytes (about
// 1.2 MB on the wire with the IPv4 and UDP headers).
func TestForgedProofEchoSprayToServer(t *testing.T) {
	cli, srv := fixedMTU(1200), fixedMTU(1200)
	cli.NoBundles = true
	link := fastnettest.Link{Delay: 10 * time.Millisecond}
	s := newSim(t, simSetup{Cli: cli, Srv: srv, Up: link, Down: link})
	s.connect(5 * time.Second)
	s.run(time.Minute)
	s.net.Inject(cliAddr, srvAddr, []byte("\xff\xffquery:ext:bundle=yes"))
	s.run(15 * time.Millisecond)
	for v := 1; v <= 32767; v++ {
		s.net.Inject(cliAddr, srvAddr, binary.BigEndian.AppendUint16([]byte{0xff, 0xfe}, uint16(v)))
	}
	s.run(50 * time.Millisecond)
	if to, _ := fastnet.BundlesNegotiated(s.ep[srvSide], s.h[srvSide]); to {
		t.Errorf("the server bundles to a client that takes no bundles")
	}
	for i := range 40 {
		for ch := range 3 {
			if err := s.send(srvSide, ch, []byte{byte(i), byte(ch)}, true); err != nil {
				t.Fatal(err)
			}
		}
		s.run(20 * time.Millisecond)
	}
	s.runUntil(s.settled, time.Minute)
	for side := range 2 {
		if s.ended[side] != nil {
			t.Errorf("%s: connection ended: %v", sideName(side), s.ended[side])
		}
	}
}

// What TestPropertyBlindForgery finds in about one run of five (its
// default 100 cases; -rapid.seed=2927 with -rapid.checks=500): a forged
// "query:ext:bundle=yes" to the client of a server that takes no bundles,
// and forged heartbeats of small negative values to the server, from the
// client's address. The server echoes them to the client, one of them is
// the client's proof, and the client bundles to the server, which drops
// every bundle: the connection ends.
func TestForgedProofReflectedByStrictServer(t *testing.T) {
	cli, srv := fixedMTU(1200), fixedMTU(1200)
	srv.NoBundles = true
	link := fastnettest.Link{Delay: 10 * time.Millisecond}
	s := newSim(t, simSetup{Cli: cli, Srv: srv, Up: link, Down: link})
	s.connect(5 * time.Second)
	s.net.Inject(srvAddr, cliAddr, []byte("\xff\xffquery:ext:bundle=yes"))
	s.run(15 * time.Millisecond)
	for v := -1; v >= -20; v-- {
		s.net.Inject(cliAddr, srvAddr, binary.BigEndian.AppendUint16([]byte{0xff, 0xfe}, uint16(int16(v))))
	}
	s.run(50 * time.Millisecond)
	if to, _ := fastnet.BundlesNegotiated(s.ep[cliSide], s.h[cliSide]); to {
		t.Errorf("the client bundles to a server that takes no bundles, after 1 forged answer and 20 forged heartbeats")
	}
	for i := range 40 {
		for ch := range 3 {
			if err := s.send(cliSide, ch, []byte{byte(i), byte(ch)}, true); err != nil {
				t.Fatal(err)
			}
		}
		s.run(20 * time.Millisecond)
	}
	s.runUntil(s.settled, time.Minute)
	s.checkIntact(t)
}
