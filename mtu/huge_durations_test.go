package mtu

import (
	"math"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
)

// A ProbeInterval of "never" keeps the first round's probes apart
// (N109): its spacing, ProbeInterval*ProbesPerRound/n, wrapped to 0 or
// below from about 1067 days.
func TestHugeProbeInterval(t *testing.T) {
	for _, iv := range []time.Duration{math.MaxInt64, 1 << 57, 1 << 62} {
		cfg := Config{MaxPayload: 1400, ProbeInterval: iv}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("ProbeInterval %v: %v (refused: fine, not the finding)", iv, err)
		}
		e := NewEstimator(cfg)
		now := clock.Epoch
		e.Start(now)
		if _, ok := e.AppendPayload(nil, now, 0); !ok {
			t.Fatal("no reset")
		}
		e.HandlePayload(now, []byte{ackByte})
		if _, ok := e.AppendPayload(nil, now, 0); !ok {
			t.Fatal("no first probe")
		}
		// The next probe is due ProbeInterval*100/400 later: never, for
		// these intervals, as clock.Time.Add saturates.
		if _, ok := e.AppendPayload(nil, now, 0); ok {
			t.Errorf("ProbeInterval %v (%d ns): a second probe went at once; next due %v after the first",
				iv, int64(iv), e.NextDeadline().Sub(now))
		}
	}
}

// An RTT of "never" keeps the resets apart (N109): 3*rtt wrapped
// negative at 2^62, and all the resets went at once.
func TestHugeRTTResetSpacing(t *testing.T) {
	e := NewEstimator(Config{MaxPayload: 1400})
	now := clock.Epoch
	e.Start(now)
	rtt := time.Duration(1 << 62)
	n := 0
	for range 20 {
		if _, ok := e.AppendPayload(nil, now, rtt); ok {
			n++
		}
	}
	if n != 1 {
		t.Errorf("rtt %v: %d resets sent at the same instant, want 1 (next deadline %v from now)", rtt, n, e.NextDeadline().Sub(now))
	}
}
