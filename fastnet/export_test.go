package fastnet

// SetLiveReceivers sets how many receivers and senders ep's connections
// keep, for good, before they park those of channels that fall idle (N25),
// so that tests with few channels make them park and revive all the time.
func SetLiveReceivers(ep *Endpoint, n int) { ep.liveReceivers, ep.liveCap = n, n }
