package fastnet

import (
	"github.com/fastnet-engine/fastnet/coalesce"
	"github.com/fastnet-engine/fastnet/internal/bufpool"
	"github.com/fastnet-engine/fastnet/internal/fifo"
)

// streamQueue holds the messages of a connection over a Stream transport.
// There each message is one packet, the encoded message after the channel
// id, with no sequence header, acks or resends (D4).
type streamQueue struct {
	q     fifo.Queue[streamMsg]
	bytes int // encoded bytes queued
	// bufs recycles the messages' buffers: each is encoded in one of the
	// smallest size class that holds it, twice its encoded length at most
	// or 32 bytes, and at most streamKeep bytes of free ones are kept, as
	// a sender keeps on an idle Datagram connection (N107).
	bufs bufpool.Pool
}

// streamKeep bounds the bytes of free message buffers a Stream connection
// keeps (its bufs' Limit, set by newConn).
const streamKeep = 256 << 10

type streamMsg struct {
	ch  int16
	enc []byte
	id  MessageID // SendTracked's, 0 for Send (N55)
}

func (s *streamQueue) empty() bool { return s.q.Len() == 0 }

// push encodes and queues a message, tracked if id is not 0.
func (s *streamQueue) push(ch int16, msg []byte, reliable bool, id MessageID) {
	buf := s.bufs.Get(coalesce.EncodedLen(len(msg)))[:0]
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
	s.bufs.Put(m.enc)
	return b, m.id, true
}
