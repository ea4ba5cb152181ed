//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package main

import "time"

// processCPU returns -1: the platform's CPU time is not read.
func processCPU() time.Duration { return -1 }

// processCPUSplit reports nothing: the platform's CPU time is not read.
func processCPUSplit() (user, sys time.Duration, ok bool) { return 0, 0, false }

// raiseFileLimit does nothing: the platform's limit is not read.
func raiseFileLimit(n int) error { return nil }
