package fastnet

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"slices"
	"testing"

	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/coalesce"
)

// HandleDatagrams on a Stream transport computes together the digests of
// the messages with MD5 checksums of an established connection's packets,
// and of nothing else (N121): not a short checksum's, not a packet cut
// short, not a stranger's.
func TestStreamBatchSummed(t *testing.T) {
	if !coalesce.Batched() {
		t.Skip("this machine computes digests one at a time")
	}
	from, stranger := netip.MustParseAddrPort("192.0.2.1:1000"), netip.MustParseAddrPort("192.0.2.2:1000")
	now := clock.Epoch
	e, err := NewEndpoint(Config{Role: Server, Transport: Stream})
	if err != nil {
		t.Fatal(err)
	}
	e.HandleDatagram(now, from, []byte("\xff\xffconnect?"))
	packet := func(size int) []byte {
		b := binary.BigEndian.AppendUint16(nil, 1)
		return coalesce.AppendMessage(b, bytes.Repeat([]byte{byte(size)}, size), true)
	}
	in := []Incoming{
		{From: from, Data: packet(64)}, {From: from, Data: packet(coalesce.ShortChecksumMax)}, {From: from, Data: packet(100)}, {From: stranger, Data: packet(64)},
		{From: from, Data: packet(64)[:30]}, {From: from, Data: packet(1000)}, {From: from, Data: []byte("\xff\xfe\x00\x00\x00\x01")},
	}
	e.HandleDatagrams(now, in)
	if e.streamSummed != 3 {
		t.Errorf("%d digests computed together, want 3 (the 64-, 100- and 1000-byte messages)", e.streamSummed)
	}
	if e.streamPre != nil || slices.ContainsFunc(e.streamSums.payloads[:cap(e.streamSums.payloads)], func(p []byte) bool { return p != nil }) {
		t.Error("the batch's payloads still held after it")
	}
}
