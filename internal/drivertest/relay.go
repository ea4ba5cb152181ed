package drivertest

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"testing"
)

// mode is what a relay does with the bytes or datagrams it reads.
type mode int

const (
	// forward passes everything on.
	forward mode = iota
	// discard reads everything and passes nothing on: the peer has
	// vanished without a word.
	discard
	// stall stops reading (TCP), so that the sender's buffers fill; a UDP
	// relay drops, as a full network does.
	stall
)

// A relay sits between a client and a server on the same transport, so that
// a test can make the network misbehave under a live connection.
type relay interface {
	// Addr is the address clients dial instead of the server's.
	Addr() string
	// SetMode changes what the relay does from now on, both ways.
	SetMode(m mode)
	// Cut closes every connection through the relay. A UDP relay forgets
	// its clients: their later datagrams reach the server from new
	// addresses.
	Cut()
	// Close stops the relay; its goroutines have returned when Close
	// returns.
	Close()
}

// newRelay starts a relay to target on the transport of d. It is closed when
// the test ends.
func newRelay(t *testing.T, d Driver, target string) relay {
	t.Helper()
	var r relay
	var err error
	if d.TCP {
		r, err = newTCPRelay(target)
	} else {
		r, err = newUDPRelay(target)
	}
	if err != nil {
		t.Fatalf("relay: %v", err)
	}
	t.Cleanup(r.Close)
	return r
}

// udpRelay forwards datagrams between clients and a server: one front
// socket for the clients, and per client one socket to the server, so the
// server sees each client through its own address.
type udpRelay struct {
	front  *net.UDPConn
	target netip.AddrPort
	wg     sync.WaitGroup

	mu    sync.Mutex
	mode  mode
	backs map[netip.AddrPort]*net.UDPConn
	done  bool
}

func newUDPRelay(target string) (*udpRelay, error) {
	ta, err := netip.ParseAddrPort(target)
	if err != nil {
		return nil, err
	}
	front, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:0")))
	if err != nil {
		return nil, err
	}
	r := &udpRelay{front: front, target: ta, backs: make(map[netip.AddrPort]*net.UDPConn)}
	r.wg.Add(1)
	go r.frontLoop()
	return r, nil
}

func (r *udpRelay) Addr() string { return r.front.LocalAddr().String() }

func (r *udpRelay) SetMode(m mode) {
	r.mu.Lock()
	r.mode = m
	r.mu.Unlock()
}

func (r *udpRelay) Cut() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for from, b := range r.backs {
		b.Close()
		delete(r.backs, from)
	}
}

func (r *udpRelay) passing() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mode == forward
}

func (r *udpRelay) frontLoop() {
	defer r.wg.Done()
	buf := make([]byte, 65536)
	for {
		n, from, err := r.front.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // an ICMP error from an earlier write
		}
		if !r.passing() {
			continue
		}
		back := r.back(from)
		if back == nil {
			return
		}
		back.Write(buf[:n])
	}
}

// back returns the socket that carries from's datagrams to the server,
// creating it and its reader on first use; nil once the relay is closed.
func (r *udpRelay) back(from netip.AddrPort) *net.UDPConn {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return nil
	}
	if b := r.backs[from]; b != nil {
		return b
	}
	b, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(r.target))
	if err != nil {
		return nil
	}
	r.backs[from] = b
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		buf := make([]byte, 65536)
		for {
			n, err := b.Read(buf)
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				continue
			}
			if r.passing() {
				r.front.WriteToUDPAddrPort(buf[:n], from)
			}
		}
	}()
	return b
}

func (r *udpRelay) Close() {
	r.mu.Lock()
	if r.done {
		r.mu.Unlock()
		return
	}
	r.done = true
	for _, b := range r.backs {
		b.Close()
	}
	r.mu.Unlock()
	r.front.Close()
	r.wg.Wait()
}

// tcpRelay forwards TCP connections to a server, one outgoing connection
// per incoming one.
type tcpRelay struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu      sync.Mutex
	mode    mode
	changed chan struct{} // closed and replaced when mode changes
	conns   []net.Conn
	done    bool
}

func newTCPRelay(target string) (*tcpRelay, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &tcpRelay{ln: ln, target: target, changed: make(chan struct{})}
	r.wg.Add(1)
	go r.acceptLoop()
	return r, nil
}

func (r *tcpRelay) Addr() string { return r.ln.Addr().String() }

func (r *tcpRelay) SetMode(m mode) {
	r.mu.Lock()
	r.mode = m
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
}

func (r *tcpRelay) Cut() {
	r.mu.Lock()
	conns := r.conns
	r.conns = nil
	r.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

func (r *tcpRelay) acceptLoop() {
	defer r.wg.Done()
	for {
		in, err := r.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", r.target)
		if err != nil {
			in.Close()
			continue
		}
		r.mu.Lock()
		if r.done {
			r.mu.Unlock()
			in.Close()
			out.Close()
			return
		}
		r.conns = append(r.conns, in, out)
		r.wg.Add(2)
		r.mu.Unlock()
		go r.pipe(in, out)
		go r.pipe(out, in)
	}
}

// wait blocks while the relay stalls and returns the mode to act on.
func (r *tcpRelay) wait() mode {
	for {
		r.mu.Lock()
		m, ch, done := r.mode, r.changed, r.done
		r.mu.Unlock()
		if m != stall || done {
			return m
		}
		<-ch
	}
}

// pipe copies src to dst as the mode says, until either fails; then it
// closes both, unless the relay discards: a vanished network carries no
// end of connection either, and Cut or Close closes them.
func (r *tcpRelay) pipe(src, dst net.Conn) {
	defer r.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		r.wait()
		n, err := src.Read(buf)
		m := r.wait()
		if n > 0 && m == forward {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				err = werr
			}
		}
		if err != nil {
			if m != discard {
				src.Close()
				dst.Close()
			}
			return
		}
	}
}

func (r *tcpRelay) Close() {
	r.mu.Lock()
	if r.done {
		r.mu.Unlock()
		return
	}
	r.done = true
	close(r.changed)
	r.changed = make(chan struct{})
	conns := r.conns
	r.conns = nil
	r.mu.Unlock()
	r.ln.Close()
	for _, c := range conns {
		c.Close()
	}
	r.wg.Wait()
}

// silentServer accepts packets or connections on the transport of d and
// never answers: a host where something listens that is not Fastnet, or a
// server that has hung. It is closed when the test ends.
func silentServer(t *testing.T, d Driver) string {
	t.Helper()
	var wg sync.WaitGroup
	if d.TCP {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var conns []net.Conn
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
			}
		}()
		t.Cleanup(func() {
			ln.Close()
			wg.Wait()
			for _, c := range conns {
				c.Close()
			}
		})
		return ln.Addr().String()
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		buf := make([]byte, 65536)
		for {
			if _, _, err := pc.ReadFrom(buf); errors.Is(err, net.ErrClosed) {
				return
			}
		}
	}()
	t.Cleanup(func() {
		pc.Close()
		wg.Wait()
	})
	return pc.LocalAddr().String()
}

// deadAddr returns an address on the transport of d where nothing listens:
// one just bound and released.
func deadAddr(t *testing.T, d Driver) string {
	t.Helper()
	if d.TCP {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		return addr
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := pc.LocalAddr().String()
	pc.Close()
	return addr
}
