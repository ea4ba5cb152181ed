package fastnet_test

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/coalesce"
	"github.com/fastnet-engine/fastnet/fastnet"
)

// A driver reuses its read buffer: after a batch, a packet at the very
// address and length of the batch's last message, but with other bytes
// (a bad checksum), must not be taken with the digest computed for the
// batch (N121: streamPre cleared after each packet).
func TestStreamBatchDigestNotReused(t *testing.T) {
	from := netip.MustParseAddrPort("192.0.2.1:1000")
	now := clock.Epoch
	ep, err := fastnet.NewEndpoint(fastnet.Config{Role: fastnet.Server, Transport: fastnet.Stream})
	if err != nil {
		t.Fatal(err)
	}
	ep.HandleDatagram(now, from, []byte("\xff\xffconnect?"))
	out := make([]byte, 1<<16)
	drain := func() (msgs int, ended bool) {
		for {
			if _, ok := ep.PollTransmit(now, out); !ok {
				break
			}
		}
		var ev fastnet.Event
		for ep.NextEvent(&ev) {
			switch ev.Kind {
			case fastnet.EventMessage:
				msgs++
			case fastnet.EventDisconnected:
				ended = true
			}
		}
		return
	}
	drain()
	packet := func(fill byte) []byte {
		b := binary.BigEndian.AppendUint16(nil, 1)
		return coalesce.AppendMessage(b, bytes.Repeat([]byte{fill}, 64), true)
	}
	p1, p2 := packet(1), packet(2)
	buf := append(append([]byte(nil), p1...), p2...) // one read buffer
	ep.HandleDatagrams(now, []fastnet.Incoming{{From: from, Data: buf[:len(p1)]}, {From: from, Data: buf[len(p1):]}})
	if n, ended := drain(); n != 2 || ended {
		t.Fatalf("batch: %d messages, ended %v", n, ended)
	}
	// The buffer refilled: at the last packet's place, a message whose
	// payload differs from the one the digest was computed for.
	copy(buf[len(p1):], p2)
	buf[len(p1)+10] ^= 0xff // p2's payload changed, its checksum kept: corrupt
	ep.HandleDatagram(now, from, buf[len(p1):])
	if n, ended := drain(); n != 0 || !ended {
		t.Fatalf("a corrupt message after a batch: %d messages delivered, connection ended %v", n, ended)
	}
}
