package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// lineReader cuts its input into the messages of connect's line mode: a
// line ends at LF, and a CR just before the LF belongs to the line ending
// (CRLF). Any other CR is data, even at the end of the input. A last line
// without a newline is a message too.
type lineReader struct {
	r    *bufio.Reader
	max  int // the longest line, without its ending
	line int // lines read so far
	err  error
}

func newLineReader(r io.Reader, max int) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

// lineTooLongError is a line longer than the largest message.
type lineTooLongError struct {
	line, max int
}

func (e *lineTooLongError) Error() string {
	return fmt.Sprintf("input line %d is longer than %d bytes, the largest message (--raw sends input of any length, in chunks)", e.line, e.max)
}

// next returns the next line, a new slice without its ending, or io.EOF
// at the end of the input, or the error that ended it.
func (l *lineReader) next() ([]byte, error) {
	if l.err != nil {
		return nil, l.err
	}
	l.line++
	var line []byte
	for {
		chunk, err := l.r.ReadSlice('\n')
		// Up to max bytes, then "\r\n", may make a line that fits.
		if len(line)+len(chunk) > l.max+2 {
			l.err = &lineTooLongError{line: l.line, max: l.max}
			return nil, l.err
		}
		line = append(line, chunk...)
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			l.err = err
			if err != io.EOF || len(line) == 0 {
				return nil, err
			}
			// A last line without a newline: as it is.
			if len(line) > l.max {
				l.err = &lineTooLongError{line: l.line, max: l.max}
				return nil, l.err
			}
			return line, nil
		}
		break
	}
	line = bytes.TrimSuffix(line, []byte("\n"))
	line = bytes.TrimSuffix(line, []byte("\r"))
	if len(line) > l.max {
		l.err = &lineTooLongError{line: l.line, max: l.max}
		return nil, l.err
	}
	return line, nil
}

// chunkReader cuts its input into the messages of connect --raw: chunks of
// size bytes, the last one what is left.
type chunkReader struct {
	r    io.Reader
	size int
	err  error
}

func newChunkReader(r io.Reader, size int) *chunkReader {
	return &chunkReader{r: r, size: size}
}

// next returns the next chunk, a new slice, or io.EOF at the end of the
// input, or the error that ended it.
func (c *chunkReader) next() ([]byte, error) {
	if c.err != nil {
		return nil, c.err
	}
	b := make([]byte, c.size)
	n, err := io.ReadFull(c.r, b)
	switch {
	case err == nil:
		return b, nil
	case errors.Is(err, io.ErrUnexpectedEOF):
		c.err = io.EOF
		return b[:n], nil
	}
	c.err = err
	if n > 0 {
		return b[:n], nil // what came before a read error is sent
	}
	return nil, err
}
