package udpdriver_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/driver"
	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/udpdriver"
)

// TestCloseUnderLoad closes the listener and the clients while every
// connection sends and receives as fast as it can: every call returns,
// with an error that says the connection ended, and no goroutine is left.
func TestCloseUnderLoad(t *testing.T) {
	for _, who := range []string{"listener", "clients", "both"} {
		t.Run(who, func(t *testing.T) {
			base := runtime.NumGoroutine()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			l, err := udpdriver.Listen(ctx, "127.0.0.1:0", udpdriver.Config{})
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			ended := func(err error) bool {
				return err == nil || errors.Is(err, fastnet.ErrClosed) || errors.Is(err, context.Canceled)
			}
			pump := func(c *driver.Conn, name string) {
				msg := make([]byte, 3000)
				wg.Go(func() {
					for {
						if err := c.Send(ctx, 1, msg, true); err != nil {
							if !ended(err) {
								t.Errorf("%s: Send: %v", name, err)
							}
							return
						}
					}
				})
				wg.Go(func() {
					for {
						err := c.TrySend(2, msg[:100], false)
						if err != nil && !errors.Is(err, fastnet.ErrQueueFull) {
							if !ended(err) {
								t.Errorf("%s: TrySend: %v", name, err)
							}
							return
						}
						if err != nil {
							runtime.Gosched()
						}
					}
				})
				wg.Go(func() {
					for {
						if _, err := c.Receive(ctx); err != nil {
							if !ended(err) {
								t.Errorf("%s: Receive: %v", name, err)
							}
							return
						}
					}
				})
			}
			var accepting sync.WaitGroup
			defer accepting.Wait()
			accepting.Go(func() {
				for {
					c, err := l.Accept(ctx)
					if err != nil {
						if !errors.Is(err, fastnet.ErrClosed) && !errors.Is(err, context.Canceled) {
							t.Errorf("Accept: %v", err)
						}
						return
					}
					pump(c, "server")
				}
			})
			var clients []*driver.Conn
			for range 3 {
				c, err := udpdriver.Dial(ctx, l.Addr().String(), udpdriver.Config{})
				if err != nil {
					t.Fatal(err)
				}
				clients = append(clients, c)
				pump(c, "client")
			}
			time.Sleep(300 * time.Millisecond)
			var closers sync.WaitGroup
			if who != "clients" {
				closers.Go(func() { l.Close() })
			}
			if who != "listener" {
				for _, c := range clients {
					closers.Go(func() { c.Abort("done") })
				}
			}
			done := make(chan struct{})
			go func() { closers.Wait(); wg.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				buf := make([]byte, 1<<20)
				t.Fatalf("calls still blocked 20 s after Close:\n%s", buf[:runtime.Stack(buf, true)])
			}
			for _, c := range clients {
				c.Close()
			}
			l.Close()
			accepting.Wait()
			cancel()
			if g := settled(5*time.Second, base, runtime.NumGoroutine); g > base {
				buf := make([]byte, 1<<20)
				t.Errorf("goroutines: %d before, %d after:\n%s", base, g, buf[:runtime.Stack(buf, true)])
			}
		})
	}
}
