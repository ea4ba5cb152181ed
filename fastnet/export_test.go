package fastnet

import "github.com/fastnet-engine/fastnet/mtu"

// SetLiveReceivers sets how many receivers and senders ep's connections
// keep, for good, before they park those of channels that fall idle (N25),
// so that tests with few channels make them park and revive all the time.
func SetLiveReceivers(ep *Endpoint, n int) { ep.liveReceivers, ep.liveCap = n, n }

// EstimatorStatsOf returns the estimator statistics of ep's first
// connection, for debugging tests.
func EstimatorStatsOf(ep *Endpoint) (s mtu.EstimatorStats) {
	for _, c := range ep.conns {
		if c.estimator != nil {
			return c.estimator.Stats()
		}
	}
	return s
}
