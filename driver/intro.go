package driver

import (
	"context"
	"errors"
	"net/netip"

	"github.com/fastnet-engine/fastnet/fastnet"
)

// A Peer endpoint (fastnet.Peer, docs/nat.md X19) dials and accepts on one
// socket: its connections do not own the engine, and introductions run
// through the methods below, their events reaching Options.Intro.

// errNotThisEngine is Introduce's error for a via of another endpoint.
var errNotThisEngine = errors.New("fastnet: the connection belongs to another endpoint")

// Connect connects the engine, a Peer, to addr and waits for the
// handshake. Unlike Dial the connection does not own the engine: closing
// it leaves the engine and its other connections running, and a failure
// or a cancelled ctx ends only this connection.
func (e *Engine) Connect(ctx context.Context, addr netip.AddrPort) (*Conn, error) {
	return e.dial(ctx, addr, false)
}

// Introduce asks the introducer at the other end of via to introduce this
// Peer to the peer whose connection id there is target (X4). started is
// called with the request's number (fastnet.Introduction.Req) under the
// engine's lock before the request leaves, so that the caller can match
// the events Options.Intro hears before any can arrive. The errors are
// fastnet.Endpoint.Introduce's.
func (e *Engine) Introduce(via *Conn, target uint32, started func(req uint32)) error {
	if via.e != e {
		return errNotThisEngine
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return ErrListenerClosed
	}
	req, err := e.ep.Introduce(e.clk.Now(), via.h, target)
	if err != nil {
		e.mu.Unlock()
		return err
	}
	if started != nil {
		started(req)
	}
	e.flushLocked()
	e.needInputLocked() // the introducer's answer
	e.unlock()
	return nil
}

// RelayHosted passes on fastnet.Endpoint.RelayHosted: the group gid (0:
// none) hosted for the introduction id that an EventRelayHost asked for
// (X13).
func (e *Engine) RelayHosted(id fastnet.IntroID, gid uint32) error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return ErrListenerClosed
	}
	err := e.ep.RelayHosted(e.clk.Now(), id, gid)
	if err == nil {
		e.flushLocked()
	}
	e.unlock()
	return err
}
