package fastnet

import (
	"net/netip"

	"github.com/fastnet-engine/fastnet/clock"
)

// An Endpoint is one side of Fastnet: a client with its connections to
// servers, or a server with the connections of its clients. It is a pure
// state machine; see the package documentation for how to drive it.
type Endpoint struct {
	cfg Config
	// (internals under construction)
}

// NewEndpoint returns an endpoint configured by cfg, or the error of
// cfg.Validate.
func NewEndpoint(cfg Config) (*Endpoint, error) {
	c, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	return &Endpoint{cfg: c}, nil
}

// Config returns the endpoint's configuration with defaults filled in.
func (e *Endpoint) Config() Config { return e.cfg }

// Connect starts a client's handshake with the server at to and returns the
// handle of the new connection. EventConnected, EventRefused or
// EventConnectFailed follows.
func (e *Endpoint) Connect(now clock.Time, to netip.AddrPort) (Handle, error) {
	panic("fastnet: internal: under construction")
}

// HandleDatagram feeds the endpoint one datagram (on a Stream transport, one
// deframed packet) that arrived from addr. It does not keep b.
func (e *Endpoint) HandleDatagram(now clock.Time, from netip.AddrPort, b []byte) {}

// HandleTransportClosed tells a Stream endpoint that the transport connection
// to addr is gone.
func (e *Endpoint) HandleTransportClosed(now clock.Time, addr netip.AddrPort) {}

// HandleTimeout tells the endpoint that time has reached now. Calls before
// NextDeadline do nothing harmful.
func (e *Endpoint) HandleTimeout(now clock.Time) {}

// NextDeadline returns when HandleTimeout should next be called; ok is false
// when nothing is scheduled.
func (e *Endpoint) NextDeadline() (deadline clock.Time, ok bool) { return 0, false }

// PollTransmit writes the next datagram to send into buf and says where it
// goes; ok is false when there is nothing to send. buf must hold at least
// Config.MaxPacketSize bytes.
func (e *Endpoint) PollTransmit(now clock.Time, buf []byte) (t Transmit, ok bool) {
	return Transmit{}, false
}

// PollEvent returns the next event; ok is false when there is none.
func (e *Endpoint) PollEvent() (ev Event, ok bool) { return Event{}, false }

// Send queues msg on channel (0..32767) of connection h, reliably or not. It
// copies msg.
func (e *Endpoint) Send(now clock.Time, h Handle, channel int, msg []byte, reliable bool) error {
	return ErrUnknownConn
}

// Close starts a graceful close of h (D18): its queued and in-flight reliable
// data is given up to Config.Linger to be acknowledged, then "disconnect"
// with reason is sent and EventDisconnected reported.
func (e *Endpoint) Close(now clock.Time, h Handle, reason string) error { return ErrUnknownConn }

// Abort closes h at once: "disconnect" with reason is sent, queued data is
// dropped and EventDisconnected reported.
func (e *Endpoint) Abort(now clock.Time, h Handle, reason string) error { return ErrUnknownConn }

// Stats returns the statistics of connection h.
func (e *Endpoint) Stats(h Handle) (Stats, bool) { return Stats{}, false }

// ConnID returns the Fastnet connection ID of h, known once connected.
func (e *Endpoint) ConnID(h Handle) (id uint32, ok bool) { return 0, false }

// RemoteAddr returns the peer address of h.
func (e *Endpoint) RemoteAddr(h Handle) (netip.AddrPort, bool) { return netip.AddrPort{}, false }
