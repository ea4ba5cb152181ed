//go:build !race

package udpio

const raceEnabled = false
