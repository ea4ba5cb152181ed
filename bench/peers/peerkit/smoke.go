package peerkit

import (
	"context"
	"fmt"
	"time"
)

// TB is the part of testing.TB SmokeW1 uses.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
}

// SmokeW1 is a peer module's smoke test: both roles in this process, a
// few W1 round trips of 64 bytes over loopback, within limit. It checks
// that the exchange completes and reports plausible figures, nothing about
// their size.
func SmokeW1(t TB, p Peer, limit time.Duration) {
	t.Helper()
	w := Workload{Name: "W1", Warmup: 5, Messages: 20, Size: 64}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	sctx, finished := context.WithCancel(ctx)
	addrs := make(chan string, 1)
	type result struct {
		m   Metrics
		err error
	}
	served := make(chan result, 1)
	go func() {
		m, err := Server(sctx, p, w, func(a string) { addrs <- a })
		served <- result{m, err}
	}()
	var addr string
	select {
	case addr = <-addrs:
	case r := <-served:
		t.Fatalf("server: %v", r.err)
	case <-ctx.Done():
		t.Fatalf("server not ready within %v", limit)
	}
	cm, err := Client(ctx, p, w, addr)
	finished()
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	r := <-served
	if r.err != nil {
		t.Fatalf("server: %v", r.err)
	}
	if cm[P50] <= 0 || cm[P99] < cm[P50] {
		t.Fatalf("p50 %v µs, p99 %v µs", cm[P50], cm[P99])
	}
	if r.m["echoed"] < float64(w.Warmup+w.Messages) {
		t.Fatalf("server echoed %v messages, want %d", r.m["echoed"], w.Warmup+w.Messages)
	}
	t.Logf("%s", fmt.Sprintf("p50 %.0f µs, p99 %.0f µs", cm[P50], cm[P99]))
}
