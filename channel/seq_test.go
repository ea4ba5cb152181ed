package channel

import (
	"math"
	"testing"

	"pgregory.net/rapid"
)

func TestSeqValid(t *testing.T) {
	tests := []struct {
		s    Seq
		want bool
	}{
		{0, true}, {-1, true}, {MinSeq, true}, {MaxSeq, true},
		{MinSeq - 1, false}, {-8388608, false}, {MaxSeq + 1, false},
	}
	for _, tc := range tests {
		if got := tc.s.Valid(); got != tc.want {
			t.Errorf("Seq(%d).Valid() = %v, want %v", tc.s, got, tc.want)
		}
	}
}

// TestSeqNext checks the wrap of D5: the value after 8388607 is -10000.
func TestSeqNext(t *testing.T) {
	tests := []struct{ s, next Seq }{
		{0, 1}, {-1, 0}, {MinSeq, MinSeq + 1}, {MaxSeq - 1, MaxSeq}, {MaxSeq, MinSeq},
	}
	for _, tc := range tests {
		if got := tc.s.Next(); got != tc.next {
			t.Errorf("Seq(%d).Next() = %d, want %d", tc.s, got, tc.next)
		}
		if got := tc.next.Prev(); got != tc.s {
			t.Errorf("Seq(%d).Prev() = %d, want %d", tc.next, got, tc.s)
		}
		if got := tc.s.Add(1); got != tc.next {
			t.Errorf("Seq(%d).Add(1) = %d, want %d", tc.s, got, tc.next)
		}
	}
	if SeqSpace != 8398608 {
		t.Errorf("SeqSpace = %d, want 8398608 (D5)", SeqSpace)
	}
}

func TestSeqAdd(t *testing.T) {
	tests := []struct {
		s    Seq
		n    int
		want Seq
	}{
		{0, 0, 0},
		{0, 100, 100},
		{MaxSeq, 2, MinSeq + 1},
		{MaxSeq - 5, 10, MinSeq + 4},
		{-5, SeqSpace, -5},
		{-5, 3*SeqSpace + 7, 2},
		{MinSeq, -1, MaxSeq},
		{0, -SeqSpace - 1, -1},
		{MaxSeq, SeqSpace - 1, MaxSeq - 1},
		{MaxSeq, 2*SeqSpace - 1, MaxSeq - 1},
		{MinSeq, 2 * SeqSpace, MinSeq},
	}
	for _, tc := range tests {
		if got := tc.s.Add(tc.n); got != tc.want {
			t.Errorf("Seq(%d).Add(%d) = %d, want %d", tc.s, tc.n, got, tc.want)
		}
	}
}

// TestSeqAddFast: Add's path without divisions, for a valid number and a
// step forward, agrees with modular arithmetic at every wrap.
func TestSeqAddFast(t *testing.T) {
	ref := func(s Seq, n int) Seq {
		return fromIndex(((s.index()+n)%SeqSpace + SeqSpace) % SeqSpace)
	}
	for _, s := range []Seq{MinSeq, MinSeq + 1, -1, 0, 1, MaxSeq - 1, MaxSeq} {
		for _, n := range []int{0, 1, 2, 10000, SeqSpace - 1, SeqSpace, SeqSpace + 1, 2*SeqSpace - 1, 2 * SeqSpace, 5 * SeqSpace} {
			if got, want := s.Add(n), ref(s, n); got != want {
				t.Errorf("Seq(%d).Add(%d) = %d, want %d", s, n, got, want)
			}
		}
	}
	// Steps whose sum with the index overflows, and numbers out of the
	// range, take the divisions.
	slow := func(s Seq, n int) Seq {
		i := (s.index() + n%SeqSpace) % SeqSpace
		if i < 0 {
			i += SeqSpace
		}
		return fromIndex(i)
	}
	for _, tc := range []struct {
		s Seq
		n int
	}{{0, math.MaxInt}, {MaxSeq, math.MaxInt - 5}, {MinSeq, math.MaxInt32}, {math.MaxInt32, 0}, {MaxSeq + 1, 3}, {math.MinInt32, 1}} {
		if got, want := tc.s.Add(tc.n), slow(tc.s, tc.n); got != want {
			t.Errorf("Seq(%d).Add(%d) = %d, want %d", tc.s, tc.n, got, want)
		}
	}
}

func TestDistance(t *testing.T) {
	tests := []struct {
		from, to Seq
		want     int
	}{
		{0, 0, 0},
		{-1, 0, 1},
		{0, -1, SeqSpace - 1},
		{MaxSeq, MinSeq, 1},
		{MaxSeq - 1, MinSeq + 1, 3},
		{MinSeq, MaxSeq, SeqSpace - 1},
		{100, 50, SeqSpace - 50},
	}
	for _, tc := range tests {
		if got := Distance(tc.from, tc.to); got != tc.want {
			t.Errorf("Distance(%d, %d) = %d, want %d", tc.from, tc.to, got, tc.want)
		}
	}
}

// TestSeqBefore checks comes-before (D6): serial number arithmetic on
// i(s) = s+10000, including across the wrap, and the pair the
// specification's own formula gets wrong (5 and -3).
func TestSeqBefore(t *testing.T) {
	half := SeqSpace / 2
	tests := []struct {
		name string
		a, b Seq
		want bool
	}{
		{"0 before 1", 0, 1, true},
		{"1 not before 0", 1, 0, false},
		{"equal", 7, 7, false},
		{"-1 before 0 (the ignore number before the first packet)", -1, 0, true},
		{"-3 before 5", -3, 5, true},
		{"5 not before -3 (D6 fixes the spec's formula)", 5, -3, false},
		{"MaxSeq before MinSeq across the wrap", MaxSeq, MinSeq, true},
		{"MinSeq not before MaxSeq", MinSeq, MaxSeq, false},
		{"8388600 before -9990 across the wrap", 8388600, -9990, true},
		{"positive before negative near the wrap", 8000000, -5000, true},
		{"just under half the space ahead", 0, MinSeq.Add(10000 + half - 1), true},
		{"exactly half: neither", 0, Seq(0).Add(half), false},
		{"exactly half, other way: neither", Seq(0).Add(half), 0, false},
		{"just over half ahead is behind", 0, Seq(0).Add(half + 1), false},
		{"just over half ahead, other way", Seq(0).Add(half + 1), 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.a.Before(tc.b); got != tc.want {
				t.Errorf("Seq(%d).Before(%d) = %v, want %v", tc.a, tc.b, got, tc.want)
			}
		})
	}
}

// TestSeqBeforeIsOrderNearby checks that Before is a strict order on any
// window shorter than half the space, wherever it sits (D6).
func TestSeqBeforeIsOrderNearby(t *testing.T) {
	for _, start := range []Seq{MinSeq, -5, 0, MaxSeq - 3, 4000000} {
		w := make([]Seq, 8)
		for i := range w {
			w[i] = start.Add(i * 1000)
		}
		for i := range w {
			for j := range w {
				if got, want := w[i].Before(w[j]), i < j; got != want {
					t.Errorf("start %d: %d.Before(%d) = %v, want %v", start, w[i], w[j], got, want)
				}
			}
		}
	}
}

// TestDistanceAsRemainder checks Distance against its definition, (i(to) -
// i(from)) mod M, for any two Seq values, valid or not: its shortcut for
// differences within (-M, M) must give the remainder itself, at the edges
// of that range and beyond them too.
func TestDistanceAsRemainder(t *testing.T) {
	ref := func(from, to Seq) int {
		d := (to.index() - from.index()) % SeqSpace
		if d < 0 {
			d += SeqSpace
		}
		return d
	}
	m := Seq(SeqSpace)
	edges := []Seq{0, 1, -1, MinSeq, MaxSeq, MinSeq - 1, MaxSeq + 1, m, -m, m - 1, 1 - m, m + 1, -m - 1, 2 * m, -2 * m,
		MinSeq + m, MaxSeq - m, math.MaxInt32, math.MinInt32, math.MaxInt32 - 1, math.MinInt32 + 1}
	for _, a := range edges {
		for _, b := range edges {
			for _, from := range []Seq{a, b, a + b} {
				for _, to := range []Seq{a, b, a - b} {
					if got, want := Distance(from, to), ref(from, to); got != want {
						t.Fatalf("Distance(%d, %d) = %d, want %d", from, to, got, want)
					}
				}
			}
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		from := Seq(rapid.Int32().Draw(t, "from"))
		to := Seq(rapid.Int32().Draw(t, "to"))
		if got, want := Distance(from, to), ref(from, to); got != want {
			t.Fatalf("Distance(%d, %d) = %d, want %d", from, to, got, want)
		}
	})
}

// Add gives the number n places on by the definition, (i(s) + n) mod M
// (D6), for every valid s and any n, its common path (0 <= n < M,
// N105) and the rest alike.
func TestSeqAddDefinition(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := Seq(rapid.IntRange(int(MinSeq), int(MaxSeq)).Draw(t, "s"))
		n := rapid.OneOf(rapid.IntRange(0, SeqSpace-1), rapid.IntRange(-3*SeqSpace, 3*SeqSpace),
			rapid.SampledFrom([]int{0, 1, SeqSpace - 1, SeqSpace, int(MaxSeq) - int(s), int(MaxSeq) - int(s) + 1})).Draw(t, "n")
		i := (int(s) - int(MinSeq) + n) % SeqSpace
		if i < 0 {
			i += SeqSpace
		}
		if got, want := s.Add(n), Seq(i+int(MinSeq)); got != want {
			t.Fatalf("Seq(%d).Add(%d) = %d, want %d", s, n, got, want)
		}
	})
}
