// Package urp implements the User Relay Protocol 1.0 (docs/urp.md restates it):
// relays with no application logic, where users connected over TCP form
// groups, a host and its members, and exchange messages through the relay.
//
// The package is the protocol's sans-IO core, in the style of the fastnet
// package: no sockets, no goroutines, no clock (URP has no timers). It
// holds
//
//   - the packet codecs of the specification's Tables 2 and 3 (Packet,
//     Append, Parse), little-endian, and a Decoder that cuts a TCP byte
//     stream into packets, which carry no length prefix;
//   - Relay, the relay's state machine: users with unique non-zero UIDs,
//     their roles and transitions, groups with unique non-zero GIDs, a
//     password, flags (LOCK, NOSEND, NOBROD, NOP2P) and a member limit,
//     settings with RESPOND and NOTIFY, kicks, and a host whose leaving
//     disbands its group;
//   - Client, a user's state machine.
//
// The packages below it run these over TCP: urp/urpserver (a relay server),
// urp/urpclient (a blocking client), and urp/urpdriver (Fastnet carried over a
// URP group).
//
// # Driving a Relay
//
//  1. When a TCP connection arrives, call Connect. It returns the user's
//     UID and queues R2U_WELC and R2U_STAT; ErrRelayFull means close the
//     connection (U13).
//  2. Hand every read of a user's stream to HandleBytes, in order, cut
//     anywhere. When the stream ends or breaks, or the driver closes it,
//     call Disconnect.
//  3. After each input, drain PollWrite: for each user it names, take its
//     bytes with TakeOutput and write them to its connection, in order.
//  4. Before reading a user's stream, ask Held: while a user of its group
//     has more than Config.HighWater bytes waiting, do not read it (U11).
//     After inputs and TakeOutput calls, drain PollResume: the users it
//     names may be read again.
//  5. Drain PollEvent. On EventDisconnected close that user's connection:
//     the relay closed it (bad input, U5, U6; a full output, U11;
//     guessing, U26), or it reports a Disconnect.
//
// Failed joins are guesses of a group's GID and password: a relay open
// to the world sets Config.JoinGuard, which decides, by what the driver
// knows of each user (its address, the time), how many a user may make
// (U26); urpserver's counts them by address.
//
// Bytes handed in are not kept once a call returns; bytes taken out are
// the caller's. Nothing blocks, and nothing calls back but the
// JoinGuard, from HandleBytes.
//
// # Driving a Client
//
// Feed the relay's bytes to HandleBytes and call HandleEnd at the end of
// the stream; an error from either means close the connection. Requests
// (Make, Join, Quit, Broadcast, Send, Set, Get, Kick) queue packets; write
// what TakeOutput returns after each. Drain PollEvent for what arrived.
//
// # Decisions
//
// Where the specification is silent or inconsistent, the package follows
// the numbered decisions U1, U2, ... of docs/urp.md, which the code and the
// tests cite.
package urp
