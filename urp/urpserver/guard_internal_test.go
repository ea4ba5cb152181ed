package urpserver

import (
	"net/netip"
	"testing"
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
