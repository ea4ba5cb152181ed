package udpdriver_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/internal/drivertest"
	"github.com/fastnet-engine/fastnet/udpdriver"
)

// TestConformance runs the drivers' shared suite over loopback UDP, with
// segmentation offload where the kernel has it (N28) and without, and
// with GOMAXPROCS 1.
func TestConformance(t *testing.T) {
	for _, v := range []struct {
		name      string
		noOffload bool
		oneP      bool
	}{
		{"udp", false, false},
		{"udp-nooffload", true, false},
		{"udp-onep", false, true},
	} {
		t.Run(v.name, func(t *testing.T) {
			if v.oneP {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
			}
			drivertest.Run(t, drivertest.Driver{
				Name: v.name,
				Listen: func(ctx context.Context, addr string, engine fastnet.Config, opts drivertest.ListenOptions) (*udpdriver.Listener, error) {
					return udpdriver.Listen(ctx, addr, udpdriver.Config{Engine: engine, ReceiveQueue: opts.ReceiveQueue, Backlog: opts.Backlog, NoOffload: v.noOffload})
				},
				Dial: func(ctx context.Context, addr string, engine fastnet.Config) (*udpdriver.Conn, error) {
					return udpdriver.Dial(ctx, addr, udpdriver.Config{Engine: engine, NoOffload: v.noOffload})
				},
			})
		})
	}
}
