package urpserver

import (
	"net/netip"
	"time"
)

// Defaults of the join budget (U26).
const (
	// DefaultJoinFailures is the joins the users of one address may fail
	// at once.
	DefaultJoinFailures = 32
	// DefaultJoinFailureEvery is how often they may fail one more once
	// those are spent: 360 an hour.
	DefaultJoinFailureEvery = 10 * time.Second
	// DefaultJoinFailureAddrs is the most addresses whose failures are
	// counted apart, about 5 MB of bookkeeping at the limit.
	DefaultJoinFailureAddrs = 1 << 16
)

// joinGuard is the server's urp.JoinGuard (U26): the joins that fail are
// counted by the address of the user who sent them, in a budget of burst
// at once and one more every every. Each address's budget is kept as the
// time at which it is whole again (a virtual scheduling time, as the
// generic cell rate algorithm keeps it): a failure moves it on by every,
// from now if it was whole, and may not move it more than limit
// (burst*every) past now. An address whose budget is whole has no entry.
//
// The relay calls it within HandleBytes, under the server's lock, which
// also guards the users' addresses it reads.
type joinGuard struct {
	s     *Server // set once the server is made
	every time.Duration
	limit time.Duration
	max   int // entries of addrs
	// now is the time since start, from the monotonic clock; tests
	// replace it.
	now   func() time.Duration
	addrs map[netip.Prefix]time.Duration
	// rest is the budget shared by the addresses that find addrs full of
	// budgets not yet whole.
	rest time.Duration
	// swept is when addrs was last rid of whole budgets: at most once
	// every every, so that a full table of spent budgets does not cost
	// a pass over it at each failure.
	swept time.Duration
}

func newJoinGuard(burst int, every time.Duration, addrs int) *joinGuard {
	start := time.Now()
	return &joinGuard{
		every: every,
		limit: time.Duration(burst) * every,
		max:   addrs,
		now:   func() time.Duration { return time.Since(start) },
		addrs: make(map[netip.Prefix]time.Duration),
		swept: -every,
	}
}

// MayFail reports whether the address of user uid may fail one more
// join now.
func (g *joinGuard) MayFail(uid uint32) bool {
	now := g.now()
	t := g.rest
	if k, own := g.slot(uid, now, false); own {
		t = g.addrs[k] // 0, whole, if it has no entry
	}
	return max(t, now)+g.every-now <= g.limit
}

// Failed counts a failed join against the address of user uid.
func (g *joinGuard) Failed(uid uint32) {
	now := g.now()
	k, own := g.slot(uid, now, true)
	if !own {
		g.rest = max(g.rest, now) + g.every
		return
	}
	g.addrs[k] = max(g.addrs[k], now) + g.every
}

// slot returns the key of the budget of the address of user uid, and
// whether the address has a budget of its own (else it shares rest): it
// has if addrs holds it or has room for it, once rid of whole budgets
// if full. With take, the room is taken (an entry made, whole).
func (g *joinGuard) slot(uid uint32, now time.Duration, take bool) (netip.Prefix, bool) {
	var addr netip.Addr
	if u := g.s.users[uid]; u != nil {
		addr = u.addr.Addr()
	}
	k := addressKey(addr)
	if _, ok := g.addrs[k]; ok {
		return k, true
	}
	if len(g.addrs) >= g.max && now-g.swept >= g.every {
		g.swept = now
		for a, t := range g.addrs {
			if t <= now {
				delete(g.addrs, a)
			}
		}
	}
	if len(g.addrs) >= g.max {
		return k, false
	}
	if take {
		g.addrs[k] = 0
	}
	return k, true
}

// addressKey returns what budgets are counted by for a user at addr: the
// address for IPv4, its /64 for IPv6 (the least a host is given), and
// the zero prefix, one budget for all, for a user with no IP address.
func addressKey(addr netip.Addr) netip.Prefix {
	addr = addr.Unmap().WithZone("")
	switch {
	case addr.Is4():
		return netip.PrefixFrom(addr, 32)
	case addr.Is6():
		p, _ := addr.Prefix(64)
		return p
	}
	return netip.Prefix{}
}
