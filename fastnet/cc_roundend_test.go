package fastnet

import (
	"math"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
)

// TestOnAcksRoundEnd holds onAcks to the round's end of N78 and N124: an
// ack packet ends the round if a packet it acks was first sent at or
// after the round began, resent or not (a resent packet gives no sample
// but still dates the round), and not if all were sent before.
func TestOnAcksRoundEnd(t *testing.T) {
	const mtu = 1200 + wireOverhead
	ms := time.Millisecond
	start := clock.Epoch.Add(time.Second)
	now := start.Add(40 * ms)
	for _, tc := range []struct {
		name string
		sent clock.Time
		ends bool
	}{
		{"sent as the round began", start, true},
		{"sent a nanosecond before", start.Add(-1), false},
		{"sent after", start.Add(ms), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cc := congestion{on: true, cwnd: 20000, ssthresh: math.MaxInt, sampled: true, srtt: 80 * ms,
				roundStart: start, roundMin: 50 * ms, roundSamples: 3, lastRound: 45 * ms}
			// Two packets, both resent: no sample, and the round
			// dated by the newer one's first send.
			sum := ackPacket(64, 2, tc.sent, start.Add(-10*ms))
			cc.onAcks(now, sum, 19000, mtu)
			want := congestion{roundStart: start, roundMin: 50 * ms, roundSamples: 3, lastRound: 45 * ms}
			if tc.ends {
				want = congestion{roundStart: now, roundMin: 0, roundSamples: 0, lastRound: 50 * ms}
			}
			if cc.roundStart != want.roundStart || cc.roundMin != want.roundMin || cc.roundSamples != want.roundSamples || cc.lastRound != want.lastRound {
				t.Errorf("round start %v, min %v, samples %d, last round %v; want %v, %v, %d, %v",
					cc.roundStart, cc.roundMin, cc.roundSamples, cc.lastRound,
					want.roundStart, want.roundMin, want.roundSamples, want.lastRound)
			}
			if cc.srtt != 80*ms {
				t.Errorf("srtt %v; a resent packet gives no sample", cc.srtt)
			}
		})
	}
}
