package fastnet

import (
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/fastnet-engine/fastnet/channel"
	"github.com/fastnet-engine/fastnet/clock"
)

// ackPacket sums the acks of one ack packet: packets freed, each of
// bytes chunk bytes, first sent at the times sent (in order), the first
// resent of them resent.
func ackPacket(bytes int, resent int, sent ...clock.Time) *channel.AckSum {
	var s channel.AckSum
	for i, at := range sent {
		a := channel.Acked{Bytes: bytes, First: at, Last: at}
		if i < resent {
			a.Resends, a.Last = 1, at.Add(time.Millisecond)
		}
		s.Add(a)
	}
	return &s
}

// TestOnAcksOnePacketOneEvent holds the controller to N124: an ack
// packet is one event, however many packets it acks. It gives one
// round-trip sample, from its newest packet never resent, weighed as its
// acks of packets never resent (smooth); HyStart++ needs eight ack
// packets in a round, not eight acks; and the window grows once, by all
// the packet acked.
func TestOnAcksOnePacketOneEvent(t *testing.T) {
	const mtu = 1200 + wireOverhead
	t0 := clock.Epoch.Add(time.Second)
	ms := time.Millisecond
	// A row of n packets sent one each 10 µs from t0.
	row := func(n int, resent int) *channel.AckSum {
		sent := make([]clock.Time, n)
		for i := range sent {
			sent[i] = t0.Add(time.Duration(i) * 10 * time.Microsecond)
		}
		return ackPacket(64, resent, sent...)
	}
	slow := func() congestion {
		return congestion{on: true, cwnd: 20000, ssthresh: math.MaxInt, sampled: true, srtt: 80 * ms,
			roundStart: t0.Add(5 * ms), roundMin: 50 * ms, roundSamples: 1}
	}
	for _, tc := range []struct {
		name     string
		cc       congestion
		sum      *channel.AckSum
		now      clock.Time
		inFlight int
		want     func(*congestion) // the fields that change
		wantIn   int
	}{{
		name: "one sample from the newest of 96",
		cc:   slow(), sum: row(96, 0), now: t0.Add(40 * ms), inFlight: 19000,
		want: func(cc *congestion) {
			r := 40*ms - 950*time.Microsecond
			cc.srtt, cc.roundMin, cc.roundSamples = smooth(80*ms, r, 96), r, 2
			cc.cwnd += 96 * (64 + wireOverhead)
		},
		wantIn: 19000 - 96*(64+wireOverhead),
	}, {
		name: "resent packets give no sample but count",
		cc:   slow(), sum: row(3, 3), now: t0.Add(40 * ms), inFlight: 19000,
		want: func(cc *congestion) {
			cc.cwnd += 3 * (64 + wireOverhead)
		},
		wantIn: 19000,
	}, {
		name: "the newest never resent gives the sample",
		cc:   slow(), sum: ackPacket(64, 1, t0.Add(2*ms), t0), now: t0.Add(40 * ms), inFlight: 19000,
		want: func(cc *congestion) {
			// The second packet, sent at t0, was never resent.
			cc.srtt, cc.roundMin, cc.roundSamples = (7*80*ms+40*ms)/8, 40*ms, 2
			cc.cwnd += 2 * (64 + wireOverhead)
		},
		wantIn: 19000 - (64 + wireOverhead),
	}, {
		name: "slow start, the application limits: no growth",
		cc:   slow(), sum: row(10, 0), now: t0.Add(40 * ms), inFlight: 9000,
		want: func(cc *congestion) {
			r := 40*ms - 90*time.Microsecond
			cc.srtt, cc.roundMin, cc.roundSamples = smooth(80*ms, r, 10), r, 2
		},
		wantIn: 9000 - 10*(64+wireOverhead),
	}, {
		name: "a round ends with a packet sent in it",
		cc: func() congestion {
			cc := slow()
			cc.roundStart = t0.Add(500 * time.Microsecond)
			return cc
		}(),
		sum: row(96, 0), now: t0.Add(40 * ms), inFlight: 19000,
		want: func(cc *congestion) {
			r := 40*ms - 950*time.Microsecond
			cc.srtt = smooth(80*ms, r, 96)
			cc.lastRound, cc.roundMin, cc.roundSamples, cc.roundStart = r, 0, 0, t0.Add(40*ms)
			cc.cwnd += 96 * (64 + wireOverhead)
		},
		wantIn: 19000 - 96*(64+wireOverhead),
	}, {
		name: "HyStart++ on the eighth packet of a round",
		cc: func() congestion {
			cc := slow()
			cc.lastRound, cc.roundMin, cc.roundSamples = 20*ms, 30*ms, 7
			return cc
		}(),
		sum: row(1, 0), now: t0.Add(40 * ms), inFlight: 19000,
		want: func(cc *congestion) {
			cc.srtt, cc.roundSamples = (7*80*ms+40*ms)/8, 8
			cc.ssthresh = 20000 // set before this packet's growth
			cc.acked = 64 + wireOverhead
		},
		wantIn: 19000 - (64 + wireOverhead),
	}, {
		name: "HyStart++ not on a row of 96 acks of one packet",
		cc: func() congestion {
			cc := slow()
			cc.lastRound, cc.roundMin, cc.roundSamples = 20*ms, 30*ms, 0
			return cc
		}(),
		sum: row(96, 0), now: t0.Add(40 * ms), inFlight: 19000,
		want: func(cc *congestion) {
			r := 40*ms - 950*time.Microsecond
			cc.srtt, cc.roundMin, cc.roundSamples = smooth(80*ms, r, 96), r, 1
			cc.cwnd += 96 * (64 + wireOverhead)
		},
		wantIn: 19000 - 96*(64+wireOverhead),
	}, {
		name: "congestion avoidance: two windows acked at once grow it twice",
		cc:   congestion{on: true, cwnd: 2400, ssthresh: 2000, sampled: true, srtt: 40 * ms, roundStart: t0.Add(ms), acked: 2000},
		sum:  ackPacket(1200, 0, t0, t0, t0, t0, t0), now: t0.Add(40 * ms), inFlight: 6000,
		want: func(cc *congestion) {
			cc.roundMin, cc.roundSamples = 40*ms, 1
			cc.cwnd, cc.acked = 2400+2*mtu, 2000+5*(1200+wireOverhead)-2400-(2400+mtu)
		},
		wantIn: 6000 - 5*(1200+wireOverhead),
	}, {
		name: "congestion avoidance, the application limits",
		cc:   congestion{on: true, cwnd: 50000, ssthresh: 4000, sampled: true, srtt: 40 * ms, roundStart: t0.Add(ms)},
		sum:  row(2, 0), now: t0.Add(40 * ms), inFlight: 6000,
		want: func(cc *congestion) {
			r := 40*ms - 10*time.Microsecond
			cc.srtt, cc.roundMin, cc.roundSamples = smooth(40*ms, r, 2), r, 1
		},
		wantIn: 6000 - 2*(64+wireOverhead),
	}, {
		name: "the first sample starts the first round",
		cc:   congestion{on: true, cwnd: 14600, ssthresh: math.MaxInt},
		sum:  row(4, 0), now: t0.Add(10 * ms), inFlight: 14000,
		want: func(cc *congestion) {
			r := 10*ms - 30*time.Microsecond
			cc.sampled, cc.srtt, cc.roundStart, cc.roundMin, cc.roundSamples = true, r, t0.Add(10*ms), r, 1
			cc.cwnd += 4 * (64 + wireOverhead)
		},
		wantIn: 14000 - 4*(64+wireOverhead),
	}, {
		name: "off: only the bytes in flight",
		cc:   congestion{cwnd: 14600, ssthresh: math.MaxInt},
		sum:  row(4, 1), now: t0.Add(10 * ms), inFlight: 14000,
		want: func(cc *congestion) {},
		// The resent packet had left the window (N76).
		wantIn: 14000 - 3*(64+wireOverhead),
	}, {
		name: "a clock gone back: no sample",
		cc:   slow(), sum: row(4, 0), now: t0, inFlight: 19000,
		want: func(cc *congestion) {
			cc.cwnd += 4 * (64 + wireOverhead)
		},
		wantIn: 19000 - 4*(64+wireOverhead),
	}} {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.cc
			tc.want(&want)
			cc := tc.cc
			in := cc.onAcks(tc.now, tc.sum, tc.inFlight, mtu)
			if diff := cmp.Diff(want, cc, cmp.AllowUnexported(congestion{}, baseBucket{}, echoMark{})); diff != "" {
				t.Errorf("controller (-want +got):\n%s", diff)
			}
			if in != tc.wantIn {
				t.Errorf("in flight %d, want %d", in, tc.wantIn)
			}
		})
	}
}

// TestOnAcksSumsOrderFree checks, on random controllers and ack
// packets, that what a packet acked sums the same in any order of its
// acks (acks out of order are summed as they come), that onAcks takes
// the bytes of the packets never resent off those in flight, that acks
// never shrink the window, that growth in congestion avoidance leaves
// less than a window acked, and that a controller off changes nothing.
func TestOnAcksSumsOrderFree(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ms := func(label string, lo, hi int) time.Duration {
			return time.Duration(rapid.IntRange(lo, hi).Draw(t, label)) * time.Millisecond
		}
		now := clock.Epoch.Add(time.Second)
		cc := congestion{
			on:           rapid.IntRange(0, 9).Draw(t, "off") > 0,
			cwnd:         rapid.IntRange(ccMinWindow, 200000).Draw(t, "cwnd"),
			ssthresh:     math.MaxInt,
			acked:        rapid.IntRange(0, 20000).Draw(t, "acked"),
			sampled:      rapid.Bool().Draw(t, "sampled"),
			srtt:         ms("srtt", 0, 200),
			roundStart:   now.Add(-ms("round", -20, 200)),
			roundMin:     ms("roundMin", 0, 200),
			lastRound:    ms("lastRound", 0, 200),
			roundSamples: rapid.IntRange(0, 12).Draw(t, "roundSamples"),
		}
		if rapid.Bool().Draw(t, "avoidance") {
			cc.ssthresh = cc.cwnd + rapid.IntRange(-50000, 50000).Draw(t, "ssthresh")
		}
		acks := make([]channel.Acked, rapid.IntRange(0, 100).Draw(t, "acks"))
		for i := range acks {
			last := now.Add(-ms("age", -5, 300))
			acks[i] = channel.Acked{Bytes: rapid.IntRange(0, 9000).Draw(t, "bytes"), First: last.Add(-ms("first", 0, 300)), Last: last}
			if rapid.IntRange(0, 7).Draw(t, "resent") == 0 {
				acks[i].Resends = 1
			}
		}
		var a, b channel.AckSum
		for _, ak := range acks {
			a.Add(ak)
		}
		perm := rapid.Permutation(acks).Draw(t, "order")
		for _, ak := range perm {
			b.Add(ak)
		}
		if a != b {
			t.Fatalf("sums differ with the order: %+v, %+v", a, b)
		}
		mtu := rapid.IntRange(1, 9000).Draw(t, "mtu") + wireOverhead
		inFlight := rapid.IntRange(0, 300000).Draw(t, "inFlight")
		c := cc
		in := c.onAcks(now, &a, inFlight, mtu)
		if want := inFlight - a.FreshBytes - a.Fresh*wireOverhead; in != want {
			t.Fatalf("in flight %d, want %d", in, want)
		}
		if c.cwnd < cc.cwnd {
			t.Fatalf("acks shrank the window from %d to %d", cc.cwnd, c.cwnd)
		}
		if c.on && c.cwnd >= c.ssthresh && c.acked != cc.acked && c.acked >= c.cwnd {
			t.Fatalf("acked %d left of a window of %d", c.acked, c.cwnd)
		}
		if !c.on && c != cc {
			t.Fatalf("a controller off changed: %+v", c)
		}
	})
}

// TestSmooth holds smooth to RFC 6298's update (alpha 1/8) applied k
// times with the same sample.
func TestSmooth(t *testing.T) {
	for _, tc := range []struct {
		srtt, r time.Duration
		k       int
	}{
		{80 * time.Millisecond, 40 * time.Millisecond, 1},
		{40 * time.Millisecond, 80 * time.Millisecond, 1},
		{80 * time.Millisecond, 40 * time.Millisecond, 2},
		{80 * time.Millisecond, 40 * time.Millisecond, 12},
		{3 * time.Microsecond, 250 * time.Millisecond, 30},
		{250 * time.Millisecond, 3 * time.Microsecond, 96},
		{time.Second, 0, 64},
		{0, time.Second, 200},
		{time.Duration(math.MaxInt64 / 2), 0, 3},
		{7, 7, 5},
	} {
		want := tc.srtt
		for range tc.k {
			want += (tc.r - want) / 8
		}
		// Each of the k updates rounds to the nanosecond, and the
		// product to a few parts in 2^32.
		got, tol := smooth(tc.srtt, tc.r, tc.k), time.Duration(tc.k)+abs(tc.srtt-tc.r)>>28
		if d := got - want; d < -tol || d > tol {
			t.Errorf("smooth(%v, %v, %d) = %v, want %v", tc.srtt, tc.r, tc.k, got, want)
		}
	}
}

func abs(d time.Duration) time.Duration { return max(d, -d) }

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
