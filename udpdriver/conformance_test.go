package udpdriver_test

import (
	"context"
	"testing"

	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/internal/drivertest"
	"github.com/fastnet-engine/fastnet/udpdriver"
)

// TestConformance runs the drivers' shared suite over loopback UDP, with
// segmentation offload where the kernel has it (N28) and without.
func TestConformance(t *testing.T) {
	for _, noOffload := range []bool{false, true} {
		name := "udp"
		if noOffload {
			name = "udp-nooffload"
		}
		t.Run(name, func(t *testing.T) {
			drivertest.Run(t, drivertest.Driver{
				Name: name,
				Listen: func(ctx context.Context, addr string, engine fastnet.Config, receiveQueue int) (*udpdriver.Listener, error) {
					return udpdriver.Listen(ctx, addr, udpdriver.Config{Engine: engine, ReceiveQueue: receiveQueue, NoOffload: noOffload})
				},
				Dial: func(ctx context.Context, addr string, engine fastnet.Config) (*udpdriver.Conn, error) {
					return udpdriver.Dial(ctx, addr, udpdriver.Config{Engine: engine, NoOffload: noOffload})
				},
			})
		})
	}
}
