package channel

import (
	"encoding/binary"
	"errors"
	"slices"
)

// The ack packet (D13), the payload of a Fastnet packet on channel -5:
//
//	+--------+--------+--------+--------+--------+-- ...
//	|    channel      |    sequence number       |  more pairs
//	+--------+--------+--------+--------+--------+-- ...
//
//	channel          16-bit two's complement, big-endian: a message channel
//	sequence number  24-bit two's complement, big-endian (D5)
//
// The payload is one or more such 5-byte pairs; any other length is
// malformed.

// AckLen is the size of one ack pair.
const AckLen = 5

// ErrBadAcks reports an ack payload whose length is not a positive multiple
// of AckLen (D13).
var ErrBadAcks = errors.New("channel: ack payload is not a positive multiple of 5 bytes")

// Ack acknowledges one reliable packet of one channel (D13).
type Ack struct {
	// Channel is the message channel the packet travelled on.
	Channel int16
	// Seq is the packet's sequence number.
	Seq Seq
}

// AppendAck appends the 5-byte encoding of a to b and returns the extended
// slice.
func AppendAck(b []byte, a Ack) []byte {
	return append(b, byte(a.Channel>>8), byte(a.Channel),
		byte(a.Seq>>16), byte(a.Seq>>8), byte(a.Seq))
}

// AppendAcks appends the encodings of as to b, as AppendAck would one
// after the other, growing b once, and returns the extended slice.
func AppendAcks(b []byte, as []Ack) []byte {
	n := len(b)
	b = slices.Grow(b, len(as)*AckLen)[:n+len(as)*AckLen]
	e := b[n:]
	// Two pairs at a time, in a store of eight bytes and one of two:
	// five stores of a byte a pair, and the loop around each, cost 10
	// instructions more a reliable message in full bundles.
	for len(as) >= 2 && len(e) >= 2*AckLen {
		a, z := as[0], as[1]
		binary.BigEndian.PutUint64(e, uint64(uint16(a.Channel))<<48|uint64(uint32(a.Seq)&0xffffff)<<24|
			uint64(uint16(z.Channel))<<8|uint64(byte(z.Seq>>16)))
		binary.BigEndian.PutUint16(e[8:], uint16(z.Seq))
		e, as = e[2*AckLen:], as[2:]
	}
	if len(as) > 0 && len(e) >= AckLen {
		a := as[0]
		binary.BigEndian.PutUint32(e, uint32(uint16(a.Channel))<<16|uint32(uint16(a.Seq>>8)))
		e[4] = byte(a.Seq)
	}
	return b
}

// AckIter iterates over the acks of an ack payload without allocating:
//
//	it, err := channel.ParseAcks(payload)
//	for it.Next() {
//		a := it.Ack()
//		...
//	}
//
// It aliases the payload given to ParseAcks.
type AckIter struct {
	b []byte
	a Ack
}

// ParseAcks checks the length of an ack payload (D13) and returns an
// iterator over its acks. It returns ErrBadAcks unless len(b) is a positive
// multiple of AckLen.
func ParseAcks(b []byte) (AckIter, error) {
	if len(b) == 0 || len(b)%AckLen != 0 {
		return AckIter{}, ErrBadAcks
	}
	return AckIter{b: b}, nil
}

// Next advances to the next ack and reports whether there is one. Pairs that
// cannot acknowledge anything, a negative (non-message) channel or a
// sequence number below MinSeq, are skipped.
func (it *AckIter) Next() bool {
	// Written to be inlined where acks are handled (N105).
	for len(it.b) >= AckLen {
		x, lo := binary.BigEndian.Uint32(it.b), it.b[4]
		it.b = it.b[AckLen:]
		ch, seq := int16(x>>16), Seq(int32(x<<16|uint32(lo)<<8)>>8)
		// A 24-bit value is MaxSeq at most: only the low end is tested.
		if ch >= 0 && seq >= MinSeq {
			it.a = Ack{Channel: ch, Seq: seq}
			return true
		}
	}
	return false
}

// SkipChannel moves past the pairs that come next while they are of
// channel ch, as Next would, for a caller that has nothing to do with the
// acks of ch: those Next would skip, of a sequence number below MinSeq,
// and those it would move to alike.
func (it *AckIter) SkipChannel(ch int16) {
	b := it.b
	for len(b) >= AckLen && binary.BigEndian.Uint16(b) == uint16(ch) {
		b = b[AckLen:]
	}
	it.b = b
}

// Ack returns the ack Next moved to.
func (it *AckIter) Ack() Ack { return it.a }

// isAck reports whether the pair at b[k:] acknowledges packet seq, a
// valid sequence number, of channel ch, a message channel: whether Next,
// over b[k:], would move to that ack.
func isAck(b []byte, k int, ch int16, seq Seq) bool {
	// The pair's bytes are compared with those of the ack (AppendAck):
	// the encoding of a valid pair is one to one.
	return k+AckLen <= len(b) && b[k+4] == byte(seq) &&
		binary.BigEndian.Uint32(b[k:k+4]) == uint32(uint16(ch))<<16|uint32(uint16(seq>>8))
}
