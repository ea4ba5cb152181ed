package main

import (
	"slices"
	"testing"
)

func TestParseCPUList(t *testing.T) {
	tests := []struct {
		in   string
		want []int
	}{
		{"0", []int{0}},
		{"1,0", []int{0, 1}},
		{"0-3", []int{0, 1, 2, 3}},
		{"2-3,0,3", []int{0, 2, 3}},
		{" 1 ", []int{1}},
	}
	for _, tt := range tests {
		got, err := parseCPUList(tt.in)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("parseCPUList(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "x", "-1", "3-1", "0,", "1-x"} {
		if got, err := parseCPUList(bad); err == nil {
			t.Errorf("parseCPUList(%q) = %v, want an error", bad, got)
		}
	}
}
