package main

import (
	"context"

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
func listenOn(ctx context.Context, tcp bool, addr string, cfg fastnet.Config) (*listener, error) {
	if tcp {
		return tcpdriver.Listen(ctx, addr, tcpdriver.Config{Engine: cfg})
	}
	return udpdriver.Listen(ctx, addr, udpdriver.Config{Engine: cfg})
}

// dial connects to the server at addr over TCP or UDP.
func dial(ctx context.Context, tcp bool, addr string, cfg fastnet.Config) (*conn, error) {
	if tcp {
		return tcpdriver.Dial(ctx, addr, tcpdriver.Config{Engine: cfg})
	}
	return udpdriver.Dial(ctx, addr, udpdriver.Config{Engine: cfg})
}
