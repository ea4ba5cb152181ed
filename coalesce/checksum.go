package coalesce

import (
	"crypto/md5"
	"math/bits"
)

// The message checksum (D3). A payload shorter than [ShortChecksumMax]+1
// bytes is followed by its own bit string reversed and inverted: checksum
// byte i is NOT(bit-reverse(payload[len-1-i])). A longer payload is followed
// by its 16-byte MD5 digest. An empty payload has an empty checksum.

// MD5Len is the size of the checksum of a payload of 16 bytes or more.
const MD5Len = md5.Size

// ShortChecksumMax is the longest payload protected by the reversed-bits
// checksum; longer payloads carry an MD5 digest.
const ShortChecksumMax = 15

// reversedNot[b] is NOT(bit-reverse(b)), one byte of the short checksum,
// from a table as the specification asks.
var reversedNot = func() (t [256]byte) {
	for i := range t {
		t[i] = ^bits.Reverse8(uint8(i))
	}
	return t
}()

// ChecksumLen returns the size of the checksum of a payload of n bytes (D3).
func ChecksumLen(n int) int {
	if n <= ShortChecksumMax {
		return max(n, 0)
	}
	return MD5Len
}

// AppendChecksum appends the checksum of payload (D3) to b and returns the
// extended slice.
func AppendChecksum(b, payload []byte) []byte {
	n := len(payload)
	if n > ShortChecksumMax {
		sum := md5.Sum(payload)
		return append(b, sum[:]...)
	}
	for i := n - 1; i >= 0; i-- {
		b = append(b, reversedNot[payload[i]])
	}
	return b
}

// VerifyChecksum reports whether sum is the checksum of payload (D3),
// including its length. It allocates nothing.
func VerifyChecksum(payload, sum []byte) bool {
	n := len(payload)
	if len(sum) != ChecksumLen(n) {
		return false
	}
	if n > ShortChecksumMax {
		return md5.Sum(payload) == [MD5Len]byte(sum)
	}
	for i, c := range sum {
		if c != reversedNot[payload[n-1-i]] {
			return false
		}
	}
	return true
}
