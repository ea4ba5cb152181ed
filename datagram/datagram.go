// Package datagram holds the one type the engine's drivers and their
// transports exchange: a datagram with its peer's address. It is the
// bottom of the driver layer, neutral about the transport: the UDP driver
// reads and writes these in batches, the TCP driver frames them on a
// stream, and a transport of your own (see package driver) needs nothing
// else.
package datagram

import (
	"iter"
	"net/netip"
)

// Message is one datagram, or, after a read with receive offload, several
// datagrams from one sender (see Seg).
type Message struct {
	// Buf is the datagram's storage. A read fills Buf from its start (a
	// datagram longer than len(Buf) is truncated); a write sends all of
	// Buf.
	Buf []byte
	// N is the length of the datagram a read put in Buf: Buf[:N].
	N int
	// Addr is the sender (read) or the destination (write).
	Addr netip.AddrPort
	// Local is, after a read, the local address the datagram was sent
	// to, where the transport reports it (a UDP socket bound to an
	// unspecified address, on Linux), else the zero Addr; for a write,
	// the local address to send it from, the zero Addr letting the
	// system choose. A server on a host of several addresses answers
	// each peer from the address the peer sent to (N149).
	Local netip.Addr
	// Seg is set by a read when several datagrams from Addr arrived at
	// once (receive offload): Buf[:N] then holds datagrams of Seg bytes
	// each, the last one possibly shorter. It is 0 for a single datagram.
	// Read the datagrams with Datagrams.
	Seg int
}

// Datagrams returns the datagrams a read put in m: Buf[:N], cut into
// pieces of Seg bytes if Seg is set. Each has no capacity beyond its end.
func (m *Message) Datagrams() iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		b, seg := m.Buf[:m.N:m.N], m.Seg
		if seg <= 0 || seg >= len(b) {
			yield(b)
			return
		}
		for len(b) > 0 {
			n := min(seg, len(b))
			if !yield(b[:n:n]) {
				return
			}
			b = b[n:]
		}
	}
}
