// Package channel implements one Fastnet message channel over an unreliable
// transport, one direction each way: a [Sender] that cuts messages into
// sequenced packets and resends the reliable ones until they are acked, and
// a [Receiver] that queues arriving packets and turns them back into
// messages. It also holds the wire formats these exchange: sequence numbers
// ([Seq], D5, D6), the data packet header ([Header], D4) and acks ([Ack],
// D13). D-numbers refer to docs/decisions.md.
//
// Both halves are pure state machines in the style of the rest of the core:
// time is passed in as a clock.Time, output is pulled (AppendNew,
// AppendResend, Poll), nothing calls back into the caller, and nothing here
// is safe for concurrent use. The caller (package fastnet) writes the 2-byte
// channel id in front of every packet and demultiplexes acks by channel.
//
// A Sender's lifecycle per message: Queue copies and encodes it; AppendNew
// cuts the next chunk at the message MTU given at that moment and appends
// the packet; reliable packets stay in flight until HandleAck, and
// AppendResend sends them again on the Fibonacci schedule of D14. A
// Receiver's: Handle queues an arriving packet (or rejects it, saying
// whether to ack), Poll yields complete messages in order, NextDeadline
// says when an incomplete unreliable message expires, and Err reports a
// peer that broke the protocol.
//
// Memory (D22, D23). A Receiver never holds more than its MaxBytes, nor its
// Budget more than its Limit. Unreliable packets give way to reliable
// ones. Because an acked reliable packet cannot be given back, reliable
// packets are also refused (and so resent later) when taking them would
// leave no room for the reliable packets still owed before them, or for
// the rest of a message whose memory was promised (granted) to the head of
// some channel's queue: a granted message always completes, so channels
// sharing a budget cannot deadlock by each holding part of a message.
//
// Steady-state sending, receiving and acking allocate nothing per packet:
// message buffers and packet chunks come from free lists; the only
// allocation is the payload of each delivered message, which belongs to
// the application.
package channel
