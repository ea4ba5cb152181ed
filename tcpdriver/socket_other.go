//go:build !unix

package tcpdriver

import (
	"syscall"
)

// inlineWrites is false where a socket cannot be written without the
// runtime's poller: the writer goroutine writes everything.
const inlineWrites = false

// inlineWriter is never made where inlineWrites is false.
type inlineWriter struct{}

func newInlineWriter(rc syscall.RawConn) *inlineWriter { return nil }

func (w *inlineWriter) tryWrite(b []byte) int { return 0 }
