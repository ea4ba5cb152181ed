//go:build !linux

package main

import "errors"

var errPinUnsupported = errors.New("-pin needs Linux")

func restartPinned([]int, string) error { return errPinUnsupported }

func checkPinned([]int) error { return errPinUnsupported }
