package urpdriver_test

import (
	"context"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/driver"
	"github.com/fastnet-engine/fastnet/tcpdriver"
	"github.com/fastnet-engine/fastnet/urp/internal/urptest"
	"github.com/fastnet-engine/fastnet/urp/urpdriver"
)

// Fastnet over a relay against Fastnet over direct TCP, in the same run,
// on W1-W3 of docs/workloads.md: the round trip of a 64-byte reliable
// message, and 64-byte and 1 KiB reliable messages one way as fast as
// they go, in order on one channel.
//
//	go test -run '^$' -bench . -benchtime 2s ./urp/urpdriver
func BenchmarkFastnet(b *testing.B) {
	urptest.RunWorkloads(b, []string{"relay", "tcp"}, func(b *testing.B, w urptest.Workload, path string) {
		client, server := fastnetPair(b, path == "relay")
		if w.Echo {
			benchEcho(b, client, server, w.Size)
		} else {
			benchStream(b, client, server, w.Size)
		}
	})
}

// fastnetPair connects a client to a server, through a relay or directly
// over TCP.
func fastnetPair(b *testing.B, relayed bool) (client, server *driver.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var l *driver.Listener
	var err error
	if relayed {
		s := relay(b)
		ul, lerr := urpdriver.Listen(ctx, s.Addr().String(), urpdriver.Config{})
		if lerr != nil {
			b.Fatal(lerr)
		}
		l = ul.Listener
		gid, pass := ul.Group()
		client, err = urpdriver.Dial(ctx, s.Addr().String(), gid, pass, urpdriver.Config{})
	} else {
		l, err = tcpdriver.Listen(ctx, "127.0.0.1:0", tcpdriver.Config{})
		if err != nil {
			b.Fatal(err)
		}
		client, err = tcpdriver.Dial(ctx, l.Addr().String(), tcpdriver.Config{})
	}
	if err != nil {
		b.Fatal(err)
	}
	server, err = l.Accept(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		client.Abort("")
		l.Close()
	})
	return client, server
}

func benchEcho(b *testing.B, client, server *driver.Conn, size int) {
	ctx := context.Background()
	go func() {
		for m, err := server.Receive(ctx); err == nil; m, err = server.Receive(ctx) {
			server.Send(ctx, m.Channel, m.Data, true)
		}
	}()
	msg := make([]byte, size)
	for range 100 { // warm-up
		client.Send(ctx, 0, msg, true)
		client.Receive(ctx)
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		if err := client.Send(ctx, 0, msg, true); err != nil {
			b.Fatal(err)
		}
		if _, err := client.Receive(ctx); err != nil {
			b.Fatal(err)
		}
	}
	el := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(el.Microseconds())/float64(b.N), "µs/rtt")
}

func benchStream(b *testing.B, client, server *driver.Conn, size int) {
	ctx := context.Background()
	n := b.N
	got := make(chan error, 1)
	go func() {
		for i := range n {
			m, err := server.Receive(ctx)
			if err == nil && (m.Data[0] != byte(i) || len(m.Data) != size) {
				b.Errorf("message %d out of order", i)
			}
			if err != nil {
				got <- err
				return
			}
		}
		got <- nil
	}()
	msg := make([]byte, size)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := range n {
		msg[0] = byte(i)
		if err := client.Send(ctx, 0, msg, true); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-got; err != nil {
		b.Fatal(err)
	}
	el := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(n)/el.Seconds(), "msgs/s")
}
