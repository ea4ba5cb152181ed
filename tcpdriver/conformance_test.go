package tcpdriver_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/internal/drivertest"
	"github.com/fastnet-engine/fastnet/tcpdriver"
)

// TestConformance runs the drivers' shared suite over loopback TCP, and
// again with GOMAXPROCS 1.
func TestConformance(t *testing.T) {
	for _, v := range []struct {
		name string
		oneP bool
	}{
		{"tcp", false},
		{"tcp-onep", true},
	} {
		t.Run(v.name, func(t *testing.T) {
			if v.oneP {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
			}
			drivertest.Run(t, drivertest.Driver{
				Name: v.name,
				TCP:  true,
				Listen: func(ctx context.Context, addr string, engine fastnet.Config, opts drivertest.ListenOptions) (*tcpdriver.Listener, error) {
					return tcpdriver.Listen(ctx, addr, tcpdriver.Config{Engine: engine, ReceiveQueue: opts.ReceiveQueue, Backlog: opts.Backlog})
				},
				Dial: func(ctx context.Context, addr string, engine fastnet.Config) (*tcpdriver.Conn, error) {
					return tcpdriver.Dial(ctx, addr, tcpdriver.Config{Engine: engine})
				},
			})
		})
	}
}
