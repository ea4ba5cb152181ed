package fastnet

import (
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
)

// The window counts an estimator packet for a round trip after it went
// (N92). Asking what it counts at a time to come, as nextDeadline does
// through probeFits, forgets nothing; expiring at the present does, and
// drops the ring once it is empty.
func TestProbeWindowCount(t *testing.T) {
	c := &conn{}
	c.hb.srtt = 40 * time.Millisecond
	t0 := clock.Epoch
	c.sentProbe(t0, 1000)
	c.sentProbe(t0.Add(10*time.Millisecond), 1000)
	for _, tc := range []struct {
		at   time.Duration
		want int
	}{{0, 2000}, {39 * time.Millisecond, 2000}, {40 * time.Millisecond, 1000}, {50 * time.Millisecond, 0}} {
		if got := c.probeBytesAt(t0.Add(tc.at)); got != tc.want {
			t.Errorf("probeBytesAt(+%v) = %d, want %d", tc.at, got, tc.want)
		}
	}
	if c.probeBytes != 2000 || c.probeN != 2 {
		t.Fatalf("after asking of times to come: %d bytes, %d probes counted, want 2000 and 2 (nothing forgotten)", c.probeBytes, c.probeN)
	}
	if got := c.probesLeaveAt(); got != t0.Add(40*time.Millisecond) {
		t.Errorf("probesLeaveAt = %v, want +40ms", got.Sub(t0))
	}
	c.expireProbes(t0.Add(45 * time.Millisecond))
	if c.probeBytes != 1000 || c.probeN != 1 {
		t.Fatalf("after expiring at +45ms: %d bytes, %d probes, want 1000 and 1", c.probeBytes, c.probeN)
	}
	c.expireProbes(t0.Add(time.Second))
	if c.probeBytes != 0 || c.probeN != 0 || c.probes != nil {
		t.Fatalf("after expiring them all: %d bytes, %d probes, ring kept %v", c.probeBytes, c.probeN, c.probes != nil)
	}
}
