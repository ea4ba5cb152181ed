package udpdriver

import (
	"net/netip"

	"github.com/fastnet-engine/fastnet/driver"
	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/internal/udpio"
)

// Path MTU (D29, notes N42 to N45). The socket sets the don't-fragment bit
// (udpio), so MTU probes larger than the path are lost instead of
// fragmented. When a connection's estimation starts, the engine asks the
// driver what the system knows of the path to the peer (MTUConfig.Path):
// the kernel's path MTU, less the IP and UDP headers and the 2-byte
// channel id, which the estimator probes first; or, where the bit cannot be
// set toward that peer, the reason, and that side does not estimate.

// udpHeader is the size of a UDP header.
const udpHeader = 8

// socketPath answers MTUConfig.Path for the socket the endpoint is
// given once it is open.
type socketPath struct {
	uc *udpio.Conn // set before the engine starts
}

// hook returns the MTUConfig.Path of the endpoint: user's, if set,
// otherwise the socket's.
func (p *socketPath) hook(user func(netip.AddrPort) fastnet.PathInfo) func(netip.AddrPort) fastnet.PathInfo {
	if user != nil {
		return user
	}
	return p.info
}

// info returns what the socket knows about the path to peer.
func (p *socketPath) info(peer netip.AddrPort) fastnet.PathInfo {
	if p.uc == nil {
		return fastnet.PathInfo{}
	}
	return pathInfo(p.uc, peer)
}

// pathInfo returns what uc's system knows about the path to peer.
func pathInfo(uc *udpio.Conn, peer netip.AddrPort) fastnet.PathInfo {
	if err := uc.DontFragment(peer); err != nil {
		return fastnet.PathInfo{NoDontFragment: err.Error()}
	}
	mtu, hdr, err := uc.PathMTU(peer)
	if err != nil {
		return fastnet.PathInfo{}
	}
	return fastnet.PathInfo{PayloadMTU: max(mtu-hdr-udpHeader-2, 0)}
}

// AddStats makes the transport a driver.StatsReporter: it adds the
// datagrams the system refused as too big for the path (EMSGSIZE), which
// are lost like any other, to DriverStats.TooBig.
func (t *transport) AddStats(s *driver.Stats) {
	s.TooBig += t.uc.TooBig()
}
