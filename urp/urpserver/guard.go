package urpserver

import (
	"fmt"
	"math"
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
	// DefaultJoinFailureAddrs is the most addresses and networks whose
	// failures are counted apart, about 6 MB of bookkeeping at the
	// limit.
	DefaultJoinFailureAddrs = 1 << 16
)

// networkShare is how many times an address's budget of failed joins the
// users of one network (an IPv4 /24, an IPv6 /48) share: as many times
// more at once, and as many times as often after.
const networkShare = 4

// joinGuard is the server's urp.JoinGuard (U26): the joins that fail are
// counted by the address of the user who sent them (an IPv4 address, an
// IPv6 /64), in a budget of burst at once and one more every every, and
// by its network (an IPv4 /24, an IPv6 /48), in one networkShare times
// larger: a join may fail only if both have room, so that the many /64s
// of one /48, which anyone may have, buy no more than networkShare
// addresses. Each budget is kept as the time at which it is whole again
// (a virtual scheduling time, as the generic cell rate algorithm keeps
// it): a failure moves it on by its step (every, or every/networkShare
// for a network), from now if it was whole, and may not move it more
// than limit (burst*every, the same for both) past now. A budget is
// given an entry when a join fails against it, if the table of them
// has room; entries whose budgets are whole again are dropped when it
// fills, and the budgets that find it full share one, rest.
//
// The relay calls it within HandleBytes, under the server's lock, which
// also guards the users' addresses it reads.
type joinGuard struct {
	s     *Server // set once the server is made
	every time.Duration
	limit time.Duration
	max   int // entries of budgets
	// now is the time since start, from the monotonic clock; tests
	// replace it.
	now     func() time.Duration
	budgets map[netip.Prefix]time.Duration
	// rest is the budget shared by the addresses and networks that find
	// the table full of budgets not yet whole, with an address's step.
	rest time.Duration
	// swept is when budgets was last rid of whole ones: at most once
	// every every, so that a full table of spent budgets does not cost
	// a pass over it at each failure.
	swept  time.Duration
	keyBuf [2]netip.Prefix // keys' result
}

// newJoinGuard returns a guard of burst failures at once and one more
// every every for an address, counting at most addrs budgets apart, or
// an error if burst*every overflows.
func newJoinGuard(burst int, every time.Duration, addrs int) (*joinGuard, error) {
	if every > math.MaxInt64/time.Duration(burst) {
		return nil, fmt.Errorf("urpserver: JoinFailures %d times JoinFailureEvery %v is too long a time", burst, every)
	}
	start := time.Now()
	return &joinGuard{
		every:   every,
		limit:   time.Duration(burst) * every,
		max:     addrs,
		now:     func() time.Duration { return time.Since(start) },
		budgets: make(map[netip.Prefix]time.Duration),
		swept:   -every,
	}, nil
}

// MayFail reports whether the address of user uid, and its network, may
// fail one more join now.
func (g *joinGuard) MayFail(uid uint32) bool {
	now := g.now()
	keys := g.keys(uid)
	own, rest := g.own(keys, now), false
	for i, k := range keys {
		switch {
		case !own[i]:
			rest = true
		case !g.room(g.budgets[k], g.step(k), now): // 0, whole, without an entry
			return false
		}
	}
	return !rest || g.room(g.rest, g.every, now)
}

// Failed counts a failed join against the address of user uid and its
// network.
func (g *joinGuard) Failed(uid uint32) {
	now := g.now()
	keys := g.keys(uid)
	own, rest := g.own(keys, now), false
	for i, k := range keys {
		if !own[i] {
			rest = true
			continue
		}
		g.budgets[k] = max(g.budgets[k], now) + g.step(k)
	}
	if rest {
		g.rest = max(g.rest, now) + g.every
	}
}

// room reports whether a budget whole again at t, of step step, has
// room for one more failure at now.
func (g *joinGuard) room(t, step, now time.Duration) bool {
	return max(t, now)+step-now <= g.limit
}

// step returns the step of budget k: an address's every, a network's
// networkShare times less.
func (g *joinGuard) step(k netip.Prefix) time.Duration {
	if k.Bits() == 24 || k.Bits() == 48 {
		return max(g.every/networkShare, 1)
	}
	return g.every
}

// keys returns the keys of the budgets of user uid, its network's first
// (networkKey, addressKey), or the one budget of users with no IP
// address.
func (g *joinGuard) keys(uid uint32) []netip.Prefix {
	var a netip.Addr
	if u := g.s.users[uid]; u != nil {
		a = u.addr.Addr()
	}
	if n := networkKey(a); n.IsValid() {
		g.keyBuf = [2]netip.Prefix{n, addressKey(a)}
		return g.keyBuf[:2]
	}
	g.keyBuf[0] = addressKey(a)
	return g.keyBuf[:1]
}

// own reports, for each of keys, whether its budget is counted apart: it
// has an entry, or the table has room for one, which a failure counted
// now takes (in keys' order: a network before its address). A full
// table is first rid of the budgets whole again, if it was not within
// the last every. The others share rest.
func (g *joinGuard) own(keys []netip.Prefix, now time.Duration) (own [2]bool) {
	missing := 0
	for _, k := range keys {
		if _, ok := g.budgets[k]; !ok {
			missing++
		}
	}
	if missing > 0 && len(g.budgets)+missing > g.max && now-g.swept >= g.every {
		g.swept = now
		for k, t := range g.budgets {
			if t <= now {
				delete(g.budgets, k)
			}
		}
	}
	free := g.max - len(g.budgets)
	for i, k := range keys {
		if _, ok := g.budgets[k]; ok {
			own[i] = true
		} else if free > 0 {
			own[i] = true
			free--
		}
	}
	return own
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

// networkKey returns the network of a user at addr, whose users share a
// budget networkShare times an address's: its /24 for IPv4, its /48 for
// IPv6 (the most a site is given), and the zero prefix for a user with
// no IP address, who has no network.
func networkKey(addr netip.Addr) netip.Prefix {
	addr = addr.Unmap().WithZone("")
	switch {
	case addr.Is4():
		p, _ := addr.Prefix(24)
		return p
	case addr.Is6():
		p, _ := addr.Prefix(48)
		return p
	}
	return netip.Prefix{}
}
