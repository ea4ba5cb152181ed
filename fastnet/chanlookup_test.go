package fastnet

import (
	"math/rand/v2"
	"testing"
)

// A connection finds a channel's state by its id, through the slice of
// low channels or the map (N120): the same state whichever way, made once,
// nil for a channel never used unless asked to make it, and the slice no
// longer than the highest low channel used.
func TestChannelLookup(t *testing.T) {
	ids := []int16{0, 1, 2, lowChannels - 1, lowChannels, lowChannels + 1, 200, MaxChannel}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		ids = append(ids, int16(rng.IntN(2*lowChannels)), int16(rng.IntN(MaxChannel+1)))
	}
	for round := range 50 {
		c := &conn{chans: make(map[int16]*chanState)}
		made := map[int16]*chanState{}
		highest := -1
		for range 200 {
			id := ids[rng.IntN(len(ids))]
			create := rng.IntN(2) == 0
			if rng.IntN(4) == 0 {
				c.last = nil // not the one-entry cache's answer
			}
			cs := c.channel(id, create)
			want, ok := made[id]
			switch {
			case ok && cs != want:
				t.Fatalf("round %d: channel %d: a state other than the one made", round, id)
			case !ok && create && (cs == nil || cs.id != id):
				t.Fatalf("round %d: channel %d: made %+v", round, id, cs)
			case !ok && !create && cs != nil:
				t.Fatalf("round %d: channel %d never made, yet found", round, id)
			}
			if !ok && create {
				made[id] = cs
				if id < lowChannels {
					highest = max(highest, int(id))
				}
			}
			if len(c.chans) != len(made) || len(c.low) != highest+1 {
				t.Fatalf("round %d: %d states in the map, %d made; low slice of %d, highest low channel %d",
					round, len(c.chans), len(made), len(c.low), highest)
			}
		}
	}
}
