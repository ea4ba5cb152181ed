package fastnet

import (
	"net/netip"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
)

// endedConns remembers, for a short while, the addresses of a server's
// connections that ended while a "connect?" from their client could still
// be a retry of their handshake (N123): until when, by address, and the
// order they ended in, so that the oldest go first.
type endedConns struct {
	until map[netip.AddrPort]clock.Time
	order []endedConn
	head  int
}

type endedConn struct {
	addr  netip.AddrPort
	until clock.Time
}

// maxEnded bounds the records endedConns keeps: past it, the oldest is
// forgotten, and a late retry from its address opens a connection as
// before N123. The list of them is bounded, not only the addresses: it
// is in the order the connections ended, not that of their times, and
// a record that lasts long at its front kept every one behind it, one
// for each connection that ended meanwhile, from however few addresses
// (N141).
const maxEnded = 1024

// specConnectWait is how long a client waits for its answer, sending
// "connect?" again every 200 ms, as the specification says it does. An
// unvalidated connection's record covers the retries of a client that
// waits as long as the connect timeout, but no longer than its own
// validation timeout less a second, or this if more (retryUntil, N141):
// a connection that expires unvalidated then leaves no record past its
// end that would shut its address out (one forged "connect?" could),
// and a client that waits longer than the server validates is one the
// server cannot tell from a forger.
const specConnectWait = 5 * time.Second

// add records that a connection with addr ended at now, whose client's
// retries may arrive until until.
func (m *endedConns) add(addr netip.AddrPort, now, until clock.Time) {
	m.expire(now)
	if m.until == nil {
		m.until = make(map[netip.AddrPort]clock.Time)
	}
	for len(m.order)-m.head >= maxEnded {
		m.forgetOldest()
	}
	m.until[addr] = until
	m.order = append(m.order, endedConn{addr, until})
}

// retry reports whether a "connect?" from addr at now may be a retry of
// the handshake of a connection that ended.
func (m *endedConns) retry(addr netip.AddrPort, now clock.Time) bool {
	if len(m.until) == 0 {
		return false
	}
	m.expire(now)
	until, ok := m.until[addr]
	return ok && now < until
}

// expire forgets the addresses whose time is over, in the order they
// ended; one that ends later than another may be kept a little past its
// time, behind it.
func (m *endedConns) expire(now clock.Time) {
	for m.head < len(m.order) && now >= m.order[m.head].until {
		m.forgetOldest()
	}
}

// forgetOldest forgets the address that ended longest ago.
func (m *endedConns) forgetOldest() {
	if m.head == len(m.order) {
		return
	}
	o := m.order[m.head]
	m.order[m.head] = endedConn{}
	m.head++
	if m.until[o.addr] == o.until {
		delete(m.until, o.addr)
	}
	if m.head == len(m.order) {
		m.order, m.head = m.order[:0], 0
	} else if m.head >= 64 && 2*m.head >= len(m.order) {
		n := copy(m.order, m.order[m.head:])
		clear(m.order[n:])
		m.order, m.head = m.order[:n], 0
	}
}

// retryUntil returns until when a "connect?" from the address of c, a
// server-side connection over datagrams that ends at now, may be a retry of
// its handshake, or 0 if no longer or if its peer said "disconnect" (its
// connection is gone: nothing could keep a new one alive, and a client that
// reconnects from the same port must not be refused): as mayBeRetry counts
// it once the client's heartbeats were heard (N34), and otherwise for as
// long as a client retries, the connect timeout, from now, or, for an
// unvalidated connection, from shortly after it was opened, and no longer
// than its validation timeout allows (specConnectWait), so that a forged
// "connect?" does not shut its address out once it ends (D25), whatever
// the connect timeout (N141).
func (c *conn) retryUntil(now clock.Time) clock.Time {
	if c.role != Server || c.peerClosed || c.ep.cfg.Transport != Datagram || !c.mayBeRetry(now) {
		return 0
	}
	if c.hb.firstHeard == 0 {
		until := now.Add(c.ep.cfg.ConnectTimeout)
		if c.unvalidated {
			// Its client retried for ConnectTimeout at most from before it
			// was opened (validateBy less the validation timeout).
			wait := min(c.ep.cfg.ConnectTimeout, max(specConnectWait, c.ep.cfg.ValidationTimeout-time.Second))
			until = min(until, c.validateBy.Add(wait+time.Second-c.ep.cfg.ValidationTimeout))
		}
		if now >= until {
			return 0
		}
		return until
	}
	return c.hb.firstHeard.Add(max(time.Second, 4*c.hb.srtt))
}
