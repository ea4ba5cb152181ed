package urpserver

import "time"

// SetGuardClock makes the clock of s's join budget (U26) now, a time
// since any start.
func SetGuardClock(s *Server, now func() time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.guard.now = now
}
