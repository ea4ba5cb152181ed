// Package dialer connects a Fastnet client to a server over whichever
// transport answers first: UDP, and TCP on the same host and port when UDP
// has no answer within a short delay, in the manner of happy eyeballs
// (RFC 8305) applied to transports. The specification asks that Fastnet
// "fall back to other transports"; a network that drops UDP, as some
// corporate and public networks do, still reaches the server over TCP,
// and a network that carries UDP pays no more than the UDP handshake.
//
//	c, path, err := dialer.Dial(ctx, "server:7000", dialer.Config{})
//	if err != nil { ... }
//	fmt.Println("connected over", path) // udp or tcp
//	c.Send(ctx, 1, []byte("hello"), true)
//
// The connection is a *driver.Conn whichever path won, with the methods
// and errors documented in package driver. The design is note X21 of
// docs/nat.md.
package dialer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fastnet-engine/fastnet/driver"
	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/tcpdriver"
	"github.com/fastnet-engine/fastnet/udpdriver"
)

// Path says which transport a connection uses.
type Path uint8

const (
	// UDP: the connection runs over UDP (udpdriver).
	UDP Path = iota + 1
	// TCP: the connection runs over TCP (tcpdriver), UDP having had no
	// answer.
	TCP
)

func (p Path) String() string {
	switch p {
	case UDP:
		return "udp"
	case TCP:
		return "tcp"
	}
	return fmt.Sprintf("Path(%d)", p)
}

// DefaultDelay is how long UDP has alone before TCP is tried as well, when
// Config.Delay is zero: a few round trips of a distant server, well short
// of the UDP handshake's timeout.
const DefaultDelay = 250 * time.Millisecond

// Config configures Dial. The zero value works.
type Config struct {
	// UDP and TCP configure each transport's dial, as udpdriver.Dial and
	// tcpdriver.Dial take them; their Engine.ConnectTimeout bounds each
	// handshake (default 5 s).
	UDP udpdriver.Config
	TCP tcpdriver.Config

	// Delay is how long the UDP dial runs alone before the TCP dial
	// starts beside it. Zero means DefaultDelay; a negative delay starts
	// both at once.
	Delay time.Duration
}

// Error is Dial's error when no transport connected: each transport's
// failure (TCP nil if it was never tried). errors.Is and errors.As look
// into both.
type Error struct {
	UDP, TCP error
}

func (e *Error) Error() string {
	if e.TCP == nil {
		return "dialer: udp: " + e.UDP.Error()
	}
	return "dialer: udp: " + e.UDP.Error() + "; tcp: " + e.TCP.Error()
}

// Unwrap returns the transports' errors.
func (e *Error) Unwrap() []error {
	if e.TCP == nil {
		return []error{e.UDP}
	}
	return []error{e.UDP, e.TCP}
}

// lostReason is what the server hears from a connection that completed
// its handshake after the other transport's had won.
const lostReason = "another transport connected first"

// Dial connects to the Fastnet server at addr ("host:port") and returns
// the first connection to complete its handshake, and the path it took:
//
//   - UDP is dialed at once (udpdriver.Dial).
//   - TCP is dialed on the same host and port (tcpdriver.Dial) when
//     Config.Delay has passed without a UDP connection, or as soon as the
//     UDP dial fails, whichever comes first: on Linux a UDP dial to a port
//     where nothing listens fails at once (N65 in docs/protocol.md).
//   - The first connection wins. The other dial is cancelled, and if it
//     had connected meanwhile its connection is aborted; Dial returns
//     only once it has ended, so nothing is left running.
//   - A server that answered over UDP is believed: if it refused the
//     connection (a *fastnet.RefusedError) or speaks another version
//     (fastnet.ErrIncompatible), Dial returns that error, as a
//     *net.OpError from udpdriver, without trying TCP.
//
// When no transport connects, the error is an *Error holding each
// transport's, so that errors.Is(err, fastnet.ErrTimeout),
// errors.Is(err, syscall.ECONNREFUSED) and errors.Is(err,
// context.Canceled) say what happened. Dial fails within the longer of the
// UDP handshake's timeout and Delay plus the TCP dial's, or when ctx ends.
func Dial(ctx context.Context, addr string, cfg Config) (*driver.Conn, Path, error) {
	delay := cfg.Delay
	if delay == 0 {
		delay = DefaultDelay
	}
	type result struct {
		c    *driver.Conn
		path Path
		err  error
	}
	results := make(chan result, 2)
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	running := 0
	dial := func(p Path) {
		running++
		go func() {
			var c *driver.Conn
			var err error
			if p == UDP {
				c, err = udpdriver.Dial(dctx, addr, cfg.UDP)
			} else {
				c, err = tcpdriver.Dial(dctx, addr, cfg.TCP)
			}
			results <- result{c, p, err}
		}()
	}
	// finish cancels the dials still running and waits for them, aborting
	// any that connected all the same.
	finish := func() {
		cancel()
		for ; running > 0; running-- {
			if r := <-results; r.err == nil {
				r.c.Abort(lostReason)
			}
		}
	}

	dial(UDP)
	var wait <-chan time.Time
	if delay < 0 {
		dial(TCP)
	} else {
		t := time.NewTimer(delay)
		defer t.Stop()
		wait = t.C
	}
	tcpStarted := delay < 0
	var errs Error
	for running > 0 {
		select {
		case <-wait:
			wait = nil
			if !tcpStarted {
				tcpStarted = true
				dial(TCP)
			}
		case r := <-results:
			running--
			if r.err == nil {
				finish()
				return r.c, r.path, nil
			}
			if r.path == TCP {
				errs.TCP = r.err
				break
			}
			errs.UDP = r.err
			if answered(r.err) {
				finish()
				return nil, UDP, r.err
			}
			if !tcpStarted && ctx.Err() == nil {
				wait = nil
				tcpStarted = true
				dial(TCP)
			}
		}
	}
	return nil, 0, &errs
}

// answered reports whether a UDP dial's error is the server's own answer,
// which TCP would not change.
func answered(err error) bool {
	var refused *fastnet.RefusedError
	return errors.As(err, &refused) || errors.Is(err, fastnet.ErrIncompatible)
}
