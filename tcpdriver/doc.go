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
//
// A server bounds what it spends on TCP connections before they are
// Fastnet connections: at most Config.MaxHandshakes of them may be in
// their handshake at once (the oldest is closed to make room for a new
// one), each for at most Config.HandshakeTimeout, with small buffers until
// the handshake completes. Config.Backlog bounds the established
// connections waiting for Accept. Listener.DriverStats counts both.
package tcpdriver
