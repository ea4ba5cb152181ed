package fastnet

import (
	"bytes"
	"fmt"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/channel"
	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/coalesce"
)

// TestEndpointReceiveMemory checks D22 and D23 with N49 and N50 against
// many hostile peers: 64 validated connections each touch all 32,768
// channels with one packet that starts a reliable message and never
// finishes it. Each connection alone stays within ConnReceiveMemory, but
// 64 of them would hold over a gigabyte; the endpoint's accounted memory
// stays within EndpointReceiveMemory, and the heap grows by no more than
// a modest factor of what is accounted, so the accounting is true. Before
// N49, a connection's channel state was charged nothing, and a ring place
// 16 bytes of its 40: 4 such connections grew the heap by 79 MB while
// their budgets counted 24.5 MB.
func TestEndpointReceiveMemory(t *testing.T) {
	conns := 64
	if raceOn || testing.Short() {
		conns = 8
	}
	const limit = 32 << 20
	tc := newTestEndpoint(t, Config{Role: Server, EndpointReceiveMemory: limit, MaxConnections: conns})
	enc := coalesce.AppendMessage(nil, make([]byte, 1000), true)
	before := heapInUse()
	handles := make([]Handle, conns)
	refused := uint64(0)
	for k := range conns {
		tc.peer = netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 1, byte(k >> 8), byte(k)}), 4000)
		handles[k], _ = tc.connectServer()
		flood(tc, func(int16) []byte { return dataPacket(true, true, 0, 1, enc[:500]) })
		if got := tc.ep.ReceiveMemory(); got > limit {
			t.Fatalf("after %d connections: the endpoint holds %d, above its limit %d", k+1, got, limit)
		}
	}
	accounted := tc.ep.ReceiveMemory()
	grew := int64(heapInUse()) - int64(before)
	runtime.KeepAlive(tc)
	sum := 0
	for _, h := range handles {
		st, _ := tc.ep.Stats(h)
		sum += st.ReceiveBytes
		refused += st.Dropped[DropMemory]
		if st.ReceiveBytes > tc.ep.cfg.ConnReceiveMemory {
			t.Errorf("a connection holds %d, above ConnReceiveMemory %d", st.ReceiveBytes, tc.ep.cfg.ConnReceiveMemory)
		}
	}
	granted := tc.ep.recvBudget.Granted()
	t.Logf("%d connections x 32,768 partial messages: accounted %d (connections %d, free buffers %d) and %d granted, heap grew by %d (%.2f times the accounted), %d packets refused",
		conns, accounted, sum, tc.ep.recvBudget.Free(), granted, grew, float64(grew)/float64(accounted), refused)
	if sum != tc.ep.recvBudget.Used {
		t.Errorf("the connections hold %d, the endpoint counts %d", sum, tc.ep.recvBudget.Used)
	}
	// Hostile peers fill it, but for the reserve of one message's grant.
	if full := accounted + granted + tc.ep.recvBudget.Reserve; accounted > limit || full < limit*7/8 {
		t.Errorf("accounted %d, granted %d: want close to the limit %d", accounted, granted, limit)
	}
	// What is not accounted: each connection's own state and its queues
	// of acks, a few KB.
	if grew > int64(accounted)*5/4+int64(conns)<<14 {
		t.Errorf("heap grew by %d, accounted %d: the accounting is not true", grew, accounted)
	}
	if refused == 0 {
		t.Error("nothing refused")
	}

	// A connection that ends gives back what its peer made it hold.
	for _, h := range handles {
		tc.ep.Abort(tc.now, h, "")
	}
	if got := tc.ep.recvBudget.Used; got != 0 {
		t.Errorf("after every connection ended the endpoint holds %d", got)
	}
}

// TestChannelStateCharge checks that ChannelStateMemory is what a channel
// the peer used costs its connection for its life (N49): a peer sending
// one whole message on each of the 32,768 channels leaves the connection
// the channel's state for each, charged at about what it takes on the
// heap.
func TestChannelStateCharge(t *testing.T) {
	tc := newTestEndpoint(t, Config{Role: Server})
	h, _ := tc.connectServer()
	msg := coalesce.AppendMessage(nil, []byte("one of many"), true)
	st0, _ := tc.ep.Stats(h)
	before := heapInUse()
	flood(tc, func(int16) []byte { return dataPacket(true, true, 0, 1, msg) })
	grew := int64(heapInUse()) - int64(before)
	runtime.KeepAlive(tc)
	st, _ := tc.ep.Stats(h)
	charged := st.ReceiveBytes - st0.ReceiveBytes
	t.Logf("32,768 channels: %d bytes charged (%d a channel, ChannelStateMemory %d), heap grew by %d (%d a channel)",
		charged, charged/32768, ChannelStateMemory, grew, grew/32768)
	if min := 32768 * ChannelStateMemory; charged < min {
		t.Errorf("charged %d, want at least %d", charged, min)
	}
	if grew > int64(charged)*5/4 || grew < int64(charged)/2 {
		t.Errorf("heap grew by %d, charged %d", grew, charged)
	}
}

// TestEndpointMemoryNoStall checks N50 with D22 and N20: honest traffic
// completes under an endpoint budget just above what one message needs.
// Two clients each send large reliable messages at payload MTU 32 to one
// server whose EndpointReceiveMemory holds one of them at a time: the
// message whose memory is granted first completes while the other's
// packets are refused (DropMemory) and resent (D14), then the other gets
// its grant; nothing stalls.
func TestEndpointMemoryNoStall(t *testing.T) {
	const size = 60000
	encoded := size + maxMessageOverhead
	need := channel.MessageMemory(encoded, DefaultPayloadMTU-7)
	limit := need + 16<<10
	srvCfg := Config{Role: Server, MaxMessageSize: size, MTU: MTUConfig{Disabled: true},
		ChannelReceiveMemory: need, ConnReceiveMemory: limit, EndpointReceiveMemory: limit}
	cliCfg := Config{Role: Client, MaxMessageSize: size, MTU: MTUConfig{Disabled: true}}
	srv, err := NewEndpoint(srvCfg)
	if err != nil {
		t.Fatal(err)
	}
	const clients, msgs = 2, 3
	var cli [clients]*Endpoint
	var addr [clients]netip.AddrPort
	var h [clients]Handle
	now := clock.Epoch
	buf := make([]byte, 1<<16)
	got := map[string]int{}
	maxHeld := 0
	flush := func() {
		for moved := true; moved; {
			moved = false
			for i, c := range cli {
				for {
					tr, ok := c.PollTransmit(now, buf)
					if !ok {
						break
					}
					moved = true
					srv.HandleDatagram(now, addr[i], buf[:tr.N])
					maxHeld = max(maxHeld, srv.ReceiveMemory())
				}
			}
			for {
				tr, ok := srv.PollTransmit(now, buf)
				if !ok {
					break
				}
				moved = true
				for i := range cli {
					if addr[i] == tr.To {
						cli[i].HandleDatagram(now, serverAddr, buf[:tr.N])
					}
				}
			}
			for {
				ev, ok := srv.PollEvent()
				if !ok {
					break
				}
				switch ev.Kind {
				case EventMessage:
					got[string(ev.Data[:16])]++
				case EventDisconnected:
					t.Errorf("server: a connection ended: %v", ev.Err)
				}
			}
		}
	}
	advance := func() {
		next := now.Add(time.Second)
		for _, e := range append([]*Endpoint{srv}, cli[:]...) {
			if d, ok := e.NextDeadline(); ok && d < next {
				next = d
			}
		}
		now = max(now, next)
		for _, e := range append([]*Endpoint{srv}, cli[:]...) {
			e.HandleTimeout(now)
		}
		flush()
	}
	for i := range cli {
		if cli[i], err = NewEndpoint(cliCfg); err != nil {
			t.Fatal(err)
		}
		addr[i] = netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 2, 0, byte(i)}), 5000)
		if h[i], err = cli[i].Connect(now, serverAddr); err != nil {
			t.Fatal(err)
		}
	}
	for range 50 {
		advance() // handshakes and validation (D25)
	}
	want := map[string]int{}
	for i := range cli {
		for m := range msgs {
			data := bytes.Repeat([]byte{byte(i), byte(m)}, size/2)
			copy(data, fmt.Sprintf("client %d msg %02d", i, m))
			want[string(data[:16])] = 1
			if err := cli[i].Send(now, h[i], m%2, data, true); err != nil {
				t.Fatal(err)
			}
		}
	}
	flush()
	start := now
	for len(got) < len(want) && now.Sub(start) < time.Minute {
		advance()
	}
	var dropped uint64
	for _, c := range srv.conns {
		dropped += c.stats.Dropped[DropMemory]
	}
	t.Logf("%d messages of %d bytes at payload MTU 32 through an endpoint budget of %d (one needs %d): %v, held at most %d, %d packets refused",
		len(got), size, limit, need, now.Sub(start), maxHeld, dropped)
	if len(got) != len(want) {
		t.Fatalf("delivered %d of %d messages in %v: stalled", len(got), len(want), now.Sub(start))
	}
	for k, n := range got {
		if n != 1 || want[k] != 1 {
			t.Errorf("message %q delivered %d times", k, n)
		}
	}
	if maxHeld > limit {
		t.Errorf("the endpoint held %d, above its limit %d", maxHeld, limit)
	}
	if dropped == 0 {
		t.Error("no packet refused: the budget did not bind")
	}
}

// TestDropTooLarge checks that a datagram longer than any transport
// carries (D20, D21) is dropped and counted as DropTooLarge, against its
// connection if it has one, before it is handled.
func TestDropTooLarge(t *testing.T) {
	tc := newTestEndpoint(t, Config{Role: Server})
	big := make([]byte, DefaultMaxDatagram-1) // with the channel id, one byte over
	tc.recv(chControl, append([]byte(litConnect), big[len(litConnect):]...))
	if got := tc.ep.Dropped()[DropTooLarge]; got != 1 {
		t.Errorf("stray DropTooLarge = %d, want 1", got)
	}
	h, _ := tc.connectServer()
	tc.recv(0, big)
	st, _ := tc.ep.Stats(h)
	if st.Dropped[DropTooLarge] != 1 || st.OpenChannels != 0 || st.BytesReceived > 1000 {
		t.Errorf("DropTooLarge %d, %d channels, %d bytes counted received", st.Dropped[DropTooLarge], st.OpenChannels, st.BytesReceived)
	}
	tc.recv(0, big[:DefaultMaxDatagram-2]) // the largest UDP payload: handled
	if st, _ = tc.ep.Stats(h); st.Dropped[DropTooLarge] != 1 || st.PacketsReceived < 3 {
		t.Errorf("the largest datagram: DropTooLarge %d, %d packets received", st.Dropped[DropTooLarge], st.PacketsReceived)
	}

	stream := newTestEndpoint(t, Config{Role: Server, Transport: Stream, MaxMessageSize: 8 << 10})
	stream.recv(chControl, make([]byte, stream.ep.cfg.MaxPacketSize-1))
	if got := stream.ep.Dropped()[DropTooLarge]; got != 1 {
		t.Errorf("stream: DropTooLarge = %d, want 1 for a packet above MaxPacketSize (D20)", got)
	}
}
