// Package coalesce holds the Fastnet message format and the rules that turn
// queued channel packets back into messages.
//
// A message travels as its encoding (spec "The Message Format", read with
// D2 and D3 of docs/decisions.md): a flags byte, the payload length
// in 1 to 4 bytes, the payload, and a checksum. [AppendMessage] encodes,
// [ParseHeader] reads the flags byte and length from the first bytes of an
// encoding (so a receiver knows how many bytes to wait for), and
// [ParseMessage] decodes and verifies one complete encoding.
//
// The receiver of a message channel groups queued packets into the current
// message group (CMG, D10) and applies the coalescing rules of D11 to it.
// Those rules are the pure function [Decide]; package channel gathers the
// facts about the group and acts on the answer.
//
// Nothing in this package allocates while decoding: a decoded payload
// aliases its input, and the MD5 digest of D3 is computed on the stack.
package coalesce
