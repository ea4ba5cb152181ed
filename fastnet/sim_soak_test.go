package fastnet_test

import (
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/fastnet/fastnettest"
)

// soakScale is how much longer the soak runs when FASTNET_SOAK=long.
func soakScale(t *testing.T) int {
	if os.Getenv("FASTNET_SOAK") == "long" {
		return 100
	}
	if testing.Short() {
		t.Skip("the soak does not run in -short mode")
	}
	return 1
}

// A soak through a terrible network, as the reliable-messages article
// advises for any ack scheme ("setup a soak test with terrible network
// conditions"): 50 % loss each way, duplication, reordering and jitter;
// eight channels, each carrying interleaved reliable and unreliable
// messages of 0 bytes to 20 kB from both sides, sent in waves with pauses.
// Every reliable message arrives exactly once, intact and in order per
// channel (D7-D14), unreliable ones at most once and in order, memory stays
// within the limits after every step (D22), and the connection survives.
// FASTNET_SOAK=long runs a hundred times as many messages.
func TestSoakTerribleNetwork(t *testing.T) {
	scale := soakScale(t)
	wall := time.Now()
	link := fastnettest.Link{
		Loss:    0.5,
		Dup:     0.1,
		Reorder: 0.1,
		Delay:   40 * time.Millisecond,
		Jitter:  20 * time.Millisecond,
	}
	// Receive memory for every message of a wave at once, so that the
	// soak measures delivery, not the memory limits (which
	// TestScenarioReceiveMemoryHeadOfLine and the properties cover).
	cfg := fastnet.Config{
		MaxMessageSize: 64 << 10,
		// A wave queued whole, whatever the send queue's default (1 MiB
		// since N96): the soak measures delivery, not backpressure.
		SendQueueSize:        4 << 20,
		ChannelReceiveMemory: 16 << 20,
		ConnReceiveMemory:    64 << 20,
		Timeout:              5 * time.Minute,
		ConnectTimeout:       time.Minute,
		MaxResendInterval:    time.Second,
	}
	s := newSim(t, simSetup{Seed: 2026, Cli: cfg, Srv: cfg, Up: link, Down: link})
	s.connect(time.Minute)

	rng := rand.New(rand.NewPCG(1, 2))
	waves := 40 * scale
	id := uint32(0)
	sent := 0
	for range waves {
		for range 100 {
			id++
			side := rng.IntN(2)
			size := rng.IntN(300)
			switch rng.IntN(20) {
			case 0:
				size = 0
			case 1:
				size = 1000 + rng.IntN(19_000)
			}
			reliable := rng.IntN(4) != 0
			if err := s.send(side, rng.IntN(8), payload(id, size), reliable); err != nil {
				t.Fatalf("Send: %v", err)
			}
			if reliable {
				sent++
			}
		}
		s.run(time.Duration(rng.IntN(500)) * time.Millisecond)
	}
	if !s.runUntil(s.settled, time.Hour) {
		t.Fatalf("not settled an hour after the last wave: %s, %s missing", s.led[cliSide].firstMissing(), s.led[srvSide].firstMissing())
	}
	for side := range 2 {
		if s.ended[side] != nil {
			t.Fatalf("%s: connection lost: %v", sideName(side), s.ended[side])
		}
	}
	rel := s.led[0].delivered - s.led[0].unrel + s.led[1].delivered - s.led[1].unrel
	if rel != sent {
		t.Fatalf("%d reliable messages delivered, %d sent", rel, sent)
	}
	ns := s.net.Stats()
	cs, ss := s.stats(cliSide), s.stats(srvSide)
	t.Logf("%d reliable and %d of %d unreliable messages delivered in %v of virtual time (%v wall); %d datagrams sent, %d lost; %d resends",
		rel, s.led[0].unrel+s.led[1].unrel, int(id)-sent, s.elapsed().Round(time.Millisecond), time.Since(wall).Round(time.Millisecond),
		ns.Sent, ns.Lost, cs.PacketsResent+ss.PacketsResent)
	s.closeAndIdle()
}
