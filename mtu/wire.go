package mtu

import "encoding/binary"

// The payloads of channels -3 and -4 (spec "Determining Payload MTU", D19).
// The 2-byte channel id in front of them is the endpoint's business.
//
// Estimator to responder:
//
//	reset:  +------+
//	        | 0x00 |          exactly one byte
//	        +------+
//	probe:  +----------------------------+
//	        | random bytes, MTU long     |  any payload but the reset
//	        +----------------------------+
//
// Responder to estimator:
//
//	reset ack: +------+
//	           | 0x01 |       exactly one byte
//	           +------+
//	count:     +------+------+------+------+
//	           | probes counted since reset|  4-byte big-endian (D1)
//	           +------+------+------+------+
const (
	resetByte = 0x00
	ackByte   = 0x01
	countLen  = 4
)

// isReset reports whether p is the estimator's reset.
func isReset(p []byte) bool { return len(p) == 1 && p[0] == resetByte }

// isAck reports whether p is the responder's reset acknowledgement.
func isAck(p []byte) bool { return len(p) == 1 && p[0] == ackByte }

// parseCount returns the count a responder's 4-byte reply carries, and false
// if p is not a count. The value is read unsigned: a count the specification
// would read as a negative i32 is above any number of probes sent, so the
// estimator ignores it like any other impossible count.
func parseCount(p []byte) (uint32, bool) {
	if len(p) != countLen {
		return 0, false
	}
	return binary.BigEndian.Uint32(p), true
}
