package fastnet_test

import (
	"fmt"
	"hash/fnv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/fastnet/fastnettest"
)

// N101: a bundle's first-time packets written in place, one channel's
// run at a time, and the runs of whole messages a receiver takes from a
// bundle at once, are shortcuts only. Over any network without
// corruption and any workload, the same case played with them and
// without them gives the same datagrams at the same times, byte for
// byte, the same messages delivered at the same times, and the same
// statistics on both sides. Across the cases, both shortcuts must have
// been taken, or the comparison proves nothing.
//
// A side that estimates its path's MTU (D19) takes runs too once its
// estimation is over (N119), and a channel that shares the ring with
// others takes them in its turns (N122): the packets of each count apart,
// and must not be none.
func TestPropertyRunsChangeNothing(t *testing.T) {
	var sent, taken, estimating, shared uint64
	rapid.Check(t, func(t *rapid.T) {
		c := drawCase(t, 0, 12, false)
		drawBursts(t, &c, 120, 64)
		if rapid.Bool().Draw(t, "partialDrain") {
			// Drains cut short, with a packet left over from a full
			// bundle waiting across the cut (N71, N122).
			c.setup.Drain = rapid.IntRange(1, 3).Draw(t, "drain")
		}
		if rapid.Bool().Draw(t, "estimateFirst") {
			// Time for the MTU estimations, where a side runs one
			// (D19), to end before the workload (N119).
			c.ops = append([]op{{wait: 10 * time.Second}}, c.ops...)
		}
		// A run's bounds differ with congestion control off, where
		// the pacer never floods and the window never binds, and with
		// a fixed rate (N111).
		for _, cfg := range []*fastnet.Config{&c.setup.Cli, &c.setup.Srv} {
			switch rapid.IntRange(0, 3).Draw(t, "congestion") {
			case 1:
				cfg.Congestion.Disabled = true
			case 2:
				cfg.Congestion.FixedRate = rapid.IntRange(20_000, 2_000_000).Draw(t, "fixedRate")
			}
		}
		playTwice(t, c, [2]string{"with runs", "without"}, func(i int, s *simSetup) { s.NoRuns = i == 1 },
			func(i int, s *sim) {
				if i == 0 {
					for side := range 2 {
						a, b := fastnet.Runs(s.ep[side])
						sent += a
						taken += b
						shared += fastnet.SharedRuns(s.ep[side])
						if !s.cfg[side].MTU.Disabled {
							estimating += a
						}
					}
				}
			})
	})
	if sent == 0 || taken == 0 || estimating == 0 || shared == 0 {
		t.Fatalf("runs taken: %d packets written in place (%d by sides estimating MTU, %d in turns of channels sharing the ring), %d taken whole; all must be taken for the comparison to mean anything", sent, estimating, shared, taken)
	}
	t.Logf("%d packets written in place (%d by sides estimating MTU, %d in turns of channels sharing the ring), %d taken whole", sent, estimating, shared, taken)
}

// drawBursts puts 1-4 bursts of 8 to maxN messages of 17 to maxSize bytes,
// as runs and batches are made of, among c's own steps.
func drawBursts(t *rapid.T, c *simCase, maxSize, maxN int) {
	for range rapid.IntRange(1, 4).Draw(t, "bursts") {
		o := op{
			side:     rapid.IntRange(0, 1).Draw(t, "burstSide"),
			channel:  rapid.IntRange(0, 2).Draw(t, "burstChannel"),
			reliable: rapid.Bool().Draw(t, "burstReliable"),
			size:     rapid.IntRange(17, maxSize).Draw(t, "burstSize"),
			n:        rapid.IntRange(8, maxN).Draw(t, "burstN"),
		}
		at := rapid.IntRange(0, len(c.ops)).Draw(t, "burstAt")
		c.ops = append(c.ops[:at], append([]op{o}, c.ops[at:]...)...)
	}
}

// playTwice plays c twice, arm(i, setup) making play i differ, and fails
// unless both give the same trace, the same deliveries and the same
// statistics; what names the two plays. each, if not nil, sees each sim
// once played, before it closes.
func playTwice(t *rapid.T, c simCase, what [2]string, arm func(i int, s *simSetup), each func(i int, s *sim)) {
	c.setup.KeepMessages = true
	var (
		traces [2]*hashWriter
		got    [2]string
		stats  [2][2]fastnet.Stats
	)
	for i := range traces {
		traces[i] = &hashWriter{h: fnv.New64a()}
		c.setup.Trace = traces[i]
		arm(i, &c.setup)
		s := play(t, c)
		if each != nil {
			each(i, s)
		}
		for side := range 2 {
			stats[i][side] = s.stats(side)
		}
		got[i] = fmt.Sprint(s.got)
		s.closeAndIdle()
	}
	if traces[0].String() != traces[1].String() {
		t.Fatalf("%s and %s, different traces: %v and %v", what[0], what[1], traces[0], traces[1])
	}
	if got[0] != got[1] {
		t.Fatalf("%s and %s, different deliveries", what[0], what[1])
	}
	if d := cmp.Diff(stats[1], stats[0]); d != "" {
		t.Fatalf("%s and %s, different statistics (-%s +%s):\n%s", what[0], what[1], what[1], what[0], d)
	}
}

// N102: HandleDatagrams handles a batch of datagrams exactly as
// HandleDatagram would one after the other; computing the digests of its
// bundles' messages together changes only the cost. Over any network
// without corruption and any workload, with the datagrams that arrive at
// a side at one instant handed over together (fastnettest.Network.Batch),
// the same case played through HandleDatagrams and one datagram at a
// time gives the same datagrams at the same times, byte for byte, the
// same messages delivered at the same times, and the same statistics.
// Across the cases, bundles must have been taken apart with digests
// computed across datagrams, or the comparison proves nothing.
func TestPropertyBatchesChangeNothing(t *testing.T) {
	var batched uint64
	rapid.Check(t, func(t *rapid.T) {
		c := drawCase(t, 0, 12, false)
		c.setup.Batch = true
		// Each side reads what arrived at each instant, or every so
		// often, as a loop that reads once a tick (60 Hz at most).
		c.setup.ReadEvery = rapid.SampledFrom([]time.Duration{0, 500 * time.Microsecond, 2 * time.Millisecond, 16 * time.Millisecond}).Draw(t, "readEvery")
		if rapid.Bool().Draw(t, "steadyLinks") {
			// Without jitter or a rate limit, the datagrams sent at
			// one instant arrive at one instant: batches of several.
			for _, l := range []*fastnettest.Link{&c.setup.Up, &c.setup.Down} {
				l.Jitter, l.Bandwidth, l.Bottleneck = 0, 0, nil
			}
		}
		drawBursts(t, &c, 300, 96)
		playTwice(t, c, [2]string{"in batches", "one by one"}, func(i int, s *simSetup) { s.OneByOne = i == 1 },
			func(i int, s *sim) {
				n := fastnet.Batched(s.ep[0]) + fastnet.Batched(s.ep[1])
				if i == 0 {
					batched += n
				} else if n != 0 {
					t.Fatalf("one by one, %d bundles took digests computed across datagrams", n)
				}
			})
	})
	if batched == 0 {
		t.Fatalf("no bundle took digests computed across datagrams: the comparison means nothing")
	}
	t.Logf("%d bundles took digests computed across datagrams", batched)
}
