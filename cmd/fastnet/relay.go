package main

import (
	"container/heap"
	"errors"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// impairment is what the relay does to the datagrams it forwards, the same
// in both directions.
type impairment struct {
	Loss    float64       // probability that a datagram is lost
	Dup     float64       // probability that a datagram arrives twice
	Reorder float64       // probability that a datagram is held back, for later ones to overtake
	Delay   time.Duration // one-way delay
	Jitter  time.Duration // each delay is Delay plus or minus up to Jitter, uniformly
	MTU     int           // datagrams longer than this are dropped; 0: none
}

// holdBack is how much longer than others a reordered datagram takes: half
// the delay, twice the jitter and a millisecond, so that the datagrams sent
// right after it arrive first.
func (imp impairment) holdBack() time.Duration {
	return imp.Delay/2 + 2*imp.Jitter + time.Millisecond
}

// Bounds on what the relay holds, so that no sender can make it grow
// without limit.
const (
	relayMaxPeers  = 256
	relayMaxQueued = 1 << 16 // datagrams waiting in one direction
	relayBufSize   = 65536
	// relaySocketBuffer is asked for each socket's buffers: a burst of
	// small packets must not overflow a default-sized buffer, which would
	// be loss the relay does not count.
	relaySocketBuffer = 8 << 20
)

// listenRelay opens a socket of the relay on a free port of 127.0.0.1.
func listenRelay() (*net.UDPConn, error) {
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, err
	}
	c.SetReadBuffer(relaySocketBuffer) // capped by the system: best effort
	c.SetWriteBuffer(relaySocketBuffer)
	return c, nil
}

// relayStats counts what the relay did to the datagrams, both directions
// together.
type relayStats struct {
	Datagrams  uint64 // received from either side
	Lost       uint64 // dropped as loss
	TooBig     uint64 // dropped for exceeding the MTU
	Duplicated uint64
	Reordered  uint64
	Overflow   uint64 // dropped because too many were waiting
}

// relay is an impairing UDP proxy between clients and one server, like a
// router on a bad path: datagrams a client sends to the relay's address go
// to the server from a socket of the relay's own for that client, and the
// server's answers go back the same way, each direction through a delay
// line that applies the impairment.
type relay struct {
	imp    impairment
	front  *net.UDPConn
	server netip.AddrPort
	up     *delayLine // to the server
	down   *delayLine // to the clients
	done   chan struct{}
	wg     sync.WaitGroup

	mu    sync.Mutex
	rng   *rand.Rand
	peers map[netip.AddrPort]*net.UDPConn // by client address
	shut  bool

	datagrams, lost, tooBig, duplicated, reordered atomic.Uint64
}

// newRelay starts a relay on a free port of 127.0.0.1 in front of server.
func newRelay(server netip.AddrPort, imp impairment, seed uint64) (*relay, error) {
	front, err := listenRelay()
	if err != nil {
		return nil, err
	}
	r := &relay{
		imp:    imp,
		front:  front,
		server: server,
		up:     newDelayLine(),
		down:   newDelayLine(),
		done:   make(chan struct{}),
		rng:    rand.New(rand.NewPCG(seed, 0x72656c6179)),
		peers:  make(map[netip.AddrPort]*net.UDPConn),
	}
	r.wg.Add(3)
	go r.up.run(r.done, &r.wg)
	go r.down.run(r.done, &r.wg)
	go r.readFront()
	return r, nil
}

// Addr returns the address clients send to.
func (r *relay) Addr() netip.AddrPort { return r.front.LocalAddr().(*net.UDPAddr).AddrPort() }

// Stats returns what the relay did so far.
func (r *relay) Stats() relayStats {
	return relayStats{
		Datagrams:  r.datagrams.Load(),
		Lost:       r.lost.Load(),
		TooBig:     r.tooBig.Load(),
		Duplicated: r.duplicated.Load(),
		Reordered:  r.reordered.Load(),
		Overflow:   r.up.overflow.Load() + r.down.overflow.Load(),
	}
}

// Close stops the relay; datagrams still on their way are lost.
func (r *relay) Close() error {
	r.mu.Lock()
	if r.shut {
		r.mu.Unlock()
		return nil
	}
	r.shut = true
	close(r.done)
	err := r.front.Close()
	for _, c := range r.peers {
		c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
	return err
}

// readFront forwards the clients' datagrams towards the server.
func (r *relay) readFront() {
	defer r.wg.Done()
	buf := make([]byte, relayBufSize)
	for {
		n, from, err := r.front.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		up := r.peer(from)
		if up == nil {
			continue
		}
		r.impair(r.up, buf[:n], up, r.server)
	}
}

// peer returns the socket that carries client's datagrams to the server,
// opening it and its reader the first time, or nil if there are too many
// clients or the relay is closed.
func (r *relay) peer(client netip.AddrPort) *net.UDPConn {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.peers[client]; ok || r.shut || len(r.peers) >= relayMaxPeers {
		return c
	}
	c, err := listenRelay()
	if err != nil {
		return nil
	}
	r.peers[client] = c
	r.wg.Add(1)
	go r.readPeer(c, client)
	return c
}

// readPeer forwards the server's datagrams on c back to client.
func (r *relay) readPeer(c *net.UDPConn, client netip.AddrPort) {
	defer r.wg.Done()
	buf := make([]byte, relayBufSize)
	for {
		n, from, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if from != r.server {
			continue
		}
		r.impair(r.down, buf[:n], r.front, client)
	}
}

// impair puts b, copied, on line towards to from conn, as the impairment
// says: dropped, delayed, duplicated or held back.
func (r *relay) impair(line *delayLine, b []byte, conn *net.UDPConn, to netip.AddrPort) {
	r.datagrams.Add(1)
	if r.imp.MTU > 0 && len(b) > r.imp.MTU {
		r.tooBig.Add(1)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.rng.Float64() < r.imp.Loss {
		r.lost.Add(1)
		return
	}
	copies := 1
	if r.rng.Float64() < r.imp.Dup {
		copies = 2
		r.duplicated.Add(1)
	}
	now := time.Now()
	for range copies {
		d := r.imp.Delay
		if r.imp.Jitter > 0 {
			d += time.Duration((2*r.rng.Float64() - 1) * float64(r.imp.Jitter))
		}
		if r.rng.Float64() < r.imp.Reorder {
			d += r.imp.holdBack()
			r.reordered.Add(1)
		}
		line.push(now.Add(max(d, 0)), append([]byte(nil), b...), conn, to)
	}
}

// delayed is a datagram on its way.
type delayed struct {
	at   time.Time
	n    uint64 // order of arrival, to keep equal times in order
	b    []byte
	conn *net.UDPConn
	to   netip.AddrPort
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

// delayLine delivers datagrams at their time, from one goroutine.
type delayLine struct {
	mu       sync.Mutex
	q        delayQueue
	n        uint64
	wake     chan struct{}
	overflow atomic.Uint64
}

func newDelayLine() *delayLine { return &delayLine{wake: make(chan struct{}, 1)} }

func (l *delayLine) push(at time.Time, b []byte, conn *net.UDPConn, to netip.AddrPort) {
	l.mu.Lock()
	if len(l.q) >= relayMaxQueued {
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
			d.conn.WriteToUDPAddrPort(d.b, d.to) // a failed write is a lost datagram
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
