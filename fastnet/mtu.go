package fastnet

import (
	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/mtu"
)

// MTU estimation (channels -3 and -4, D19). The server estimates on -3 and
// answers the client's probes on -4; the client estimates on -4 and answers
// on -3. Both run at once on every Datagram connection.

// mtuChannels returns the channel this side estimates on and the one it
// answers on.
func (c *conn) mtuChannels() (own, peer int16) {
	if c.ep.cfg.Role == Server {
		return chMTUServer, chMTUClient
	}
	return chMTUClient, chMTUServer
}

// startMTU begins estimation when the connection is established.
func (c *conn) startMTU(now clock.Time) {
	cfg := &c.ep.cfg
	if cfg.Transport != Datagram {
		return
	}
	c.responder = mtu.NewResponder()
	if cfg.MTU.Disabled {
		return
	}
	c.estimator = mtu.NewEstimator(mtu.Config{
		MaxPayload:    cfg.MaxPacketSize - 2,
		Initial:       cfg.InitialPayloadMTU,
		ProbeInterval: cfg.MTU.ProbeInterval,
		FinalTimeout:  cfg.MTU.FinalTimeout,
		Period:        cfg.MTU.Period,
		Rand:          cfg.Rand,
	})
	c.estimator.Start(now)
}

// handleMTU routes a channel -3 or -4 payload to the estimator (answers to
// our probes) or the responder (the peer's probes).
func (c *conn) handleMTU(now clock.Time, ch int16, p []byte) {
	if c.responder == nil {
		c.stats.Dropped[DropUnknownChannel]++
		return
	}
	own, _ := c.mtuChannels()
	if ch != own {
		c.responder.HandlePayload(p)
		return
	}
	if c.estimator != nil {
		c.estimator.HandlePayload(now, p)
		c.applyMTU()
	}
}

// applyMTU makes a new estimate the payload MTU of packets sent from now on.
func (c *conn) applyMTU() {
	if c.estimator == nil {
		return
	}
	if m, changed := c.estimator.Changed(); changed && m != c.payloadMTU {
		c.payloadMTU = m
		c.ep.emit(Event{Kind: EventMTUChanged, Conn: c.handle, Addr: c.addr, MTU: m})
	}
}

func (c *conn) mtuDeadline() clock.Time {
	if c.estimator == nil {
		return 0
	}
	return c.estimator.NextDeadline()
}

func (c *conn) mtuTimeout(now clock.Time) {
	if c.estimator == nil {
		return
	}
	if t := c.estimator.NextDeadline(); t != 0 && t <= now {
		c.estimator.HandleTimeout(now)
		c.applyMTU()
	}
}

func (c *conn) mtuWantsTransmit(now clock.Time) bool {
	return (c.responder != nil && c.responder.Pending()) ||
		(c.estimator != nil && c.estimator.NextDeadline() != 0 && c.estimator.NextDeadline() <= now)
}

// mtuPoll writes a responder reply or an estimator packet, if one is due.
func (c *conn) mtuPoll(now clock.Time, buf []byte) ([]byte, bool) {
	own, peer := c.mtuChannels()
	if c.responder != nil {
		if b, ok := c.responder.AppendReply(appendPacketHeader(buf, peer)); ok {
			return b, true
		}
	}
	if c.estimator != nil {
		if b, ok := c.estimator.AppendPayload(appendPacketHeader(buf, own), now, c.hb.srtt); ok {
			c.applyMTU()
			return b, true
		}
	}
	return buf, false
}
