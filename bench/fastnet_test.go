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
	tests := []struct {
		name    string
		r       *result
		results []*result
		want    string
	}{
		{"latency, median of runs", fnW1, []*result{plainW1, fnW1}, "p50 2.00x, p99 2.00x raw-udp-plain"},
		{"latency without baseline", fnW1, []*result{fnW1, batchW4}, "-"},
		{"rate, both baselines", fnW2, []*result{batchW4, udpioW4, fnW2}, "2.00x raw-udp-batch64 W4, 0.50x udpio-batch64 W4 (best baseline)"},
		{"rate, batch64 best", fnW2, []*result{batchW4, fnW2}, "2.00x raw-udp-batch64 W4"},
		{"rate, only udpio", fnW2, []*result{udpioW4, fnW2}, "0.50x udpio-batch64 W4 (best baseline)"},
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
	}{{"fastnet-udp", "W1 W2 W3 W4"}, {"fastnet-tcp", "W1 W2 W3"}} {
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
