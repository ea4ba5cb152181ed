package udpdriver_test

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/fastnet-engine/fastnet/udpdriver"
)

// TestDialErrorIsOpError: every failure of a dial is a *net.OpError (Op
// "dial"), as Dial documents, those of the address too (N144).
func TestDialErrorIsOpError(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		ctx  context.Context
		addr string
		is   error
	}{
		{context.Background(), "nonsense", nil},
		{context.Background(), "127.0.0.1:nosuchport", nil},
		{cancelled, "localhost:7000", context.Canceled},
	} {
		_, err := udpdriver.Dial(tc.ctx, tc.addr, udpdriver.Config{})
		var oe *net.OpError
		if !errors.As(err, &oe) || oe.Op != "dial" {
			t.Errorf("Dial(%q) = %T %v, want a *net.OpError", tc.addr, err, err)
		}
		if tc.is != nil && !errors.Is(err, tc.is) {
			t.Errorf("Dial(%q) = %v, want it to match %v", tc.addr, err, tc.is)
		}
		_, err = udpdriver.DialPacket(tc.ctx, nopPC(t), tc.addr, udpdriver.Config{})
		if !errors.As(err, &oe) || oe.Op != "dial" {
			t.Errorf("DialPacket(%q) = %T %v, want a *net.OpError", tc.addr, err, err)
		}
	}
}

// nopPC returns a UDP socket closed at the end of the test.
func nopPC(t *testing.T) net.PacketConn {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	return pc
}
