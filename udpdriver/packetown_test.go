package udpdriver_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/udpdriver"
)

// TestDialPacketFailureClosesSocket: DialPacket owns its socket from the
// call on, so a dial that fails closes it, whatever the failure: a bad
// address, a context done already, a handshake that times out, a
// configuration the engine refuses. The caller, who gave the socket away,
// has no other way to release it.
func TestDialPacketFailureClosesSocket(t *testing.T) {
	done, cancel := context.WithCancel(context.Background())
	cancel()
	silent := nopPC(t)
	for _, tc := range []struct {
		name string
		ctx  context.Context
		addr string
		cfg  udpdriver.Config
	}{
		{"bad address", context.Background(), "nonsense", udpdriver.Config{}},
		{"bad port", context.Background(), "127.0.0.1:nosuchport", udpdriver.Config{}},
		{"context done", done, silent.LocalAddr().String(), udpdriver.Config{}},
		{"handshake timeout", context.Background(), silent.LocalAddr().String(),
			udpdriver.Config{Engine: fastnet.Config{ConnectTimeout: 200 * time.Millisecond}}},
		{"refused config", context.Background(), silent.LocalAddr().String(), udpdriver.Config{ReceiveQueue: -1}},
	} {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := udpdriver.DialPacket(tc.ctx, pc, tc.addr, tc.cfg); err == nil {
			t.Fatalf("%s: DialPacket succeeded", tc.name)
		}
		_, werr := pc.WriteTo([]byte("x"), silent.LocalAddr())
		if !errors.Is(werr, net.ErrClosed) {
			t.Errorf("%s: the socket is still open after the failed dial (a write: %v)", tc.name, werr)
			pc.Close()
		}
	}
}
