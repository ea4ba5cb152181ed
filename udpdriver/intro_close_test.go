package udpdriver

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/driver"
	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/internal/udpio"
)

// TestIntroduceAfterPeerClose: an Introduce under way when its Peer
// closes returns at once (N144). It waited for the introduction to
// settle, which the engine, shut down, never did: with a context without
// a deadline, for good.
func TestIntroduceAfterPeerClose(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := Listen(ctx, "127.0.0.1:0", Config{Engine: fastnet.Config{Punch: fastnet.PunchConfig{Introducer: true}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	go func() {
		for {
			if _, err := s.Accept(ctx); err != nil {
				return
			}
		}
	}()
	saddr, _ := udpio.AddrPort(s.Addr())
	punch := fastnet.PunchConfig{PunchTimeout: 20 * time.Second}
	a, err := Open(ctx, "127.0.0.1:0", Config{Engine: fastnet.Config{Punch: punch}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	aS, err := a.Dial(ctx, s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	// The target hears only the introducer, so the punch goes on for
	// its whole PunchTimeout.
	raw, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	bp := punch
	bp.Consent = consentAll
	b, err := OpenPacket(ctx, &onlyFrom{PacketConn: raw, from: saddr}, Config{Engine: fastnet.Config{Punch: bp}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	bS, err := b.Dial(ctx, s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // the introducer hears that B speaks the extension (X2)
	done := make(chan error, 1)
	go func() {
		_, _, err := a.Introduce(context.Background(), aS, bS.ID())
		done <- err
	}()
	time.Sleep(time.Second) // the punch under way
	a.Close()
	select {
	case err := <-done:
		if !errors.Is(err, driver.ErrListenerClosed) {
			t.Errorf("Introduce after Close: %v, want driver.ErrListenerClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Introduce still blocked 5 s after the Peer closed")
	}
}
