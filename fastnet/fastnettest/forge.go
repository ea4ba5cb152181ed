package fastnettest

import "net/netip"

// A Forger plays an off-path attacker: it sends datagrams from any source
// address it names, as a host that can forge IP sources does, and sees
// nothing that is sent back. It counts what it forged, so that a test can
// compare it with what a server sent the addresses it named (the
// reflection and amplification that address validation bounds, D25).
type Forger struct {
	n    *Network
	sent map[linkKey]uint64 // bytes forged, by (source, destination)
}

// Forger returns a Forger on n.
func (n *Network) Forger() *Forger {
	return &Forger{n: n, sent: make(map[linkKey]uint64)}
}

// Send sends b from from to to, whatever node (if any) is at from. The
// link from from to to acts on it as on any other datagram.
func (f *Forger) Send(from, to netip.AddrPort, b []byte) {
	f.sent[linkKey{from, to}] += uint64(len(b))
	f.n.Inject(from, to, b)
}

// Forged returns the bytes sent from from to to with Send.
func (f *Forger) Forged(from, to netip.AddrPort) uint64 {
	return f.sent[linkKey{from, to}]
}

// Reflected returns the bytes (and datagrams) that the node at server
// sent to victim, delivered or not: the traffic a forged source drew
// onto the address it named.
func (f *Forger) Reflected(server, victim netip.AddrPort) (bytes, datagrams uint64) {
	s := f.n.LinkStats(server, victim)
	return s.SentBytes, s.Sent
}
