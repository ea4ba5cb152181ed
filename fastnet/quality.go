package fastnet

import (
	"time"

	"github.com/fastnet-engine/fastnet/clock"
)

// Connection quality (N57, N58). A connection counts its traffic in
// windows of one period, QualityInterval or, when quality events are off,
// one second, back to back from the moment it was made. A window closes
// at the first input or transmit of the connection at or after its end,
// before that input's packets are counted, so every packet counts in the
// window of the instant it was sent or received; with quality events on,
// the connection's timer closes it on time when nothing else does.
// Closing a window keeps its rates, which Stats and EventQuality report;
// a window that closes more than a period late is followed by empty
// ones, and the rates read zero.

// Quality describes an established connection over the last quality
// interval, reported by EventQuality every Config.QualityInterval (N57).
type Quality struct {
	// RTT is the smoothed round-trip time (D17), RTTVar its variation and
	// MinRTT the smallest sample, as in Stats.
	RTT, RTTVar, MinRTT time.Duration
	// Loss is the share of the reliable data packets sent over the
	// interval that were resends (D14), 0..1; 0 if none was sent. A
	// resend follows the loss of the packet or of its ack.
	Loss float64
	// SendRate and ReceiveRate are the bytes of whole datagrams sent and
	// received over the interval, per second.
	SendRate, ReceiveRate float64
	// MTU is the payload MTU this side sends with (D19).
	MTU int
}

// window holds a connection's counters as they were when its current
// window began, and the rates of the window before.
type window struct {
	end                  clock.Time // when the current window ends
	bytesSent, bytesRecv uint64
	relSent, resent      uint64
	// The last window closed.
	loss, sendRate, recvRate float64
}

// ratePeriod is the length of a connection's windows.
func (e *Endpoint) ratePeriod() time.Duration {
	if e.cfg.QualityInterval > 0 {
		return e.cfg.QualityInterval
	}
	return time.Second
}

// startWindow begins the connection's first window at now.
func (c *conn) startWindow(now clock.Time) {
	c.win = window{end: now.Add(c.ep.ratePeriod())}
}

// tick closes the connection's window if now is past its end; it runs
// before the packets of an input or transmit at now are counted.
func (c *conn) tick(now clock.Time) {
	if now >= c.win.end {
		c.closeWindow(now)
	}
}

// rates returns the loss and rates of the window ending at c.win.end, as
// closed at now, without closing it.
func (c *conn) windowRates(now clock.Time) (loss, send, recv float64) {
	p := c.ep.ratePeriod()
	if now >= c.win.end.Add(p) {
		return 0, 0, 0 // the window closed last was empty
	}
	s := &c.stats
	relSent, resent := s.ReliablePacketsSent-c.win.relSent, s.PacketsResent-c.win.resent
	if n := relSent + resent; n > 0 {
		loss = float64(resent) / float64(n)
	}
	secs := p.Seconds()
	return loss, float64(s.BytesSent-c.win.bytesSent) / secs, float64(s.BytesReceived-c.win.bytesRecv) / secs
}

// closeWindow closes the connection's window at now, which is at or after
// its end, begins the one now falls in, and reports EventQuality if the
// application knows the connection and asked for them.
func (c *conn) closeWindow(now clock.Time) {
	w := &c.win
	p := c.ep.ratePeriod()
	w.loss, w.sendRate, w.recvRate = c.windowRates(now)
	// The window now falls in: the n-th after the one that ended.
	n := now.Sub(w.end) / p
	w.end = w.end.Add(n * p).Add(p)
	s := &c.stats
	w.bytesSent, w.bytesRecv = s.BytesSent, s.BytesReceived
	w.relSent, w.resent = s.ReliablePacketsSent, s.PacketsResent
	if c.ep.cfg.QualityInterval > 0 && c.established() && !c.unvalidated {
		q := c.quality()
		c.ep.emit(Event{Kind: EventQuality, Conn: c.handle, Addr: c.addr, Quality: &q})
	}
}

// quality returns what EventQuality reports: the last window closed.
func (c *conn) quality() Quality {
	return Quality{
		RTT: c.hb.srtt, RTTVar: c.hb.rttvar, MinRTT: c.hb.minRTT,
		Loss: c.win.loss, SendRate: c.win.sendRate, ReceiveRate: c.win.recvRate,
		MTU: c.payloadMTU,
	}
}

// qualityDeadline returns when the connection's next EventQuality is due,
// 0 if quality events are off.
func (c *conn) qualityDeadline() clock.Time {
	if c.ep.cfg.QualityInterval <= 0 || c.unvalidated {
		return 0
	}
	return c.win.end
}
