//go:build !windows && !plan9

package udpdriver

import "syscall"

// errMsgSize is the system's refusal of a datagram larger than the path
// it knows or the socket allows (EMSGSIZE).
var errMsgSize error = syscall.EMSGSIZE
