// Package impair is a UDP relay that makes a good network path a bad one:
// it loses, delays, jitters, duplicates and reorders the datagrams it
// forwards, drops those above an MTU, and can make each direction a
// bottleneck of a given rate with a tail-drop queue, so that a program
// using UDP (a Fastnet client and server among others) can be tried on a
// bad or narrow network without one.
//
// Clients send to the relay's address; the relay forwards each datagram to
// the target from a socket of its own for that client (one upstream socket
// per client address), and forwards what the target answers on that socket
// back to the client, from the relay's address. Both directions go through
// the same impairment, each through a delay line of its own:
//
//	client ──▶ relay (Addr) ──impair──▶ target
//	client ◀── relay (Addr) ◀──impair── target
//
// From a test:
//
//	srv, _ := udpdriver.Listen(ctx, "127.0.0.1:0", udpdriver.Config{})
//	r, err := impair.Listen(ctx, "127.0.0.1:0", srv.Addr().String(), impair.Config{
//		Loss: 0.05, Delay: 20 * time.Millisecond, Jitter: 5 * time.Millisecond, Seed: 1,
//	})
//	if err != nil {
//		t.Fatal(err)
//	}
//	defer r.Close()
//	c, err := udpdriver.Dial(ctx, r.Addr().String(), udpdriver.Config{})
//
// The command "fastnet impair" runs one from the command line.
//
// # What it does to a datagram
//
// Each datagram, in either direction, is first dropped if it is longer than
// Config.MTU; otherwise it is lost with probability Config.Loss; otherwise,
// with a Config.Rate, it joins the queue of its direction (see below) or is
// dropped there; then it is sent once, or twice with probability Config.Dup, each copy after
// Config.Delay plus or minus up to Config.Jitter (uniformly), and each copy
// with probability Config.Reorder held back a little longer (half the
// delay, twice the jitter and a millisecond), for the datagrams sent right
// after it to overtake it. Jitter alone reorders datagrams too, as on a
// real path where delays vary: datagrams sent closer together than the
// jitter may swap.
//
// # A bottleneck
//
// With Config.Rate set, each direction is a link of that rate shared by
// every client: a datagram waits behind those before it in its direction,
// from any client, and takes its size over the rate to be sent, its size
// counting the IP and UDP headers a real link carries (28 bytes over IPv4,
// 48 over IPv6) beside its payload. A datagram that finds the bytes
// waiting in its direction (the one being sent included) plus its own
// above Config.Queue is dropped (tail drop, Stats.Up.Dropped and
// Stats.Down.Dropped), unless nothing waits. Delay, jitter, duplication and
// reordering come after the queue: a datagram's delay starts when it has
// been sent. Config.Rate of 2,500,000 with Delay 20 ms and Queue 100,000
// is a 20 Mbit/s path with a 40 ms round trip and a queue of one
// bandwidth-delay product. The relay computes when each datagram leaves
// rather than sleeping per datagram, so the rate is exact on average and
// datagrams leave in bursts of about a millisecond, the accuracy of the
// timers.
//
// The random choices come from one generator seeded with Config.Seed: the
// same seed and the same datagrams arriving in the same order get the same
// choices. Datagrams arriving concurrently from several clients, or in both
// directions, interleave as the scheduler has them, so a run is
// reproducible in its statistics rather than datagram by datagram.
//
// # Limits
//
//   - UDP only, IPv4 or IPv6; the relay does not look inside the datagrams.
//   - The target is resolved once, by Listen. Answers from any other
//     address than the target's are ignored.
//   - At most Config.MaxClients client addresses have an upstream socket at
//     once; datagrams from further clients are dropped (Stats.NoRoom)
//     until one has been idle for Config.Idle and its socket is closed.
//     Each upstream socket is a file descriptor and a goroutine.
//   - At most 65,536 datagrams wait in each delay line; further ones are
//     dropped (Stats.Overflow). With a long delay and a fast sender this
//     is loss the relay did not choose.
//   - The relay asks for 8 MiB socket buffers; if the system grants less,
//     a burst may overflow them, which is loss the relay does not see.
//   - Timing is the Go runtime's: delays are accurate to about a
//     millisecond, not microseconds.
package impair

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Config is what the relay does to the datagrams it forwards, the same in
// both directions. The zero value forwards everything at once, unchanged.
type Config struct {
	// Loss is the probability that a datagram is lost, 0..1.
	Loss float64
	// Dup is the probability that a datagram arrives twice, 0..1.
	Dup float64
	// Reorder is the probability that a datagram is held back for later
	// ones to overtake, 0..1.
	Reorder float64
	// Delay is the one-way delay, 0..1 minute.
	Delay time.Duration
	// Jitter varies each delay by up to this much either way, uniformly,
	// 0..1 minute. A delay never goes below zero.
	Jitter time.Duration
	// MTU drops datagrams longer than this many bytes; 0 drops none.
	MTU int
	// Seed seeds the random choices.
	Seed uint64
	// MaxClients bounds the client addresses with an upstream socket at
	// once. Default (0): 1024.
	MaxClients int
	// Idle closes the upstream socket of a client after this long with no
	// datagram either way. Default (0): 2 minutes.
	Idle time.Duration
	// Rate makes each direction a bottleneck that sends this many bytes
	// a second, headers included (see the package documentation), up to
	// MaxRate; 0 sets no limit. ParseRate reads "20mbit" and the like.
	Rate int64
	// Queue bounds, in bytes, what waits for the Rate in each direction,
	// headers included; a datagram that would pass it is dropped. Default
	// (0): DefaultQueue. At most MaxQueue; without a Rate it must be 0.
	Queue int
}

// Defaults and bounds of Config.
const (
	DefaultMaxClients = 1024
	DefaultIdle       = 2 * time.Minute
	MaxDelay          = time.Minute // the most Delay or Jitter may be
	maxMTU            = 65535
	MaxRate           = 100_000_000_000 // bytes a second, 800 Gbit/s
	MaxQueue          = 64 << 20        // bytes
	// MinDefaultQueue is the least queue DefaultQueue gives: ten datagrams
	// of 1,500 bytes.
	MinDefaultQueue = 15000
)

// DefaultQueue returns the queue a Config with Queue 0 gets: one
// bandwidth-delay product of the round trip the relay adds (Rate times
// twice Delay), at least MinDefaultQueue bytes and at most MaxQueue.
func (c Config) DefaultQueue() int {
	bdp := float64(c.Rate) * 2 * c.Delay.Seconds()
	return int(min(max(bdp, MinDefaultQueue), MaxQueue))
}

// Validate reports what is wrong with c, if anything.
func (c Config) Validate() error {
	for _, p := range []struct {
		name string
		v    float64
	}{{"Loss", c.Loss}, {"Dup", c.Dup}, {"Reorder", c.Reorder}} {
		if math.IsNaN(p.v) || p.v < 0 || p.v > 1 {
			return fmt.Errorf("impair: %s %v: want a probability from 0 to 1", p.name, p.v)
		}
	}
	switch {
	case c.Delay < 0 || c.Delay > MaxDelay:
		return fmt.Errorf("impair: Delay %v: want 0 to %v", c.Delay, MaxDelay)
	case c.Jitter < 0 || c.Jitter > MaxDelay:
		return fmt.Errorf("impair: Jitter %v: want 0 to %v", c.Jitter, MaxDelay)
	case c.MTU < 0 || c.MTU > maxMTU:
		return fmt.Errorf("impair: MTU %d: want 1 to %d bytes, or 0 for none", c.MTU, maxMTU)
	case c.MaxClients < 0:
		return fmt.Errorf("impair: MaxClients %d is negative", c.MaxClients)
	case c.Idle < 0:
		return fmt.Errorf("impair: Idle %v is negative", c.Idle)
	case c.Rate < 0 || c.Rate > MaxRate:
		return fmt.Errorf("impair: Rate %d: want 1 to %d bytes a second, or 0 for no limit", c.Rate, int64(MaxRate))
	case c.Queue < 0 || c.Queue > MaxQueue:
		return fmt.Errorf("impair: Queue %d: want 1 to %d bytes, or 0 for the default", c.Queue, MaxQueue)
	case c.Queue != 0 && c.Rate == 0:
		return fmt.Errorf("impair: Queue %d without a Rate: the queue is the rate's", c.Queue)
	}
	return nil
}

// holdBack is how much longer than others a reordered datagram takes.
func (c Config) holdBack() time.Duration {
	return c.Delay/2 + 2*c.Jitter + time.Millisecond
}

// Stats counts what the relay did, both directions together.
//
// A datagram is counted in Datagrams only once the counters of what befell
// it are, so a snapshot that counts a datagram also counts it as lost, too
// big, duplicated, and so on, if it was. A test that waits for Datagrams to
// reach the number it sent can then trust the other counters.
type Stats struct {
	Datagrams  uint64 // received, from clients and from the target
	Lost       uint64 // dropped as loss
	TooBig     uint64 // dropped for being longer than the MTU
	Duplicated uint64 // sent twice
	Reordered  uint64 // copies held back
	Overflow   uint64 // dropped because a delay line was full
	NoRoom     uint64 // from a new client, while MaxClients had sockets or the system gave none
	Clients    int    // client addresses with an upstream socket now

	// With a Rate: the queue towards the target (Up) and towards the
	// clients (Down).
	Up, Down QueueStats
}

// Bounds on what the relay holds, so that no sender can make it grow
// without limit.
const (
	maxQueued = 1 << 16 // datagrams waiting in one delay line
	bufSize   = 65536
	// socketBuffer is asked for each socket's buffers: a burst of small
	// datagrams must not overflow a default-sized buffer, which would be
	// loss the relay does not count.
	socketBuffer = 8 << 20
)

// Relay is a running impairing relay. Its methods are safe for concurrent
// use.
type Relay struct {
	cfg    Config
	front  *net.UDPConn
	target *net.UDPAddr
	up     *delayLine // to the target
	down   *delayLine // to the clients
	header int        // bytes of IP and UDP header a datagram counts for the rate
	done   chan struct{}
	wg     sync.WaitGroup

	mu      sync.Mutex
	rng     *rand.Rand
	clients map[netip.AddrPort]*client
	shut    bool

	datagrams, lost, tooBig, duplicated, reordered, noRoom atomic.Uint64
}

// client is the upstream socket of one client address.
type client struct {
	conn *net.UDPConn // connected to the target
	last atomic.Int64 // when a datagram last passed, in Unix nanoseconds
}

// Listen starts a relay on the UDP address listen (":0" or "127.0.0.1:0"
// pick a free port; an empty host is every address) that forwards to the
// UDP address target (an empty host is 127.0.0.1), impaired as cfg says.
// ctx bounds the resolution of the addresses only: the relay runs until
// Close.
func Listen(ctx context.Context, listen, target string, cfg Config) (*Relay, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.MaxClients == 0 {
		cfg.MaxClients = DefaultMaxClients
	}
	if cfg.Idle == 0 {
		cfg.Idle = DefaultIdle
	}
	to, err := resolveTarget(ctx, target)
	if err != nil {
		return nil, err
	}
	var lc net.ListenConfig
	pc, err := lc.ListenPacket(ctx, "udp", listen)
	if err != nil {
		return nil, fmt.Errorf("impair: %w", err)
	}
	front := pc.(*net.UDPConn)
	setBuffers(front)
	if cfg.Rate > 0 && cfg.Queue == 0 {
		cfg.Queue = cfg.DefaultQueue()
	}
	r := &Relay{
		cfg:     cfg,
		front:   front,
		target:  to,
		up:      newDelayLine(cfg),
		down:    newDelayLine(cfg),
		header:  28,
		done:    make(chan struct{}),
		rng:     rand.New(rand.NewPCG(cfg.Seed, 0x696d70616972)),
		clients: make(map[netip.AddrPort]*client),
	}
	if !to.AddrPort().Addr().Is4() {
		r.header = 48
	}
	r.wg.Add(4)
	go r.up.run(r.done, &r.wg)
	go r.down.run(r.done, &r.wg)
	go r.readFront()
	go r.expire()
	return r, nil
}

// resolveTarget resolves a "host:port" to forward to.
func resolveTarget(ctx context.Context, target string) (*net.UDPAddr, error) {
	host, port, err := net.SplitHostPort(target)
	if err != nil {
		return nil, fmt.Errorf("impair: target %q: want HOST:PORT", target)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		pn, lerr := net.DefaultResolver.LookupPort(ctx, "udp", port)
		if lerr != nil {
			return nil, fmt.Errorf("impair: target %q: bad port %q", target, port)
		}
		p = uint64(pn)
	}
	if p == 0 {
		return nil, fmt.Errorf("impair: target %q: port 0", target)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		ips, lerr := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		if lerr != nil {
			return nil, fmt.Errorf("impair: target %q: %w", target, lerr)
		}
		if len(ips) == 0 {
			return nil, fmt.Errorf("impair: target %q: no address", target)
		}
		ip = ips[0]
		for _, a := range ips {
			if a.Unmap().Is4() { // as net.Dial would try first
				ip = a
				break
			}
		}
	}
	return net.UDPAddrFromAddrPort(netip.AddrPortFrom(ip.Unmap(), uint16(p))), nil
}

func setBuffers(c *net.UDPConn) {
	c.SetReadBuffer(socketBuffer) // capped by the system: best effort
	c.SetWriteBuffer(socketBuffer)
}

// Addr returns the address clients send to.
func (r *Relay) Addr() netip.AddrPort { return r.front.LocalAddr().(*net.UDPAddr).AddrPort() }

// Target returns the address the relay forwards to.
func (r *Relay) Target() netip.AddrPort { return r.target.AddrPort() }

// Stats returns what the relay did so far.
func (r *Relay) Stats() Stats {
	// Datagrams is loaded first, so that every datagram it counts has its
	// fate in the counters loaded after it.
	datagrams := r.datagrams.Load()
	r.mu.Lock()
	n := len(r.clients)
	r.mu.Unlock()
	return Stats{
		Datagrams:  datagrams,
		Lost:       r.lost.Load(),
		TooBig:     r.tooBig.Load(),
		Duplicated: r.duplicated.Load(),
		Reordered:  r.reordered.Load(),
		Overflow:   r.up.overflow.Load() + r.down.overflow.Load(),
		NoRoom:     r.noRoom.Load(),
		Clients:    n,
		Up:         r.up.queueStats(),
		Down:       r.down.queueStats(),
	}
}

// Config returns the relay's configuration, with the defaults it applied.
func (r *Relay) Config() Config { return r.cfg }

// Close stops the relay and waits for its goroutines; datagrams still on
// their way are lost. Close may be called more than once.
func (r *Relay) Close() error {
	r.mu.Lock()
	if r.shut {
		r.mu.Unlock()
		return nil
	}
	r.shut = true
	close(r.done)
	err := r.front.Close()
	for _, c := range r.clients {
		c.conn.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
	return err
}

// readFront forwards the clients' datagrams towards the target.
func (r *Relay) readFront() {
	defer r.wg.Done()
	buf := make([]byte, bufSize)
	for {
		n, from, err := r.front.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // an ICMP error of an earlier write, say
		}
		c := r.client(from)
		if c == nil {
			r.noRoom.Add(1)
			r.datagrams.Add(1) // after its fate: see Stats
			continue
		}
		c.last.Store(time.Now().UnixNano())
		r.impair(r.up, buf[:n], c.conn, netip.AddrPort{})
	}
}

// client returns the upstream socket of the client at addr, opening it and
// its reader the first time, or nil if MaxClients have one or the relay is
// closed.
func (r *Relay) client(addr netip.AddrPort) *client {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.clients[addr]; ok || r.shut || len(r.clients) >= r.cfg.MaxClients {
		return c
	}
	conn, err := net.DialUDP("udp", nil, r.target)
	if err != nil {
		return nil
	}
	setBuffers(conn)
	c := &client{conn: conn}
	c.last.Store(time.Now().UnixNano())
	r.clients[addr] = c
	r.wg.Add(1)
	go r.readUpstream(c, addr)
	return c
}

// readUpstream forwards the target's datagrams on c back to the client at
// addr, until c is closed.
func (r *Relay) readUpstream(c *client, addr netip.AddrPort) {
	defer r.wg.Done()
	buf := make([]byte, bufSize)
	for {
		// The socket is connected: the system passes on datagrams from
		// the target only.
		n, err := c.conn.Read(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // ECONNREFUSED: nothing listens at the target (yet)
		}
		c.last.Store(time.Now().UnixNano())
		r.impair(r.down, buf[:n], r.front, addr)
	}
}

// expire closes the upstream sockets of clients idle for cfg.Idle.
func (r *Relay) expire() {
	defer r.wg.Done()
	t := time.NewTicker(max(r.cfg.Idle/4, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-r.done:
			return
		case now := <-t.C:
			r.mu.Lock()
			for addr, c := range r.clients {
				if now.Sub(time.Unix(0, c.last.Load())) >= r.cfg.Idle {
					c.conn.Close() // its reader returns; late writes to it fail, lost
					delete(r.clients, addr)
				}
			}
			r.mu.Unlock()
		}
	}
}

// impair puts b, copied, on line: to go out on conn, to the address to, or
// on conn's own peer if to is the zero AddrPort. It is dropped, delayed,
// duplicated or held back as the configuration says.
func (r *Relay) impair(line *delayLine, b []byte, conn *net.UDPConn, to netip.AddrPort) {
	// The datagram is counted last, once whatever befell it is: see Stats.
	defer r.datagrams.Add(1)
	if r.cfg.MTU > 0 && len(b) > r.cfg.MTU {
		r.tooBig.Add(1)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cfg.Loss > 0 && r.rng.Float64() < r.cfg.Loss {
		r.lost.Add(1)
		return
	}
	now := time.Now()
	sent := now
	if r.cfg.Rate > 0 {
		var ok bool
		if sent, ok = line.queue.Enqueue(now, len(b)+r.header); !ok {
			return
		}
	}
	copies := 1
	if r.cfg.Dup > 0 && r.rng.Float64() < r.cfg.Dup {
		copies = 2
		r.duplicated.Add(1)
	}
	for range copies {
		d := r.cfg.Delay
		if r.cfg.Jitter > 0 {
			d += time.Duration((2*r.rng.Float64() - 1) * float64(r.cfg.Jitter))
		}
		if r.cfg.Reorder > 0 && r.rng.Float64() < r.cfg.Reorder {
			d += r.cfg.holdBack()
			r.reordered.Add(1)
		}
		line.push(sent.Add(max(d, 0)), append([]byte(nil), b...), conn, to)
	}
}

// delayed is a datagram on its way.
type delayed struct {
	at   time.Time
	n    uint64 // order of arrival, to keep equal times in order
	b    []byte
	conn *net.UDPConn
	to   netip.AddrPort // the zero value: conn's connected peer
}

// delayQueue is a min-heap of datagrams by time of delivery.
type delayQueue []delayed

func (q delayQueue) Len() int { return len(q) }
func (q delayQueue) Less(i, j int) bool {
	if !q[i].at.Equal(q[j].at) {
		return q[i].at.Before(q[j].at)
	}
	return q[i].n < q[j].n
}
func (q delayQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *delayQueue) Push(x any)   { *q = append(*q, x.(delayed)) }
func (q *delayQueue) Pop() any {
	old := *q
	d := old[len(old)-1]
	old[len(old)-1] = delayed{}
	*q = old[:len(old)-1]
	return d
}

// delayLine delivers datagrams at their time, from one goroutine. With a
// rate, it is also the bottleneck of its direction.
type delayLine struct {
	mu       sync.Mutex
	q        delayQueue
	n        uint64
	wake     chan struct{}
	overflow atomic.Uint64

	// queue is the bottleneck of the direction, with a Config.Rate.
	queue *Queue
}

func newDelayLine(cfg Config) *delayLine {
	l := &delayLine{wake: make(chan struct{}, 1)}
	if cfg.Rate > 0 {
		q := cfg.Queue
		if q == 0 {
			q = cfg.DefaultQueue()
		}
		l.queue = newQueue(cfg.Rate, q)
	}
	return l
}

// queueStats returns the statistics of the line's queue, if it has one.
func (l *delayLine) queueStats() QueueStats {
	if l.queue == nil {
		return QueueStats{}
	}
	return l.queue.Stats()
}

func (l *delayLine) push(at time.Time, b []byte, conn *net.UDPConn, to netip.AddrPort) {
	l.mu.Lock()
	if len(l.q) >= maxQueued {
		l.mu.Unlock()
		l.overflow.Add(1)
		return
	}
	l.n++
	heap.Push(&l.q, delayed{at: at, n: l.n, b: b, conn: conn, to: to})
	first := l.q[0].n == l.n
	l.mu.Unlock()
	if first {
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
}

// run sends each datagram when its time comes, until done is closed.
func (l *delayLine) run(done <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var due []delayed
	for {
		l.mu.Lock()
		now := time.Now()
		for len(l.q) > 0 && !l.q[0].at.After(now) {
			due = append(due, heap.Pop(&l.q).(delayed))
		}
		wait := time.Hour
		if len(l.q) > 0 {
			wait = l.q[0].at.Sub(now)
		}
		l.mu.Unlock()
		for i, d := range due {
			// A failed write is a lost datagram, as on a real path.
			if d.to.IsValid() {
				d.conn.WriteToUDPAddrPort(d.b, d.to)
			} else {
				d.conn.Write(d.b)
			}
			due[i] = delayed{}
		}
		if len(due) > 0 {
			due = due[:0]
			continue
		}
		timer.Reset(wait)
		select {
		case <-done:
			return
		case <-l.wake:
		case <-timer.C:
		}
	}
}
