package fastnettest

import "net/netip"

// natHop is what a datagram that crosses a NAT carries besides its bytes:
// the source its receiver sees, the address it was sent to, and the NAT
// that decides at its arrival where it goes, if that address is a NAT's.
type natHop struct {
	from, to netip.AddrPort
	nat      *NAT
}

// AddNAT puts a NAT with behaviour cfg at the external IP address public
// and returns it; AddBehind puts nodes behind it. A NATConfig without a
// Rand draws from the network's. AddNAT panics if public is invalid, is
// another NAT's, or is the IP of a node, or if cfg is invalid.
//
// Once a network has a NAT, every datagram is routed as follows, at the
// instant it is sent:
//   - between two nodes behind the same NAT, or two nodes behind none, it
//     goes directly, untranslated (one LAN, or the Internet);
//   - to the private address of a node behind another NAT, or behind a
//     NAT from a node behind none, it is dropped as NoRoute: private
//     addresses do not route;
//   - otherwise, from a node behind a NAT, it leaves from the external
//     address NAT.Outbound gives, and if it is bound for a NAT's external
//     address (the sender's own one included: hairpinning), that NAT
//     decides when it arrives (NAT.Inbound) which node gets it, or drops
//     it (counted in LinkStats.NAT, and by reason in NATStats).
//
// A datagram travels the link between the two nodes' own addresses, as
// the test names them: SetPath(client, server, l) sets the path between a
// node behind a NAT and a server whatever port the NAT maps, and the link
// from the server to the client's external address is the one from the
// server to the client. A datagram sent to an external port that no live
// mapping holds travels the link to that address as given. The network's
// Filter and the trace name the nodes' own addresses too.
func (n *Network) AddNAT(public netip.Addr, cfg NATConfig) *NAT {
	if cfg.Rand == nil {
		cfg.Rand = n.rng
	}
	t := NewNAT(public, cfg)
	if n.nats[t.public] != nil {
		panic("fastnettest: AddNAT of a taken address " + t.public.String())
	}
	for addr := range n.byAddr {
		if addr.Addr() == t.public {
			panic("fastnettest: AddNAT of a node's address " + t.public.String())
		}
	}
	if n.nats == nil {
		n.nats = make(map[netip.Addr]*NAT)
	}
	n.nats[t.public] = t
	t.n = n
	return t
}

// AddBehind puts node at the private address addr behind nat, a NAT of
// this network. Private addresses must be unique in the network, so give
// each NAT's LAN its own prefix. It panics as Add does, or if nat is not
// this network's.
func (n *Network) AddBehind(nat *NAT, addr netip.AddrPort, nd Node) {
	if nat == nil || nat.n != n {
		panic("fastnettest: AddBehind of a NAT of another network")
	}
	n.Add(addr, nd)
	n.byAddr[addr].nat = nat
}

// route sends the datagram b, in a pooled buffer, from the address from,
// behind nat if it is set, to the address to, in a network with NATs (see
// AddNAT).
func (n *Network) route(from netip.AddrPort, nat *NAT, to netip.AddrPort, b []byte) {
	dst := n.byAddr[to]
	switch {
	case dst != nil && dst.nat == nat:
		n.transmit(n.link(from, to), b)
		return
	case dst != nil && dst.nat != nil:
		n.refuse(n.link(from, to), b, dropNoRoute)
		return
	}
	src := from
	if nat != nil {
		ext, err := nat.Outbound(n.now, from, to)
		if err != nil {
			n.refuse(n.link(from, to), b, dropNAT)
			return
		}
		src = ext
	}
	dnat := n.nats[to.Addr()]
	if dnat == nil && src == from {
		n.transmit(n.link(from, to), b)
		return
	}
	lto := to
	if dnat != nil {
		if in, ok := dnat.Owner(n.now, to); ok {
			lto = in
		}
	}
	n.transmitHop(n.link(from, lto), b, &natHop{from: src, to: to, nat: dnat})
}

// refuse counts b as sent on l and drops it at once for c.
func (n *Network) refuse(l *link, b []byte, c dropCause) {
	l.stats.Sent++
	l.stats.SentBytes += uint64(len(b))
	n.drop(l, b, c)
}

// arrive decides where the datagram p, which crossed a NAT, goes now that
// it has come to the end of its link l: the node to hand it to and the
// source that node sees, or false if it was dropped.
func (n *Network) arrive(l *link, p packet) (*node, netip.AddrPort, bool) {
	h := p.hop
	if h.nat == nil {
		return l.dst, h.from, true
	}
	in, err := h.nat.Inbound(n.now, h.from, h.to)
	if err != nil {
		n.drop(l, p.b, dropNAT)
		return nil, netip.AddrPort{}, false
	}
	dst := n.byAddr[in]
	if dst == nil {
		n.drop(l, p.b, dropNoRoute)
		return nil, netip.AddrPort{}, false
	}
	return dst, h.from, true
}
