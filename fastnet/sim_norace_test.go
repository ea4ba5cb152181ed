//go:build !race

package fastnet_test

// raceEnabled reports whether the tests run under the race detector, which
// slows the simulator tenfold.
const raceEnabled = false
