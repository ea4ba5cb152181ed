package main

import (
	"strings"
	"testing"
)

// TestRatioCell checks the comparisons of the table's last column.
func TestRatioCell(t *testing.T) {
	w := map[string]Workload{}
	for _, x := range workloads(false) {
		w[x.Name] = x
	}
	plainW1 := &result{system: "raw-udp-plain", w: w["W1"], runs: []Metrics{{P50: 20, P99: 100}}}
	batchW4 := &result{system: "raw-udp-batch64", w: w["W4"], runs: []Metrics{{Rate: 100e3}}}
	udpioW4 := &result{system: "udpio-batch64", w: w["W4"], runs: []Metrics{{Rate: 400e3}}}
	fnW1 := &result{system: "fastnet-udp", w: w["W1"], runs: []Metrics{{P50: 30, P99: 150}, {P50: 50, P99: 300}, {P50: 40, P99: 200}}}
	fnW2 := &result{system: "fastnet-udp", w: w["W2"], runs: []Metrics{{Rate: 200e3}}}
	ackedW1 := &result{system: "raw-udp-acked", w: w["W1"], runs: []Metrics{{P50: 40, P99: 200}}}
	udpioAckedW1 := &result{system: "udpio-acked", w: w["W1"], runs: []Metrics{{P50: 30, P99: 133.33333333333334}}}
	batchW4K := &result{system: "raw-udp-batch64", w: w["W4K"], runs: []Metrics{{Rate: 100e3}}}
	udpioW4K := &result{system: "udpio-batch64", w: w["W4K"], runs: []Metrics{{Rate: 1.5e6}}}
	fnW3 := &result{system: "fastnet-udp", w: w["W3"], runs: []Metrics{{Rate: 150e3}}}
	tests := []struct {
		name    string
		r       *result
		results []*result
		want    string
	}{
		{"latency, median of runs", fnW1, []*result{plainW1, fnW1}, "p50 2.00x, p99 2.00x raw-udp-plain"},
		{"latency without baseline", fnW1, []*result{fnW1, batchW4}, "-"},
		{"latency, every floor", fnW1, []*result{plainW1, ackedW1, udpioAckedW1, fnW1}, "p50 2.00x, p99 2.00x raw-udp-plain; p50 1.00x, p99 1.00x raw-udp-acked; p50 1.33x, p99 1.50x udpio-acked"},
		{"rate, both baselines", fnW2, []*result{batchW4, udpioW4, fnW2}, "2.00x raw-udp-batch64 W4, 0.50x udpio-batch64 W4"},
		{"rate, batch64 only", fnW2, []*result{batchW4, fnW2}, "2.00x raw-udp-batch64 W4"},
		{"rate, only udpio", fnW2, []*result{udpioW4, fnW2}, "0.50x udpio-batch64 W4"},
		{"W3 against 1 KiB datagrams", fnW3, []*result{batchW4, batchW4K, udpioW4K, fnW3}, "1.50x raw-udp-batch64 W4K, 0.10x udpio-batch64 W4K"},
		{"rate without baseline", fnW2, []*result{fnW2}, "-"},
		{"baseline itself", batchW4, []*result{batchW4}, "1.00x raw-udp-batch64 W4"},
	}
	for _, tt := range tests {
		if got := ratioCell(tt.r, tt.results); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestFastnetRows checks that the engine's systems are listed with the
// workloads they run: every one over UDP, W1-W3 over TCP.
func TestFastnetRows(t *testing.T) {
	for _, tt := range []struct {
		system string
		want   string
	}{{"fastnet-udp", "W1 W2 W3 W4 W5"}, {"fastnet-tcp", "W1 W2 W3"}} {
		s := findSystem(tt.system)
		if s == nil {
			t.Fatalf("no system %s", tt.system)
		}
		var got []string
		for _, w := range workloads(false) {
			if s.Supports(w) {
				got = append(got, w.Name)
			}
		}
		if strings.Join(got, " ") != tt.want {
			t.Errorf("%s runs %q, want %q", tt.system, got, tt.want)
		}
	}
}
