package main

import (
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/bench/peers/peerkit"
)

// TestW1 runs a few echo round trips through ENet over loopback, both
// roles in this process.
func TestW1(t *testing.T) {
	peerkit.SmokeW1(t, peer{}, 30*time.Second)
}
