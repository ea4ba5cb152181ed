package urpdriver

import "github.com/fastnet-engine/fastnet/urp/urpclient"

// RelayConn returns the listener's connection to the relay, for the tests
// of what it queues.
func RelayConn(l *Listener) *urpclient.Conn { return l.t.c }

// Peers returns how many users the listener keeps as peers, members and
// greetings waiting (U25).
func Peers(l *Listener) (peers, members, greet int) {
	l.t.mu.Lock()
	defer l.t.mu.Unlock()
	return len(l.t.peers), len(l.t.members), len(l.t.greet)
}

// IsMember reports whether the listener has handled the join of uid, and
// not its leaving.
func IsMember(l *Listener, uid uint32) bool {
	l.t.mu.Lock()
	defer l.t.mu.Unlock()
	return l.t.members[uid]
}
