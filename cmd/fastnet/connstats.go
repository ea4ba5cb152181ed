package main

import (
	"sync"
	"time"

	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/udpdriver"
)

// statsPoll is how often connect --stats takes the connection's statistics
// while it runs, for a connection that is lost (whose statistics end with
// it).
const statsPoll = 50 * time.Millisecond

// statsRecorder keeps the latest statistics of a connection for connect
// --stats.
type statsRecorder struct {
	c      *conn
	mu     sync.Mutex
	last   fastnet.Stats
	driver udpdriver.DriverStats
	have   bool
	done   chan struct{}
	wg     sync.WaitGroup
}

// recordStats starts polling c's statistics until it ends.
func recordStats(c *conn) *statsRecorder {
	r := &statsRecorder{c: c, done: make(chan struct{})}
	r.capture()
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		t := time.NewTicker(statsPoll)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				r.capture()
			case <-c.Done():
				return
			case <-r.done:
				return
			}
		}
	}()
	return r
}

// capture takes the connection's statistics, unless it has ended.
func (r *statsRecorder) capture() {
	select {
	case <-r.c.Done():
		return
	default:
	}
	st := r.c.Stats()
	ds := r.c.DriverStats()
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case <-r.c.Done():
		// Ended meanwhile: st may be the zero Stats of an ended
		// connection.
		return
	default:
	}
	r.last, r.have = st, true
	r.driver = ds
}

// print stops the polling and writes the last statistics to standard
// error.
func (r *statsRecorder) print(s *stdio, tcp bool) {
	close(r.done)
	r.wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.have {
		return
	}
	st, ds := r.last, r.driver
	s.errorf("statistics of the connection to %s over %s:", r.c.RemoteAddr(), transportName(tcp))
	s.errorf("  payload MTU: %d sent; largest payload received %d (the peer's payload MTU once it sends full packets)", st.PayloadMTU, st.PeerPayloadMTU)
	if !tcp {
		limited := st.MTULimited
		if limited == "" {
			limited = "none"
		}
		s.errorf("  MTU estimation: %d finished, searching %v, %d probes, %d probe bytes, path hint %d, limited: %s",
			st.MTUEstimations, st.MTUSearching, st.MTUProbes, st.MTUProbeBytes, st.MTUHint, limited)
	}
	s.errorf("  rtt: %v (variation %v, min %v)", st.RTT, st.RTTVar, st.MinRTT)
	s.errorf("  packets: %d sent (%d bytes), %d received (%d bytes), %d resent", st.PacketsSent, st.BytesSent, st.PacketsReceived, st.BytesReceived, st.PacketsResent)
	s.errorf("  messages: %d sent, %d delivered; %d packets dropped", st.MessagesSent, st.MessagesDelivered, st.TotalDropped())
	if tcp {
		s.errorf("  socket: %d write errors", ds.WriteErrors)
		return
	}
	s.errorf("  socket: %d datagrams refused as too big (EMSGSIZE), %d other write errors", ds.TooBig, ds.WriteErrors)
}
