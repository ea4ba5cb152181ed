package coalesce

import (
	"crypto/md5"
	"math"

	"github.com/fastnet-engine/fastnet/internal/multimd5"
)

// The checksums of many messages at once. An MD5 digest per message is
// most of what the protocol costs for small messages (D3); a processor
// with a vector unit computes several side by side for about the price
// of one (package multimd5). A sender that queues many messages defers
// their digests and fills them together before they leave; a receiver
// given a bundle of packets computes the digests of the whole messages in
// it together, before handling the packets one by one.

// Batched reports whether computing digests together is faster than one
// at a time on this machine: whether deferring them gains anything.
func Batched() bool { return multimd5.Vector() }

// BatchLanes is the number of digests computed side by side.
const BatchLanes = multimd5.Lanes

// maxBatch is the number of digests computed in one call.
const maxBatch = 2 * BatchLanes

// AppendMessageDeferred is AppendMessage, except that the MD5 checksum of
// a payload of more than ShortChecksumMax bytes is left as zeros, for
// FillChecksums to compute later; deferred reports whether it was. A short
// checksum is never deferred.
func AppendMessageDeferred(b, payload []byte, reliable bool) (enc []byte, deferred bool) {
	if len(payload) <= ShortChecksumMax {
		return AppendMessage(b, payload, reliable), false
	}
	b = appendHeader(b, len(payload), reliable)
	b = append(b, payload...)
	return append(b, make([]byte, MD5Len)...), true
}

// PutMessageDeferred writes into enc, EncodedLen(len(payload)) bytes,
// the encoding AppendMessageDeferred appends, and reports whether its
// checksum was deferred, in which case the checksum's place is left as
// it was, for FillChecksum or FillChecksums to write: a queue that
// encodes each message into a buffer of its size, and fills the
// checksums before they leave, writes each byte once, with no append's
// test of capacity (N128). It panics if enc is shorter, and, as
// AppendMessage, for a payload of 4 GiB or more.
func PutMessageDeferred(enc, payload []byte, reliable bool) (deferred bool) {
	n := len(payload)
	if n <= ShortChecksumMax {
		// A short checksum, never deferred, written as AppendMessage
		// writes it, within enc.
		_ = enc[EncodedLen(n)-1]
		AppendMessage(enc[:0:len(enc)], payload, reliable)
		return false
	}
	var f byte
	if reliable {
		f = FlagReliable
	}
	hl := 2
	if n <= 0xff {
		_ = enc[hl+n+MD5Len-1]
		enc[0], enc[1] = f, byte(n)
	} else {
		if uint64(n) > 0xffffffff {
			panic("coalesce: payload of 4 GiB or more")
		}
		hl = 1 + lengthLen(n)
		_ = enc[hl+n+MD5Len-1]
		enc[0] = f | byte(hl-2)<<flagLenShift
		for i, u := hl-1, uint(n); i > 0; i, u = i-1, u>>8 {
			enc[i] = byte(u)
		}
	}
	copy(enc[hl:], payload)
	return true
}

// FillChecksum computes and writes the deferred checksum of enc, one
// message encoded by AppendMessageDeferred with its checksum deferred.
// Anything else is left as it is.
func FillChecksum(enc []byte) {
	h, err := ParseHeader(enc, math.MaxInt)
	if err != nil || h.Len <= ShortChecksumMax || h.EncodedLen() != len(enc) {
		return
	}
	end := h.HeaderLen + h.Len
	sum := md5.Sum(enc[h.HeaderLen:end])
	copy(enc[end:], sum[:])
}

// FillChecksums computes and writes the deferred checksums of encs, each
// exactly one message encoded by AppendMessageDeferred with its checksum
// deferred. An encoding that is not one such message is left as it is.
// One alone is FillChecksum's, with no batch set up.
func FillChecksums(encs [][]byte) {
	if len(encs) == 1 {
		FillChecksum(encs[0])
		return
	}
	var (
		payloads [maxBatch][]byte
		sums     [maxBatch][]byte
		digests  [maxBatch][multimd5.Size]byte
	)
	for len(encs) > 0 {
		k := 0
		for len(encs) > 0 && k < maxBatch {
			enc := encs[0]
			encs = encs[1:]
			h, err := ParseHeader(enc, math.MaxInt)
			if err != nil || h.Len <= ShortChecksumMax || h.EncodedLen() != len(enc) {
				continue
			}
			end := h.HeaderLen + h.Len
			payloads[k], sums[k] = enc[h.HeaderLen:end], enc[end:]
			k++
		}
		multimd5.Sums(digests[:k], payloads[:k])
		for i := 0; i < k; i++ {
			// An array store, not copy: a call to memmove for 16
			// bytes cost more than the move. sums[i] holds exactly
			// MD5Len bytes (EncodedLen above).
			*(*[multimd5.Size]byte)(sums[i]) = digests[i]
		}
	}
}

// Presums holds digests computed ahead of the messages they protect, for
// VerifyChecksumWith: a receiver handling a bundle computes the digests of
// its whole messages together, then hands over each message's with
// Set before the message is verified, and calls Clear after. The zero
// value holds nothing.
type Presums struct {
	p      *byte
	n      int
	digest [MD5Len]byte
	set    bool
}

// Set makes d the digest of payload, for VerifyChecksumWith given the
// same slice (the same first byte in memory and the same length) until
// Clear. payload must not change meanwhile.
func (ps *Presums) Set(payload []byte, d [MD5Len]byte) {
	if len(payload) == 0 {
		ps.set = false
		return
	}
	ps.p, ps.n, ps.digest, ps.set = &payload[0], len(payload), d, true
}

// Clear forgets the digest given to Set.
func (ps *Presums) Clear() { ps.set, ps.p = false, nil }

// Digests computes the MD5 digests of payloads together: digests[i] of
// payloads[i]. digests must be at least as long as payloads.
func Digests(digests [][MD5Len]byte, payloads [][]byte) { multimd5.Sums(digests, payloads) }

// VerifyChecksumWith is VerifyChecksum, taking the digest from ps if ps
// holds the digest of this very payload.
func VerifyChecksumWith(ps *Presums, payload, sum []byte) bool {
	n := len(payload)
	if ps != nil && ps.set && n > ShortChecksumMax && ps.n == n && ps.p == &payload[0] {
		return len(sum) == MD5Len && ps.digest == [MD5Len]byte(sum)
	}
	return VerifyChecksum(payload, sum)
}

// ParseMessageWith is ParseMessage, taking the digest from ps if ps holds
// the digest of the message's payload.
func ParseMessageWith(ps *Presums, b []byte, maxLen int) (Message, error) {
	h, err := ParseHeader(b, maxLen)
	if err != nil {
		return Message{}, err
	}
	return h.MessageWith(ps, b)
}

// MessageWith is ParseMessageWith for an encoded message b whose header,
// h, is parsed already.
func (h Header) MessageWith(ps *Presums, b []byte) (Message, error) {
	switch n := h.EncodedLen(); {
	case len(b) < n:
		return Message{}, ErrShort
	case len(b) > n:
		return Message{}, ErrTrailing
	}
	end := h.HeaderLen + h.Len
	payload := b[h.HeaderLen:end:end]
	if !VerifyChecksumWith(ps, payload, b[end:]) {
		return Message{}, ErrChecksum
	}
	return Message{Reliable: h.Reliable, Payload: payload}, nil
}
