package main

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/fastnet-engine/fastnet/driver"
	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/tcpdriver"
	"github.com/fastnet-engine/fastnet/udpdriver"
)

// Both drivers share one connection and listener type, so the commands
// handle either through these names.
type (
	conn     = udpdriver.Conn
	listener = udpdriver.Listener
)

// transportName names the transport in output.
func transportName(tcp bool) string {
	if tcp {
		return "tcp"
	}
	return "udp"
}

// listenOn starts a server on addr over TCP or UDP.
func listenOn(ctx context.Context, tcp bool, addr string, cfg fastnet.Config, events chan<- driver.Event) (*listener, error) {
	if tcp {
		return tcpdriver.Listen(ctx, addr, tcpdriver.Config{Engine: cfg, Events: events})
	}
	return udpdriver.Listen(ctx, addr, udpdriver.Config{Engine: cfg, Events: events})
}

// dial connects to the server at addr over TCP or UDP.
func dial(ctx context.Context, tcp bool, addr string, cfg fastnet.Config) (*conn, error) {
	if tcp {
		return tcpdriver.Dial(ctx, addr, tcpdriver.Config{Engine: cfg})
	}
	return udpdriver.Dial(ctx, addr, udpdriver.Config{Engine: cfg})
}

// dialFailure explains why connect could not connect to addr, and suggests
// the other transport when the failure is what a server of the other kind
// would cause: a TCP server does not answer over UDP, and a UDP server
// refuses TCP connections.
func dialFailure(addr string, tcp bool, timeout time.Duration, err error) string {
	name := transportName(tcp)
	var refused *fastnet.RefusedError
	switch {
	case errors.As(err, &refused):
		// The server answered "abort" with its reason: the dial's
		// wrapping (its *net.OpError) only repeats the address.
		return fmt.Sprintf("%s: connection refused: %s", addr, refused.Reason)
	case errors.Is(err, syscall.ECONNREFUSED):
		hint := "is it a UDP server? try without --tcp"
		if !tcp {
			hint = "is it a TCP server? try --tcp"
		}
		return fmt.Sprintf("%s: nothing listening over %s (connection refused); %s", addr, name, hint)
	case tcp && errors.Is(err, fastnet.ErrTransportClosed):
		// The server closed the connection before the handshake
		// completed (N144).
		return fmt.Sprintf("%s: the server closed the connection before the Fastnet handshake; is it a Fastnet server? (\"fastnet probe --tcp %s\" tells)", addr, addr)
	case errors.Is(err, fastnet.ErrTimeout) || errors.Is(err, context.DeadlineExceeded):
		if tcp {
			return fmt.Sprintf("%s: timed out: no Fastnet handshake over tcp within %v; is it a Fastnet server? (\"fastnet probe --tcp %s\" tells)", addr, timeout, addr)
		}
		// "No answer" was not always so: a UDP echo server answers
		// every query with the query itself.
		return fmt.Sprintf("%s: timed out: no Fastnet handshake over udp within %v; is a Fastnet server up there (\"fastnet probe %s\" tells), or is it a TCP server? try --tcp", addr, timeout, addr)
	}
	return fmt.Sprintf("%s: %s", addr, reason(err))
}
