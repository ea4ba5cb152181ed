package main

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// pinnedEnv marks a process that -pin has already restarted on its CPUs;
// its value is the CPU list.
const pinnedEnv = "FASTNET_BENCH_PINNED"

// parseCPUList parses -pin's value: CPU numbers and ranges separated by
// commas, as taskset(1) takes them ("0", "0,1", "0-3").
func parseCPUList(s string) ([]int, error) {
	var cpus []int
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("-pin %q: %q is not a CPU number", s, lo)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("-pin %q: %q is not a range of CPUs", s, part)
			}
		}
		for c := a; c <= b; c++ {
			cpus = append(cpus, c)
		}
	}
	slices.Sort(cpus)
	return slices.Compact(cpus), nil
}

// pinned returns the CPU list this process was restarted on by -pin, or "".
func pinned() string { return os.Getenv(pinnedEnv) }
