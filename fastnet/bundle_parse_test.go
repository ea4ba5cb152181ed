package fastnet

import (
	"encoding/binary"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/fastnet-engine/fastnet/channel"
	"github.com/fastnet-engine/fastnet/coalesce"
)

// parseSums, which reads a bundle's channel and message headers in place
// (N101, N113), records exactly the packets that the general parsers,
// cutBundle, parsePacket, channel.ParseHeader and coalesce.ParseHeader,
// find to be data packets starting a message that fills their chunk with
// an MD5 checksum, with the same headers: random bundles of such packets
// mixed with packets a byte short or long, on negative channels, without
// the start flag, with sequence numbers below MinSeq, with every length
// of length field, lengths about ShortChecksumMax and MaxMessageSize,
// junk, and a bad length at the end.
func TestParseSumsLikeParsers(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	found := 0
	for _, maxLen := range []int{-1, 0, coalesce.ShortChecksumMax, coalesce.ShortChecksumMax + 1, 40, 1000, 1 << 20} {
		e := &Endpoint{}
		e.cfg.MaxMessageSize = maxLen
		for round := range 3000 {
			var s bundleSums
			// Records appended after those of another bundle, as for a
			// batch (presumBatch), keep their positions in their own.
			e.parseSums(&s, randomBundle(r, maxLen))
			k := len(s.ws)
			p := randomBundle(r, maxLen)
			e.parseSums(&s, p)
			want := referenceWholes(p, maxLen)
			found += len(want)
			if got := s.ws[k:]; !reflect.DeepEqual(got, want) && len(got)+len(want) > 0 {
				t.Fatalf("max %d, round %d, bundle %x:\n got %+v\nwant %+v", maxLen, round, p, got, want)
			}
			for i := range want {
				if w := want[i].Payload(p); &s.payloads[k+i][0] != &w[0] || len(s.payloads[k+i]) != len(w) {
					t.Fatalf("max %d, round %d: payload %d is not the message's", maxLen, round, i)
				}
			}
		}
	}
	if found < 1000 {
		t.Fatalf("%d whole messages in all: too few for the comparison to prove much", found)
	}
}

// referenceWholes returns the records parseSums must make for bundle
// payload p, found by the general parsers.
func referenceWholes(p []byte, maxLen int) []channel.Whole {
	var ws []channel.Whole
	for rest := p; len(rest) > 0; {
		inner, next, ok := cutBundle(rest)
		if !ok {
			break
		}
		at := len(p) - len(rest) + bundleLenSize
		rest = next
		ch, payload, err := parsePacket(inner)
		if err != nil || ch < 0 {
			continue
		}
		h, err := channel.ParseHeader(payload)
		if err != nil || !h.Start {
			continue
		}
		chunk := payload[channel.HeaderLen:]
		m, err := coalesce.ParseHeader(chunk, maxLen)
		if err != nil || m.Len <= coalesce.ShortChecksumMax || m.EncodedLen() != len(chunk) {
			continue
		}
		off := at + 2 + channel.HeaderLen
		ws = append(ws, channel.Whole{H: h, Msg: m, Off: off, End: off + len(chunk)})
	}
	return ws
}

// randomBundle returns a bundle payload of random packets, many of them
// whole messages or nearly.
func randomBundle(r *rand.Rand, maxLen int) []byte {
	var b []byte
	for range r.IntN(12) {
		var pkt []byte
		switch r.IntN(8) {
		case 0: // junk
			pkt = make([]byte, r.IntN(60))
			for i := range pkt {
				pkt[i] = byte(r.Uint32())
			}
		default:
			pkt = randomWholePacket(r, maxLen)
		}
		b = appendBundled(b, pkt)
	}
	if r.IntN(8) == 0 { // a length that does not add up
		b = binary.BigEndian.AppendUint16(b, uint16(r.IntN(300)))
		b = append(b, make([]byte, r.IntN(4))...)
	}
	return b
}

// randomWholePacket returns a data packet whose chunk is a message, or
// nearly: its channel, header and message header drawn about the edges
// parseSums tests.
func randomWholePacket(r *rand.Rand, maxLen int) []byte {
	ch := uint16(r.IntN(4))
	if r.IntN(8) == 0 {
		ch = uint16(r.Uint32()) // negative half the time
	}
	pkt := binary.BigEndian.AppendUint16(nil, ch)
	flags := byte(r.Uint32())
	if r.IntN(4) != 0 {
		flags |= channel.FlagStart
	}
	pkt = append(pkt, flags)
	for range 2 {
		seq := r.IntN(1<<24) - 1<<23
		if r.IntN(2) == 0 {
			seq = r.IntN(40000) - 20000 // about MinSeq
		}
		pkt = append(pkt, byte(seq>>16), byte(seq>>8), byte(seq))
	}
	n := r.IntN(80)
	switch r.IntN(4) {
	case 0:
		n = coalesce.ShortChecksumMax - 2 + r.IntN(5)
	case 1:
		n = max(maxLen-2+r.IntN(5), 0)
	}
	hl := 2 + r.IntN(4) // any length of length field, canonical or not
	mflags := byte(hl-2)<<6 | byte(r.IntN(2))
	if r.IntN(16) == 0 {
		mflags = byte(r.Uint32())
	}
	pkt = append(pkt, mflags)
	for i := hl - 2; i >= 0; i-- {
		pkt = append(pkt, byte(n>>(8*i)))
	}
	body := n + coalesce.ChecksumLen(n) + r.IntN(3) - 1
	if n > 300 {
		body = r.IntN(300) // a length longer than the packet
	}
	for range max(body, 0) {
		pkt = append(pkt, byte(r.Uint32()))
	}
	return pkt
}

// FuzzParseSums is TestParseSumsLikeParsers for arbitrary bundle
// payloads.
func FuzzParseSums(f *testing.F) {
	r := rand.New(rand.NewPCG(13, 14))
	for range 8 {
		f.Add(randomBundle(r, 1000), 1000)
	}
	f.Add([]byte{}, 0)
	f.Fuzz(func(t *testing.T, p []byte, maxLen int) {
		e := &Endpoint{}
		e.cfg.MaxMessageSize = maxLen
		var s bundleSums
		e.parseSums(&s, p)
		want := referenceWholes(p, maxLen)
		if !reflect.DeepEqual(s.ws, want) && len(s.ws)+len(want) > 0 {
			t.Fatalf("bundle %x, max %d:\n got %+v\nwant %+v", p, maxLen, s.ws, want)
		}
	})
}
