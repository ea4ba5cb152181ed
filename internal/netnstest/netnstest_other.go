//go:build !linux

package netnstest

import (
	"errors"
	"runtime"
	"testing"
)

func runChild(t *testing.T, _ string) (string, error) {
	t.Skipf("network namespaces are Linux only, not %s", runtime.GOOS)
	return "", nil
}

func loopbackUp(int) error { return errors.ErrUnsupported }
