package urp

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// streamOf returns the golden packets of direction dir and their bytes
// one after the other.
func streamOf(t testing.TB, dir Direction) ([]Packet, []byte) {
	var ps []Packet
	var b []byte
	for _, tt := range golden {
		if dirOf(tt.p.ID) == dir {
			ps = append(ps, tt.p)
			b = append(b, unhex(t, tt.hex)...)
		}
	}
	return ps, b
}

// decodeChunks feeds the chunks to a decoder and returns the packets, with
// their data copied, and the most bytes it buffered.
func decodeChunks(d *Decoder, chunks [][]byte) ([]Packet, int, error) {
	var ps []Packet
	most := 0
	for _, c := range chunks {
		d.Feed(c)
		for {
			p, ok, err := d.Next()
			if err != nil {
				return ps, most, err
			}
			if !ok {
				break
			}
			p.Data = bytes.Clone(p.Data)
			ps = append(ps, p)
		}
		most = max(most, d.Buffered())
	}
	return ps, most, nil
}

// TestDecoderCuts decodes the stream of every golden packet cut in two at
// every place, a byte at a time, and in random pieces: a TCP read may end
// anywhere.
func TestDecoderCuts(t *testing.T) {
	for _, dir := range []Direction{ToRelay, ToUser} {
		want, stream := streamOf(t, dir)
		var cuts [][][]byte
		for i := range len(stream) + 1 {
			cuts = append(cuts, [][]byte{stream[:i], stream[i:]})
		}
		var bytewise [][]byte
		for i := range stream {
			bytewise = append(bytewise, stream[i:i+1])
		}
		cuts = append(cuts, bytewise)
		rng := rand.New(rand.NewPCG(1, 2))
		for range 100 {
			var chunks [][]byte
			for rest := stream; len(rest) > 0; {
				n := min(len(rest), rng.IntN(20))
				chunks = append(chunks, rest[:n])
				rest = rest[n:]
			}
			cuts = append(cuts, chunks)
		}
		for _, chunks := range cuts {
			d := NewDecoder(dir, 1<<10)
			got, most, err := decodeChunks(d, chunks)
			if err != nil {
				t.Fatalf("dir %d, %d chunks: %v", dir, len(chunks), err)
			}
			if diff := cmp.Diff(want, got, equateEmpty); diff != "" {
				t.Fatalf("dir %d, %d chunks (-want +got):\n%s", dir, len(chunks), diff)
			}
			if most > MaxHeader+1<<10 {
				t.Errorf("buffered %d bytes, above one packet", most)
			}
			if err := d.End(); err != nil {
				t.Errorf("End at a packet boundary: %v", err)
			}
		}
	}
}

// TestDecoderErrors checks that a bad identifier or an over-long message
// ends the stream at that packet, with the packets before it returned,
// and that a stream cut inside a packet ends as truncated.
func TestDecoderErrors(t *testing.T) {
	good := Append(nil, Packet{ID: U2RGets, Key: 1})
	tests := []struct {
		name   string
		chunks [][]byte
		want   int // packets before the error
		err    error
		end    error
	}{
		{"unknown id after a packet", [][]byte{append(append([]byte{}, good...), 0x99)}, 1, ErrUnknownPacket, ErrUnknownPacket},
		{"unknown id in its own read", [][]byte{good, {0x00}}, 1, ErrUnknownPacket, ErrUnknownPacket},
		{"long message, header split", [][]byte{good, {0x83, 0, 0}, {0, 0, 0xff, 0xff}, {0, 0}}, 1, ErrMessageTooLong, ErrMessageTooLong},
		{"truncated header", [][]byte{good, {0x81, 1, 2}}, 1, nil, ErrTruncated},
		{"truncated data", [][]byte{{0x84, 1, 0, 0, 0, 5, 0, 0, 0, 'a'}}, 0, nil, ErrTruncated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewDecoder(ToRelay, 100)
			got, _, err := decodeChunks(d, tt.chunks)
			if len(got) != tt.want || err != tt.err {
				t.Errorf("%d packets, %v; want %d, %v", len(got), err, tt.want, tt.err)
			}
			if err := d.End(); err != tt.end {
				t.Errorf("End = %v, want %v", err, tt.end)
			}
			if tt.err != nil {
				if _, _, err := d.Next(); err != tt.err {
					t.Errorf("Next after the error = %v, want it again", err)
				}
			}
		})
	}
}

// TestDecoderReleasesLongBuffer checks that the buffer of a long message
// cut across reads is not kept once the message is handled.
func TestDecoderReleasesLongBuffer(t *testing.T) {
	msg := Append(nil, Packet{ID: U2RSend, UID: 1, Data: make([]byte, 100<<10)})
	d := NewDecoder(ToRelay, 1<<20)
	got, most, err := decodeChunks(d, [][]byte{msg[:10], msg[10:]})
	if err != nil || len(got) != 1 || len(got[0].Data) != 100<<10 {
		t.Fatalf("%d packets, %v", len(got), err)
	}
	if most > len(msg) {
		t.Errorf("buffered %d bytes for a packet of %d", most, len(msg))
	}
	d.Feed(Append(nil, Packet{ID: U2RQuit}))
	if _, ok, _ := d.Next(); !ok || cap(d.buf) > keepBuffer {
		t.Errorf("after the next packet the buffer holds %d bytes", cap(d.buf))
	}
}

// TestDecoderAllocs checks that packets complete in one read are parsed
// where they lie, with no allocation.
func TestDecoderAllocs(t *testing.T) {
	_, stream := streamOf(t, ToRelay)
	d := NewDecoder(ToRelay, 1<<10)
	allocs := testing.AllocsPerRun(100, func() {
		d.Feed(stream)
		for {
			_, ok, err := d.Next()
			if err != nil || !ok {
				break
			}
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per stream", allocs)
	}
}

// TestDecoderSkips: a message the decoder is told it will be ignored
// (SetIgnore) has its data skipped, never held, however the stream is
// cut, and comes out without them; the packets around it come whole.
func TestDecoderSkips(t *testing.T) {
	before := Packet{ID: U2RJoin, GID: 7, Password: 9}
	msg := Packet{ID: U2RBrod, UID: 3, Data: bytes.Repeat([]byte{0xab}, 5000)}
	after := Packet{ID: U2RSend, UID: 4, Data: []byte("kept")}
	stream := Append(Append(Append(nil, before), msg), after)
	want := []Packet{before, {ID: U2RBrod, UID: 3}, after}
	for _, step := range []int{1, 3, 9, 10, 100, 4096, len(stream)} {
		d := NewDecoder(ToRelay, 1<<20)
		// Only the long broadcast is ignored.
		d.SetIgnore(func(id ID) bool { return id == U2RBrod })
		var chunks [][]byte
		for b := stream; len(b) > 0; b = b[min(step, len(b)):] {
			chunks = append(chunks, b[:min(step, len(b))])
		}
		got, most, err := decodeChunks(d, chunks)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		for i := range got {
			// Whole in one read, a message is parsed where it lies,
			// holding nothing: it comes out with its data.
			if len(got[i].Data) == 0 || bytes.Equal(got[i].Data, msg.Data) && step >= len(stream) {
				got[i].Data = nil
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("step %d (-want +got):\n%s", step, diff)
		}
		if most > messageHead+len(after.Data) {
			t.Errorf("step %d: held %d bytes at most, want no more than a header and the kept message", step, most)
		}
		if d.InPacket() || d.End() != nil {
			t.Errorf("step %d: in a packet at the end (%v)", step, d.End())
		}
	}
	// Cut within the skipped data, the stream is inside a packet.
	d := NewDecoder(ToRelay, 1<<20)
	d.SetIgnore(func(ID) bool { return true })
	d.Feed(Append(nil, msg)[:messageHead+10])
	if _, ok, err := d.Next(); ok || err != nil {
		t.Fatalf("Next on part of a skipped message = %v, %v", ok, err)
	}
	if d.Buffered() != 0 || !d.InPacket() || d.End() != ErrTruncated {
		t.Errorf("Buffered %d, InPacket %v, End %v; want 0, true, ErrTruncated", d.Buffered(), d.InPacket(), d.End())
	}
}
