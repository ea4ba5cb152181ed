package udpdriver_test

import (
	"context"
	"errors"
	"net"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/udpdriver"
)

// openFDs returns how many descriptors the process has open, or -1 where
// the system does not say.
func openFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

// settled waits until f() is at most want or limit passes, and returns
// its last value.
func settled(limit time.Duration, want int, f func() int) int {
	deadline := time.Now().Add(limit)
	for {
		n := f()
		if n <= want || time.Now().After(deadline) {
			return n
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestDialCyclesRelease dials and ends connections in every way a client
// can (closed, aborted, ended by the server, refused by the system,
// cancelled during the handshake, many at once), and checks that the
// process holds no more goroutines and descriptors afterwards than before.
func TestDialCyclesRelease(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l, err := udpdriver.Listen(ctx, "127.0.0.1:0", udpdriver.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	addr := l.Addr().String()
	var served sync.WaitGroup
	served.Go(func() {
		for {
			c, err := l.Accept(ctx)
			if err != nil {
				return
			}
			served.Go(func() {
				for {
					m, err := c.Receive(ctx)
					if err != nil {
						return
					}
					if string(m.Data) == "end" {
						c.CloseWithReason("served")
						return
					}
					c.Send(ctx, m.Channel, m.Data, m.Reliable)
				}
			})
		}
	})
	// A port where nothing listens, and a socket that never answers.
	dead, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.LocalAddr().String()
	dead.Close()
	silent, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	cfg := udpdriver.Config{Engine: fastnet.Config{ConnectTimeout: 3 * time.Second}}

	cycle := func() {
		// Closed.
		c, err := udpdriver.Dial(ctx, addr, cfg)
		if err != nil {
			t.Fatal(err)
		}
		c.Send(ctx, 1, []byte("x"), true)
		if _, err := c.Receive(ctx); err != nil {
			t.Fatal(err)
		}
		c.Close()
		// Aborted.
		c, err = udpdriver.Dial(ctx, addr, cfg)
		if err != nil {
			t.Fatal(err)
		}
		c.Abort("bye")
		// Ended by the server, never closed here.
		c, err = udpdriver.Dial(ctx, addr, cfg)
		if err != nil {
			t.Fatal(err)
		}
		c.Send(ctx, 1, []byte("end"), true)
		select {
		case <-c.Done():
		case <-ctx.Done():
			t.Fatal("the server's close never came")
		}
		// Refused by the system.
		if _, err := udpdriver.Dial(ctx, deadAddr, cfg); !errors.Is(err, fastnet.ErrRefused) {
			t.Fatalf("Dial to a dead port: %v", err)
		}
		// Cancelled during the handshake.
		dctx, dcancel := context.WithTimeout(ctx, 50*time.Millisecond)
		_, err = udpdriver.Dial(dctx, silent.LocalAddr().String(), cfg)
		dcancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Dial to a silent socket: %v", err)
		}
	}
	cycle() // the pools and lazily made goroutines of the process
	runtime.GC()
	baseG := settled(2*time.Second, 0, runtime.NumGoroutine)
	baseFD := openFDs()
	for range 10 {
		cycle()
	}
	// Many at once.
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			c, err := udpdriver.Dial(ctx, addr, cfg)
			if err != nil {
				t.Error(err)
				return
			}
			c.Close()
		})
	}
	wg.Wait()
	if g := settled(5*time.Second, baseG, runtime.NumGoroutine); g > baseG {
		buf := make([]byte, 1<<20)
		t.Errorf("goroutines: %d before, %d after:\n%s", baseG, g, buf[:runtime.Stack(buf, true)])
	}
	if baseFD >= 0 {
		if fd := settled(5*time.Second, baseFD, openFDs); fd > baseFD {
			t.Errorf("descriptors: %d before, %d after", baseFD, fd)
		}
	}
}
