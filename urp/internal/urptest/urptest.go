// Package urptest holds what the tests of the urp packages share: a relay
// on loopback that ends with the test, a context that bounds a test, and
// the benchmark workloads of docs/workloads.md the relay is measured on.
package urptest

import (
	"context"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/urp/urpserver"
)

// Relay starts a relay on a free loopback port, closed when the test
// ends.
func Relay(t testing.TB, cfg urpserver.Config) *urpserver.Server {
	t.Helper()
	s, err := urpserver.Listen(context.Background(), "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Context returns a context that ends after d, or when the test ends.
func Context(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// Workload is one of W1-W3 (docs/workloads.md) as the relay's benchmarks
// run it: messages of Size bytes, echoed one at a time (W1) or sent one
// way as fast as they go (W2, W3).
type Workload struct {
	Name string
	Size int
	Echo bool
}

// Workloads are W1, W2 and W3.
var Workloads = []Workload{
	{"W1-echo-64B", 64, true},
	{"W2-64B", 64, false},
	{"W3-1KiB", 1024, false},
}

// RunWorkloads runs bench for every workload over every path, as the
// sub-benchmark "workload/path", so that the paths compare in one run.
func RunWorkloads(b *testing.B, paths []string, bench func(b *testing.B, w Workload, path string)) {
	for _, w := range Workloads {
		for _, path := range paths {
			b.Run(w.Name+"/"+path, func(b *testing.B) { bench(b, w, path) })
		}
	}
}
