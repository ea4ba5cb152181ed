package urpclient

// QueuedEvents returns how many events wait for Receive, for the tests
// of the receive queue's bound.
func (c *Conn) QueuedEvents() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.queue.Len()
}

// ReadBuffer is the most bytes one read of the relay's stream takes.
const ReadBuffer = readBuffer
