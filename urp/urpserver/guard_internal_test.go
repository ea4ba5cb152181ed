package urpserver

import (
	"fmt"
	"math"
	"net/netip"
	"testing"
	"time"
)

// TestAddressKey: join budgets are counted by IPv4 address and by IPv6
// /64 (U26), an IPv4 address the same however it is written.
func TestAddressKey(t *testing.T) {
	tests := []struct {
		addr string // "" for no address
		want string // "" for the zero prefix
	}{
		{"192.0.2.7", "192.0.2.7/32"},
		{"::ffff:192.0.2.7", "192.0.2.7/32"},
		{"2001:db8:1:2:aaaa::1", "2001:db8:1:2::/64"},
		{"2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::/64"},
		{"2001:db8:1:3::1", "2001:db8:1:3::/64"},
		{"fe80::1%eth0", "fe80::/64"},
		{"", ""},
	}
	for _, tt := range tests {
		var a netip.Addr
		if tt.addr != "" {
			a = netip.MustParseAddr(tt.addr)
		}
		var want netip.Prefix
		if tt.want != "" {
			want = netip.MustParsePrefix(tt.want)
		}
		if got := addressKey(a); got != want {
			t.Errorf("addressKey(%q) = %v, want %v", tt.addr, got, want)
		}
	}
}

// guardAt returns a join guard of a server with no connections, whose
// users tests add with addUser, and its clock, which starts at 0.
func guardAt(t *testing.T, burst int, every time.Duration, addrs int) (*joinGuard, *Server, *time.Duration) {
	t.Helper()
	g, err := newJoinGuard(burst, every, addrs)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{users: map[uint32]*user{}, guard: g}
	g.s = s
	now := new(time.Duration)
	g.now = func() time.Duration { return *now }
	return g, s, now
}

// addUser adds user uid at address ip ("" for none) to s.
func addUser(s *Server, uid uint32, ip string) {
	var addr netip.AddrPort
	if ip != "" {
		addr = netip.AddrPortFrom(netip.MustParseAddr(ip), 1)
	}
	s.users[uid] = &user{uid: uid, addr: addr}
}

// fails has user uid fail joins until the guard refuses one, at most
// limit, and returns how many failed.
func fails(g *joinGuard, uid uint32, limit int) int {
	n := 0
	for n < limit && g.MayFail(uid) {
		g.Failed(uid)
		n++
	}
	return n
}

// TestGuardAddress: an address may fail JoinFailures joins at once and
// one more every JoinFailureEvery after that (U26).
func TestGuardAddress(t *testing.T) {
	const every = time.Hour
	g, s, now := guardAt(t, 3, every, 100)
	addUser(s, 1, "192.0.2.1")
	addUser(s, 2, "")
	for _, uid := range []uint32{1, 2} {
		*now = 0
		steps := []struct {
			at   time.Duration
			want int
		}{
			{0, 3},
			{every - 1, 0},
			{every, 1},
			{every, 0},
			{3 * every, 2},
			{10 * every, 3},
		}
		for _, st := range steps {
			*now = st.at
			if got := fails(g, uid, 100); got != st.want {
				t.Errorf("user %d at %v: %d failures, want %d", uid, st.at, got, st.want)
			}
		}
		g.budgets, g.rest = map[netip.Prefix]time.Duration{}, 0
	}
}

// TestGuardNetwork: the addresses of one network, an IPv4 /24 or an
// IPv6 /48, share a budget four times an address's, at once and over
// time (networkShare).
func TestGuardNetwork(t *testing.T) {
	const burst, every = 2, time.Hour
	for _, tt := range []struct {
		name  string
		addr  func(i int) string // the ith address of one network
		other string             // an address of another network
	}{
		{"IPv4 /24", func(i int) string { return fmt.Sprintf("198.51.100.%d", i) }, "198.51.101.1"},
		{"IPv6 /48", func(i int) string { return fmt.Sprintf("2001:db8:7:%x::1", i) }, "2001:db8:8::1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g, s, now := guardAt(t, burst, every, 100)
			for i := 1; i <= networkShare; i++ {
				addUser(s, uint32(i), tt.addr(i))
				if got := fails(g, uint32(i), 100); got != burst {
					t.Fatalf("address %d: %d failures, want %d", i, got, burst)
				}
			}
			addUser(s, 100, tt.addr(100))
			addUser(s, 101, tt.other)
			if got := fails(g, 100, 100); got != 0 {
				t.Errorf("another address of the spent network: %d failures, want 0", got)
			}
			if got := fails(g, 101, 100); got != burst {
				t.Errorf("an address of another network: %d failures, want %d", got, burst)
			}
			*now = every / networkShare
			if got := fails(g, 100, 100); got != 1 {
				t.Errorf("a step of the network's later: %d failures, want 1", got)
			}
		})
	}
}

// TestGuardTable: budgets are counted apart while the table has room;
// a full table is rid of the budgets whole again at most once every
// JoinFailureEvery, and room is taken in order.
func TestGuardTable(t *testing.T) {
	const every = time.Hour
	g, _, _ := guardAt(t, 1, every, 2)
	k := func(i int) netip.Prefix { return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(i)}), 32) }
	keys := func(ks ...netip.Prefix) []netip.Prefix { return ks }
	if own := g.own(keys(k(1), k(2)), 0); own != [2]bool{true, true} {
		t.Errorf("an empty table: %v", own)
	}
	g.budgets[k(1)], g.budgets[k(2)] = every/4, 2*every
	if own := g.own(keys(k(3)), 0); own[0] {
		t.Error("a full table of budgets not whole gave room")
	}
	// That was a sweep, at 0: at every/2, k(1) is whole, but the table
	// is not rid of it until every.
	if own := g.own(keys(k(3)), every/2); own[0] {
		t.Error("room from a sweep half an every after the last")
	}
	if own := g.own(keys(k(3), k(4)), every); own != [2]bool{true, false} {
		t.Errorf("a sweep that frees one place: %v, want the first key to take it", own)
	}
	if _, ok := g.budgets[k(1)]; ok || len(g.budgets) != 1 {
		t.Errorf("after the sweep: %v", g.budgets)
	}
	if own := g.own(keys(k(2), k(5)), every); own != [2]bool{true, true} {
		t.Errorf("a key with an entry and one with room: %v", own)
	}
}

// TestGuardOwnBudget: an address with budgets of its own is not refused
// because the budget the others share is spent.
func TestGuardOwnBudget(t *testing.T) {
	g, s, _ := guardAt(t, 2, time.Hour, 2)
	addUser(s, 1, "192.0.2.1")
	addUser(s, 2, "203.0.113.1")
	if fails(g, 1, 1) != 1 || len(g.budgets) != 2 {
		t.Fatalf("the first address's network and address fill the table: %v", g.budgets)
	}
	if got := fails(g, 2, 100); got != 2 {
		t.Errorf("the second address, on the shared budget: %d failures, want 2", got)
	}
	if got := fails(g, 1, 100); got != 1 {
		t.Errorf("the first address once the shared budget is spent: %d failures, want 1", got)
	}
}

// TestGuardConfig: a server's guard has the defaults, or the settings
// given; none with JoinFailures negative; settings whose product
// overflows are refused.
func TestGuardConfig(t *testing.T) {
	s, err := newServer(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if g := s.guard; g == nil || g.every != DefaultJoinFailureEvery || g.limit != DefaultJoinFailures*DefaultJoinFailureEvery || g.max != DefaultJoinFailureAddrs {
		t.Errorf("default guard %+v", g)
	}
	s, err = newServer(Config{JoinFailures: 5, JoinFailureEvery: time.Minute, JoinFailureAddrs: 9})
	if err != nil {
		t.Fatal(err)
	}
	if g := s.guard; g.every != time.Minute || g.limit != 5*time.Minute || g.max != 9 {
		t.Errorf("guard %+v", g)
	}
	if s, err = newServer(Config{JoinFailures: -1}); err != nil || s.guard != nil || s.relay.Config().JoinGuard != nil {
		t.Errorf("JoinFailures -1: %v, guard %v", err, s.guard)
	}
	for _, cfg := range []Config{
		{JoinFailures: 1_000_000_000},
		{JoinFailureEvery: math.MaxInt64 / 2},
	} {
		if _, err := newServer(cfg); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
	// What the server made for itself stays its own.
	s, _ = newServer(Config{})
	if cfg := s.Config(); cfg.JoinGuard != nil || cfg.Rand != nil {
		t.Errorf("Config gives away the server's guard %v or Rand %v", cfg.JoinGuard, cfg.Rand)
	}
}
