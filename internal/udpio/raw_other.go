//go:build !linux || 386

package udpio

import (
	"net"
	"net/netip"
)

// rawSocket is Linux only (but for 386, whose socket calls go through
// socketcall): elsewhere the Conn uses the standard library's calls.
type rawSocket struct{}

func newRawSocket(*net.UDPConn) *rawSocket { return nil }

func (*rawSocket) read(*Message) (bool, error)                { panic("udpio: no raw socket") }
func (*rawSocket) write([]byte, []byte, netip.AddrPort) error { panic("udpio: no raw socket") }
