package fastnet_test

import (
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/fastnet/fastnettest"
)

// N16: a black hole suspected while an estimation is still searching is
// looked at again once it is not. Found by TestPropertyDelivery
// (-rapid.seed=16521752840486288751): on a lossy, reordering 1 Mbit/s
// downlink the server's estimation passed 2048 bytes on a 1500-byte path
// (a held-back count of the round before), its reliable packets went on
// in bundles the path dropped, and the suspicion, raised while the search
// went on above 2048, was marked seen and never raised again: the
// connection timed out, "peer is not acknowledging".
func TestBlackHoleSuspectedWhileSearching(t *testing.T) {
	base := fastnet.Config{MaxMessageSize: maxMsg, Timeout: 300 * time.Second, ConnectTimeout: 60 * time.Second}
	cli := base
	cli.MTU.Disabled = true
	srv := base
	c := simCase{setup: simSetup{
		Seed: 0x4a2ce73e12a4,
		Cli:  cli,
		Srv:  srv,
		Up:   fastnettest.Link{MTU: 1500, Loss: 0.20, Delay: 174 * time.Millisecond, Jitter: 12 * time.Millisecond, Reorder: 0.07},
		Down: fastnettest.Link{MTU: 1500, Loss: 0.17, Delay: 1 * time.Millisecond, Jitter: 38 * time.Millisecond, Dup: 0.02, Reorder: 0.14, Bandwidth: 125_000},
	}}
	w := func(d int) op { return op{wait: time.Duration(d)} }
	s := func(side, ch int, rel bool, size, n int) op {
		return op{side: side, channel: ch, reliable: rel, size: size, n: n}
	}
	c.ops = []op{
		s(1, 0, false, 0, 2), w(301000000), s(1, 0, false, 1, 8), s(1, 2, false, 28857, 1), s(1, 1, true, 8, 3),
		s(0, 0, false, 2244, 3), w(1451000000), s(1, 0, false, 135, 1), s(1, 1, false, 15, 7), s(1, 2, true, 15, 12),
		w(1601000000), w(1251000000), s(0, 0, false, 320, 5), w(2451000000), s(0, 0, true, 124, 14), w(601000000),
		w(701000000), s(1, 2, false, 2762, 5), w(301000000), s(1, 32767, true, 144, 18),
	}
	sm := play(t, c)
	for side := range 2 {
		if sm.ended[side] != nil {
			t.Fatalf("%s: connection lost: %v", sideName(side), sm.ended[side])
		}
	}
}
