package fastnet

import (
	"time"

	"github.com/fastnet-engine/fastnet/clock"
)

// Admission of MTU estimations (N53). An estimation puts up to a few
// hundred kilobytes of probes on the path in well under a second. A
// server whose thousands of clients connect together would start thousands
// of estimations at once, its own toward every client and every client's
// toward it: the probes overflow its socket, the rounds read the drops as
// loss, and lossy rounds grow to D19's full 100 probes, which overflows it
// more. So an endpoint runs at most MTUConfig.MaxConcurrent estimations of
// its own at a time, the others waiting their turn in order, and answers
// the resets of at most half as many peers' estimations at a time (their
// probes all come into its one socket): a reset beyond them is dropped (counted in EndpointStats.MTUResetsRefused), and
// the peer tries again a few round trips later, or after its estimation
// gives up and backs off (N44). Neither changes the wire.

// responderIdle is how long after a peer estimator's last reset or probe
// its estimation keeps a place among those answered: longer than the gap
// between two rounds on most paths (the final wait, 250 ms), so that its
// next round is answered, and short, since nothing says an estimation
// ended. Measured in W5 (docs/scale.md): with 1 s, places freed so slowly
// that refused clients were still retrying a minute later.
const responderIdle = 400 * time.Millisecond

// responderHold is how long a peer's estimation keeps its place among
// those answered while other peers ask for one: the payloads that keep a
// place are the peer's own to send, and nothing says an estimation ended,
// so a peer that went on sending them would keep the place for the whole
// connection and every other peer's estimation refused. An estimation that
// runs longer is answered to the end of its round (probes always are), and
// its next reset asks again, as any peer's.
const responderHold = 10 * time.Second

// admitEstimation starts c's estimation now if fewer than MaxConcurrent
// of the endpoint's own run, or queues it.
func (e *Endpoint) admitEstimation(now clock.Time, c *conn) {
	if e.mtuRunning < e.cfg.MTU.MaxConcurrent {
		e.mtuRunning++
		c.mtuRunning = true
		c.estimator.Start(now)
		return
	}
	c.mtuWaiting = true
	c.estimator.Hold() // a next estimation due waits for its turn too
	e.mtuQueue = append(e.mtuQueue, c)
}

// admitNext puts c's next estimation through admission once it is due,
// before anything else gives the estimator the time (which would start
// it): the periodic one (mtu.Config.Period) and the retries after an
// estimation that measured nothing (N44) count toward MaxConcurrent as
// the first does (N108).
func (c *conn) admitNext(now clock.Time) {
	if !c.mtuRunning && !c.mtuWaiting && c.estimator.Due(now) {
		c.ep.admitEstimation(now, c)
	}
}

// estimationDone frees c's place once its estimation ended, and starts the
// next one waiting.
func (c *conn) estimationDone(now clock.Time) {
	if !c.mtuRunning || c.estimator == nil || c.estimator.Stats().Searching {
		return
	}
	c.mtuRunning = false
	c.ep.releaseEstimation(now)
}

// releaseEstimation gives a freed place to the first connection waiting.
func (e *Endpoint) releaseEstimation(now clock.Time) {
	e.mtuRunning--
	for e.mtuHead < len(e.mtuQueue) {
		w := e.mtuQueue[e.mtuHead]
		e.mtuQueue[e.mtuHead] = nil
		e.mtuHead++
		if w.state == 0 || !w.mtuWaiting {
			continue
		}
		w.mtuWaiting = false
		e.mtuRunning++
		w.mtuRunning = true
		w.estimator.Start(now)
		e.touch(w, now)
		break
	}
	if e.mtuHead == len(e.mtuQueue) {
		e.mtuQueue, e.mtuHead = e.mtuQueue[:0], 0
	} else if e.mtuHead > 64 && 2*e.mtuHead >= len(e.mtuQueue) {
		n := copy(e.mtuQueue, e.mtuQueue[e.mtuHead:])
		clear(e.mtuQueue[n:])
		e.mtuQueue, e.mtuHead = e.mtuQueue[:n], 0
	}
}

// admitResponder reports whether a payload p of the peer's estimator may
// be answered: a reset only while fewer than MaxConcurrent/2 peers'
// estimations are answered, or if c's already is; probes always (their
// count is only valid after an answered reset).
func (e *Endpoint) admitResponder(now clock.Time, c *conn, p []byte) bool {
	isReset := len(p) == 1 && p[0] == 0
	if !isReset || c.respActive {
		c.respLast = now
		return true
	}
	limit := max(1, e.cfg.MTU.MaxConcurrent/2)
	if len(e.responders) >= limit {
		// Forget the estimations that went quiet.
		kept := e.responders[:0]
		for _, r := range e.responders {
			if r.state != 0 && now.Sub(r.respLast) < responderIdle {
				kept = append(kept, r)
			} else {
				r.respActive = false
			}
		}
		clear(e.responders[len(kept):])
		e.responders = kept
		if len(kept) >= limit {
			// The place held longest, once held past responderHold,
			// goes to the peer asking.
			oldest := 0
			for i, r := range kept {
				if r.respSince < kept[oldest].respSince {
					oldest = i
				}
			}
			if now.Sub(kept[oldest].respSince) < responderHold {
				e.estats.MTUResetsRefused++
				return false
			}
			kept[oldest].respActive = false
			e.responders = append(kept[:oldest], kept[oldest+1:]...)
			clear(kept[len(e.responders):])
		}
	}
	c.respActive, c.respLast, c.respSince = true, now, now
	e.responders = append(e.responders, c)
	return true
}

// EndpointStats counts what an endpoint did that belongs to no one
// connection, and the totals of its connections.
type EndpointStats struct {
	// ConnectionsOpened counts the connections reported by
	// EventConnected, ConnectionsEnded those since reported by
	// EventDisconnected: the difference is the connections established
	// now.
	ConnectionsOpened, ConnectionsEnded uint64
	// ConnectionsRefused counts the clients' "connect?" refused, each
	// reported by EventRejected (N67).
	ConnectionsRefused uint64
	// LateRetriesRefused counts the "connect?" answered with "abort" as
	// late retries of the handshake of a connection that ended (N123):
	// no new connection, and no event, since no new client asked.
	LateRetriesRefused uint64
	// The totals of the counters of Stats of the same names over every
	// connection the endpoint has had, live and ended (N59): those
	// reported by EventConnected and also those that never were (a
	// client's failed handshakes, a server's unvalidated connections that
	// ended silently, D25). Datagrams to or from no connection (query
	// answers, strays) are not in them: Dropped counts the strays.
	PacketsSent, PacketsReceived uint64
	BytesSent, BytesReceived     uint64
	MessagesSent                 uint64
	MessagesDelivered            uint64

	// MTUResetsRefused counts peers' MTU estimation resets not answered
	// because MTUConfig.MaxConcurrent/2 peers' estimations were being
	// answered (N53).
	MTUResetsRefused uint64
	// MTUWaiting is the number of this endpoint's connections whose
	// estimation waits for a place, MTURunning the number estimating.
	MTUWaiting, MTURunning int
}

// EndpointStats returns the endpoint's own counters.
func (e *Endpoint) EndpointStats() EndpointStats {
	s := e.estats
	s.MTURunning = e.mtuRunning
	for _, c := range e.mtuQueue[e.mtuHead:] {
		if c.state != 0 && c.mtuWaiting {
			s.MTUWaiting++
		}
	}
	return s
}
