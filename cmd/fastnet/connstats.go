package main

// printStats writes c's statistics to standard error: once c has ended,
// those it ended with. transport names what c runs over (udp, tcp, urp);
// tcp says it is a stream, with no MTU estimation nor congestion control
// of the engine's.
func printStats(s *stdio, c *conn, transport string, tcp bool) {
	st, ds := c.Stats(), c.DriverStats()
	s.errorf("statistics of the connection to %s over %s:", c.RemoteAddr(), transport)
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
	if !tcp {
		phase := "congestion avoidance"
		if st.SlowStart {
			phase = "slow start"
		}
		if st.PacingRate == 0 {
			phase = "off"
		}
		s.errorf("  congestion control: %s, window %d bytes, pacing %.0f kB/s, %d reductions, %d unreliable messages expired",
			phase, st.CongestionWindow, st.PacingRate/1000, st.CongestionEvents, st.UnreliableExpired)
	}
	s.errorf("  packets: %d sent (%d bytes), %d received (%d bytes), %d resent", st.PacketsSent, st.BytesSent, st.PacketsReceived, st.BytesReceived, st.PacketsResent)
	s.errorf("  messages: %d sent, %d delivered; %d packets dropped", st.MessagesSent, st.MessagesDelivered, st.TotalDropped())
	if tcp {
		s.errorf("  socket: %d write errors", ds.WriteErrors)
		return
	}
	s.errorf("  socket: %d datagrams refused as too big (EMSGSIZE), %d other write errors", ds.TooBig, ds.WriteErrors)
}
