package fastnet

import (
	"encoding/binary"
	"math"
	"testing"

	"pgregory.net/rapid"
)

// spend, written with comparisons (N105), leaves the bucket where its
// definition does: max(tokens-n, floor), the floor being the capacity
// owed (-capacity, owe) or min(tokens, 0) (N79).
func TestSpendLevel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tokens := rapid.Float64Range(-1e6, 1e6).Draw(t, "tokens")
		rate := rapid.Float64Range(0, 1e10).Draw(t, "rate")
		n := rapid.IntRange(0, 70000).Draw(t, "n")
		datagram := rapid.IntRange(34, 65537).Draw(t, "datagram")
		owe := rapid.Bool().Draw(t, "owe")
		cc := congestion{on: true, tokens: tokens, rateVal: rate}
		cc.spend(n, datagram, owe)
		floor := math.Min(tokens, 0)
		if owe {
			floor = -math.Max(rate*ccBurstSeconds, float64(ccBurstDatagrams*datagram))
		}
		if want := math.Max(tokens-float64(n), floor); cc.tokens != want {
			t.Fatalf("spend(%d, %d, %v) from %v at rate %v: %v tokens, want %v", n, datagram, owe, tokens, rate, cc.tokens, want)
		}
		if cc.sent != uint64(n) {
			t.Fatalf("sent %d, want %d", cc.sent, n)
		}
	})
}

// spendRun leaves the bucket and the bytes sent where spend, with owe
// set, leaves them for each packet of the run in turn, to the bit.
func TestSpendRunLikeSpend(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tokens := rapid.Float64Range(-1e6, 1e6).Draw(t, "tokens")
		rate := rapid.Float64Range(0, 1e10).Draw(t, "rate")
		datagram := rapid.IntRange(34, 65537).Draw(t, "datagram")
		sizes := rapid.SliceOfN(rapid.IntRange(0, 9000), 0, 200).Draw(t, "sizes")
		on := rapid.Float64Range(0, 1).Draw(t, "on") < 0.9
		var run []byte
		for _, n := range sizes {
			run = binary.BigEndian.AppendUint16(run, uint16(n))
			run = append(run, make([]byte, n)...)
		}
		want := congestion{on: on, tokens: tokens, rateVal: rate, sent: 7}
		got := want
		for _, n := range sizes {
			want.spend(n, datagram, true)
		}
		got.spendRun(run, datagram)
		if math.Float64bits(got.tokens) != math.Float64bits(want.tokens) || got.sent != want.sent {
			t.Fatalf("spendRun: %v tokens, %d sent; spend one by one: %v, %d", got.tokens, got.sent, want.tokens, want.sent)
		}
	})
}
