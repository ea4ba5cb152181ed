package fastnet

import "net/netip"

// SetLiveReceivers sets how many receivers and senders ep's connections
// keep, for good, before they park those of channels that fall idle (N25),
// so that tests with few channels make them park and revive all the time.
func SetLiveReceivers(ep *Endpoint, n int) { ep.liveReceivers, ep.liveCap = n, n }

// SetRuns turns on or off, for ep, the in-place making of a bundle's
// first-time packets (N101), for tests that compare the two.
func SetRuns(ep *Endpoint, on bool) { ep.noRuns = !on }

// Runs returns how many first-time packets ep wrote in place in bundles,
// and how many packets of bundles its receivers took in runs (N101).
func Runs(ep *Endpoint) (sent, taken uint64) { return ep.runSent, ep.runTaken }

// SharedRuns returns how many of the packets Runs counts as written in
// place went in a turn of a channel that shared the ring (N122).
func SharedRuns(ep *Endpoint) uint64 { return ep.runShared }

// Batched returns how many bundles ep took apart with digests that
// HandleDatagrams computed across datagrams (N102).
func Batched(ep *Endpoint) uint64 { return ep.batched }

// BundlesNegotiated reports, for connection h of ep, whether its peer
// answered "query:ext:bundle=yes" and echoed a heartbeat sent to it in a
// bundle (ep may send it bundles, N156) and whether ep answered it so (ep
// takes its bundles) (D24).
func BundlesNegotiated(ep *Endpoint, h Handle) (to, from bool) {
	c := ep.conns[h]
	if c == nil {
		return false, false
	}
	return c.bundleTo, c.bundleFrom
}

// IntroToken returns the token ep holds for introduction id, zero if none
// (X6).
func IntroToken(ep *Endpoint, id IntroID) [16]byte {
	if in := ep.intros.byID[id]; in != nil {
		return in.token
	}
	return [16]byte{}
}

// AppendIntroGo appends an "intro=" payload to b (X6), for forgeries.
func AppendIntroGo(b []byte, req uint32, id IntroID, role uint8, peer uint32, addr netip.AddrPort) []byte {
	return appendExt(b, &extMsg{kind: extIntroGo, req: req, id: id, role: role, ttl: 30000, target: peer, addr: addr}, nil)
}

// AppendIntroOffer appends an "intro>" payload to b (X5).
func AppendIntroOffer(b []byte, id IntroID, initiator uint32, addr netip.AddrPort) []byte {
	return appendExt(b, &extMsg{kind: extIntroOffer, id: id, target: initiator, addr: addr}, nil)
}

// AppendIntroAccept appends an "intro+" payload to b (X5).
func AppendIntroAccept(b []byte, id IntroID) []byte {
	return appendExt(b, &extMsg{kind: extIntroAccept, id: id}, nil)
}

// AppendIntroRequest appends an "intro?" payload to b (X4).
func AppendIntroRequest(b []byte, req, target uint32) []byte {
	return appendExt(b, &extMsg{kind: extIntroReq, req: req, target: target}, nil)
}

// ProvedAddrs returns the addresses ep proved for introduction id (X11).
func ProvedAddrs(ep *Endpoint, id IntroID) []netip.AddrPort {
	var out []netip.AddrPort
	if in := ep.intros.byID[id]; in != nil {
		for i := range in.npaths {
			if in.paths[i].proved {
				out = append(out, in.paths[i].addr)
			}
		}
	}
	return out
}

// RelayPassword is the relay group's password for token (X13).
func RelayPassword(token [16]byte) uint32 { return relayPassword(&token) }

// IntroCount returns the introductions ep keeps.
func IntroCount(ep *Endpoint) int { return ep.intros.n() }
