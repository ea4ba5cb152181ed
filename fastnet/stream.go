package fastnet

import (
	"github.com/fastnet-engine/fastnet/coalesce"
	"github.com/fastnet-engine/fastnet/internal/fifo"
)

// streamQueue holds the messages of a connection over a Stream transport.
// There each message is one packet, the encoded message after the channel
// id, with no sequence header, acks or resends (D4).
type streamQueue struct {
	q     fifo.Queue[streamMsg]
	bytes int      // encoded bytes queued
	free  [][]byte // recycled message buffers
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
	if n := len(s.free); n > 0 {
		buf, s.free = s.free[n-1][:0], s.free[:n-1]
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
	if cap(m.enc) <= 64<<10 && len(s.free) < 64 {
		s.free = append(s.free, m.enc)
	}
	return b, m.id, true
}
