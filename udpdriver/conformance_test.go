package udpdriver_test

import (
	"context"
	"testing"

	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/internal/drivertest"
	"github.com/fastnet-engine/fastnet/udpdriver"
)

// TestConformance runs the drivers' shared suite over loopback UDP.
func TestConformance(t *testing.T) {
	drivertest.Run(t, drivertest.Driver{
		Name: "udp",
		Listen: func(ctx context.Context, addr string, engine fastnet.Config, receiveQueue int) (*udpdriver.Listener, error) {
			return udpdriver.Listen(ctx, addr, udpdriver.Config{Engine: engine, ReceiveQueue: receiveQueue})
		},
		Dial: func(ctx context.Context, addr string, engine fastnet.Config) (*udpdriver.Conn, error) {
			return udpdriver.Dial(ctx, addr, udpdriver.Config{Engine: engine})
		},
	})
}
