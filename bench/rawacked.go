package main

import (
	"context"
	"fmt"
	"net"
	"net/netip"

	"golang.org/x/net/ipv4"
)

// rawAcked is the floor of W1 for a protocol that acknowledges every
// reliable message with a datagram of its own, as Fastnet 1.0 does (D13;
// until bundles, D24, let an ack ride with a reply): raw UDP in which each
// side sends, with every message, a small datagram standing for the ack of
// the message it received, after the message and in the same sendmmsg
// call. Four datagrams per round trip instead of two: the cost of that
// structure alone, with no protocol work.
type rawAcked struct{}

// ackSize is the length of a Fastnet ack datagram for one packet: the
// packet header and one channel-sequence pair (D13).
const ackSize = 9

func (rawAcked) Name() string { return "raw-udp-acked" }

func (rawAcked) Supports(w Workload) bool { return w.Name == "W1" }

// skipAcks reads datagrams until one that is not an ack arrives.
func skipAcks(uc *net.UDPConn) func([]byte) (int, netip.AddrPort, error) {
	return func(b []byte) (int, netip.AddrPort, error) {
		for {
			n, from, err := uc.ReadFromUDPAddrPort(b)
			if err != nil || n != ackSize {
				return n, from, err
			}
		}
	}
}

// writeAcked writes b and then an ack to to, in one batch.
func writeAcked(pc *ipv4.PacketConn) func([]byte, netip.AddrPort) error {
	ack := make([]byte, ackSize)
	ms := []ipv4.Message{{Buffers: [][]byte{nil}}, {Buffers: [][]byte{ack}}}
	return func(b []byte, to netip.AddrPort) error {
		addr := net.UDPAddrFromAddrPort(to)
		ms[0].Buffers[0], ms[0].Addr, ms[1].Addr = b, addr, addr
		for done := 0; done < len(ms); {
			n, err := pc.WriteBatch(ms[done:], 0)
			if err != nil {
				return err
			}
			done += n
		}
		return nil
	}
}

func (rawAcked) Server(ctx context.Context, w Workload, o Options, ready func(string)) (Metrics, error) {
	if w.Size == ackSize {
		return nil, fmt.Errorf("%s: a message of %d bytes is taken for an ack", rawAcked{}.Name(), w.Size)
	}
	uc, err := listenUDP(o)
	if err != nil {
		return nil, err
	}
	defer uc.Close()
	ready(uc.LocalAddr().String())
	return echo(ctx, uc, skipAcks(uc), writeAcked(ipv4.NewPacketConn(uc)))
}

func (rawAcked) Client(ctx context.Context, w Workload, o Options, addr string) (Metrics, error) {
	uc, to, err := clientUDP(o, addr)
	if err != nil {
		return nil, err
	}
	defer uc.Close()
	read, write := skipAcks(uc), writeAcked(ipv4.NewPacketConn(uc))
	return pingPong(ctx, w, uc,
		func(b []byte) (int, error) { n, _, err := read(b); return n, err },
		func(b []byte) error { return write(b, to) })
}
