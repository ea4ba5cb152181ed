// Package tcpdriver runs Fastnet over TCP, the reliable, ordered transport
// every implementation must provide.
//
// TCP is a byte stream and the specification gives it no framing, so each
// Fastnet packet travels preceded by its length as a 4-byte big-endian
// unsigned integer (D20):
//
//	+--------+--------+--------+--------+------------------------+
//	|        length (u32, big-endian)   |  packet (length bytes) |
//	+--------+--------+--------+--------+------------------------+
//
// A length above the receiver's maximum packet size closes the transport
// connection, before any memory is set aside for the packet.
package tcpdriver
