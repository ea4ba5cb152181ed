package driver_test

import (
	"context"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/driver"
	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/udpdriver"
)

// TestEchoRoundTripBundled: between two endpoints that negotiated bundles
// (D24), a reply leaves in one datagram with the ack of what it answers
// (N75), so that a request and its echo cost two datagrams, not four; with
// bundles off on one side, four.
func TestEchoRoundTripBundled(t *testing.T) {
	for _, tt := range []struct {
		name      string
		noBundles bool
		most      float64 // datagrams a round trip, both ways
	}{
		{"bundles", false, 2.5},
		{"strict peer", true, 4.5},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			l, err := udpdriver.Listen(ctx, "127.0.0.1:0", udpdriver.Config{Engine: fastnet.Config{NoBundles: tt.noBundles}})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			accepted := make(chan *driver.Conn, 1)
			go func() {
				sc, err := l.Accept(ctx)
				if err != nil {
					close(accepted)
					return
				}
				accepted <- sc
				for m, err := sc.Receive(ctx); err == nil; m, err = sc.Receive(ctx) {
					sc.Send(ctx, m.Channel, m.Data, m.Reliable)
				}
			}()
			c, err := udpdriver.Dial(ctx, l.Addr().String(), udpdriver.Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			sc := <-accepted
			if sc == nil {
				t.Fatal("no connection accepted")
			}
			// Until both sides have negotiated (a few heartbeats).
			deadline := time.Now().Add(5 * time.Second)
			for !tt.noBundles && c.Stats().BundlesReceived == 0 && time.Now().Before(deadline) {
				c.Send(ctx, 1, []byte("warm-up"), true)
				if _, err := c.Receive(ctx); err != nil {
					t.Fatal(err)
				}
				time.Sleep(10 * time.Millisecond)
			}
			// Until the MTU estimation is over each way: its probes and
			// their counts are datagrams of their own. That takes a few
			// hundred ms on an idle machine, and past a second on a
			// loaded one.
			for _, conn := range []*driver.Conn{c, sc} {
				for st := conn.Stats(); st.MTUSearching || st.MTUEstimations == 0; st = conn.Stats() {
					if time.Now().After(deadline.Add(5 * time.Second)) {
						t.Fatalf("the MTU estimation still running: %+v", st)
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
			// A measurement counts datagrams over wall-clock time, and on a
			// loaded machine a goroutine held off the processor past the
			// ack delay sends its ack alone now and then: up to three
			// tries, the best of which must meet the bound. A build that
			// does not carry the ack with the reply misses it every time
			// (four datagrams a round trip).
			var after fastnet.Stats
			best := 0.0
			for try := range 3 {
				before := c.Stats()
				const n = 200
				for range n {
					if err := c.Send(ctx, 1, []byte("ping"), true); err != nil {
						t.Fatal(err)
					}
					if _, err := c.Receive(ctx); err != nil {
						t.Fatal(err)
					}
				}
				after = c.Stats()
				sent := after.PacketsSent - before.PacketsSent
				recv := after.PacketsReceived - before.PacketsReceived
				per := float64(sent+recv) / n
				t.Logf("try %d: %d datagrams sent, %d received: %.2f a round trip; bundles sent %d, received %d",
					try+1, sent, recv, per, after.BundlesSent-before.BundlesSent, after.BundlesReceived-before.BundlesReceived)
				if try == 0 || per < best {
					best = per
				}
				if best <= tt.most {
					break
				}
			}
			if best > tt.most {
				t.Errorf("%.2f datagrams a round trip at best of 3 tries, want at most %.1f", best, tt.most)
			}
			if tt.noBundles && after.BundlesSent+after.BundlesReceived > 0 {
				t.Errorf("bundles with a strict peer: %d sent, %d received", after.BundlesSent, after.BundlesReceived)
			}
		})
	}
}
