//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package main

import (
	"fmt"
	"syscall"
	"time"
)

// processCPU returns the user and system CPU time this process has used,
// or -1 if the platform does not say.
func processCPU() time.Duration {
	user, sys, ok := processCPUSplit()
	if !ok {
		return -1
	}
	return user + sys
}

// processCPUSplit returns the user and the system CPU time this process
// has used; ok is false if the platform does not say.
func processCPUSplit() (user, sys time.Duration, ok bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0, false
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano()), true
}

// raiseFileLimit makes sure this process may open at least n files,
// raising its soft limit up to the hard one if needed.
func raiseFileLimit(n int) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return err
	}
	if lim.Cur >= uint64(n) {
		return nil
	}
	if lim.Max < uint64(n) {
		return fmt.Errorf("need %d open files, the hard limit is %d (ulimit -Hn)", n, lim.Max)
	}
	lim.Cur = uint64(n)
	return syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
}
