package frame

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"testing/iotest"
)

// frame returns the wire form of packet p (D20).
func frame(p []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(p))), p...)
}

// pattern returns n bytes that differ from those of other lengths.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + n)
	}
	return b
}

// TestFrameGolden checks the wire form of D20: each packet is preceded by
// its length as a u32, big-endian.
func TestFrameGolden(t *testing.T) {
	tests := []struct {
		name    string
		packets [][]byte
		hex     string
	}{
		{"empty packet", [][]byte{{}}, "00000000"},
		{"heartbeat", [][]byte{{0xff, 0xfe, 0x00, 0x07}}, "00000004" + "fffe0007"},
		{"two packets", [][]byte{{0xff, 0xff}, []byte("abc")}, "00000002ffff" + "00000003616263"},
		{"256 bytes", [][]byte{bytes.Repeat([]byte{0xaa}, 256)}, "00000100" + hex.EncodeToString(bytes.Repeat([]byte{0xaa}, 256))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			fw := NewWriter(&out, 1<<20, 0)
			for _, p := range tt.packets {
				if err := fw.Write(p); err != nil {
					t.Fatal(err)
				}
			}
			if err := fw.Flush(); err != nil {
				t.Fatal(err)
			}
			if got := hex.EncodeToString(out.Bytes()); got != tt.hex {
				t.Errorf("encoded %s\nwant    %s", got, tt.hex)
			}

			wire, _ := hex.DecodeString(tt.hex)
			fr := NewReader(bytes.NewReader(wire), 1<<20, 0)
			for i, want := range tt.packets {
				got, err := fr.Next()
				if err != nil {
					t.Fatalf("packet %d: %v", i, err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("packet %d: decoded %x, want %x", i, got, want)
				}
			}
			if _, err := fr.Next(); err != io.EOF {
				t.Errorf("after the last packet: %v, want io.EOF", err)
			}
		})
	}
}

// TestFrameRoundTrip sends packets of lengths around the buffer sizes
// through stream readers that return data in small and odd pieces.
func TestFrameRoundTrip(t *testing.T) {
	const bufSize = 64
	const maxPacket = 1000
	lengths := []int{0, 1, 2, 63, 64, 65, 127, 128, 129, 500, 999, 1000, 3, 1000, 0, 64}
	var wire bytes.Buffer
	fw := NewWriter(&wire, maxPacket, bufSize)
	for _, n := range lengths {
		if err := fw.Write(pattern(n)); err != nil {
			t.Fatal(err)
		}
	}
	if err := fw.Flush(); err != nil {
		t.Fatal(err)
	}

	readers := []struct {
		name string
		wrap func(io.Reader) io.Reader
	}{
		{"whole", func(r io.Reader) io.Reader { return r }},
		{"one byte", iotest.OneByteReader},
		{"half", iotest.HalfReader},
		{"data with EOF", iotest.DataErrReader},
	}
	for _, rd := range readers {
		t.Run(rd.name, func(t *testing.T) {
			fr := NewReader(rd.wrap(bytes.NewReader(wire.Bytes())), maxPacket, bufSize)
			for i, n := range lengths {
				got, err := fr.Next()
				if err != nil {
					t.Fatalf("packet %d (%d bytes): %v", i, n, err)
				}
				if !bytes.Equal(got, pattern(n)) {
					t.Fatalf("packet %d: got %d bytes %x, want %d bytes", i, len(got), got, n)
				}
			}
			if _, err := fr.Next(); err != io.EOF {
				t.Errorf("at the end: %v, want io.EOF", err)
			}
		})
	}
}

func TestFrameReaderErrors(t *testing.T) {
	const maxPacket = 100
	tests := []struct {
		name   string
		stream []byte
		good   int // packets read before the error
		want   error
	}{
		{"empty stream", nil, 0, io.EOF},
		{"header cut", []byte{0, 0}, 0, io.ErrUnexpectedEOF},
		{"body cut", []byte{0, 0, 0, 5, 1, 2}, 0, io.ErrUnexpectedEOF},
		{"second header cut", append(frame([]byte("ok")), 0), 1, io.ErrUnexpectedEOF},
		{"length max+1", []byte{0, 0, 0, maxPacket + 1}, 0, ErrTooLarge},
		{"length 2^32-1", []byte{0xff, 0xff, 0xff, 0xff}, 0, ErrTooLarge},
		{"length max is fine", frame(pattern(maxPacket)), 1, io.EOF},
		{"too long after a good one", append(frame([]byte("ok")), 0, 1, 0, 0), 1, ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fr := NewReader(bytes.NewReader(tt.stream), maxPacket, 16)
			for i := range tt.good {
				if _, err := fr.Next(); err != nil {
					t.Fatalf("packet %d: %v", i, err)
				}
			}
			if _, err := fr.Next(); !errors.Is(err, tt.want) {
				t.Errorf("next = %v, want %v", err, tt.want)
			}
		})
	}
}

// errReader fails every read.
type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

func TestFrameReaderPassesStreamErrors(t *testing.T) {
	boom := errors.New("connection reset")
	for _, stream := range [][]byte{nil, {0, 0}, {0, 0, 0, 3, 1}, {0, 0, 0, 200, 1}} {
		fr := NewReader(io.MultiReader(bytes.NewReader(stream), errReader{boom}), 1000, 16)
		if _, err := fr.Next(); !errors.Is(err, boom) {
			t.Errorf("stream %x then an error: next = %v, want %v", stream, err, boom)
		}
	}
}

// TestFrameReaderRefusesBeforeAllocating checks D20 and D23: a length above
// the maximum is refused without allocating, and a long length within the
// maximum gets memory only as its bytes arrive.
func TestFrameReaderRefusesBeforeAllocating(t *testing.T) {
	huge := []byte{0x7f, 0xff, 0xff, 0xff, 1, 2, 3}
	src := bytes.NewReader(nil)
	fr := NewReader(src, 1<<20, 16)
	allocs := testing.AllocsPerRun(100, func() {
		src.Reset(huge)
		fr.br.Reset(src)
		if _, err := fr.Next(); err != ErrTooLarge {
			t.Fatalf("next = %v", err)
		}
	})
	if allocs != 0 {
		t.Errorf("refusing a length of 2^31-1 allocates %v times", allocs)
	}
	if cap(fr.long) != 0 {
		t.Errorf("refusing a length set aside %d bytes", cap(fr.long))
	}

	// A peer announces 16 MiB (within the maximum) and sends 100 bytes.
	const claimed = 16 << 20
	stream := append(binary.BigEndian.AppendUint32(nil, claimed), pattern(100)...)
	fr = NewReader(bytes.NewReader(stream), claimed, 4096)
	if _, err := fr.Next(); err != io.ErrUnexpectedEOF {
		t.Fatalf("next = %v, want io.ErrUnexpectedEOF", err)
	}
	if c := cap(fr.long); c > 2*4096 {
		t.Errorf("announcing %d bytes and sending 100 set aside %d bytes", claimed, c)
	}
}

// TestFrameReaderMemoryTracksInput checks that the memory a long packet
// takes is at most about twice the bytes received, whatever the length
// announced.
func TestFrameReaderMemoryTracksInput(t *testing.T) {
	const bufSize = 4096
	for _, sent := range []int{5000, 20000, 100000, 1 << 20} {
		stream := append(binary.BigEndian.AppendUint32(nil, 8<<20), pattern(sent)...)
		fr := NewReader(bytes.NewReader(stream), 8<<20, bufSize)
		if _, err := fr.Next(); err != io.ErrUnexpectedEOF {
			t.Fatalf("next = %v", err)
		}
		if c := cap(fr.long); c > 2*sent+bufSize {
			t.Errorf("%d bytes received: %d set aside, want at most %d", sent, c, 2*sent+bufSize)
		}
	}
}

func TestFrameWriter(t *testing.T) {
	t.Run("too large", func(t *testing.T) {
		var out bytes.Buffer
		fw := NewWriter(&out, 10, 0)
		if err := fw.Write(make([]byte, 11)); err != ErrTooLarge {
			t.Errorf("write of 11 bytes with a maximum of 10: %v", err)
		}
		if err := fw.Write(make([]byte, 10)); err != nil {
			t.Errorf("write of 10 bytes: %v", err)
		}
		fw.Flush()
		if out.Len() != 4+10 {
			t.Errorf("stream holds %d bytes, want only the 14 of the packet that fits", out.Len())
		}
	})
	t.Run("buffers until flush", func(t *testing.T) {
		var w countingWriter
		fw := NewWriter(&w, 1000, 4096)
		for range 50 {
			if err := fw.Write(pattern(64)); err != nil {
				t.Fatal(err)
			}
		}
		if w.writes != 0 {
			t.Errorf("%d writes to the stream before flush", w.writes)
		}
		if got := fw.Buffered(); got != 50*68 {
			t.Errorf("buffered() = %d, want %d", got, 50*68)
		}
		if err := fw.Flush(); err != nil {
			t.Fatal(err)
		}
		if w.writes != 1 || w.n != 50*68 || fw.Buffered() != 0 {
			t.Errorf("flush: %d writes of %d bytes, %d left", w.writes, w.n, fw.Buffered())
		}
	})
	t.Run("stream error sticks", func(t *testing.T) {
		boom := errors.New("broken pipe")
		fw := NewWriter(failWriter{boom}, 100000, 16)
		if err := fw.Write(pattern(1000)); !errors.Is(err, boom) {
			t.Errorf("write = %v, want %v", err, boom)
		}
		if err := fw.Write(pattern(1)); !errors.Is(err, boom) {
			t.Errorf("write after a failure = %v", err)
		}
		if err := fw.Flush(); !errors.Is(err, boom) {
			t.Errorf("flush after a failure = %v", err)
		}
	})
}

type countingWriter struct{ writes, n int }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.writes++
	w.n += len(p)
	return len(p), nil
}

type failWriter struct{ err error }

func (w failWriter) Write([]byte) (int, error) { return 0, w.err }

// TestFrameTCP runs the framing over a real loopback TCP connection, with
// packet lengths from 0 to past both buffers.
func TestFrameTCP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const maxPacket = 200000
	const count = 2000
	length := func(i int) int { return (i * i * 131) % (maxPacket + 1) / (1 + i%50) }

	errc := make(chan error, 1)
	go func() {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			errc <- err
			return
		}
		defer c.Close()
		fw := NewWriter(c, maxPacket, 0)
		for i := range count {
			if err := fw.Write(pattern(length(i))); err != nil {
				errc <- err
				return
			}
			if i%7 == 0 {
				if err := fw.Flush(); err != nil {
					errc <- err
					return
				}
			}
		}
		errc <- fw.Flush()
	}()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fr := NewReader(c, maxPacket, 0)
	for i := range count {
		p, err := fr.Next()
		if err != nil {
			t.Fatalf("packet %d: %v", i, err)
		}
		if !bytes.Equal(p, pattern(length(i))) {
			t.Fatalf("packet %d: %d bytes, want %d", i, len(p), length(i))
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if _, err := fr.Next(); err != io.EOF {
		t.Errorf("after the writer closed: %v, want io.EOF", err)
	}
}

// TestFrameAllocs checks that writing and reading packets allocates nothing
// once the buffers exist.
func TestFrameAllocs(t *testing.T) {
	for _, n := range []int{64, 1024, 100000} {
		var wire bytes.Buffer
		fw := NewWriter(&wire, 1<<20, 4096)
		for range 3 {
			fw.Write(pattern(n))
		}
		fw.Flush()
		src := bytes.NewReader(nil)
		fr := NewReader(src, 1<<20, 4096)
		fw = NewWriter(io.Discard, 1<<20, 4096)
		p := pattern(n)
		allocs := testing.AllocsPerRun(100, func() {
			src.Reset(wire.Bytes())
			fr.br.Reset(src)
			for range 3 {
				if _, err := fr.Next(); err != nil {
					t.Fatal(err)
				}
			}
			fw.Write(p)
			fw.Flush()
		})
		if allocs != 0 {
			t.Errorf("%d-byte packets: %v allocations per 3 reads and 1 write", n, allocs)
		}
	}
}

// FuzzFrameReader feeds arbitrary streams to the reader. Every packet it
// returns respects the maximum; framing the packets again reproduces the
// part of the stream they came from; the error, if any, is one the
// documentation allows; memory stays within twice the input.
func FuzzFrameReader(f *testing.F) {
	f.Add([]byte{}, uint16(100))
	f.Add(frame([]byte("hello")), uint16(100))
	f.Add(append(frame(pattern(40)), frame(pattern(0))...), uint16(40))
	f.Add(append(frame(pattern(300)), 0, 0, 1), uint16(1000))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1}, uint16(65535))
	f.Add(frame(pattern(41)), uint16(40))
	f.Fuzz(func(t *testing.T, stream []byte, maxPacket uint16) {
		const bufSize = 32
		fr := NewReader(bytes.NewReader(stream), int(maxPacket), bufSize)
		var again bytes.Buffer
		fw := NewWriter(&again, int(maxPacket), bufSize)
		for {
			p, err := fr.Next()
			if err != nil {
				switch err {
				case io.EOF:
					if again.Len() != len(stream) {
						t.Fatalf("io.EOF after %d of %d bytes", again.Len(), len(stream))
					}
				case io.ErrUnexpectedEOF:
					if again.Len() == len(stream) {
						t.Fatal("io.ErrUnexpectedEOF at a packet boundary")
					}
				case ErrTooLarge:
					rest := stream[again.Len():]
					if len(rest) < 4 || binary.BigEndian.Uint32(rest) <= uint32(maxPacket) {
						t.Fatalf("ErrTooLarge for %x", rest)
					}
				default:
					t.Fatalf("unexpected error %v", err)
				}
				break
			}
			if len(p) > int(maxPacket) {
				t.Fatalf("packet of %d bytes above the maximum %d", len(p), maxPacket)
			}
			if err := fw.Write(p); err != nil {
				t.Fatal(err)
			}
			if err := fw.Flush(); err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(stream, again.Bytes()) {
				t.Fatalf("packets re-framed to %x, not a prefix of the stream %x", again.Bytes(), stream)
			}
		}
		if c := cap(fr.long); c > 2*len(stream)+bufSize {
			t.Fatalf("%d bytes of input set aside %d bytes", len(stream), c)
		}
	})
}

func BenchmarkFrameWrite(b *testing.B) {
	for _, n := range []int{64, 1024} {
		b.Run(byteSize(n), func(b *testing.B) {
			fw := NewWriter(io.Discard, 1<<20, 0)
			p := pattern(n)
			b.ReportAllocs()
			b.SetBytes(int64(n))
			for b.Loop() {
				if err := fw.Write(p); err != nil {
					b.Fatal(err)
				}
			}
			fw.Flush()
		})
	}
}

func BenchmarkFrameRead(b *testing.B) {
	for _, n := range []int{64, 1024} {
		b.Run(byteSize(n), func(b *testing.B) {
			var wire bytes.Buffer
			fw := NewWriter(&wire, 1<<20, 0)
			const perPass = 1000
			for range perPass {
				fw.Write(pattern(n))
			}
			fw.Flush()
			src := bytes.NewReader(wire.Bytes())
			fr := NewReader(src, 1<<20, 0)
			b.ReportAllocs()
			b.SetBytes(int64(n))
			i := 0
			for b.Loop() {
				if i == perPass {
					src.Reset(wire.Bytes())
					fr.br.Reset(src)
					i = 0
				}
				if _, err := fr.Next(); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

func byteSize(n int) string {
	if n >= 1024 {
		return fmt.Sprintf("%dKiB", n/1024)
	}
	return fmt.Sprintf("%dB", n)
}

// timeoutReader hands out its data a few bytes at a time, with a deadline
// error (what a read interrupted by a past deadline returns) between every
// two pieces.
type timeoutReader struct {
	data  []byte
	piece int
	fail  bool
}

func (r *timeoutReader) Read(p []byte) (int, error) {
	if r.fail = !r.fail; r.fail {
		return 0, os.ErrDeadlineExceeded
	}
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), r.piece)], r.data)
	r.data = r.data[n:]
	return n, nil
}

// TestFrameReaderResumesAfterDeadline: a read the driver interrupts with a
// past deadline (a Receive reading the stream itself, N26) loses nothing;
// the next call goes on, inside a short or a long packet alike.
func TestFrameReaderResumesAfterDeadline(t *testing.T) {
	const bufSize = 64
	sizes := []int{0, 1, 17, bufSize - HeaderLen, bufSize - 1, bufSize, 3*bufSize + 5, 1000}
	for _, piece := range []int{1, 3, 50} {
		var wire []byte
		for _, n := range sizes {
			wire = append(wire, frame(pattern(n))...)
		}
		fr := NewReader(&timeoutReader{data: wire, piece: piece}, 4096, bufSize)
		for i := 0; i < len(sizes); {
			p, err := fr.Next()
			if errors.Is(err, os.ErrDeadlineExceeded) {
				continue
			}
			if err != nil {
				t.Fatalf("piece %d, packet %d: %v", piece, i, err)
			}
			if !bytes.Equal(p, pattern(sizes[i])) {
				t.Fatalf("piece %d, packet %d: got %d bytes, want pattern(%d)", piece, i, len(p), sizes[i])
			}
			i++
		}
		for {
			_, err := fr.Next()
			if errors.Is(err, os.ErrDeadlineExceeded) {
				continue
			}
			if err != io.EOF {
				t.Fatalf("piece %d: at the end: %v, want io.EOF", piece, err)
			}
			break
		}
	}
}

// TestFrameReaderGrow checks that a reader whose buffer grows after the
// handshake (N46) loses and repeats nothing: the packets its small buffer
// held, whole or in part, come first, then the rest of the stream.
func TestFrameReaderGrow(t *testing.T) {
	const small, large, maxPacket = 16, 256, 1000
	lengths := []int{3, 5, 2, 40, 7, 300, 0, 9}
	var wire []byte
	for _, n := range lengths {
		wire = append(wire, frame(pattern(n))...)
	}
	// Grow after each number of packets, so that the small buffer holds
	// a whole packet, part of one, or nothing when it grows.
	for at := range len(lengths) {
		fr := NewReader(bytes.NewReader(wire), maxPacket, small)
		for i, n := range lengths {
			if i == at {
				fr.Grow(large)
				if fr.br.Size() != large {
					t.Fatalf("after grow(%d): buffer of %d bytes", large, fr.br.Size())
				}
			}
			got, err := fr.Next()
			if err != nil || !bytes.Equal(got, pattern(n)) {
				t.Fatalf("grown before packet %d: packet %d: %x, %v; want %d bytes", at, i, got, err, n)
			}
		}
		if _, err := fr.Next(); err != io.EOF {
			t.Errorf("grown before packet %d: at the end: %v, want io.EOF", at, err)
		}
	}
}

// TestCut checks Cut against Append: every packet comes back whole and in
// order, and a partial one is left.
func TestCut(t *testing.T) {
	var b []byte
	packets := [][]byte{{}, pattern(1), pattern(300), pattern(2)}
	for _, p := range packets {
		b = Append(b, p)
	}
	partial := Append(nil, pattern(9))[:7]
	b = append(b, partial...)
	rest := b
	for i, want := range packets {
		var p []byte
		var ok bool
		p, rest, ok = Cut(rest)
		if !ok || !bytes.Equal(p, want) {
			t.Fatalf("packet %d: %x, %v; want %x", i, p, ok, want)
		}
	}
	if p, r, ok := Cut(rest); ok || p != nil || !bytes.Equal(r, partial) {
		t.Fatalf("partial packet: %x, rest %x, %v", p, r, ok)
	}
	for _, short := range [][]byte{nil, {0, 0}, {0, 0, 0, 5, 1}} {
		if _, _, ok := Cut(short); ok {
			t.Errorf("Cut(%x) found a packet", short)
		}
	}
}

// The packets Next returns while Buffered reports the next one whole all
// stay valid together, the one read before them included, long or not:
// Next then neither reads the stream nor moves its buffer. A reader that
// collects them and hands them over at once (the TCP driver, N121)
// relies on it.
func TestFrameBufferedPacketsStayValid(t *testing.T) {
	const bufSize = 256
	const maxPacket = 1000
	lengths := []int{10, 20, 0, 30, 500, 40, 50, 60, 999, 5, 5, 5, 200, 250, 1, 2, 3}
	var wire bytes.Buffer
	for _, n := range lengths {
		wire.Write(frame(pattern(n)))
	}
	readers := []struct {
		name string
		wrap func(io.Reader) io.Reader
	}{
		{"whole", func(r io.Reader) io.Reader { return r }},
		{"one byte", iotest.OneByteReader},
		{"half", iotest.HalfReader},
	}
	for _, rd := range readers {
		t.Run(rd.name, func(t *testing.T) {
			fr := NewReader(rd.wrap(bytes.NewReader(wire.Bytes())), maxPacket, bufSize)
			i, batches := 0, 0
			for i < len(lengths) {
				p, err := fr.Next()
				if err != nil {
					t.Fatalf("packet %d: %v", i, err)
				}
				batch := [][]byte{p}
				for fr.Buffered() {
					if p, err = fr.Next(); err != nil {
						t.Fatalf("packet %d: %v", i+len(batch), err)
					}
					batch = append(batch, p)
				}
				for j, got := range batch {
					if n := lengths[i+j]; !bytes.Equal(got, pattern(n)) {
						t.Fatalf("batch %d, packet %d of %d: %d bytes %x, want %d bytes", batches, j, len(batch), len(got), got, n)
					}
				}
				i += len(batch)
				batches++
			}
			if rd.name == "whole" && batches >= len(lengths) {
				t.Errorf("%d batches of %d packets: none read more than one", batches, len(lengths))
			}
		})
	}
}

// TestFrameReaderLetsGoOfLong: the memory of a long packet is let go once
// a short packet follows (a heartbeat, on a live connection), not kept by
// every connection that once got one; while long packets come back to
// back, it is kept (N136).
func TestFrameReaderLetsGoOfLong(t *testing.T) {
	long := make([]byte, 200<<10)
	pr, pw := io.Pipe()
	fr := NewReader(pr, 1<<20, 16<<10)
	go func() {
		pw.Write(append(Append(nil, long), Append(nil, long)...))
		pw.Write(Append(nil, []byte("short")))
		pw.Close()
	}()
	for i := range 2 {
		p, err := fr.Next()
		if err != nil || len(p) != len(long) {
			t.Fatalf("packet %d: %d bytes, %v", i, len(p), err)
		}
	}
	if cap(fr.long) < len(long) {
		t.Fatalf("long's memory %d bytes after a long packet, want it kept until the next call", cap(fr.long))
	}
	if p, err := fr.Next(); err != nil || string(p) != "short" {
		t.Fatalf("after the long packets: %q, %v", p, err)
	}
	if fr.long != nil {
		t.Errorf("long's memory %d bytes kept after a short packet", cap(fr.long))
	}
}

// TestFrameBudget: readers that share a Budget take the memory they
// hold for long packets from it as it grows, and a long packet that
// would take more than is left fails with ErrBudget; what a reader
// holds goes back when a short packet follows (N136) and at Release
// (N140). Packets that fit the read buffer take nothing.
func TestFrameBudget(t *testing.T) {
	const long, buf = 100 << 10, 4 << 10
	b := NewBudget(long + long/2)
	reader := func(stream []byte) *Reader {
		fr := NewReader(bytes.NewReader(stream), 1<<20, buf)
		fr.SetBudget(b)
		return fr
	}
	// One long packet, then a short one, then another long one.
	a := reader(append(append(Append(nil, pattern(long)), Append(nil, pattern(10))...), Append(nil, pattern(long))...))
	if p, err := a.Next(); err != nil || !bytes.Equal(p, pattern(long)) {
		t.Fatalf("the first long packet: %d bytes, %v", len(p), err)
	}
	if got := b.Used(); got != long {
		t.Fatalf("used %d after a long packet, want %d", got, long)
	}
	// A second reader's long packet, half received, finds too little
	// left while the first holds its buffer.
	half := Append(nil, pattern(long))[:HeaderLen+long/2]
	c := reader(half)
	if _, err := c.Next(); !errors.Is(err, ErrBudget) {
		t.Fatalf("a long packet past the budget: %v, want ErrBudget", err)
	}
	if got := b.Used(); got > long+long/2 || got < long {
		t.Errorf("used %d after a refusal, want %d to %d", got, long, long+long/2)
	}
	c.Release()
	if got := b.Used(); got != long {
		t.Errorf("used %d once the refused reader let go, want %d", got, long)
	}
	// The short packet lets the first reader's buffer go; its next long
	// packet takes it again.
	if p, err := a.Next(); err != nil || !bytes.Equal(p, pattern(10)) {
		t.Fatalf("the short packet: %q, %v", p, err)
	}
	if got := b.Used(); got != 0 {
		t.Errorf("used %d after a short packet, want 0", got)
	}
	d := reader(half)
	if _, err := d.Next(); err != io.ErrUnexpectedEOF {
		t.Fatalf("half a long packet within the budget: %v, want io.ErrUnexpectedEOF", err)
	}
	if got := b.Used(); got < long/2 || got > long {
		t.Errorf("used %d holding half a long packet, want %d to %d", got, long/2, long)
	}
	d.Release()
	if p, err := a.Next(); err != nil || !bytes.Equal(p, pattern(long)) {
		t.Fatalf("the second long packet: %d bytes, %v", len(p), err)
	}
	a.Release()
	a.Release() // twice: nothing more
	if got := b.Used(); got != 0 {
		t.Errorf("used %d once every reader let go, want 0", got)
	}
}

// TestFrameBudgetKept: ReleaseKept lets go of the buffer kept after a
// long packet, but not of one in the middle of a packet (N140); a long
// packet shorter than DefaultBuffer (one past a handshake's small read
// buffer) is let go at the next short packet too.
func TestFrameBudgetKept(t *testing.T) {
	const buf = 512
	b := NewBudget(1 << 20)
	stream := append(Append(nil, pattern(10_000)), Append(nil, pattern(10))...)
	fr := NewReader(bytes.NewReader(stream), 1<<20, buf)
	fr.SetBudget(b)
	if p, err := fr.Next(); err != nil || len(p) != 10_000 {
		t.Fatalf("the long packet: %d bytes, %v", len(p), err)
	}
	if b.Used() != 10_000 {
		t.Fatalf("used %d after a long packet of 10,000 bytes", b.Used())
	}
	if p, err := fr.Next(); err != nil || len(p) != 10 {
		t.Fatalf("the short packet: %d bytes, %v", len(p), err)
	}
	if b.Used() != 0 {
		t.Errorf("used %d after a short packet past a long one of less than DefaultBuffer", b.Used())
	}

	half := Append(nil, pattern(10_000))[:HeaderLen+5_000]
	pr, pw := io.Pipe()
	fr = NewReader(pr, 1<<20, buf)
	fr.SetBudget(b)
	go func() {
		pw.Write(Append(nil, pattern(10_000)))
		pw.Write(half)
		pw.Close()
	}()
	if _, err := fr.Next(); err != nil {
		t.Fatal(err)
	}
	fr.ReleaseKept()
	if b.Used() != 0 {
		t.Errorf("used %d after ReleaseKept between packets", b.Used())
	}
	if _, err := fr.Next(); err != io.ErrUnexpectedEOF {
		t.Fatalf("half a packet: %v", err)
	}
	held := b.Used()
	fr.ReleaseKept()
	if held == 0 || b.Used() != held {
		t.Errorf("used %d, then %d after ReleaseKept in the middle of a packet; want it kept", held, b.Used())
	}
	fr.Release()
	if b.Used() != 0 {
		t.Errorf("used %d after Release", b.Used())
	}
}

// TestFrameBudgetTakeExact: a take that fails does not make another that
// fits fail with it, as adding first and giving back after did: a reader
// whose packet fitted was refused, and its connection closed, while
// another's was being refused.
func TestFrameBudgetTakeExact(t *testing.T) {
	b := NewBudget(100)
	if !b.take(1) {
		t.Fatal("the first take")
	}
	var stop atomic.Bool
	var tries atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !stop.Load() {
			b.take(100) // never fits once 1 is held
			tries.Add(1)
		}
	}()
	for tries.Load() < 1000 { // under way
		runtime.Gosched()
	}
	refused := 0
	for range 1_000_000 {
		if b.take(1) {
			b.used.Add(-1)
		} else {
			refused++
		}
	}
	stop.Store(true)
	<-done
	if refused > 0 {
		t.Errorf("%d takes of 1 byte refused with 1 of 100 used", refused)
	}
}
