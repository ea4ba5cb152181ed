package urpdriver_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/urp"
	"github.com/fastnet-engine/fastnet/urp/internal/urptest"
	"github.com/fastnet-engine/fastnet/urp/urpclient"
	"github.com/fastnet-engine/fastnet/urp/urpdriver"
	"github.com/fastnet-engine/fastnet/urp/urpserver"
)

// Each packet is one relay message, and nothing is resent over the relay:
// a Relay.Client.MaxMessage below the engine's MaxPacketSize is refused
// by Listen and Dial (N109). Before, a longer packet was refused by the
// relay client and lost, silently, while Send returned nil.
func TestRelayMessageBelowPacketRefused(t *testing.T) {
	s := urptest.Relay(t, urpserver.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	small := urpdriver.Config{Relay: urpclient.Config{Client: urp.ClientConfig{MaxMessage: 1024}}}
	if l, err := urpdriver.Listen(ctx, s.Addr().String(), small); err == nil || !strings.Contains(err.Error(), "MaxMessage") {
		if l != nil {
			l.Close()
		}
		t.Fatalf("Listen with MaxMessage 1024: %v, want it refused", err)
	}
	l, err := urpdriver.Listen(ctx, s.Addr().String(), urpdriver.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	gid, pass := l.Group()
	if c, err := urpdriver.Dial(ctx, s.Addr().String(), gid, pass, small); err == nil || !strings.Contains(err.Error(), "MaxMessage") {
		if c != nil {
			c.Abort("")
		}
		t.Fatalf("Dial with MaxMessage 1024: %v, want it refused", err)
	}
	// Packets that fit are fine: a smaller engine with a smaller relay
	// message.
	fit := small
	fit.Engine.MaxMessageSize = 1024 - 23
	fit.Engine.MaxPacketSize = 4096
	fit.Relay.Client.MaxMessage = 4096
	c, err := urpdriver.Dial(ctx, s.Addr().String(), gid, pass, fit)
	if err != nil {
		t.Fatalf("Dial with packets within the relay's messages: %v", err)
	}
	c.Abort("")
}
