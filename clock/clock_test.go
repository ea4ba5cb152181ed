package clock

import (
	"math"
	"testing"
	"time"
)

func TestEarliest(t *testing.T) {
	tests := []struct {
		a, b, want Time
	}{
		{0, 0, 0},
		{0, 5, 5},
		{5, 0, 5},
		{3, 5, 3},
		{5, 3, 3},
	}
	for _, tt := range tests {
		if got := Earliest(tt.a, tt.b); got != tt.want {
			t.Errorf("Earliest(%d, %d) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestManual(t *testing.T) {
	m := NewManual(0)
	if m.Now() != Epoch {
		t.Fatalf("NewManual(0).Now() = %v, want %v", m.Now(), Epoch)
	}
	if got := m.Advance(time.Second); got != Epoch.Add(time.Second) {
		t.Fatalf("Advance(1s) = %v", got)
	}
	m.Advance(-time.Hour)
	m.Set(Epoch)
	if m.Now() != Epoch.Add(time.Second) {
		t.Fatalf("clock went backwards: %v", m.Now())
	}
	m.Set(Epoch.Add(5 * time.Second))
	if m.Now().Sub(Epoch) != 5*time.Second {
		t.Fatalf("Set: %v", m.Now())
	}
}

func TestReal(t *testing.T) {
	r := NewReal()
	a := r.Now()
	b := r.Now()
	if a == 0 || b < a {
		t.Fatalf("real clock readings %v then %v", a, b)
	}
	d := r.Deadline(a.Add(time.Second))
	if got := d.Sub(r.Deadline(a)); got != time.Second {
		t.Fatalf("Deadline difference = %v, want 1s", got)
	}
}

// TestAddSaturates checks that instants past the clock's range saturate
// (N36): a configured duration of math.MaxInt64 means "never", not a
// deadline that overflowed into the past.
func TestAddSaturates(t *testing.T) {
	for _, tc := range []struct {
		t    Time
		d    time.Duration
		want Time
	}{
		{Epoch, time.Second, Epoch + Time(time.Second)},
		{Epoch, math.MaxInt64, Never},
		{Never - 5, 10, Never},
		{Never, 1, Never},
		{Never, -1, Never - 1},
		{Epoch, -time.Second, Epoch - Time(time.Second)},
		{minTime + 5, -10, minTime},
		{minTime, math.MinInt64, minTime},
	} {
		if got := tc.t.Add(tc.d); got != tc.want {
			t.Errorf("%d.Add(%d) = %d, want %d", tc.t, tc.d, got, tc.want)
		}
	}
}

func TestScale(t *testing.T) {
	tests := []struct {
		d    time.Duration
		n    int64
		want time.Duration
	}{
		{0, 5, 0},
		{time.Second, 0, 0},
		{time.Second, 3, 3 * time.Second},
		{-time.Second, 3, -3 * time.Second},
		{math.MaxInt64, 1, math.MaxInt64},
		{math.MaxInt64, 2, math.MaxInt64},
		{1 << 62, 2, math.MaxInt64},
		{1 << 62, 3, math.MaxInt64},
		{math.MaxInt64 / 3, 3, math.MaxInt64 / 3 * 3},
		{math.MaxInt64/3 + 1, 3, math.MaxInt64},
		{math.MinInt64 / 2, 2, math.MinInt64},
		{math.MinInt64/2 - 1, 2, math.MinInt64},
		{-1 << 62, 3, math.MinInt64},
	}
	for _, tc := range tests {
		if got := Scale(tc.d, tc.n); got != tc.want {
			t.Errorf("Scale(%d, %d) = %d, want %d", tc.d, tc.n, got, tc.want)
		}
	}
}
