package tcpdriver_test

import (
	"context"
	"testing"

	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/internal/drivertest"
	"github.com/fastnet-engine/fastnet/tcpdriver"
)

// TestConformance runs the drivers' shared suite over loopback TCP.
func TestConformance(t *testing.T) {
	drivertest.Run(t, drivertest.Driver{
		Name: "tcp",
		TCP:  true,
		Listen: func(ctx context.Context, addr string, engine fastnet.Config, receiveQueue int) (*tcpdriver.Listener, error) {
			return tcpdriver.Listen(ctx, addr, tcpdriver.Config{Engine: engine, ReceiveQueue: receiveQueue})
		},
		Dial: func(ctx context.Context, addr string, engine fastnet.Config) (*tcpdriver.Conn, error) {
			return tcpdriver.Dial(ctx, addr, tcpdriver.Config{Engine: engine})
		},
	})
}
