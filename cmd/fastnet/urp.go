package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/urp/urpclient"
	"github.com/fastnet-engine/fastnet/urp/urpdriver"
)

// listenURP is listen --via-urp: it hosts a group on the relay and serves
// the Fastnet connections of its members as listen serves its clients.
func listenURP(ctx context.Context, s *stdio, o listenOptions) int {
	relayAddr := dialAddr(o.viaURP)
	l, err := urpdriver.Listen(ctx, relayAddr, urpdriver.Config{Engine: fastnet.Config{MaxConnections: o.maxConns}})
	if err != nil {
		if ctx.Err() != nil {
			s.errorf("fastnet listen: interrupted")
		} else {
			s.errorf("fastnet listen: relay %s: %v", relayAddr, err)
		}
		return exitFailure
	}
	gid, password := l.Group()
	s.printf("listening urp %s group=%d password=%d", relayAddr, gid, password)
	var wg sync.WaitGroup
	accepted := make(chan error, 1)
	wg.Go(func() {
		for {
			c, err := l.Accept(ctx)
			if err != nil {
				accepted <- err
				return
			}
			s.printf("connected urp %s id=%d", c.RemoteAddr(), c.ID())
			wg.Go(func() { serve(c, "urp", o.echo, o.print, s) })
		}
	})
	code := exitOK
	select {
	case <-ctx.Done():
	case <-accepted:
		if ctx.Err() == nil {
			// The listener closed itself: the relay went away.
			s.errorf("fastnet listen: relay %s: connection lost", relayAddr)
			code = exitFailure
		}
	}
	l.CloseWithReason("server shutting down")
	wg.Wait()
	return code
}

// dialConnect connects as connect's options say: directly, or through a
// relay group with --via-urp.
func dialConnect(ctx context.Context, o connectOptions, cfg fastnet.Config) (*conn, error) {
	if o.viaURP == "" {
		return dial(ctx, o.tcp, o.addr, cfg)
	}
	return urpdriver.Dial(ctx, dialAddr(o.viaURP), o.group, o.password, urpdriver.Config{Engine: cfg})
}

// connectTransport names connect's transport in its messages.
func connectTransport(o connectOptions) string {
	if o.viaURP != "" {
		return "urp"
	}
	return transportName(o.tcp)
}

// urpDialFailure explains why connect --via-urp could not connect.
func urpDialFailure(o connectOptions, err error) string {
	relayAddr := dialAddr(o.viaURP)
	var me *urpclient.MadeError
	switch {
	case errors.As(err, &me):
		return fmt.Sprintf("relay %s: %s", relayAddr, strings.TrimPrefix(me.Error(), "urpclient: "))
	case errors.Is(err, urpdriver.ErrNotFastnetGroup), errors.Is(err, urpdriver.ErrHostLeft):
		return fmt.Sprintf("relay %s, group %d: %s", relayAddr, o.group, strings.TrimPrefix(err.Error(), "urpdriver: "))
	}
	return fmt.Sprintf("relay %s: %s", relayAddr, reason(err))
}

// parseU32 parses a flag's unsigned 32-bit value.
func parseU32(v string, dst *uint32) error {
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil {
		return fmt.Errorf("want a number 0..4294967295")
	}
	*dst = uint32(n)
	return nil
}

// checkViaURP checks connect's arguments with --via-urp, and reports a
// usage error.
func checkViaURP(s *stdio, o connectOptions, args []string) (int, bool) {
	switch {
	case len(args) > 0:
		return usageError(s, "connect", "unexpected argument %q: --via-urp names the relay", args[0]), true
	case o.tcp:
		return usageError(s, "connect", "--tcp is for a direct connection, not --via-urp"), true
	case o.group == 0:
		return usageError(s, "connect", "--via-urp needs --group GID"), true
	}
	return 0, false
}
