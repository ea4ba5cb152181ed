package fastnet

// SetLiveReceivers sets how many receivers ep's connections keep before
// they park the receivers of channels that fall idle (N25), so that tests
// with few channels make them park and revive all the time.
func SetLiveReceivers(ep *Endpoint, n int) { ep.liveReceivers = n }
