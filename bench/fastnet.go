package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/tcpdriver"
	"github.com/fastnet-engine/fastnet/udpdriver"
)

// fastnetSystem is this project's engine through its UDP or TCP driver, one
// connection, every message on channel 0. Over UDP the client first waits,
// for at most Workload.WarmUp, for MTU estimation (D19) to end above
// warmUpMTU, so that a message of W3 fits one datagram (warmUp).
type fastnetSystem struct{ tcp bool }

// Metrics only the fastnet systems report.
const (
	// MTU is the client's payload MTU when measuring started.
	MTU = "mtu"
	// Resent is the reliable packets the client sent again.
	Resent = "resent"
	// WarmUpSeconds is how long the client waited for MTU estimation.
	WarmUpSeconds = "warmup_s"
)

// warmUpMTU is the payload MTU the client waits for: a 1 KiB message of W3
// plus its header and checksum and the channel data header fit.
const warmUpMTU = 1200

// peerMargin is how long the client waits, once its own MTU estimation is
// over, for the server's: the two start together, when the connection is
// made, and search the same path, so the server's ends at about the same
// time, give or take a round's final wait (MTUConfig.FinalTimeout, 250 ms).
const peerMargin = 500 * time.Millisecond

// warmUp waits, for at most limit, until the client's MTU estimation (D19)
// is over (Stats.MTUSearching) with a payload MTU of at least warmUpMTU,
// then peerMargin for the server's, so that messages are measured at the
// size they keep and no probe (one every 2 ms, up to 9 KB) shares the wire
// with the measured traffic. On loopback the estimation takes about 2.5 s.
func warmUp(ctx context.Context, c *udpdriver.Conn, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	wait := func(d time.Duration) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
			return nil
		}
	}
	for time.Now().Before(deadline) {
		st := c.Stats()
		if !st.MTUSearching && st.MTUEstimations > 0 && st.PayloadMTU >= warmUpMTU {
			return wait(min(peerMargin, time.Until(deadline)))
		}
		if err := wait(10 * time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

// The engine runs on its defaults (fastnet.DefaultSendQueueSize,
// DefaultMaxInFlight, ...), as an application that sets nothing gets it.
// Until 2026-11-26 the benchmark set a 16 MiB send queue and 128 KiB
// (W2) or 512 KiB (W3) in flight, chosen when a larger window drew
// spurious resends; with the resend timer held above the acks' RTT
// (N77) the defaults are faster: W2 2.0-2.2M against 1.4-1.6M messages
// a second, W3 684-727k against 512-613k, measured alternately
// (docs/performance.md).

// doneMessage is what the W2 and W3 server sends back once it has received
// every message: the client's clock stops when it arrives.
var doneMessage = []byte("done")

func (s fastnetSystem) Name() string {
	if s.tcp {
		return "fastnet-tcp"
	}
	return "fastnet-udp"
}

func (s fastnetSystem) Supports(w Workload) bool {
	return w.Name != "W4K" && (!s.tcp || w.Name != "W4" && w.Name != "W5")
}

// engine is the engine's configuration for w.
func (s fastnetSystem) engine(w Workload, o Options) fastnet.Config {
	cfg := fastnet.Config{MinResendRTT: o.MinResendRTT}
	if o.PayloadMTU > 0 && !s.tcp {
		cfg.InitialPayloadMTU, cfg.MTU.Disabled = o.PayloadMTU, true
	}
	return cfg
}

func (s fastnetSystem) listen(ctx context.Context, w Workload, o Options) (*udpdriver.Listener, error) {
	if s.tcp {
		return tcpdriver.Listen(ctx, "127.0.0.1:0", tcpdriver.Config{Engine: s.engine(w, o)})
	}
	addr := "127.0.0.1:0"
	if o.ListenAny {
		addr = "0.0.0.0:0" // a socket of both families: IPv4 peers come mapped
	}
	return udpdriver.Listen(ctx, addr, udpdriver.Config{Engine: s.engine(w, o), SocketBuffer: o.SocketBuffer, NoOffload: o.NoOffload})
}

func (s fastnetSystem) dial(ctx context.Context, w Workload, o Options, addr string) (*udpdriver.Conn, error) {
	if s.tcp {
		return tcpdriver.Dial(ctx, addr, tcpdriver.Config{Engine: s.engine(w, o)})
	}
	return udpdriver.Dial(ctx, addr, udpdriver.Config{Engine: s.engine(w, o), SocketBuffer: o.SocketBuffer, NoOffload: o.NoOffload})
}

func (s fastnetSystem) Server(ctx context.Context, w Workload, o Options, ready func(string)) (Metrics, error) {
	if w.Name == "W5" {
		return idleServer(ctx, w, o, ready)
	}
	l, err := s.listen(ctx, w, o)
	if err != nil {
		return nil, err
	}
	defer l.Close()
	addr := l.Addr().String()
	if o.ListenAny && !s.tcp {
		// The loopback address of its family, as a client would dial
		// one of the host's addresses.
		addr = "127.0.0.1:" + strconv.Itoa(l.Addr().(*net.UDPAddr).Port)
	}
	ready(addr)
	c, err := l.Accept(ctx)
	if err != nil {
		return nil, fmt.Errorf("accept: %w", err)
	}
	switch w.Name {
	case "W1":
		echoed := 0
		for {
			m, err := c.Receive(ctx)
			if err != nil {
				if ctx.Err() != nil || errors.Is(err, fastnet.ErrClosed) {
					return Metrics{"echoed": float64(echoed)}, nil
				}
				return nil, err
			}
			if err := c.Send(ctx, m.Channel, m.Data, true); err != nil {
				return nil, err
			}
			echoed++
		}
	case "W4":
		return countMessages(ctx, w, c)
	}
	// W2, W3: every message, in order, then tell the client.
	var first time.Time
	for i := range w.Messages {
		m, err := c.Receive(ctx)
		if err != nil {
			return nil, fmt.Errorf("after %d of %d messages: %w", i, w.Messages, err)
		}
		if i == 0 {
			first = time.Now()
		}
		if len(m.Data) != w.Size || !m.Reliable || binary.BigEndian.Uint64(m.Data) != uint64(i) {
			return nil, fmt.Errorf("message %d: %d bytes, reliable %v, number %d: out of order or damaged",
				i, len(m.Data), m.Reliable, binary.BigEndian.Uint64(m.Data))
		}
	}
	took := time.Since(first)
	if err := c.Send(ctx, 0, doneMessage, true); err != nil {
		return nil, err
	}
	<-ctx.Done() // the client has its answer; let it close first
	return Metrics{"server_rate": float64(w.Messages-1) / took.Seconds()}, nil
}

// countMessages is the W4 server: countUntilSilence with Receive as the
// read, stopped by cancelling it.
func countMessages(ctx context.Context, w Workload, c *udpdriver.Conn) (Metrics, error) {
	rctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := cancelDeadline(cancel)
	return countUntilSilence(ctx, w, stop, func() (int, error) {
		m, err := c.Receive(rctx)
		switch {
		case rctx.Err() != nil || errors.Is(err, fastnet.ErrClosed):
			// Stopped, or the client closed after its last message: the
			// count is complete.
			return 0, os.ErrDeadlineExceeded
		case err != nil:
			return 0, err
		case len(m.Data) != w.Size || m.Reliable:
			return 0, fmt.Errorf("a message of %d bytes, reliable %v", len(m.Data), m.Reliable)
		}
		return 1, nil
	})
}

// cancelDeadline is a deadliner whose deadline, whatever its time, stops
// the read at once: countUntilSilence only ever sets the present.
type cancelDeadline context.CancelFunc

func (c cancelDeadline) SetReadDeadline(time.Time) error {
	c()
	return nil
}

func (s fastnetSystem) Client(ctx context.Context, w Workload, o Options, addr string) (Metrics, error) {
	if w.Name == "W5" {
		return idleClient(ctx, w, o, addr)
	}
	c, err := s.dial(ctx, w, o, addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	m := Metrics{}
	if !s.tcp {
		start := time.Now()
		limit := w.WarmUp
		if o.PayloadMTU > 0 {
			limit = 0 // no estimation to wait for
		}
		if err := warmUp(ctx, c, limit); err != nil {
			return nil, err
		}
		m[WarmUpSeconds] = time.Since(start).Seconds()
		m[MTU] = float64(c.Stats().PayloadMTU)
	}
	resent0 := c.Stats().PacketsResent

	payload := make([]byte, w.Size)
	switch w.Name {
	case "W1":
		rtts := make([]time.Duration, 0, w.Messages)
		for i := range w.Warmup + w.Messages {
			binary.BigEndian.PutUint64(payload, uint64(i))
			start := time.Now()
			if err := c.Send(ctx, 0, payload, true); err != nil {
				return nil, err
			}
			r, err := c.Receive(ctx)
			if err != nil {
				return nil, err
			}
			if len(r.Data) != w.Size || binary.BigEndian.Uint64(r.Data) != uint64(i) {
				return nil, fmt.Errorf("round trip %d: wrong echo", i)
			}
			if i >= w.Warmup {
				rtts = append(rtts, time.Since(start))
			}
		}
		slices.Sort(rtts)
		us := func(p float64) float64 { return float64(percentile(rtts, p)) / float64(time.Microsecond) }
		m[P50], m[P99] = us(50), us(99)
	case "W2", "W3":
		start := time.Now()
		for i := range w.Messages {
			binary.BigEndian.PutUint64(payload, uint64(i))
			if err := c.Send(ctx, 0, payload, true); err != nil {
				return nil, fmt.Errorf("message %d: %w", i, err)
			}
		}
		r, err := c.Receive(ctx)
		if err != nil {
			return nil, fmt.Errorf("waiting for the server to receive everything: %w", err)
		}
		if string(r.Data) != string(doneMessage) {
			return nil, fmt.Errorf("the server said %q", r.Data)
		}
		m[Rate] = float64(w.Messages) / time.Since(start).Seconds()
	case "W4":
		start := time.Now()
		for i := range w.Messages {
			putSeq(payload, i)
			if err := c.Send(ctx, 0, payload, false); err != nil {
				return nil, fmt.Errorf("message %d: %w", i, err)
			}
		}
		// Sent once the send queue is empty.
		for c.Stats().SendQueueBytes > 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			time.Sleep(100 * time.Microsecond)
		}
		m[Sent] = float64(w.Messages)
		m[SendSeconds] = time.Since(start).Seconds()
	}
	if !s.tcp {
		m[Resent] = float64(c.Stats().PacketsResent - resent0)
	}
	return m, nil
}
