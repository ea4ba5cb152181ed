//go:build !linux

package timer

import (
	"errors"
	"time"
)

// kernelTimer exists on Linux only (alarm_linux.go).
type kernelTimer struct{}

func newKernelTimer() (*kernelTimer, error) { return nil, errors.New("no kernel timer") }

func (k *kernelTimer) set(time.Duration) {}
func (k *kernelTimer) wait() bool        { return false }
func (k *kernelTimer) close()            {}
