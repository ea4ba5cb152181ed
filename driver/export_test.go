package driver

// BacklogQueued returns the bytes the connections of l's backlog hold
// for Receive together (N152).
func (l *Listener) BacklogQueued() int {
	l.e.mu.Lock()
	defer l.e.mu.Unlock()
	return l.queued
}

// Backlogged returns how many connections wait in l's backlog.
func (l *Listener) Backlogged() int {
	l.e.mu.Lock()
	defer l.e.mu.Unlock()
	return len(l.queue)
}
