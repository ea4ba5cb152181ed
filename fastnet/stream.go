package fastnet

import (
	"math/bits"

	"github.com/fastnet-engine/fastnet/coalesce"
	"github.com/fastnet-engine/fastnet/internal/fifo"
)

// streamQueue holds the messages of a connection over a Stream transport.
// There each message is one packet, the encoded message after the channel
// id, with no sequence header, acks or resends (D4).
type streamQueue struct {
	q     fifo.Queue[streamMsg]
	bytes int // encoded bytes queued
	// free holds recycled message buffers by size class, a power of two
	// from 16 bytes to 64 KiB, freeBytes of them in all (N107).
	free      [streamClasses][][]byte
	freeBytes int
}

// The recycled buffers of a Stream connection's messages: each message is
// encoded in a buffer of the smallest class that holds it, twice its
// encoded length at most or 16 bytes, and at most streamKeep bytes of
// them are kept, as a sender keeps on an idle Datagram connection (N107).
const (
	streamMinShift = 4
	streamClasses  = 13 // 16 B .. 64 KiB
	streamKeep     = 256 << 10
)

// streamClass returns the class of the buffers that hold n bytes, or
// streamClasses if none does.
func streamClass(n int) int {
	if n <= 1<<streamMinShift {
		return 0
	}
	return min(bits.Len(uint(n-1))-streamMinShift, streamClasses)
}

type streamMsg struct {
	ch  int16
	enc []byte
	id  MessageID // SendTracked's, 0 for Send (N55)
}

func (s *streamQueue) empty() bool { return s.q.Len() == 0 }

// push encodes and queues a message, tracked if id is not 0.
func (s *streamQueue) push(ch int16, msg []byte, reliable bool, id MessageID) {
	var buf []byte
	n := coalesce.EncodedLen(len(msg))
	if c := streamClass(n); c < streamClasses {
		if f := s.free[c]; len(f) > 0 {
			buf, s.free[c] = f[len(f)-1][:0], f[:len(f)-1]
			s.freeBytes -= cap(buf)
		} else {
			buf = make([]byte, 0, 1<<(streamMinShift+c))
		}
	}
	enc := coalesce.AppendMessage(buf, msg, reliable)
	s.q.Push(streamMsg{ch: ch, enc: enc, id: id})
	s.bytes += len(enc)
}

// pop writes the next queued message as one packet, and returns its
// tracking ID.
func (s *streamQueue) pop(buf []byte) ([]byte, MessageID, bool) {
	m, ok := s.q.Take()
	if !ok {
		return buf, 0, false
	}
	b := append(appendPacketHeader(buf, m.ch), m.enc...)
	s.bytes -= len(m.enc)
	if c := streamClass(cap(m.enc)); c < streamClasses && cap(m.enc) == 1<<(streamMinShift+c) && s.freeBytes+cap(m.enc) <= streamKeep {
		s.free[c] = append(s.free[c], m.enc)
		s.freeBytes += cap(m.enc)
	}
	return b, m.id, true
}
