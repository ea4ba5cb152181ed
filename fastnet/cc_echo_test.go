package fastnet

import (
	"math"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
)

// newEchoCC returns a controller as a connection of cfg starts it.
func newEchoCC(t *testing.T, cfg Config) *congestion {
	t.Helper()
	cfg.Role = Client
	cfg, err := cfg.resolve()
	if err != nil {
		t.Fatal(err)
	}
	var cc congestion
	cc.init(&cfg, clock.Epoch)
	return &cc
}

const echoTestRTT = time.Millisecond

// echoFlood feeds cc the echoes of a heartbeat every millisecond from
// start for n milliseconds, the connection sending out bytes a
// millisecond and the peer taking in in, so that each echo comes back
// later by the queue that builds (N90).
func echoFlood(cc *congestion, start clock.Time, n int, out, in float64, rate float64) {
	for i := range n {
		sent := start.Add(time.Duration(i) * time.Millisecond)
		bytes := uint64(float64(i) * out)
		// The peer takes the bytes before the beat in at its rate,
		// starting when the first arrives.
		took := time.Duration(float64(bytes) / in * float64(time.Millisecond))
		at := max(sent.Add(echoTestRTT), start.Add(echoTestRTT+took))
		cc.onEcho(at, sent, bytes, at.Sub(sent), echoTestRTT, echoTestRTT, rate, 1200)
	}
}

// The echo limiter (N90): a flood sent at twice what the peer takes in
// builds a queue whose echoes cut the cap to echoCut of the intake, not
// to less; a peer that keeps up never cuts it; a connection that sent
// reliable data, which its acks time, one with a fixed rate, and one with
// QueueDelay negative are not limited.
func TestEchoLimiterCuts(t *testing.T) {
	const out, in = 20_000, 10_000 // bytes per millisecond
	for _, tc := range []struct {
		name     string
		cfg      Config
		reliable bool
		in       float64
		capped   bool
	}{
		{"overloaded", Config{}, false, in, true},
		{"keeping-up", Config{}, false, 2 * out, false},
		{"reliable", Config{}, true, in, false},
		{"fixed-rate", Config{Congestion: CongestionConfig{FixedRate: 1 << 30}}, false, in, false},
		{"off", Config{Congestion: CongestionConfig{QueueDelay: -1}}, false, in, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cc := newEchoCC(t, tc.cfg)
			if tc.reliable {
				cc.sentReliable()
			}
			rate := cc.rate(echoTestRTT)
			echoFlood(cc, clock.Epoch, 200, out, tc.in, rate)
			if !tc.capped {
				if cc.qRate != 0 || cc.rate(echoTestRTT) != rate {
					t.Fatalf("cap %.0f, rate %.0f; want no cap, the rate %.0f", cc.qRate, cc.rate(echoTestRTT), rate)
				}
				return
			}
			intake := tc.in * 1000
			if cc.qRate == 0 || cc.qRate > intake || cc.qRate < 0.8*echoCut*intake {
				t.Fatalf("cap %.0f B/s, want about %.2f of the intake %.0f", cc.qRate, echoCut, intake)
			}
			if got := cc.rate(echoTestRTT); got != cc.qRate {
				t.Errorf("rate %.0f, want the cap %.0f", got, cc.qRate)
			}
		})
	}
}

// A cut halves the rate the connection sent at, at most, whatever the
// intake, and comes once per round: an intake measured over a span the
// sender was partly idle in is low (N90).
func TestEchoLimiterCutAtMostHalf(t *testing.T) {
	cc := newEchoCC(t, Config{})
	base := cc.rate(echoTestRTT)
	perMs := base / 1000 // bytes sent a millisecond, at the pacer's rate
	// Heartbeats every millisecond, whose echoes come back 10 ms apart:
	// the peer takes in a tenth of what is sent, and the queue grows.
	start := clock.Epoch.Add(time.Second)
	echo := func(i int, sent clock.Time) {
		at := start.Add(21*time.Millisecond + time.Duration(i)*10*time.Millisecond)
		cc.onEcho(at, sent, uint64(float64(sent.Sub(start).Milliseconds())*perMs), at.Sub(sent), echoTestRTT, echoTestRTT, cc.rate(echoTestRTT), 1200)
	}
	for i := range echoQueueSamples {
		echo(i, start.Add(time.Duration(i)*time.Millisecond))
	}
	if cc.qRate != base/2 {
		t.Fatalf("cap %.0f B/s after an intake of a tenth, want half the rate sent at, %.0f", cc.qRate, base/2)
	}
	// A heartbeat sent before that cut shows a longer queue: no second
	// cut.
	echo(echoQueueSamples, start.Add(echoQueueSamples*time.Millisecond))
	if cc.qRate != base/2 {
		t.Fatalf("cap %.0f B/s after an echo of a heartbeat sent before the cut, want it kept at %.0f", cc.qRate, base/2)
	}
	// Two sent after it, the queue still there: the intake measured
	// between them cuts again, never above the rate now.
	cut := cc.qRate
	echo(echoQueueSamples+1, cc.qCut)
	echo(echoQueueSamples+2, cc.qCut.Add(time.Millisecond))
	if cc.qRate >= cut {
		t.Fatalf("cap %.0f B/s after a later queue, want it cut again below %.0f", cc.qRate, cut)
	}
}

// The path's round trip with no queue is the smallest of the last five
// minutes: after a longer route, a cap cut as if the longer round trip
// were a queue grows back once the shorter one is forgotten (N90).
func TestEchoLimiterRouteChange(t *testing.T) {
	cc := newEchoCC(t, Config{})
	longer := echoTestRTT + 20*time.Millisecond
	cc.qRate = cc.rate(longer) / 8 // cut while the route changed
	now := clock.Epoch
	// Heartbeats every 5 ms, the peer keeping up, on the longer route.
	for i := 0; now.Sub(clock.Epoch) < 6*time.Minute && cc.qRate != 0; i++ {
		sent := now
		now = now.Add(5 * time.Millisecond)
		cc.onEcho(sent.Add(longer), sent, uint64(i)*1000, longer, echoTestRTT, longer, cc.rate(longer), 1200)
	}
	if cc.qRate != 0 {
		t.Fatalf("cap %.0f B/s six minutes after the route changed, want it lifted", cc.qRate)
	}
	if d := now.Sub(clock.Epoch); d < 4*time.Minute {
		t.Errorf("cap lifted %v after the route changed, want after the five minutes that remember the shorter one", d)
	}
}

// Echoes that cut nothing (N90): those of a connection that does not
// flood, whose heartbeats a second apart are too far apart to measure the
// peer's intake by, whatever queue others build ahead of them; and those
// of a jittery path, which delays some echoes by more than QueueDelay but
// never all of a few in a row.
func TestEchoLimiterNoCut(t *testing.T) {
	for _, tc := range []struct {
		name  string
		every time.Duration // between heartbeats
		delay func(i int) time.Duration
	}{
		{"no-intake", time.Second, func(i int) time.Duration {
			if i > 0 {
				return 50 * time.Millisecond
			}
			return 0
		}},
		{"jitter", time.Millisecond, func(i int) time.Duration {
			if i%echoQueueSamples != 0 {
				return 20 * time.Millisecond
			}
			return 0
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cc := newEchoCC(t, Config{})
			for i := range 1000 {
				sent := clock.Epoch.Add(time.Duration(i) * tc.every)
				r := echoTestRTT + tc.delay(i)
				cc.onEcho(sent.Add(r), sent, uint64(i)*1000, r, echoTestRTT, r, cc.rate(echoTestRTT), 1200)
			}
			if cc.qRate != 0 {
				t.Fatalf("cap %.0f B/s, want none", cc.qRate)
			}
		})
	}
}

// Once the queue is gone the cap grows by echoGrow a round, and lifts
// when it passes the rate of the window (N90).
func TestEchoLimiterGrows(t *testing.T) {
	cc := newEchoCC(t, Config{})
	base := cc.rate(echoTestRTT)
	cc.qRate = base / 2
	now := clock.Epoch
	grown := 0
	for i := 0; cc.qRate != 0 && i < 1000; i++ {
		// Two echoes of one round, no queue: one growth.
		before := cc.qRate
		sent := now
		now = now.Add(echoTestRTT)
		cc.onEcho(now, sent, uint64(i), echoTestRTT, echoTestRTT, echoTestRTT, cc.rate(echoTestRTT), 1200)
		cc.onEcho(now, sent, uint64(i), echoTestRTT, echoTestRTT, echoTestRTT, cc.rate(echoTestRTT), 1200)
		if cc.qRate != 0 && math.Abs(cc.qRate-before*echoGrow) > 1 {
			t.Fatalf("round %d: cap %.0f, want %.0f", i, cc.qRate, before*echoGrow)
		}
		cc.rate(echoTestRTT)
		grown++
	}
	if want := int(math.Ceil(math.Log(2)/math.Log(echoGrow))) + 1; cc.qRate != 0 || grown > want {
		t.Fatalf("cap %.0f after %d rounds; want it lifted after about %d", cc.qRate, grown, want)
	}
	if got := cc.rate(echoTestRTT); got != base {
		t.Errorf("rate %.0f without the cap, want the window's %.0f", got, base)
	}
}

// The heartbeats of a flood go out an eighth of the latest round trip
// apart, and twice as far apart for each echo of one already forgotten
// (N90).
func TestFloodBeatInterval(t *testing.T) {
	var h heartbeat
	h.init(Client)
	now := clock.Epoch
	v := h.originate(now, time.Second, 0)
	h.receive(now.Add(40*time.Millisecond), v)
	if h.floodIv != 5*time.Millisecond {
		t.Fatalf("interval %v after a 40 ms sample, want 5 ms", h.floodIv)
	}
	// The first of 20 beats, forgotten once 16 more went out.
	first := h.originate(now, time.Second, 0)
	for range outstanding {
		h.originate(now, time.Second, 0)
	}
	if _, ok := h.receive(now.Add(time.Second), first); ok {
		t.Fatal("an echo of a forgotten heartbeat gave a sample")
	}
	if h.floodIv != 10*time.Millisecond {
		t.Fatalf("interval %v after an echo of a forgotten heartbeat, want 10 ms", h.floodIv)
	}
}
