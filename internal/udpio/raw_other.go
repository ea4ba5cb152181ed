//go:build !linux || 386

package udpio

import (
	"errors"
	"net"
	"net/netip"
)

// rawSocket is Linux only (but for 386, whose socket calls go through
// socketcall): elsewhere the Conn uses the standard library's calls.
type rawSocket struct{ local bool }

func newRawSocket(*net.UDPConn) *rawSocket { return nil }

// read and write are never called: newRawSocket returns nil here.
func (*rawSocket) read(*Message) (bool, error)                { return false, errors.ErrUnsupported }
func (*rawSocket) readMany([]Message) (int, error)            { return 0, errors.ErrUnsupported }
func (*rawSocket) write([]byte, []byte, netip.AddrPort) error { return errors.ErrUnsupported }
