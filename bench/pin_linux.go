package main

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"syscall"

	"golang.org/x/sys/unix"
)

// restartPinned restarts the command on cpus: it restricts the calling
// thread to them and execs the same binary with the same arguments, so
// that every thread of the new process, and every server process it
// starts, runs on those CPUs only. It returns only on failure.
func restartPinned(cpus []int, list string) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	var set unix.CPUSet
	for _, c := range cpus {
		set.Set(c)
	}
	runtime.LockOSThread() // the affinity is the thread's; exec keeps it
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("-pin %s: %w", list, err)
	}
	env := append(os.Environ(), pinnedEnv+"="+list)
	return syscall.Exec(exe, os.Args, env)
}

// checkPinned verifies that this process runs on cpus only.
func checkPinned(cpus []int) error {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return err
	}
	var have []int
	for c := range 1024 {
		if set.IsSet(c) {
			have = append(have, c)
		}
	}
	if !slices.Equal(have, cpus) {
		return fmt.Errorf("-pin: running on CPUs %v, want %v", have, cpus)
	}
	return nil
}
