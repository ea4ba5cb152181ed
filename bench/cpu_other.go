//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package main

import "time"

// processCPU returns -1: the platform's CPU time is not read.
func processCPU() time.Duration { return -1 }
