package tcpdriver

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
)

// ErrFrameTooLarge reports a packet longer than the maximum packet size:
// announced by the peer, which closes the connection (D20), or handed to
// the writer.
var ErrFrameTooLarge = errors.New("tcpdriver: packet longer than the maximum packet size")

// frameHeaderLen is the length of the prefix in front of every packet (D20).
const frameHeaderLen = 4

// defaultFrameBuffer is the size of the buffers between the framing and the
// TCP connection: many small packets are read and written per system call.
const defaultFrameBuffer = 64 << 10

// frameReader reads packets framed as D20 says from a byte stream, one at a
// time, into memory it reuses.
type frameReader struct {
	br        *bufio.Reader
	src       io.Reader // what br reads
	maxPacket int
	// long holds packets that do not fit in br's buffer. It grows with the
	// bytes that actually arrive and is kept (at most maxPacket bytes) for the
	// next long packet.
	long []byte
	// longLen is the length of the long packet being read, whose header is
	// consumed; 0 when none is.
	longLen int
}

// newFrameReader returns a reader of the packets on r, refusing any longer
// than maxPacket bytes. bufSize is the size of its read buffer (at least 16;
// defaultFrameBuffer if 0).
func newFrameReader(r io.Reader, maxPacket, bufSize int) *frameReader {
	if bufSize == 0 {
		bufSize = defaultFrameBuffer
	}
	return &frameReader{br: bufio.NewReaderSize(r, bufSize), src: r, maxPacket: maxPacket}
}

// grow gives the reader a read buffer of size bytes if its own is smaller
// (a server's connection reads its handshake through a small one, N46).
// What the old buffer holds is read first, then the stream.
func (fr *frameReader) grow(size int) {
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

// next returns the next packet. The packet aliases the reader's memory and
// is valid only until the next call.
//
// At the end of the stream between two packets next returns io.EOF, within
// a packet io.ErrUnexpectedEOF. A length above the maximum yields
// ErrFrameTooLarge before anything is allocated or read past the length.
// A read deadline that passes (os.ErrDeadlineExceeded) loses nothing: the
// next call goes on where this one stopped. After any other error the
// stream is out of step and next must not be called again.
func (fr *frameReader) next() ([]byte, error) {
	if fr.longLen > 0 {
		return fr.readLong()
	}
	hdr, err := fr.br.Peek(frameHeaderLen)
	if err != nil {
		if err == io.EOF && len(hdr) > 0 {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr)
	if uint64(n) > uint64(fr.maxPacket) {
		return nil, ErrFrameTooLarge
	}
	if frameHeaderLen+int(n) <= fr.br.Size() {
		// The packet fits in the read buffer: hand it out in place. Until
		// all of it has arrived nothing is consumed.
		p, err := fr.br.Peek(frameHeaderLen + int(n))
		if err != nil {
			return nil, noEOF(err)
		}
		fr.br.Discard(frameHeaderLen + int(n))
		return p[frameHeaderLen:], nil
	}
	fr.br.Discard(frameHeaderLen)
	fr.longLen = int(n)
	fr.long = fr.long[:0]
	return fr.readLong()
}

// buffered reports whether the next packet is already in the read buffer
// whole, so that next returns it without reading the stream.
func (fr *frameReader) buffered() bool {
	if fr.longLen > 0 || fr.br.Buffered() < frameHeaderLen {
		return false
	}
	hdr, _ := fr.br.Peek(frameHeaderLen)
	n := int(binary.BigEndian.Uint32(hdr))
	return n <= fr.maxPacket && frameHeaderLen+n <= fr.br.Buffered()
}

// readLong reads the packet of fr.longLen bytes, more than the read buffer
// holds, into fr.long. The buffer grows at most by the length already
// received (and by at least one read buffer), so a peer that announces a
// long packet and sends little of it gets little memory. What arrived
// stays in fr.long when a read fails.
func (fr *frameReader) readLong() ([]byte, error) {
	n := fr.longLen
	b := fr.long
	for len(b) < n {
		if len(b) == cap(b) {
			grown := make([]byte, len(b), len(b)+min(n-len(b), max(len(b), fr.br.Size())))
			copy(grown, b)
			b = grown
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

// frameWriter frames packets as D20 says and writes them to a byte stream
// through a buffer. The driver calls flush when the endpoint has nothing
// more to send, so that a burst of packets costs one write.
type frameWriter struct {
	bw        *bufio.Writer
	maxPacket int
	hdr       [frameHeaderLen]byte
}

// newFrameWriter returns a writer of packets of at most maxPacket bytes to w.
// bufSize is the size of its buffer (defaultFrameBuffer if 0).
func newFrameWriter(w io.Writer, maxPacket, bufSize int) *frameWriter {
	if bufSize == 0 {
		bufSize = defaultFrameBuffer
	}
	return &frameWriter{bw: bufio.NewWriterSize(w, bufSize), maxPacket: maxPacket}
}

// write adds packet p, preceded by its length, to the buffer; the buffer
// goes to the stream when it fills or at flush. It returns ErrFrameTooLarge
// without writing anything if p is longer than the maximum. write does not
// keep p. After a write error, the stream is broken: every later call
// returns the same error.
func (fw *frameWriter) write(p []byte) error {
	if len(p) > fw.maxPacket {
		return ErrFrameTooLarge
	}
	binary.BigEndian.PutUint32(fw.hdr[:], uint32(len(p)))
	if _, err := fw.bw.Write(fw.hdr[:]); err != nil {
		return err
	}
	_, err := fw.bw.Write(p)
	return err
}

// flush writes the buffered packets to the stream.
func (fw *frameWriter) flush() error {
	return fw.bw.Flush()
}

// size returns the size of the writer's buffer.
func (fw *frameWriter) size() int { return fw.bw.Size() }

// buffered returns the number of bytes waiting for flush.
func (fw *frameWriter) buffered() int {
	return fw.bw.Buffered()
}
