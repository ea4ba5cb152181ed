package fastnet

import (
	"math"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
)

// TestOnAcksGrowthBounds holds onAcks's growth to its bounds (N76,
// N124), on the bytes in flight before the ack packet: slow start grows
// once they are half the window, congestion avoidance counts the bytes
// acked once they are within three datagrams of it, and neither a byte
// below.
func TestOnAcksGrowthBounds(t *testing.T) {
	const mtu = 1200 + wireOverhead
	ms := time.Millisecond
	t0 := clock.Epoch.Add(time.Second)
	n := 2 * (64 + wireOverhead) // what the ack packet acked, on the wire
	for _, tc := range []struct {
		name           string
		cwnd, ssthresh int
		inFlight       int
		wantCwnd       int
		wantAcked      int
	}{
		{"slow start, half the window in flight", 20000, math.MaxInt, 10000, 20000 + n, 0},
		{"slow start, a byte less", 20000, math.MaxInt, 9999, 20000, 0},
		{"avoidance, three datagrams short", 50000, 4000, 50000 - 3*mtu, 50000, n},
		{"avoidance, a byte more short", 50000, 4000, 50000 - 3*mtu - 1, 50000, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cc := congestion{on: true, cwnd: tc.cwnd, ssthresh: tc.ssthresh, sampled: true, srtt: 40 * ms, roundStart: t0}
			// Packets resent, so that no sample nor round end
			// plays a part.
			cc.onAcks(t0.Add(40*ms), ackPacket(64, 2, t0.Add(-ms), t0.Add(-ms)), tc.inFlight, mtu)
			if cc.cwnd != tc.wantCwnd || cc.acked != tc.wantAcked {
				t.Errorf("window %d, acked %d; want %d, %d", cc.cwnd, cc.acked, tc.wantCwnd, tc.wantAcked)
			}
		})
	}
}

// TestOnAcksZeroSample: an ack packet taken at the very time its newest
// packet never resent was sent gives a sample of zero (a clock that did
// not move, as on loopback under a coarse clock), not none.
func TestOnAcksZeroSample(t *testing.T) {
	const mtu = 1200 + wireOverhead
	ms := time.Millisecond
	t0 := clock.Epoch.Add(time.Second)
	cc := congestion{on: true, cwnd: 20000, ssthresh: math.MaxInt, sampled: true, srtt: 8 * ms, roundStart: t0.Add(ms), roundMin: 5 * ms, roundSamples: 1}
	cc.onAcks(t0, ackPacket(64, 0, t0), 19000, mtu)
	if cc.srtt != smooth(8*ms, 0, 1) || cc.roundMin != 0 || cc.roundSamples != 2 {
		t.Errorf("srtt %v, round min %v, samples %d; want %v, 0, 2", cc.srtt, cc.roundMin, cc.roundSamples, smooth(8*ms, 0, 1))
	}
}

// TestSmoothLeavesNone: past the last k srttKeep holds, nothing is left
// of the smoothed RTT's distance from the sample, however large.
func TestSmoothLeavesNone(t *testing.T) {
	for _, k := range []int{len(srttKeep) - 1, len(srttKeep), 1000} {
		if got := smooth(time.Hour, 0, k); got != 0 {
			t.Errorf("smooth(1h, 0, %d) = %v, want 0", k, got)
		}
		if got := smooth(0, time.Hour, k); got != time.Hour {
			t.Errorf("smooth(0, 1h, %d) = %v, want 1h", k, got)
		}
	}
}
