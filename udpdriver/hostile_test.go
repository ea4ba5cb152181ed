package udpdriver_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/udpdriver"
)

// The hostile load of TestHostileLoad.
const (
	// forgers sockets each send a "connect?" and, as a client's retry
	// would, another 300 ms later, and never answer: a sender that forges
	// its source address looks the same to the server. They start evenly
	// over forgeSpread, about 1,000 new addresses a second, so the
	// server's bound on unvalidated connections (MaxUnvalidated, 1,024)
	// overflows and drops the oldest, but only one older than a second:
	// a real client validates in a round trip.
	forgers     = 1500
	forgeSpread = 1500 * time.Millisecond
	forgeRetry  = 300 * time.Millisecond
	// queriers sockets each send queriesEach "query:fastnet" datagrams
	// queryGap apart.
	queriers    = 16
	queriesEach = 400
	queryGap    = 4 * time.Millisecond
	// realClients dial through udpdriver in the middle of it all, and each
	// must connect and get its reliable message echoed within realBound.
	realClients = 40
	realBound   = 10 * time.Second
	// amplification is the most a never-answering address may receive
	// for each byte it sent (D25).
	amplification = 3
)

// Channel -1 payloads, behind the channel id 0xffff.
var (
	connectPayload = append([]byte{0xff, 0xff}, "connect?"...)
	queryPayload   = append([]byte{0xff, 0xff}, "query:fastnet"...)
)

// rawPeer is a UDP socket that sends channel -1 datagrams to the server
// and counts what it sends and what comes back, never answering.
type rawPeer struct {
	uc            *net.UDPConn
	server        netip.AddrPort // got counts what comes from it
	sent, got     atomic.Int64   // UDP payload bytes
	datagramsGot  atomic.Int64
	strays        atomic.Int64 // datagrams from anyone else
	readErr       error
	answeredQuery atomic.Bool // a "query:fastnet=yes" came back
}

func newRawPeer(tb testing.TB, server netip.AddrPort) *rawPeer {
	tb.Helper()
	uc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { uc.Close() })
	return &rawPeer{uc: uc, server: server}
}

func (p *rawPeer) send(to netip.AddrPort, b []byte) {
	if n, err := p.uc.WriteToUDPAddrPort(b, to); err == nil {
		p.sent.Add(int64(n))
	}
}

// read counts every datagram that arrives from the server until the
// socket's read deadline passes. Others are strays: a port the system gave
// this socket may have been a client's of another test's server a moment
// before, which goes on sending to it until that connection times out.
func (p *rawPeer) read() {
	buf := make([]byte, 65536)
	for {
		n, from, err := p.uc.ReadFromUDPAddrPort(buf)
		if err != nil {
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				p.readErr = err
			}
			return
		}
		if from != p.server {
			p.strays.Add(1)
			continue
		}
		p.got.Add(int64(n))
		p.datagramsGot.Add(1)
		if string(buf[:n]) == "\xff\xffquery:fastnet=yes" {
			p.answeredQuery.Store(true)
		}
	}
}

// TestHostileLoad runs a server over loopback UDP through a storm: forged
// "connect?" datagrams from many never-answering addresses, a flood of
// queries, and real clients dialing in the middle of both. Every real
// client must connect and exchange a reliable message within realBound,
// the server must accept only them, and no never-answering address may
// receive more than amplification times the bytes it sent, whatever it
// sent (D25, N33).
func TestHostileLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("a storm of thousands of datagrams over loopback for about 10 s")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	// A validation timeout shorter than the default, so that the test
	// can read, in a few seconds, everything the server ever sends a
	// never-answering address.
	const validation = 4 * time.Second
	l, err := udpdriver.Listen(ctx, "127.0.0.1:0", udpdriver.Config{Engine: fastnet.Config{ValidationTimeout: validation}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	server := l.Addr().(*net.UDPAddr).AddrPort()

	var accepted atomic.Int64
	go func() {
		for {
			c, err := l.Accept(ctx)
			if err != nil {
				return
			}
			accepted.Add(1)
			go func() {
				for {
					m, err := c.Receive(ctx)
					if err != nil {
						return
					}
					if err := c.Send(ctx, m.Channel, m.Data, m.Reliable); err != nil {
						return
					}
				}
			}()
		}
	}()

	// The sockets, made before the storm so that it is not slowed by
	// their making.
	forged := make([]*rawPeer, forgers)
	for i := range forged {
		forged[i] = newRawPeer(t, server)
	}
	queries := make([]*rawPeer, queriers)
	for i := range queries {
		queries[i] = newRawPeer(t, server)
	}
	var readers sync.WaitGroup
	for _, p := range append(forged[:len(forged):len(forged)], queries...) {
		readers.Go(p.read)
	}

	start := time.Now()
	var senders sync.WaitGroup
	for i, p := range forged {
		senders.Go(func() {
			time.Sleep(forgeSpread * time.Duration(i) / forgers)
			p.send(server, connectPayload)
			time.Sleep(forgeRetry)
			p.send(server, connectPayload)
		})
	}
	for _, p := range queries {
		senders.Go(func() {
			for range queriesEach {
				p.send(server, queryPayload)
				time.Sleep(queryGap)
			}
		})
	}

	// The real clients, a third of the way into the storm.
	time.Sleep(forgeSpread / 3)
	type outcome struct {
		took time.Duration
		err  error
	}
	outcomes := make(chan outcome, realClients)
	for i := range realClients {
		go func() {
			begin := time.Now()
			err := exchange(ctx, server.String(), i)
			outcomes <- outcome{time.Since(begin), err}
		}()
	}
	var slowest time.Duration
	for range realClients {
		o := <-outcomes
		if o.err != nil {
			t.Errorf("a real client: %v", o.err)
		}
		slowest = max(slowest, o.took)
	}
	if slowest > realBound {
		t.Errorf("the slowest real client took %v, want at most %v", slowest, realBound)
	}
	senders.Wait()
	stormEnd := time.Now()

	// What the server sends an unvalidated address ends with its
	// validation timeout, counted from the last "connect?"; read a little
	// longer.
	for _, p := range append(forged[:len(forged):len(forged)], queries...) {
		p.uc.SetReadDeadline(stormEnd.Add(validation + time.Second))
	}
	readers.Wait()

	if n := accepted.Load(); n != realClients {
		t.Errorf("the server accepted %d connections, want the %d real clients only", n, realClients)
	}
	if vs := l.ValidationStats(); vs.Validated != realClients || vs.Evicted+vs.Expired == 0 {
		t.Errorf("validation stats %+v: want %d validated, the forged ones evicted or expired", vs, realClients)
	} else {
		t.Logf("validation stats %+v", vs)
	}
	check := func(kind string, peers []*rawPeer) (sent, got int64, over int) {
		for i, p := range peers {
			s, g := p.sent.Load(), p.got.Load()
			sent, got = sent+s, got+g
			if p.readErr != nil {
				t.Errorf("%s %d: %v", kind, i, p.readErr)
			}
			if g > amplification*s {
				over++
				if over <= 5 {
					t.Errorf("%s %d received %d bytes in %d datagrams for the %d it sent: more than %d times", kind, i, g, p.datagramsGot.Load(), s, amplification)
				}
			}
		}
		return sent, got, over
	}
	var strays int64
	for _, p := range append(forged[:len(forged):len(forged)], queries...) {
		strays += p.strays.Load()
	}
	if strays > 0 {
		t.Logf("%d datagrams from other addresses than the server's, not counted", strays)
	}
	fs, fg, fo := check("forger", forged)
	qs, qg, qo := check("querier", queries)
	answered := 0
	for _, p := range queries {
		if p.answeredQuery.Load() {
			answered++
		}
	}
	if answered == 0 {
		t.Error("no query was answered")
	}
	t.Logf("storm of %v; real clients: %d connected and echoed, the slowest in %v", stormEnd.Sub(start).Round(time.Millisecond), realClients, slowest.Round(time.Millisecond))
	t.Logf("forgers: %d sockets sent %d bytes and received %d (%.2fx), %d over %dx", forgers, fs, fg, float64(fg)/float64(fs), fo, amplification)
	t.Logf("queriers: %d sockets sent %d bytes and received %d (%.2fx), %d over %dx, %d of them answered", queriers, qs, qg, float64(qg)/float64(qs), qo, amplification, answered)
}

// exchange dials the server as a real client, sends a reliable message
// and waits for its echo.
func exchange(ctx context.Context, addr string, i int) error {
	ctx, cancel := context.WithTimeout(ctx, realBound)
	defer cancel()
	c, err := udpdriver.Dial(ctx, addr, udpdriver.Config{})
	if err != nil {
		return fmt.Errorf("dial: %w", err)
	}
	defer c.Close()
	msg := fmt.Appendf(nil, "real client %d", i)
	if err := c.Send(ctx, 1, msg, true); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	m, err := c.Receive(ctx)
	if err != nil {
		return fmt.Errorf("receive: %w", err)
	}
	if string(m.Data) != string(msg) || !m.Reliable || m.Channel != 1 {
		return fmt.Errorf("echo %q on channel %d, reliable %v; want %q on 1, reliable", m.Data, m.Channel, m.Reliable, msg)
	}
	return nil
}

// TestHostileChannelMemory: peers that touch every one of the 32,768
// channels on several connections cannot make a server hold more than its
// EndpointReceiveMemory, though each connection stays within its own
// ConnReceiveMemory (D22, N50). The budgets are set so that one
// connection's channels fit its own but not four connections' the
// endpoint's.
func TestHostileChannelMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("131,072 datagrams over loopback")
	}
	const (
		conns     = 4
		connMem   = 5 << 20 // a channel's state is 136 bytes since N137
		endpoint  = 6 << 20
		passes    = 2 // every channel touched twice, in case the socket dropped the first
		channels  = fastnet.MaxChannel + 1
		sendLimit = 20 * time.Second
	)
	if need := channels * fastnet.ChannelStateMemory; need > connMem || conns*need <= endpoint {
		t.Fatalf("the budgets do not test the endpoint's: a connection's channels take %d bytes", need)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	cfg := udpdriver.Config{Engine: fastnet.Config{
		MaxMessageSize:        1024,
		ConnReceiveMemory:     connMem,
		EndpointReceiveMemory: endpoint,
	}}
	l, err := udpdriver.Listen(ctx, "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	var (
		mu     sync.Mutex
		served []*udpdriver.Conn
	)
	go func() {
		for {
			c, err := l.Accept(ctx)
			if err != nil {
				return
			}
			mu.Lock()
			served = append(served, c)
			mu.Unlock()
			go func() { // the application takes every message
				for {
					if _, err := c.Receive(ctx); err != nil {
						return
					}
				}
			}()
		}
	}()
	// held sums what the server's connections hold against the budget.
	held := func() (bytes, open int, dropped uint64) {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range served {
			st := c.Stats()
			if c.Err() != nil {
				// Ended: its memory is released, and Stats are
				// the figures it ended with.
				continue
			}
			bytes += st.ReceiveBytes
			open += st.OpenChannels
			dropped += st.Dropped[fastnet.DropMemory]
		}
		return bytes, open, dropped
	}

	// The most seen of each: the clients' graceful closes may end the
	// server's connections, and their counters, before the end is read.
	var most, mostOpen, mostDropped atomic.Int64
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		for ctx.Err() == nil {
			b, o, d := held()
			if int64(b) > most.Load() {
				most.Store(int64(b))
			}
			if int64(o) > mostOpen.Load() {
				mostOpen.Store(int64(o))
			}
			if int64(d) > mostDropped.Load() {
				mostDropped.Store(int64(d))
			}
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()

	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for i := range conns {
		wg.Go(func() {
			// A hostile peer paces nothing and keeps every message
			// however late (D30 off).
			c, err := udpdriver.Dial(ctx, l.Addr().String(), udpdriver.Config{Engine: fastnet.Config{
				MaxMessageSize: 1024, Congestion: fastnet.CongestionConfig{Disabled: true}, UnreliableMaxDelay: time.Hour,
			}})
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			msg := fmt.Appendf(nil, "peer %d", i)
			for range passes {
				for ch := range channels {
					if err := c.Send(ctx, ch, msg, false); err != nil {
						errs <- fmt.Errorf("peer %d, channel %d: %w", i, ch, err)
						return
					}
				}
				deadline := time.Now().Add(sendLimit)
				for c.Stats().SendQueueBytes > 0 && time.Now().Before(deadline) {
					time.Sleep(5 * time.Millisecond)
				}
			}
			time.Sleep(200 * time.Millisecond) // the last packets reach the server
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	bytes, open, dropped := held()
	cancel()
	<-watchDone
	open, dropped = max(open, int(mostOpen.Load())), max(dropped, uint64(mostDropped.Load()))
	t.Logf("the server's %d connections hold %d bytes for %d channels (at most %d seen; budget %d), %d packets dropped for memory",
		len(served), bytes, open, most.Load(), endpoint, dropped)
	if most.Load() > endpoint {
		t.Errorf("the server's connections held %d bytes, above the endpoint's budget of %d", most.Load(), endpoint)
	}
	if dropped == 0 || open >= conns*channels {
		t.Errorf("the budget never bound: %d channels open, %d packets dropped for memory", open, dropped)
	}
}
