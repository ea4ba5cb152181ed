//go:build !race

package fastnet

// raceOn reports whether the tests run under the race detector, which
// slows them tenfold.
const raceOn = false
