// Package fastnet is a sans-IO implementation of the Fastnet 1.0 protocol:
// connections of 32768 message channels, each carrying messages of any size
// reliably and in order, or unreliably, over UDP or TCP.
//
// An [Endpoint] is a pure state machine. It owns no socket, starts no
// goroutine, never sleeps, never reads the clock and draws randomness only
// from Config.Rand. It consumes datagrams and the passing of time and
// produces datagrams and events, so the same inputs always give the same
// outputs, and a whole network of endpoints can run in virtual time (see
// package fastnettest). Packages udpdriver and tcpdriver bind it to real
// sockets behind a blocking, context-aware API.
//
// # Driving an endpoint
//
// The caller owns the endpoint and runs this loop, from one goroutine at a
// time:
//
//  1. Read the time once, as a clock.Time, for each input. Time passed to
//     the endpoint must never go backwards.
//  2. Feed one input: HandleDatagram for a datagram that arrived (or
//     HandleDatagrams for several read at once, which costs less, and
//     takes each one's local address, Incoming.Local),
//     HandleTimeout when the time from NextDeadline has come, Send, Connect
//     or Close for the application's requests.
//  3. Call PollEvent until it returns false, and act on each event; or
//     NextEvent, which stores each event into a variable of the caller's
//     and copies less.
//  4. Call PollTransmit until it returns false, sending each datagram it
//     writes to its Transmit.To, from its Transmit.Local if that is valid
//     (N149). Polled after the events, it sends what acting on them
//     queued (a Send is an input too) in the same round.
//  5. Wait for the next datagram or until NextDeadline, whichever is first,
//     and go back to 1.
//
// Extra HandleTimeout calls are harmless. Inputs never block and never call
// back into the caller, with one exception: a server's Config.Accept hook
// runs inside HandleDatagram.
//
// A loop that finds itself held up (a deadline long past, datagrams
// waiting to be read) can call HoldResends(now, true) until it has fed
// what waits, and HoldResends(now, false) then: the acks in that input
// free their packets before they are resent, and everything else still
// goes at once. The drivers do so (N129, N130).
//
// # Buffers
//
// HandleDatagram and HandleDatagrams do not keep the slices they are given. PollTransmit writes
// into the caller's buffer, which must hold Config.MaxPacketSize bytes. The
// Data of an EventMessage is the receiver's to keep. Send copies the message.
// Steady-state sending, receiving and acknowledging allocate nothing per
// packet; each delivered message is new memory (small ones carved out of
// shared 4 KiB blocks), and each connection ended one allocation more (the
// final Stats of its EventDisconnected). With Config.ReuseMessageBuffers
// the Data of an EventMessage is lent instead: valid until the next
// HandleDatagram, HandleDatagrams or HandleTimeout after PollEvent (or
// NextEvent) returned it, and small messages are then carved out of the
// same blocks again.
//
// # Events and statistics
//
// PollEvent reports, as flat Event values: EventConnected, EventRefused
// and EventConnectFailed for handshakes; EventMessage for each message
// delivered; EventWritable when a full send queue has room again;
// EventMTUChanged; EventOutcome for each message sent with SendTracked
// (acked or lost if reliable, sent or dropped if not), at no cost to
// messages sent with Send; EventQuality every Config.QualityInterval for
// each established connection (RTT, loss, rates, MTU); and
// EventDisconnected when an established connection ends, after the
// outcomes of its tracked messages and with its final Stats.
//
// Endpoint.Stats reads a live connection's counters and estimates,
// loss and send and receive rates included; it returns false once the
// connection has ended, and the EventDisconnected that reported the end
// holds the final figures. Endpoint.EndpointStats adds the totals over
// every connection the endpoint has had, and ValidationStats and Dropped
// what belongs to no connection. docs/protocol.md says how each figure is
// counted (N55-N59).
//
// # Errors
//
// Misuse by the caller (a bad channel, a message too large, a full queue)
// is an error returned at once that leaves the endpoint unchanged: test it
// with errors.Is against ErrBadChannel, ErrMessageTooLarge, ErrQueueFull and
// the other Err values. Misbehaviour by the peer is never an error of
// HandleDatagram: a malformed packet is dropped and counted by DropReason in
// Stats.Dropped, and a violation that makes a connection unusable ends it
// with an EventDisconnected whose Err is a *ProtocolError.
//
// # Protocol
//
// The wire format is that of the specification, read with the project's
// decisions D1-D30, which the comments of this module cite by number:
// channel -1 carries queries, the handshake and the disconnect extension
// (D15, D18), -2 heartbeats (D16, D17), -3 and -4 MTU estimation (D19), -5
// acks (D13), -6 bundles of packets once negotiated (D24, unless
// Config.NoBundles), and 0..32767 the application's messages (D4-D12, D14).
package fastnet
