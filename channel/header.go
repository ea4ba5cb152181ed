package channel

import (
	"encoding/binary"
	"errors"
)

// The data packet of a message channel over an unreliable transport (D4).
// It is the payload of a Fastnet packet, after the 2-byte channel id:
//
//	 0        1        2        3        4        5        6        7
//	+--------+--------+--------+--------+--------+--------+--------+-----
//	| flags  |  packet sequence number  | reliable sequence number | chunk
//	+--------+--------+--------+--------+--------+--------+--------+-----
//
//	flags  0x01 reliable, 0x02 start of message; other bits sent as 0 and
//	       ignored on receipt
//	packet sequence number    24-bit two's complement, big-endian (D1, D5)
//	reliable sequence number  24-bit two's complement, big-endian (D7)
//	chunk  a piece of an encoded message (D12)

// HeaderLen is the size of a data packet header: the message MTU is the
// payload MTU minus HeaderLen (D12).
const HeaderLen = 7

// Flag bits of the data packet header (D4).
const (
	FlagReliable = 0x01 // the packet is reliable
	FlagStart    = 0x02 // the packet starts a message
)

// Errors returned by [ParseHeader].
var (
	// ErrShort reports a packet shorter than HeaderLen.
	ErrShort = errors.New("channel: packet shorter than its header")
	// ErrBadSeq reports a sequence number below MinSeq (D5).
	ErrBadSeq = errors.New("channel: sequence number below -10000")
)

// Header is the header of a message channel data packet (D4).
type Header struct {
	// Reliable is set on every packet of a reliable message (D12).
	Reliable bool
	// Start is set on the first packet of a message (D12).
	Start bool
	// Seq is the packet sequence number (D5).
	Seq Seq
	// Rel is the reliable sequence number R (D7): for a reliable packet the
	// value R took when it was sent, for an unreliable one the current R.
	Rel Seq
}

// Append appends the encoded header to b and returns the extended slice.
func (h Header) Append(b []byte) []byte {
	var flags byte
	if h.Reliable {
		flags |= FlagReliable
	}
	if h.Start {
		flags |= FlagStart
	}
	return append(b, flags,
		byte(h.Seq>>16), byte(h.Seq>>8), byte(h.Seq),
		byte(h.Rel>>16), byte(h.Rel>>8), byte(h.Rel))
}

// get24 reads a 24-bit two's complement big-endian integer (D1).
func get24(b []byte) Seq {
	v := int32(b[0])<<16 | int32(b[1])<<8 | int32(b[2])
	return Seq(v << 8 >> 8)
}

// ParseHeader decodes the header at the start of b, the packet payload after
// the channel id; the chunk is b[HeaderLen:]. It returns ErrShort if b is
// shorter than HeaderLen and ErrBadSeq if either sequence number is below
// MinSeq (D5). Every 24-bit value is otherwise valid.
func ParseHeader(b []byte) (Header, error) {
	// Written to be inlined where a packet is parsed (N105).
	if len(b) < HeaderLen {
		return Header{}, ErrShort
	}
	x, y := binary.BigEndian.Uint32(b), binary.BigEndian.Uint32(b[3:])
	seq, rel := Seq(int32(x<<8)>>8), Seq(int32(y<<8)>>8)
	// A 24-bit value is MaxSeq at most: only the low end is tested.
	if seq < MinSeq || rel < MinSeq {
		return Header{}, ErrBadSeq
	}
	return Header{Reliable: x&(FlagReliable<<24) != 0, Start: x&(FlagStart<<24) != 0, Seq: seq, Rel: rel}, nil
}
