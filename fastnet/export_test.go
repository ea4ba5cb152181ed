package fastnet

// SetLiveReceivers sets how many receivers and senders ep's connections
// keep, for good, before they park those of channels that fall idle (N25),
// so that tests with few channels make them park and revive all the time.
func SetLiveReceivers(ep *Endpoint, n int) { ep.liveReceivers, ep.liveCap = n, n }

// BundlesNegotiated reports, for connection h of ep, whether its peer
// answered "query:ext:bundle=yes" (ep may send it bundles) and whether ep
// answered it so (ep takes its bundles) (D24).
func BundlesNegotiated(ep *Endpoint, h Handle) (to, from bool) {
	c := ep.conns[h]
	if c == nil {
		return false, false
	}
	return c.bundleTo, c.bundleFrom
}
