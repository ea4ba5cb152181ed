package driver

import (
	"context"
	"log/slog"
	"net/netip"

	"github.com/fastnet-engine/fastnet/fastnet"
)

// EventKind says what an Event reports.
type EventKind uint8

// Event kinds. The comment of each says which Event fields it sets; Conn
// and Addr are set for every kind.
const (
	_ EventKind = iota
	// EventConnected: a connection was established, dialed or accepted.
	EventConnected
	// EventEnded: a connection ended. Err says why (as Conn.Err), and
	// Stats holds its final statistics.
	EventEnded
	// EventMTU: the payload MTU this side sends with changed (D19). Sets
	// MTU.
	EventMTU
	// EventQuality: the connection's quality over the last
	// fastnet.Config.QualityInterval (N57). Sets Quality.
	EventQuality
	// EventRefused: a server refused a client (full, or refused by
	// fastnet.Config.Accept, or by the backlog's "server busy"). Addr is
	// the client's, Err a *fastnet.RefusedError with the reason it was
	// sent, and Conn is nil (N67).
	EventRefused
	// EventIntroduction: an introducer introduced Conn's peer to the
	// connection whose id is Target (Err nil), or refused or failed to
	// (Err a *fastnet.IntroError with the code the peer was sent;
	// docs/nat.md X4-X7).
	EventIntroduction
)

var eventKindNames = [...]string{
	EventConnected:    "connected",
	EventEnded:        "ended",
	EventMTU:          "mtu",
	EventQuality:      "quality",
	EventRefused:      "refused",
	EventIntroduction: "introduction",
}

func (k EventKind) String() string {
	if int(k) < len(eventKindNames) && eventKindNames[k] != "" {
		return eventKindNames[k]
	}
	return "EventKind(?)"
}

// An Event is something that happened to a connection, sent on
// Options.Events.
type Event struct {
	Kind    EventKind
	Conn    *Conn
	Addr    netip.AddrPort  // the peer
	MTU     int             // EventMTU
	Quality fastnet.Quality // EventQuality
	Stats   *fastnet.Stats  // EventEnded: the final statistics
	Err     error           // EventEnded, EventRefused, EventIntroduction
	Target  uint32          // EventIntroduction: the connection id asked for
}

// notifyLocked hands ev to the application's channel, without blocking,
// and to the logger's queue.
func (e *Engine) notifyLocked(ev Event) {
	if ch := e.opts.Events; ch != nil {
		select {
		case ch <- ev:
		default:
			e.eventsDropped++
		}
	}
	if e.opts.Logger != nil {
		if len(e.logs) >= maxLogQueue {
			// The logger fell behind (a flood of refused clients):
			// the event is dropped and counted, not queued without end.
			e.eventsDropped++
			return
		}
		e.logs = append(e.logs, ev)
		select {
		case e.logKick <- struct{}{}:
		default:
		}
	}
}

// maxLogQueue bounds the events waiting for Options.Logger.
const maxLogQueue = 4096

// logLoop writes the events queued for the logger, outside the engine's
// lock, until the engine closes.
func (e *Engine) logLoop() {
	var batch []Event
	for {
		select {
		case <-e.logKick:
		case <-e.done:
			e.mu.Lock()
			batch, e.logs = e.logs, nil
			e.mu.Unlock()
			e.log(batch)
			return
		}
		e.mu.Lock()
		batch, e.logs = e.logs, batch[:0]
		e.mu.Unlock()
		e.log(batch)
		clear(batch)
	}
}

// log writes events to Options.Logger: connections that start and end at
// Info, MTU and quality reports at Debug.
func (e *Engine) log(evs []Event) {
	lg := e.opts.Logger
	ctx := context.Background()
	for _, ev := range evs {
		addr := slog.String("peer", ev.Addr.String())
		net := slog.String("net", e.opts.Network)
		switch ev.Kind {
		case EventConnected:
			var id uint32
			if ev.Conn != nil {
				id = ev.Conn.ID()
			}
			lg.LogAttrs(ctx, slog.LevelInfo, "fastnet: connected", net, addr, slog.Uint64("id", uint64(id)))
		case EventEnded:
			attrs := []slog.Attr{net, addr, slog.String("reason", reasonOf(ev.Err))}
			if s := ev.Stats; s != nil {
				attrs = append(attrs, slog.Uint64("messages_sent", s.MessagesSent), slog.Uint64("messages_delivered", s.MessagesDelivered),
					slog.Uint64("packets_resent", s.PacketsResent), slog.Duration("rtt", s.RTT))
			}
			lg.LogAttrs(ctx, slog.LevelInfo, "fastnet: ended", attrs...)
		case EventRefused:
			lg.LogAttrs(ctx, slog.LevelInfo, "fastnet: refused", net, addr, slog.String("reason", reasonOf(ev.Err)))
		case EventIntroduction:
			attrs := []slog.Attr{net, addr, slog.Uint64("target", uint64(ev.Target))}
			if ev.Err != nil {
				attrs = append(attrs, slog.String("failed", reasonOf(ev.Err)))
			}
			lg.LogAttrs(ctx, slog.LevelInfo, "fastnet: introduction", attrs...)
		case EventMTU:
			lg.LogAttrs(ctx, slog.LevelDebug, "fastnet: mtu", net, addr, slog.Int("mtu", ev.MTU))
		case EventQuality:
			q := ev.Quality
			lg.LogAttrs(ctx, slog.LevelDebug, "fastnet: quality", net, addr, slog.Duration("rtt", q.RTT),
				slog.Float64("loss", q.Loss), slog.Float64("send_rate", q.SendRate), slog.Float64("receive_rate", q.ReceiveRate), slog.Int("mtu", q.MTU))
		}
	}
}

// reasonOf is err's text without the prefix of the package.
func reasonOf(err error) string {
	if err == nil {
		return ""
	}
	if ce, ok := err.(*CloseError); ok && ce.Err != nil {
		err = ce.Err
	}
	s := err.Error()
	const p = "fastnet: "
	if len(s) > len(p) && s[:len(p)] == p {
		return s[len(p):]
	}
	return s
}

// A Receipt follows a message sent with Conn.SendTracked until its outcome
// is known (N55).
type Receipt struct {
	id       fastnet.MessageID
	reliable bool
	done     chan struct{}
	outcome  fastnet.Outcome // set before done is closed
}

// ID returns the message's ID, unique on its connection's endpoint.
func (r *Receipt) ID() fastnet.MessageID { return r.id }

// Done is closed once the message's outcome is known.
func (r *Receipt) Done() <-chan struct{} { return r.done }

// Outcome returns what became of the message: fastnet.OutcomeAcked or
// OutcomeLost for a reliable one, OutcomeSent or OutcomeDropped for an
// unreliable one (over TCP every message ends sent or dropped; N56); 0
// until Done is closed.
func (r *Receipt) Outcome() fastnet.Outcome {
	select {
	case <-r.done:
		return r.outcome
	default:
		return 0
	}
}

// Wait blocks until the outcome is known, or ctx is done.
func (r *Receipt) Wait(ctx context.Context) (fastnet.Outcome, error) {
	select {
	case <-r.done:
		return r.outcome, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// settleLocked gives receipt id its outcome.
func (e *Engine) settleLocked(id fastnet.MessageID, o fastnet.Outcome) {
	r := e.receipts[id]
	if r == nil {
		return
	}
	delete(e.receipts, id)
	r.outcome = o
	close(r.done)
}
