// Package frame is Fastnet's framing of packets on a byte stream (D20):
// each packet preceded by its length, a 4-byte big-endian unsigned
// integer. The TCP driver reads and writes its streams through a Reader
// and a Writer, and anything else that speaks Fastnet over a stream (the
// command-line tool's probe) frames with Append and reads with a Reader,
// so that the framing is written once.
package frame

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"sync/atomic"
)

// ErrTooLarge reports a packet longer than the maximum packet size:
// announced by the peer, which closes the connection (D20), or handed to
// the writer.
var ErrTooLarge = errors.New("fastnet: packet longer than the maximum packet size")

// ErrBudget reports a long packet that the reader did not read on, its
// memory being more than its Budget had left (N140).
var ErrBudget = errors.New("fastnet: too much memory held for long packets on all connections")

// A Budget bounds the memory that the Readers sharing it hold for packets
// longer than their read buffers: those partly received, and the buffer
// each keeps for the next one (N140). Without one, each Reader holds up
// to its maximum packet size, and a peer on each connection can make it
// hold that much. It is safe for concurrent use.
type Budget struct {
	limit int64
	used  atomic.Int64
}

// NewBudget returns a budget of limit bytes.
func NewBudget(limit int) *Budget { return &Budget{limit: int64(limit)} }

// Limit returns the most the readers sharing b may hold.
func (b *Budget) Limit() int { return int(b.limit) }

// Used returns the bytes the readers sharing b hold.
func (b *Budget) Used() int { return int(b.used.Load()) }

// take takes n bytes of b, and reports whether they were left. It
// never takes more than is left, even for a moment: a take that fails
// does not make another that fits fail with it.
func (b *Budget) take(n int) bool {
	for {
		used := b.used.Load()
		if used+int64(n) > b.limit {
			return false
		}
		if b.used.CompareAndSwap(used, used+int64(n)) {
			return true
		}
	}
}

// HeaderLen is the length of the prefix in front of every packet (D20).
const HeaderLen = 4

// AppendHeader appends the prefix of a packet of n bytes to b.
func AppendHeader(b []byte, n int) []byte {
	return binary.BigEndian.AppendUint32(b, uint32(n))
}

// Append appends packet p, framed, to b.
func Append(b, p []byte) []byte {
	return append(AppendHeader(b, len(p)), p...)
}

// Cut cuts the first framed packet from b, which holds packets framed by
// Append, and returns it and the rest; ok is false if b does not begin
// with a whole one.
func Cut(b []byte) (p, rest []byte, ok bool) {
	if len(b) < HeaderLen {
		return nil, b, false
	}
	n := binary.BigEndian.Uint32(b)
	if uint64(n) > uint64(len(b)-HeaderLen) {
		return nil, b, false
	}
	end := HeaderLen + int(n)
	return b[HeaderLen:end], b[end:], true
}

// DefaultBuffer is the size of the buffers between the framing and the
// TCP connection: many small packets are read and written per system call.
const DefaultBuffer = 64 << 10

// Reader reads packets framed as D20 says from a byte stream, one at a
// time, into memory it reuses.
type Reader struct {
	br        *bufio.Reader
	src       io.Reader // what br reads
	maxPacket int
	// long holds packets that do not fit in br's buffer. It grows with the
	// bytes that actually arrive and is kept (at most maxPacket bytes) for the
	// next long packet, until a short one comes.
	long []byte
	// longLen is the length of the long packet being read, whose header is
	// consumed; 0 when none is.
	longLen int
	// budget, if not nil, bounds long's capacity together with other
	// readers' (SetBudget); the capacity is taken from it as long grows
	// and given back when long is let go (Release).
	budget *Budget
}

// NewReader returns a reader of the packets on r, refusing any longer
// than maxPacket bytes. bufSize is the size of its read buffer (at least 16;
// DefaultBuffer if 0).
func NewReader(r io.Reader, maxPacket, bufSize int) *Reader {
	if bufSize == 0 {
		bufSize = DefaultBuffer
	}
	return &Reader{br: bufio.NewReaderSize(r, bufSize), src: r, maxPacket: maxPacket}
}

// SetBudget makes the reader take the memory it holds for long packets
// from b (N140): a long packet that would take more than b has left
// makes Next return ErrBudget. Call it before the first Next, and
// Release once the reader is done with, so that what it holds goes back
// to b.
func (fr *Reader) SetBudget(b *Budget) { fr.budget = b }

// Release lets go of the memory the reader holds for long packets,
// given back to its budget. Only packets that fit the read buffer are
// read afterwards without taking more.
func (fr *Reader) Release() {
	if fr.budget != nil {
		fr.budget.used.Add(-int64(cap(fr.long)))
	}
	fr.long, fr.longLen = nil, 0
}

// ReleaseKept lets go of the buffer the reader keeps for the next long
// packet, given back to its budget, unless it is in the middle of one:
// for a reader that stops reading for a while (a paused connection),
// which would otherwise hold it, counted, for as long (N140). The packet
// Next returned last must no longer be in use.
func (fr *Reader) ReleaseKept() {
	if fr.longLen == 0 && fr.long != nil {
		fr.Release()
	}
}

// Grow gives the reader a read buffer of size bytes if its own is smaller
// (a server's connection reads its handshake through a small one, N46).
// What the old buffer holds is read first, then the stream.
func (fr *Reader) Grow(size int) {
	if fr.br.Size() >= size {
		return
	}
	src := fr.src
	if n := fr.br.Buffered(); n > 0 {
		held, _ := fr.br.Peek(n)
		src = &prefixReader{prefix: bytes.Clone(held), r: fr.src}
	}
	fr.br = bufio.NewReaderSize(src, size)
}

// prefixReader reads prefix, then r.
type prefixReader struct {
	prefix []byte
	r      io.Reader
}

func (p *prefixReader) Read(b []byte) (int, error) {
	if len(p.prefix) > 0 {
		n := copy(b, p.prefix)
		p.prefix = p.prefix[n:]
		return n, nil
	}
	return p.r.Read(b)
}

// Next returns the next packet. The packet aliases the reader's memory and
// is valid only until the next call.
//
// At the end of the stream between two packets Next returns io.EOF, within
// a packet io.ErrUnexpectedEOF. A length above the maximum yields
// ErrTooLarge before anything is allocated or read past the length.
// A read deadline that passes (os.ErrDeadlineExceeded) loses nothing: the
// next call goes on where this one stopped. After any other error the
// stream is out of step and Next must not be called again.
func (fr *Reader) Next() ([]byte, error) {
	if fr.longLen > 0 {
		return fr.readLong()
	}
	hdr, err := fr.br.Peek(HeaderLen)
	if err != nil {
		if err == io.EOF && len(hdr) > 0 {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr)
	if uint64(n) > uint64(fr.maxPacket) {
		return nil, ErrTooLarge
	}
	if HeaderLen+int(n) <= fr.br.Size() {
		if fr.long != nil {
			// Back to short packets after a long one: its memory
			// (up to maxPacket) is let go, not kept by every
			// connection that once got one (N136). Long packets
			// back to back keep it.
			fr.Release()
		}
		// The packet fits in the read buffer: hand it out in place. Until
		// all of it has arrived nothing is consumed.
		p, err := fr.br.Peek(HeaderLen + int(n))
		if err != nil {
			return nil, noEOF(err)
		}
		fr.br.Discard(HeaderLen + int(n))
		return p[HeaderLen:], nil
	}
	fr.br.Discard(HeaderLen)
	fr.longLen = int(n)
	fr.long = fr.long[:0]
	return fr.readLong()
}

// Buffered reports whether the next packet is already in the read buffer
// whole, so that Next returns it without reading the stream. Next then
// neither reads the stream nor moves the buffer: the packet it returns
// and those it returned before, back to the last one read while Buffered
// was false, all stay valid until the next such call, so that a caller
// may collect them and hand them over together.
func (fr *Reader) Buffered() bool {
	_, ok := fr.BufferedLen()
	return ok
}

// BufferedLen returns the length of the next packet and true if it is
// already in the read buffer whole (Buffered), or false.
func (fr *Reader) BufferedLen() (int, bool) {
	if fr.longLen > 0 || fr.br.Buffered() < HeaderLen {
		return 0, false
	}
	hdr, _ := fr.br.Peek(HeaderLen)
	n := int(binary.BigEndian.Uint32(hdr))
	return n, n <= fr.maxPacket && HeaderLen+n <= fr.br.Buffered()
}

// readLong reads the packet of fr.longLen bytes, more than the read buffer
// holds, into fr.long. The buffer grows at most by the length already
// received (and by at least one read buffer), so a peer that announces a
// long packet and sends little of it gets little memory; each growth is
// taken from the budget, if any, and one that finds too little left
// fails with ErrBudget. What arrived stays in fr.long when a read fails.
func (fr *Reader) readLong() ([]byte, error) {
	n := fr.longLen
	b := fr.long
	for len(b) < n {
		if len(b) == cap(b) {
			size := len(b) + min(n-len(b), max(len(b), fr.br.Size()))
			if fr.budget != nil && !fr.budget.take(size-cap(b)) {
				fr.long = b
				return nil, ErrBudget
			}
			grown := make([]byte, len(b), size)
			copy(grown, b)
			b = grown
			fr.long = b // held, and counted, from now
		}
		m, err := fr.br.Read(b[len(b):min(n, cap(b))])
		b = b[:len(b)+m]
		if err != nil {
			fr.long = b
			return nil, noEOF(err)
		}
	}
	fr.long = b[:0]
	fr.longLen = 0
	return b, nil
}

// noEOF turns io.EOF, which inside a packet means a truncated stream, into
// io.ErrUnexpectedEOF.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// Writer frames packets as D20 says and writes them to a byte stream
// through a buffer. The driver calls Flush when the endpoint has nothing
// more to send, so that a burst of packets costs one write.
type Writer struct {
	bw        *bufio.Writer
	maxPacket int
	hdr       [HeaderLen]byte
}

// NewWriter returns a writer of packets of at most maxPacket bytes to w.
// bufSize is the size of its buffer (DefaultBuffer if 0).
func NewWriter(w io.Writer, maxPacket, bufSize int) *Writer {
	if bufSize == 0 {
		bufSize = DefaultBuffer
	}
	return &Writer{bw: bufio.NewWriterSize(w, bufSize), maxPacket: maxPacket}
}

// Write adds packet p, preceded by its length, to the buffer; the buffer
// goes to the stream when it fills or at Flush. It returns ErrTooLarge
// without writing anything if p is longer than the maximum. Write does not
// keep p. After a write error, the stream is broken: every later call
// returns the same error.
func (fw *Writer) Write(p []byte) error {
	if len(p) > fw.maxPacket {
		return ErrTooLarge
	}
	if _, err := fw.bw.Write(AppendHeader(fw.hdr[:0], len(p))); err != nil {
		return err
	}
	_, err := fw.bw.Write(p)
	return err
}

// Flush writes the buffered packets to the stream.
func (fw *Writer) Flush() error {
	return fw.bw.Flush()
}

// Size returns the size of the writer's buffer.
func (fw *Writer) Size() int { return fw.bw.Size() }

// Buffered returns the number of bytes waiting for Flush.
func (fw *Writer) Buffered() int {
	return fw.bw.Buffered()
}
