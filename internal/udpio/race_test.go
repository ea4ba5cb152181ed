//go:build race

package udpio

// raceEnabled skips allocation counts, which the race detector's sync.Pool
// (it drops items at random) makes meaningless.
const raceEnabled = true
