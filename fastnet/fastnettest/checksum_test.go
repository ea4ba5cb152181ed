package fastnettest

import (
	"bytes"
	"math/bits"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestOnesSum(t *testing.T) {
	tests := []struct {
		name string
		b    []byte
		want uint16
	}{
		{"empty", nil, 0},
		// The worked example of RFC 1071, section 3.
		{"rfc1071", []byte{0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7}, 0xddf2},
		{"odd length pads low byte", []byte{0x12, 0x34, 0x56}, 0x1234 + 0x5600},
		{"end-around carry", []byte{0xff, 0xff, 0x00, 0x02}, 0x0002},
		{"negative zero is zero", []byte{0xff, 0xff}, 0},
		{"carry out of 16 bits", []byte{0x80, 0x00, 0x80, 0x01}, 0x0002},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := onesSum(tt.b); got != tt.want {
				t.Errorf("onesSum(%x) = %#04x, want %#04x", tt.b, got, tt.want)
			}
		})
	}
}

// Every single-bit flip changes the ones' complement sum by ±2^k with
// k < 16, never a multiple of 0xffff: UDP catches all of them.
func TestUDPChecksumCatchesEverySingleBitFlip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 2, 3, 31, 64, 1201} {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		sum := onesSum(b)
		for bit := range n * 8 {
			b[bit/8] ^= 1 << (bit % 8)
			if onesSum(b) == sum {
				t.Errorf("%d bytes: flipping bit %d leaves the sum at %#04x", n, bit, sum)
			}
			b[bit/8] ^= 1 << (bit % 8)
		}
	}
}

// Flips that cancel out in the sum escape the checksum.
func TestUDPChecksumEscapes(t *testing.T) {
	tests := []struct {
		name  string
		b     []byte
		flips []int // bit numbers: byte*8 + bit, bit 0 the least significant
	}{
		// Bit 0 of word 0 goes from 1 to 0, bit 0 of word 1 from 0 to 1:
		// -1 +1.
		{"opposite flips of one bit position", []byte{0x00, 0x01, 0x00, 0x00}, []int{1*8 + 0, 3*8 + 0}},
		// The same in the high bytes, in an odd-length datagram whose last
		// byte is the high byte of a padded word.
		{"high byte of the padded word", []byte{0x40, 0x00, 0x00}, []int{0*8 + 6, 2*8 + 6}},
		// Bit 15 of two words from 0 to 1 adds 0x10000, which the
		// end-around carry folds to 1; bit 0 from 1 to 0 takes it away.
		{"end-around carry", []byte{0x00, 0x00, 0x00, 0x00, 0x00, 0x01}, []int{0*8 + 7, 2*8 + 7, 5*8 + 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sum := onesSum(tt.b)
			c := bytes.Clone(tt.b)
			for _, f := range tt.flips {
				c[f/8] ^= 1 << (f % 8)
			}
			if got := onesSum(c); got != sum {
				t.Errorf("onesSum(%x) = %#04x, onesSum(%x) = %#04x: want equal", tt.b, sum, c, got)
			}
			// Each flip alone is caught.
			for _, f := range tt.flips {
				c := bytes.Clone(tt.b)
				c[f/8] ^= 1 << (f % 8)
				if onesSum(c) == sum {
					t.Errorf("flip of bit %d alone escapes", f)
				}
			}
		})
	}
}

// A UDPChecksum link drops every corrupted copy whose sum changed and
// delivers the others, damaged: never one with a single bit flipped, and
// only ones with the sum of the datagram sent.
func TestUDPChecksumLink(t *testing.T) {
	n := NewNetwork(7)
	a := &fake{}
	b := &fake{record: true}
	n.Add(addr(1), a)
	n.Add(addr(2), b)
	n.SetLink(addr(1), addr(2), Link{Corrupt: 1, UDPChecksum: true})
	var trace strings.Builder
	n.Trace = &trace
	const total = 3000
	rng := rand.New(rand.NewPCG(3, 4))
	sent := make(map[uint32][]byte, total)
	for i := range uint32(total) {
		d := make([]byte, 40)
		for j := range d {
			d[j] = byte(rng.Uint32())
		}
		d[0], d[1], d[2], d[3] = byte(i>>24), byte(i>>16), byte(i>>8), byte(i)
		sent[i] = d
		a.send(addr(2), d)
	}
	if err := n.RunUntilIdle(10 * total); err != nil {
		t.Fatal(err)
	}
	s := n.LinkStats(addr(1), addr(2))
	if s.Corrupted != total || s.ChecksumDrops+s.Delivered != total || s.Dropped() != s.ChecksumDrops {
		t.Fatalf("stats %+v: want all %d corrupted, each dropped by the checksum or delivered", s, total)
	}
	// About one corrupted datagram in a hundred escapes: two or three
	// flips at the same bit position in opposite directions.
	if s.Delivered == 0 || s.Delivered > total/20 {
		t.Errorf("%d of %d corrupted datagrams escaped the checksum", s.Delivered, total)
	}
	if got := strings.Count(trace.String(), " checksum\n"); uint64(got) != s.ChecksumDrops {
		t.Errorf("trace has %d checksum drops, stats %d", got, s.ChecksumDrops)
	}
	for _, g := range b.got {
		// The sequence number may itself be damaged: find the original
		// by the fewest differing bits.
		best, bestD := []byte(nil), 1<<30
		for _, d := range sent {
			if diff := bitDiff(d, g.b); diff < bestD {
				best, bestD = d, diff
			}
		}
		if bestD < 2 || bestD > 3 {
			t.Errorf("delivered %x, %d bits from the nearest datagram sent", g.b, bestD)
		}
		if onesSum(best) != onesSum(g.b) {
			t.Errorf("delivered %x whose sum differs from that of %x", g.b, best)
		}
	}
}

func bitDiff(a, b []byte) int {
	if len(a) != len(b) {
		return 1 << 20
	}
	d := 0
	for i := range a {
		d += bits.OnesCount8(a[i] ^ b[i])
	}
	return d
}

// Without Corrupt, UDPChecksum changes nothing: the same seed gives the
// same trace.
func TestUDPChecksumWithoutCorruption(t *testing.T) {
	traces := make([]string, 2)
	for i, sum := range []bool{false, true} {
		n, _, _ := pair(t, 9, Link{Loss: 0.2, Dup: 0.1, Jitter: 5e6, UDPChecksum: sum}, 200, 1e6)
		var tr strings.Builder
		n.Trace = &tr
		run(t, n, 1e9)
		traces[i] = tr.String()
		checkAccounting(t, n)
	}
	if traces[0] != traces[1] || len(traces[0]) == 0 {
		t.Errorf("traces differ with and without UDPChecksum on an uncorrupting link")
	}
}
