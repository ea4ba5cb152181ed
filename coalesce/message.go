package coalesce

import "errors"

// The message format (spec "The Message Format", D2, D3):
//
//	 0       1 .. n        n+1 .. n+L      n+L+1 .. n+L+C
//	+-------+-------------+---------------+---------------+
//	| flags | length (n)  | payload (L)   | checksum (C)  |
//	+-------+-------------+---------------+---------------+
//
//	flags  0x01  reliable
//	       0x02..0x20  reserved: sent as 0, ignored on receipt (D2)
//	       0xC0  n-1: the length field has ((flags>>6)&3)+1 bytes (D2)
//	length L, big-endian unsigned, n = 1..4 bytes; the encoder uses the
//	       shortest n, the decoder accepts any (D2)
//	checksum  C = L bytes if L < 16, else C = 16 (D3)
//
// An encoding is therefore 1 + n + L + C bytes; [EncodedLen] gives the size
// for the shortest length field.

// Flag bits of the message flags byte (D2).
const (
	FlagReliable = 0x01 // the message was sent reliably
	flagLenShift = 6    // the length-of-length sits in the top two bits
)

// MaxHeaderLen is the longest message header: the flags byte and a 4-byte
// length.
const MaxHeaderLen = 5

// MaxOverhead is the most an encoding adds to a payload: the longest header
// and the MD5 checksum.
const MaxOverhead = MaxHeaderLen + MD5Len

// Errors returned by [ParseHeader] and [ParseMessage]. They are sentinels so
// that a stream of bad packets costs no allocation; compare with errors.Is.
var (
	// ErrShort reports that the input ends before what its header announces
	// (or before the header itself).
	ErrShort = errors.New("coalesce: message truncated")
	// ErrTooLarge reports a length field above the caller's maximum.
	ErrTooLarge = errors.New("coalesce: message longer than the maximum")
	// ErrTrailing reports bytes after the end of the encoded message.
	ErrTrailing = errors.New("coalesce: bytes after the end of the message")
	// ErrChecksum reports a checksum that does not match the payload (D3).
	ErrChecksum = errors.New("coalesce: checksum mismatch")
)

// Header is the flags byte and length of an encoded message.
type Header struct {
	// Reliable is the reliability flag (bit 0x01).
	Reliable bool
	// Len is the payload length.
	Len int
	// HeaderLen is the size of the flags byte and the length field (2..5).
	HeaderLen int
}

// EncodedLen returns the size of the whole encoding h describes: header,
// payload and checksum.
func (h Header) EncodedLen() int { return h.HeaderLen + h.Len + ChecksumLen(h.Len) }

// lengthLen returns the size of the shortest length field that holds n (D2).
func lengthLen(n int) int {
	switch {
	case n <= 0xff:
		return 1
	case n <= 0xffff:
		return 2
	case n <= 0xffffff:
		return 3
	}
	return 4
}

// EncodedLen returns the size of the encoding [AppendMessage] produces for a
// payload of payloadLen bytes.
func EncodedLen(payloadLen int) int {
	return 1 + lengthLen(payloadLen) + payloadLen + ChecksumLen(payloadLen)
}

// AppendMessage appends the encoding of payload to b and returns the
// extended slice: the flags byte (reliability and the length-of-length, D2),
// the payload length in the shortest field, the payload and its checksum
// (D3). It never fails; a payload of 4 GiB or more cannot be encoded and
// panics, since no configuration admits one.
func AppendMessage(b, payload []byte, reliable bool) []byte {
	b = appendHeader(b, len(payload), reliable)
	b = append(b, payload...)
	return AppendChecksum(b, payload)
}

// appendHeader appends the flags byte and the length field of a message
// of n payload bytes.
func appendHeader(b []byte, n int, reliable bool) []byte {
	var f byte
	if reliable {
		f = FlagReliable
	}
	switch u := uint(n); {
	case u <= 0xff:
		return append(b, f, byte(u))
	case u <= 0xffff:
		return append(b, f|1<<flagLenShift, byte(u>>8), byte(u))
	case u <= 0xffffff:
		return append(b, f|2<<flagLenShift, byte(u>>16), byte(u>>8), byte(u))
	case u <= 0xffffffff:
		return append(b, f|3<<flagLenShift, byte(u>>24), byte(u>>16), byte(u>>8), byte(u))
	}
	panic("coalesce: payload of 4 GiB or more")
}

// ParseHeader reads the flags byte and the length field at the start of b,
// which may hold only part of a message: it needs the first 2 to 5 bytes.
// It returns ErrShort if b ends before the length field does, and
// ErrTooLarge if the announced payload is longer than maxLen (a negative
// maxLen admits only empty payloads). Nothing is allocated, so a hostile
// length costs nothing.
func ParseHeader(b []byte, maxLen int) (Header, error) {
	// Written to be inlined where a packet is parsed (N105): the first
	// test covers an empty b too, as a length field has a byte at least.
	if len(b) < 2 || len(b) < 2+int(b[0]>>flagLenShift) {
		return Header{}, ErrShort
	}
	hl := 2 + int(b[0]>>flagLenShift)
	var n uint64
	for _, c := range b[1:hl] {
		n = n<<8 | uint64(c)
	}
	if n > uint64(max(maxLen, 0)) {
		return Header{}, ErrTooLarge
	}
	return Header{Reliable: b[0]&FlagReliable != 0, Len: int(n), HeaderLen: hl}, nil
}

// Message is a decoded message.
type Message struct {
	// Reliable is the message's reliability flag.
	Reliable bool
	// Payload aliases the input ParseMessage was given.
	Payload []byte
}

// ParseMessage decodes b, which must be exactly one encoded message, and
// verifies its checksum. It returns ErrShort if b is shorter than its header
// announces, ErrTooLarge if the payload is longer than maxLen, ErrTrailing
// if b is longer, and ErrChecksum if the checksum does not match. The
// payload aliases b; nothing is allocated.
func ParseMessage(b []byte, maxLen int) (Message, error) {
	return ParseMessageWith(nil, b, maxLen)
}
