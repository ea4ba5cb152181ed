//go:build !race

package tcpdriver

// raceOn says the race detector is on: it allocates for itself.
const raceOn = false
