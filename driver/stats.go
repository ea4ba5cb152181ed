package driver

// Stats are a driver's own counters for one endpoint: a listener and all
// its connections, or one dialed connection. The engine's per-connection
// counters are in fastnet.Stats (Conn.Stats).
type Stats struct {
	// WriteErrors counts socket writes that failed, other than those
	// refused for their size (EMSGSIZE, which MTU estimation handles) and
	// those on a socket this side had closed. Over UDP the datagram is
	// lost, as UDP allows, and the driver goes on; over TCP the
	// connection is broken and ends.
	WriteErrors uint64
	// TooBig counts the datagrams the system refused as larger than the
	// path it knows (EMSGSIZE: with the don't-fragment bit, above the
	// outgoing interface's MTU; D29, N42), MTU probes above the path
	// among them. Each is lost, like any datagram, and the driver goes on
	// (UDP).
	TooBig uint64
	// EventsDropped counts events that found Options.Events full.
	EventsDropped uint64
	// SendsDropped counts unreliable messages that Conn.TrySend dropped
	// because the send queue had no room.
	SendsDropped uint64
	// BadAddr counts datagrams dropped because their sender's address
	// was not an IP address and port (a net.PacketConn of the caller's
	// own, udpdriver.ListenPacket).
	BadAddr uint64

	// Backlog is how many established connections wait for Accept.
	Backlog int
	// BacklogRefused counts connections refused with the reason
	// "server busy" because Options.Backlog connections waited for
	// Accept (N47).
	BacklogRefused uint64
	// BacklogEnded counts connections that ended before Accept took them:
	// they were removed from the backlog, and the messages they had
	// received dropped (N47).
	BacklogEnded uint64

	// Handshakes is how many transport connections a server accepted
	// whose Fastnet handshake has not completed (TCP, N46).
	Handshakes int
	// HandshakesDropped counts those closed to make room for a newer
	// one, when the bound on them was reached (TCP, N46).
	HandshakesDropped uint64
	// HandshakeTimeouts counts those closed because their handshake did
	// not complete in time (TCP, N46).
	HandshakeTimeouts uint64
	// WriteOverflows counts the transport connections closed because
	// their write queue passed its hard bound: the peer asked for more
	// answers than it read (TCP, N107).
	WriteOverflows uint64
	// LongPacketsRefused counts the transport connections closed because
	// a long packet would have taken what they all hold for long packets
	// past its bound (TCP, N140).
	LongPacketsRefused uint64
}

// StatsReporter is implemented by a transport with counters of its own
// (TCP): AddStats adds them to s. It is called without the engine's lock.
type StatsReporter interface {
	AddStats(s *Stats)
}

// CountWriteError counts a failed socket write (Stats.WriteErrors). It
// may be called from any goroutine.
func (e *Engine) CountWriteError() { e.writeErrors.Add(1) }

// Stats returns the driver's counters of the endpoint.
func (e *Engine) Stats() Stats {
	e.mu.Lock()
	s := Stats{WriteErrors: e.writeErrors.Load(), EventsDropped: e.eventsDropped, SendsDropped: e.sendsDropped}
	if l := e.listener; l != nil {
		s.Backlog = len(l.queue)
		s.BacklogRefused = l.refused
		s.BacklogEnded = l.ended
	}
	r := e.reporter
	e.mu.Unlock()
	if r != nil {
		r.AddStats(&s)
	}
	return s
}

// DriverStats returns the driver's counters of the listener's endpoint.
func (l *Listener) DriverStats() Stats { return l.e.Stats() }

// DriverStats returns the driver's counters of the connection's endpoint:
// for a connection a Listener accepted, the listener's.
func (c *Conn) DriverStats() Stats { return c.e.Stats() }
