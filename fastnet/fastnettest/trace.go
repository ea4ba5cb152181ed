package fastnettest

import (
	"strconv"

	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/fastnet"
)

// The trace has one line per happening, each starting with the virtual time
// as seconds since clock.Epoch with nine decimals:
//
//	0.010000000 send 10.0.0.1:1 > 10.0.0.2:2 34B #1c2d3e4f arrive=0.020000000 dup corrupt reorder
//	0.010000000 drop 10.0.0.1:1 > 10.0.0.2:2 34B #1c2d3e4f loss
//	0.010000000 queue 10.0.0.1:1 > 10.0.0.2:2 34B #1c2d3e4f depth=1534B
//	0.020000000 recv 10.0.0.1:1 > 10.0.0.2:2 34B #1c2d3e4f
//	0.025000000 timeout 10.0.0.1:1
//	0.025000000 event 10.0.0.1:1 Message conn=1 peer=10.0.0.2:2 ch=3 reliable 5B #0a1b2c3d
//	0.030000000 cut 10.0.0.1:1 - 10.0.0.2:2
//
// A send line is written per copy put in flight (a duplicate has its own,
// marked dup); #hash is the FNV-1a hash of the bytes, as they will arrive
// for a send line. A datagram that goes through a Bottleneck has a queue
// line when it enters the bottleneck's queue, with the bytes queued then
// (its own included), and its send line when it leaves it.

// appendTime appends t as seconds since clock.Epoch.
func appendTime(b []byte, t clock.Time) []byte {
	d := int64(t - clock.Epoch)
	if d < 0 {
		b = append(b, '-')
		d = -d
	}
	b = strconv.AppendInt(b, d/1e9, 10)
	b = append(b, '.')
	ns := d % 1e9
	for div := int64(1e8); div > 0; div /= 10 {
		b = append(b, byte('0'+ns/div%10))
	}
	return b
}

// appendHash appends '#' and the FNV-1a hash of p in hex.
func appendHash(b, p []byte) []byte {
	h := uint32(2166136261)
	for _, c := range p {
		h ^= uint32(c)
		h *= 16777619
	}
	const hex = "0123456789abcdef"
	b = append(b, '#')
	for shift := 28; shift >= 0; shift -= 4 {
		b = append(b, hex[h>>shift&0xf])
	}
	return b
}

// appendDatagram appends "from > to nB #hash".
func appendDatagram(b []byte, l *link, p []byte) []byte {
	b = l.from.AppendTo(b)
	b = append(b, " > "...)
	b = l.to.AppendTo(b)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(len(p)), 10)
	b = append(b, "B "...)
	return appendHash(b, p)
}

func (n *Network) traceSend(l *link, p []byte, at clock.Time, dup, corrupted, reordered bool) {
	b := appendTime(n.tbuf[:0], n.now)
	b = append(b, " send "...)
	b = appendDatagram(b, l, p)
	b = append(b, " arrive="...)
	b = appendTime(b, at)
	if dup {
		b = append(b, " dup"...)
	}
	if corrupted {
		b = append(b, " corrupt"...)
	}
	if reordered {
		b = append(b, " reorder"...)
	}
	n.tbuf = b
	n.writeTrace()
}

func (n *Network) traceQueue(l *link, p []byte, depth int) {
	b := appendTime(n.tbuf[:0], n.now)
	b = append(b, " queue "...)
	b = appendDatagram(b, l, p)
	b = append(b, " depth="...)
	b = strconv.AppendInt(b, int64(depth), 10)
	b = append(b, 'B')
	n.tbuf = b
	n.writeTrace()
}

func (n *Network) traceDrop(l *link, p []byte, c dropCause) {
	b := appendTime(n.tbuf[:0], n.now)
	b = append(b, " drop "...)
	b = appendDatagram(b, l, p)
	b = append(b, ' ')
	b = append(b, dropCauseNames[c]...)
	n.tbuf = b
	n.writeTrace()
}

func (n *Network) traceRecv(l *link, p []byte) {
	b := appendTime(n.tbuf[:0], n.now)
	b = append(b, " recv "...)
	b = appendDatagram(b, l, p)
	n.tbuf = b
	n.writeTrace()
}

// writeTrace ends the line in n.tbuf and writes it to n.Trace. A write
// error is ignored: the trace is a debugging aid.
func (n *Network) writeTrace() {
	n.tbuf = append(n.tbuf, '\n')
	n.Trace.Write(n.tbuf)
}

// DescribeEvent returns a one-line description of ev, as the trace shows
// it: its kind, connection and peer, then the fields its kind sets (see
// fastnet.EventKind), with a message's bytes as a length and a hash.
func DescribeEvent(ev fastnet.Event) string {
	return string(AppendEvent(nil, ev))
}

// AppendEvent appends DescribeEvent(ev) to b.
func AppendEvent(b []byte, ev fastnet.Event) []byte {
	b = append(b, ev.Kind.String()...)
	b = append(b, " conn="...)
	b = strconv.AppendUint(b, uint64(ev.Conn), 10)
	b = append(b, " peer="...)
	b = ev.Addr.AppendTo(b)
	switch ev.Kind {
	case fastnet.EventConnected:
		b = append(b, " id="...)
		b = strconv.AppendUint(b, uint64(ev.ID), 10)
	case fastnet.EventMessage:
		b = append(b, " ch="...)
		b = strconv.AppendInt(b, int64(ev.Channel), 10)
		if ev.Reliable {
			b = append(b, " reliable "...)
		} else {
			b = append(b, " unreliable "...)
		}
		b = strconv.AppendInt(b, int64(len(ev.Data)), 10)
		b = append(b, "B "...)
		b = appendHash(b, ev.Data)
	case fastnet.EventMTUChanged:
		b = append(b, " mtu="...)
		b = strconv.AppendInt(b, int64(ev.MTU), 10)
	case fastnet.EventOutcome:
		b = append(b, " msg="...)
		b = strconv.AppendUint(b, uint64(ev.Message), 10)
		b = append(b, ' ')
		b = append(b, ev.Outcome.String()...)
	case fastnet.EventQuality:
		q := ev.Quality
		if q == nil {
			q = &fastnet.Quality{}
		}
		b = append(b, " rtt="...)
		b = append(b, q.RTT.String()...)
		b = append(b, " rttvar="...)
		b = append(b, q.RTTVar.String()...)
		b = append(b, " minrtt="...)
		b = append(b, q.MinRTT.String()...)
		b = append(b, " loss="...)
		b = strconv.AppendFloat(b, q.Loss, 'f', 4, 64)
		b = append(b, " send="...)
		b = strconv.AppendFloat(b, q.SendRate, 'f', 0, 64)
		b = append(b, "B/s recv="...)
		b = strconv.AppendFloat(b, q.ReceiveRate, 'f', 0, 64)
		b = append(b, "B/s mtu="...)
		b = strconv.AppendInt(b, int64(q.MTU), 10)
	case fastnet.EventDisconnected:
		if s := ev.Stats; s != nil {
			b = append(b, " sent="...)
			b = strconv.AppendUint(b, s.PacketsSent, 10)
			b = append(b, " received="...)
			b = strconv.AppendUint(b, s.PacketsReceived, 10)
		}
	}
	if ev.Err != nil {
		b = append(b, " err="...)
		b = strconv.AppendQuote(b, ev.Err.Error())
	}
	return b
}
