package udpdriver

import "syscall"

// errMsgSize is the system's refusal of a datagram larger than the path
// it knows or the socket allows (WSAEMSGSIZE).
var errMsgSize error = syscall.Errno(10040)
