//go:build !linux

package tcpdriver

import "syscall"

// inputQuery cannot ask a socket what waits in it here: waiting never
// knows.
type inputQuery struct{}

func newInputQuery(syscall.RawConn) *inputQuery { return nil }

func (q *inputQuery) waiting() (waiting, known bool) { return false, false }
