package fastnet

import (
	"github.com/fastnet-engine/fastnet/clock"
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
	// a sender keeps on an idle Datagram connection (N107). It is made at
	// the first push: the pool's 650 bytes were a ninth of every Datagram
	// connection's state, which never uses it.
	bufs *bufpool.Pool
}

// streamKeep bounds the bytes of free message buffers a Stream connection
// keeps (its bufs' Limit).
const streamKeep = 256 << 10

type streamMsg struct {
	ch       int16
	deferred bool // its MD5 checksum is still to be computed (fillSums)
	enc      []byte
	id       MessageID // SendTracked's, 0 for Send (N55)
}

// Deferred checksums on a Stream (N125): where digests computed together
// cost less than one at a time (coalesce.Batched), a message of up to
// streamMaxDeferred bytes queued behind others gets its MD5 checksum (D3)
// as its packet is written, with those of up to streamSumBatch-1 deferred
// messages queued behind it, as a Datagram sender's are (channel.Sender's
// fillSums). A message queued alone is encoded with its checksum at once:
// a transport that writes each message as it is sent, as the TCP driver
// does, has nothing to compute it with, and a deferred checksum computed
// alone costs a parse of the header more.
const (
	streamMaxDeferred = 4096
	streamSumBatch    = 2 * coalesce.BatchLanes
)

func (s *streamQueue) empty() bool { return s.q.Len() == 0 }

// push encodes and queues a message, tracked if id is not 0.
func (s *streamQueue) push(ch int16, msg []byte, reliable bool, id MessageID) {
	if s.bufs == nil {
		s.bufs = &bufpool.Pool{Limit: streamKeep}
	}
	buf := s.bufs.Get(coalesce.EncodedLen(len(msg)))[:0]
	var (
		enc      []byte
		deferred bool
	)
	if s.q.Len() > 0 && len(msg) <= streamMaxDeferred && coalesce.Batched() {
		enc, deferred = coalesce.AppendMessageDeferred(buf, msg, reliable)
	} else {
		enc = coalesce.AppendMessage(buf, msg, reliable)
	}
	s.q.Push(streamMsg{ch: ch, deferred: deferred, enc: enc, id: id})
	s.bytes += len(enc)
}

// fillSums computes the deferred checksums of the messages at the front
// of the queue, the first among them, up to streamSumBatch of them.
func (s *streamQueue) fillSums() {
	var encs [streamSumBatch][]byte
	k := 0
	for i := 0; i < s.q.Len() && k < streamSumBatch; i++ {
		m := s.q.At(i)
		if !m.deferred {
			break // the batch is the deferred messages at the front
		}
		encs[k] = m.enc
		m.deferred = false
		k++
	}
	coalesce.FillChecksums(encs[:k])
}

// pop writes the next queued message as one packet, and returns its
// tracking ID.
func (s *streamQueue) pop(buf []byte) ([]byte, MessageID, bool) {
	if s.q.Len() > 0 && s.q.At(0).deferred {
		s.fillSums()
	}
	m, ok := s.q.Take()
	if !ok {
		return buf, 0, false
	}
	b := append(appendPacketHeader(buf, m.ch), m.enc...)
	s.bytes -= len(m.enc)
	s.bufs.Put(m.enc)
	return b, m.id, true
}

// Batches of Stream packets (N121). On a Stream transport each message
// is a packet of its own (D4), verified alone as it is handled. A
// transport that hands several packets over in one HandleDatagrams call
// (the TCP driver, those its read buffer holds) has the digests of their
// messages computed together first, as a Datagram connection's bundles
// do (N86, N102), and each packet then handled as it would be alone.

// streamSums is what handleStreamBatch computed for a batch: the digests
// of the packets' messages, and for each packet of the batch the digest
// that is its message's (at), or -1.
type streamSums struct {
	payloads [][]byte
	digests  [][coalesce.MD5Len]byte
	at       []int
	presums  coalesce.Presums
}

// handleStreamBatch is HandleDatagrams on a Stream transport, where the
// machine computes digests together (coalesce.Batched): the digests
// of the packets that are messages of established connections, with MD5
// checksums, are computed together, up to maxBatchSums at a time, then
// each packet is handled as HandleDatagram handles it, with its digest
// at hand. What a packet before it changes (its connection ended, say)
// only leaves a digest unused.
func (e *Endpoint) handleStreamBatch(now clock.Time, ds []Incoming) {
	s := &e.streamSums
	for len(ds) > 0 {
		k := 0
		s.payloads, s.at = s.payloads[:0], s.at[:0]
		for ; k < len(ds) && len(s.payloads) < maxBatchSums; k++ {
			s.at = append(s.at, -1)
			if p, ok := e.streamPayload(ds[k]); ok {
				s.at[k] = len(s.payloads)
				s.payloads = append(s.payloads, p)
			}
		}
		n := len(s.payloads)
		if n >= 2 {
			if cap(s.digests) < n {
				s.digests = make([][coalesce.MD5Len]byte, n)
			}
			s.digests = s.digests[:n]
			coalesce.Digests(s.digests, s.payloads)
			e.streamSummed += uint64(n)
		}
		for i := range ds[:k] {
			if j := s.at[i]; n >= 2 && j >= 0 {
				s.presums.Set(s.payloads[j], s.digests[j])
				e.streamPre = &s.presums
			}
			e.HandleDatagram(now, ds[i].From, ds[i].Data)
			e.streamPre = nil
		}
		clear(s.payloads)
		s.presums.Clear() // nothing of the batch kept alive
		ds = ds[k:]
	}
}

// streamPayload returns the payload of the message packet d carries, if
// HandleDatagram would hand it to handleStreamMessage as things stand
// and its checksum is an MD5 digest (D3): a message channel's packet of
// an established connection, its message encoded whole and no longer
// than MaxMessageSize.
func (e *Endpoint) streamPayload(d Incoming) ([]byte, bool) {
	if len(d.Data) > e.maxIncoming() {
		return nil, false
	}
	ch, p, err := parsePacket(d.Data)
	if err != nil || ch < 0 {
		return nil, false
	}
	if c := e.connAt(d.From); c == nil || !c.established() {
		return nil, false
	}
	h, err := coalesce.ParseHeader(p, e.cfg.MaxMessageSize)
	if err != nil || h.Len <= coalesce.ShortChecksumMax || h.EncodedLen() != len(p) {
		return nil, false
	}
	return p[h.HeaderLen : h.HeaderLen+h.Len], true
}
