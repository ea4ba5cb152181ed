package fastnet_test

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/fastnet/fastnettest"
)

// strictSim connects a client and a server on a clean 10 ms path, side
// strict taking no bundles, as a strict 1.0 peer (N156).
func strictSim(t *testing.T, strict int) *sim {
	t.Helper()
	var cfg [2]fastnet.Config
	cfg[cliSide], cfg[srvSide] = fixedMTU(1200), fixedMTU(1200)
	cfg[strict].NoBundles = true
	link := fastnettest.Link{Delay: 10 * time.Millisecond}
	s := newSim(t, simSetup{Cli: cfg[cliSide], Srv: cfg[srvSide], Up: link, Down: link})
	s.connect(5 * time.Second)
	return s
}

// forgeHeartbeats injects from to to heartbeats of every value in
// [first, last], in order.
func (s *sim) forgeHeartbeats(from, to netip.AddrPort, first, last int) {
	step := 1
	if last < first {
		step = -1
	}
	for v := first; v != last+step; v += step {
		s.net.Inject(from, to, binary.BigEndian.AppendUint16([]byte{0xff, 0xfe}, uint16(int16(v))))
	}
}

// wantUnbundled fails unless side, whose peer takes no bundles, does not
// bundle to it and still delivers every reliable message of 40 rounds
// (sendRounds), its connection up.
func (s *sim) wantUnbundled(t *testing.T, side int) {
	t.Helper()
	if to, _ := fastnet.BundlesNegotiated(s.ep[side], s.h[side]); to {
		t.Errorf("the %s bundles to a peer that takes no bundles", sideName(side))
	}
	s.sendRounds(side)
	for x := range 2 {
		if s.ended[x] != nil {
			t.Fatalf("%s: connection ended: %v", sideName(x), s.ended[x])
		}
	}
	if s.led[1-side].pendingRel != 0 {
		t.Fatalf("%d reliable messages missing, first %s", s.led[1-side].pendingRel, s.led[1-side].firstMissing())
	}
}

// N156: a blind forger that knows the client's address and roughly how
// old its connection is (a minute) forges "query:ext:bundle=yes", then
// echoes of the first 100 negative heartbeat values, 100 datagrams of 4
// bytes. When a client's heartbeats counted down from -1, about one every
// 2 s, its proof was among them: it bundled to a server that takes no
// bundles, and the connection ended as "peer is not acknowledging". They
// now count down from a value drawn at random, and an echo of a value
// never sent stops the proving.
func TestForgedProofEchoToStrictPeer(t *testing.T) {
	s := strictSim(t, srvSide)
	s.run(time.Minute)
	s.net.Inject(srvAddr, cliAddr, []byte("\xff\xffquery:ext:bundle=yes"))
	s.run(15 * time.Millisecond) // the client's proof has gone
	s.forgeHeartbeats(srvAddr, cliAddr, -1, -100)
	s.run(50 * time.Millisecond)
	s.wantUnbundled(t, cliSide)
}

// N156: the server's count starts at a random value (D25), 15 bits: a
// blind forger echoes every positive value, 32,767 datagrams of 4 bytes
// (about 1.2 MB on the wire with the IPv4 and UDP headers). The first
// echo of a value the server never sent stops its proving.
func TestForgedProofEchoSprayToServer(t *testing.T) {
	s := strictSim(t, cliSide)
	s.run(time.Minute)
	s.net.Inject(cliAddr, srvAddr, []byte("\xff\xffquery:ext:bundle=yes"))
	s.run(15 * time.Millisecond)
	s.forgeHeartbeats(cliAddr, srvAddr, 1, 32767)
	s.run(50 * time.Millisecond)
	s.wantUnbundled(t, srvSide)
}

// N156: what TestPropertyBlindForgery found in about one run of five: a
// forged "query:ext:bundle=yes" to the client of a server that takes no
// bundles, and forged heartbeats of small negative values to the server,
// from the client's address. The server echoes them to the client; when
// the client's heartbeats counted down from -1, one of them was its
// proof, and the client bundled to the server, which dropped every
// bundle: the connection ended.
func TestForgedProofReflectedByStrictServer(t *testing.T) {
	s := strictSim(t, srvSide)
	s.net.Inject(srvAddr, cliAddr, []byte("\xff\xffquery:ext:bundle=yes"))
	s.run(15 * time.Millisecond)
	s.forgeHeartbeats(cliAddr, srvAddr, -1, -20)
	s.run(50 * time.Millisecond)
	s.wantUnbundled(t, cliSide)
}
