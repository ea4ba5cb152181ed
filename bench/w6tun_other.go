//go:build !linux

package main

import (
	"context"
	"errors"
	"runtime"
	"time"

	"github.com/fastnet-engine/fastnet/impair"
)

// tunPath is W6's TUN path, Linux only.
type tunPath struct {
	serverIP string
	up       *impair.Queue
}

func newTunPath(context.Context, w6Link) (*tunPath, error) {
	return nil, &skipError{"the tun path needs Linux network namespaces, not " + runtime.GOOS}
}

func (p *tunPath) exec(string) []string { return nil }
func (p *tunPath) dropsBefore() uint64  { return 0 }
func (p *tunPath) close()               {}

// setCongestion chooses a TCP congestion control: Linux only.
func setCongestion(uintptr, string) error {
	return errors.New("choosing a TCP congestion control needs Linux")
}

// tcpRTT returns 0: reading TCP_INFO is Linux only here.
func tcpRTT(uintptr) time.Duration { return 0 }
