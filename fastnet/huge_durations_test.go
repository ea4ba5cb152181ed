package fastnet

import (
	"testing"
	"time"
)

// A MinResendRTT of "never" (N36) stays "never" in the delays counted in
// resend RTTs (N109): the black hole delay, blackHoleRTTs of them, wrapped
// negative at 2^62, and a black hole was suspected after 1 s.
func TestHugeMinResendRTT(t *testing.T) {
	const rtt = time.Duration(1 << 62)
	cfg := Config{MinResendRTT: rtt, MaxResendInterval: rtt}
	p := newPair(t, cfg, cfg)
	c := p.cli.conns[p.ch]
	if got := c.resendRTT(); got != rtt {
		t.Fatalf("resendRTT %v, want %v", got, rtt)
	}
	if d := c.blackHoleDelay(); d < rtt {
		t.Errorf("MinResendRTT %v: blackHoleDelay() = %v, want at least the resend RTT (blackHoleRTTs*resendRTT overflowed)", rtt, d)
	}
}
