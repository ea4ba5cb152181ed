package fuzz

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/coalesce"
	"github.com/fastnet-engine/fastnet/fastnet"
)

// FuzzStreamBatch feeds two identical server connections on a Stream
// transport the same packets cut from the input: one in a single
// HandleDatagrams call, whose messages' digests are computed together,
// the other one packet at a time. Whatever the packets hold (messages
// whole or cut, checksums right or wrong, control packets), the two must
// answer with the same packets, report the same events and count the
// same statistics (N121).
func FuzzStreamBatch(f *testing.F) {
	packet := func(ch int16, reliable bool, size int) []byte {
		b := binary.BigEndian.AppendUint16(nil, uint16(ch))
		return coalesce.AppendMessage(b, bytes.Repeat([]byte{byte(size)}, size), reliable)
	}
	input := func(pieces ...[]byte) []byte {
		var b []byte
		for _, p := range pieces {
			b = binary.BigEndian.AppendUint16(b, uint16(len(p)))
			b = append(b, p...)
		}
		return b
	}
	f.Add(input(packet(1, true, 64), packet(1, true, 64), packet(2, false, 64), packet(1, true, 100)))
	f.Add(input(packet(1, true, 20), packet(1, true, 40), packet(3, true, 1000), packet(1, false, 33)))
	bad := packet(1, true, 64)
	bad[len(bad)-1] ^= 1
	f.Add(input(packet(1, true, 64), bad, packet(1, true, 64)))
	f.Add(input(packet(1, true, 64), packet(1, true, 64)[:40], packet(1, true, 64)))
	f.Add(input(packet(1, true, 64), []byte("\xff\xfe\x00\x00\x00\x01"), packet(1, true, 64)))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		runStreamBatch(t, data)
	})
}

func runStreamBatch(t *testing.T, data []byte) {
	cfg := fastnet.Config{Role: fastnet.Server, Transport: fastnet.Stream, MaxMessageSize: 4096}
	from := fuzzAddrs[0]
	now := clock.Epoch
	buf := make([]byte, 1<<17)
	var sides [2]*batchSide
	drain := func(s *batchSide) { s.drain(t, now, buf) }
	for i := range sides {
		s := newBatchSide(t, cfg, from, now, drain)
		sides[i] = s
		if s.h == 0 {
			t.Fatal("not connected")
		}
	}
	// The input: packets, each a 16-bit length then its bytes; a last
	// length that does not fit takes what is left.
	var ds []fastnet.Incoming
	for len(data) >= 2 && len(ds) < 64 {
		n := min(int(binary.BigEndian.Uint16(data)), len(data)-2)
		ds = append(ds, fastnet.Incoming{From: from, Data: data[2 : 2+n]})
		data = data[2+n:]
	}
	batchAndOneByOne(t, now, ds, sides, drain)
}
