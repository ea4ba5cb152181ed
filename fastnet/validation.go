package fastnet

import (
	"reflect"
	"unicode/utf8"
)

// Address validation (D25). A "connect?" can come from a forged source
// address; the server must not let it aim traffic at that address or
// hold a connection slot. A server's new connection is unvalidated until
// its client echoes one of the heartbeats the server originated on it,
// whose first value is drawn at random (heartbeat.startChallenge): only
// a client that receives at its address can echo it. Until then:
//
//   - the server sends the address at most 3 times the bytes it received
//     from it (Endpoint.PollTransmit withholds the rest), and no MTU probe;
//   - the connection does not count against Config.MaxConnections, the
//     unvalidated ones have their own bound, Config.MaxUnvalidated, which
//     drops the oldest to make room;
//   - it ends silently after Config.ValidationTimeout, or at once if the
//     client echoes a value the server never sent;
//   - the application hears nothing of it: the messages it completes are
//     held (within Config.UnvalidatedReceiveMemory) and reported after
//     EventConnected once it is validated.

// amplification is the factor of D25: what the server may send an
// unvalidated address, against what it received from it.
const amplification = 3

// ValidationStats counts what a server's address validation did (D25).
type ValidationStats struct {
	// Validated counts connections whose client echoed the challenge.
	Validated uint64
	// Expired counts unvalidated connections ended by
	// Config.ValidationTimeout, Evicted those dropped to make room under
	// Config.MaxUnvalidated, and Forged those whose client echoed a
	// heartbeat the server never sent.
	Expired, Evicted, Forged uint64
	// Refused counts connections validated when the validated ones
	// already filled Config.MaxConnections, and so refused then.
	Refused uint64
	// WithheldPackets and WithheldBytes count the datagrams to
	// unvalidated addresses not sent because they would have passed 3
	// times the bytes received from there.
	WithheldPackets, WithheldBytes uint64
	// Unvalidated is the number of unvalidated connections now.
	Unvalidated int
}

// ValidationStats returns the counters of the server's address validation
// (D25).
func (e *Endpoint) ValidationStats() ValidationStats {
	s := e.vstats
	s.Unvalidated = e.unvalidated.n
	return s
}

// mayTransmit reports whether an unvalidated connection may be sent n more
// bytes (D25), and counts them as withheld if not.
func (e *Endpoint) mayTransmit(c *conn, n int) bool {
	if c.stats.BytesSent+uint64(n) <= amplification*c.stats.BytesReceived {
		return true
	}
	e.vstats.WithheldPackets++
	e.vstats.WithheldBytes += uint64(n)
	return false
}

// hold keeps a message an unvalidated connection completed until it is
// validated. Its memory moves from the receiver that delivered it to the
// connection's budget, whose limit while unvalidated is
// UnvalidatedReceiveMemory: once held messages fill it, packets are
// refused and not acked, so the client resends them after validation
// (D25, N50).
func (c *conn) hold(ev Event) {
	c.held = append(c.held, ev)
	n := eventSize + len(ev.Data)
	c.heldCharge += n
	c.recvBudget.Add(n)
}

// eventSize is what an Event costs beyond its Data.
var eventSize = int(reflect.TypeFor[Event]().Size())

// cutTo cuts the text s to at most n bytes at a rune boundary.
func cutTo(s string, n int) string {
	if len(s) <= n {
		return s
	}
	n = max(n, 0)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// unvalidatedQueue holds a server's unvalidated connections, oldest first
// (D25). Connections validated or removed stay in it until they reach its
// front or it is compacted; n counts those still unvalidated.
type unvalidatedQueue struct {
	q    []*conn
	head int
	n    int
}

func (u *unvalidatedQueue) push(c *conn) {
	u.n++
	if live := len(u.q) - u.head; len(u.q) == cap(u.q) && live > 2*u.n+16 {
		// Mostly connections no longer unvalidated: compact.
		kept := u.q[:0]
		for _, x := range u.q[u.head:] {
			if x.unvalidated && x.state != 0 {
				kept = append(kept, x)
			}
		}
		clear(u.q[len(kept):])
		u.q, u.head = kept, 0
	} else if len(u.q) == cap(u.q) && u.head > 0 && 2*u.head >= len(u.q) {
		n := copy(u.q, u.q[u.head:])
		clear(u.q[n:])
		u.q, u.head = u.q[:n], 0
	}
	u.q = append(u.q, c)
}

// oldest returns the oldest connection still unvalidated, nil if none.
func (u *unvalidatedQueue) oldest() *conn {
	for u.head < len(u.q) {
		c := u.q[u.head]
		if c.unvalidated && c.state != 0 {
			return c
		}
		u.q[u.head] = nil
		u.head++
	}
	u.q, u.head = u.q[:0], 0
	return nil
}
