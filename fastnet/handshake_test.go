package fastnet

import (
	"errors"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"
)

func clientConfig() Config { return Config{Role: Client, MTU: MTUConfig{Disabled: true}} }
func serverConfig() Config { return Config{Role: Server, MTU: MTUConfig{Disabled: true}} }

// D15: "A server answers queries from anyone, always", before and after a
// connection exists, and however often.
func TestServerAnswersQueries(t *testing.T) {
	tc := newTestEndpoint(t, serverConfig())
	stranger := netip.MustParseAddrPort("[2001:db8::9]:1234")
	for i := 0; i < 3; i++ {
		tc.recvFrom(stranger, chControl, []byte("query:fastnet"))
		tc.wantControl("fastnet query from a stranger", control{kind: ctlFastnetYes})
		tc.recvFrom(stranger, chControl, []byte("query:version"))
		tc.wantControl("version query from a stranger", control{kind: ctlVersion, text: "1.0"})
	}
	tc.connectServer()
	tc.skipChannel(chHeartbeat)
	tc.recvControl(control{kind: ctlQueryVersion})
	if len(tc.sent) == 0 || tc.sent[0].to != clientAddr {
		t.Fatalf("answer missing or sent elsewhere: %+v", tc.sent)
	}
	tc.wantControl("version query once connected", control{kind: ctlVersion, text: "1.0"})
}

// D15: the client sends both queries every 200 ms until answered, then
// "connect?" every 200 ms, and gives up after 5 s.
func TestClientHandshakeRetriesAndTimesOut(t *testing.T) {
	tc := newTestEndpoint(t, clientConfig())
	h, err := tc.ep.Connect(tc.now, serverAddr)
	if err != nil {
		t.Fatal(err)
	}
	tc.drain()
	tc.wantControl("first query", control{kind: ctlQueryFastnet})
	tc.wantControl("first query", control{kind: ctlQueryVersion})
	tc.advance(199 * time.Millisecond)
	tc.wantNoPacket("before 200 ms")
	tc.advance(time.Millisecond)
	tc.wantControl("retry at 200 ms", control{kind: ctlQueryFastnet})
	tc.wantControl("retry at 200 ms", control{kind: ctlQueryVersion})
	// Only the fastnet answer comes: the version query alone is retried.
	tc.recvControl(control{kind: ctlFastnetYes})
	tc.advance(200 * time.Millisecond)
	tc.wantControl("version retried alone", control{kind: ctlQueryVersion})
	tc.wantNoPacket("fastnet query not retried once answered")
	tc.recvControl(control{kind: ctlVersion, text: "1.0"})
	tc.wantControl("connect? once both answered", control{kind: ctlConnect})
	tc.advance(200 * time.Millisecond)
	tc.wantControl("connect? retried", control{kind: ctlConnect})
	tc.advance(5 * time.Second)
	ev := tc.wantEvent("handshake timeout", EventConnectFailed)
	if !errors.Is(ev.Err, ErrTimeout) || ev.Conn != h {
		t.Fatalf("ConnectFailed err %v conn %d", ev.Err, ev.Conn)
	}
	if tc.ep.NumConns() != 0 {
		t.Fatal("failed connection still held")
	}
	if _, ok := tc.ep.NextDeadline(); ok {
		t.Fatal("deadline still armed after the connection failed")
	}
}

// D15: the connect timeout covers the whole handshake, queries included.
func TestClientTimeoutCoversQueries(t *testing.T) {
	tc := newTestEndpoint(t, clientConfig())
	tc.ep.Connect(tc.now, serverAddr)
	tc.advance(4999 * time.Millisecond)
	tc.wantNoEvent("before 5 s")
	tc.advance(time.Millisecond)
	tc.wantEvent("at 5 s", EventConnectFailed)
}

// D15: another version means "incompatible".
func TestClientIncompatibleVersion(t *testing.T) {
	tc := newTestEndpoint(t, clientConfig())
	tc.ep.Connect(tc.now, serverAddr)
	tc.drain()
	tc.recvControl(control{kind: ctlFastnetYes})
	tc.recvControl(control{kind: ctlVersion, text: "2.0"})
	ev := tc.wantEvent("version 2.0", EventConnectFailed)
	var ie *IncompatibleError
	if !errors.Is(ev.Err, ErrIncompatible) || !errors.As(ev.Err, &ie) || ie.Version != "2.0" {
		t.Fatalf("err = %v", ev.Err)
	}
}

// Spec "Connection Establishment": "abort" followed by a UTF-8 reason
// refuses; the client reports the reason.
func TestClientRefused(t *testing.T) {
	tc := newTestEndpoint(t, clientConfig())
	tc.ep.Connect(tc.now, serverAddr)
	tc.drain()
	tc.recvControl(control{kind: ctlFastnetYes})
	tc.recvControl(control{kind: ctlVersion, text: "1.0"})
	tc.recvControl(control{kind: ctlAbort, text: "banned ☹"})
	ev := tc.wantEvent("abort", EventRefused)
	var re *RefusedError
	if !errors.As(ev.Err, &re) || re.Reason != "banned ☹" || !errors.Is(ev.Err, ErrRefused) {
		t.Fatalf("err = %v", ev.Err)
	}
}

// D15: the client ignores everything but the handshake's replies until it
// is connected.
func TestClientIgnoresDataBeforeConnected(t *testing.T) {
	tc := newTestEndpoint(t, clientConfig())
	tc.ep.Connect(tc.now, serverAddr)
	tc.drain()
	tc.sent = nil
	tc.recv(0, []byte{3, 0, 0, 0, 0, 0, 0, 1, 0, 0xfe})
	tc.recv(chHeartbeat, []byte{0, 1})
	tc.recvControl(control{kind: ctlConnected, id: 5}) // before the queries are answered
	tc.wantNoPacket("no answer to data before connecting")
	tc.wantNoEvent("no event")
}

// D15: a client connects, and both sides see the same ID.
func TestClientConnects(t *testing.T) {
	tc := newTestEndpoint(t, clientConfig())
	h := tc.connectClient(0xabcdef01)
	id, ok := tc.ep.ConnID(h)
	if !ok || id != 0xabcdef01 {
		t.Fatalf("ConnID = %x, %v", id, ok)
	}
	// D16: the first heartbeat goes out as soon as the connection is
	// established; the client originates negative values, from one
	// drawn at random (N156).
	tc.wantPacket("first heartbeat", chHeartbeat, appendHeartbeat(nil, clientBeat(tc, h, 0)))
}

// clientBeat returns the value of the k-th heartbeat (from 0) that client
// connection h originates: its values count down from the first, drawn at
// random (N156), wrapping from -32768 to -1.
func clientBeat(tc *testEndpoint, h Handle, k int) int16 {
	c := tc.ep.conns[h]
	if c == nil || c.hb.sentN == 0 || c.hb.sent[0].v >= 0 {
		tc.t.Fatalf("no client heartbeat originated yet")
	}
	return int16(-1 - (int(-1-c.hb.sent[0].v)+k)%32768)
}

// N156: a client's first heartbeat value is drawn from Config.Rand, so
// that a forger cannot guess what the server echoes.
func TestClientBeatsStartAtRandom(t *testing.T) {
	seen := map[int16]bool{}
	for seed := range uint64(8) {
		cfg := clientConfig()
		cfg.Rand = rand.New(rand.NewPCG(seed, 1))
		tc := newTestEndpoint(t, cfg)
		h := tc.connectClient(1)
		v := clientBeat(tc, h, 0)
		tc.wantPacket("first heartbeat", chHeartbeat, appendHeartbeat(nil, v))
		seen[v] = true
	}
	if len(seen) < 7 {
		t.Fatalf("8 clients started their heartbeats at %d values", len(seen))
	}
}

// D15: a repeated "connect?" from a connected address gets the same ID and
// nothing else.
func TestServerRepeatedConnect(t *testing.T) {
	tc := newTestEndpoint(t, serverConfig())
	_, id := tc.connectServer()
	tc.skipChannel(chHeartbeat)
	tc.recvControl(control{kind: ctlConnect})
	tc.wantControl("same id", control{kind: ctlConnected, id: id})
	tc.wantNoEvent("no second Connected")
	if tc.ep.NumConns() != 1 {
		t.Fatalf("%d connections", tc.ep.NumConns())
	}
}

// Spec: the ID "must be unique among all currently-established
// connections".
func TestServerIDsUnique(t *testing.T) {
	tc := newTestEndpoint(t, serverConfig())
	seen := map[uint32]bool{}
	for i := 0; i < 500; i++ {
		from := netip.AddrPortFrom(netip.MustParseAddr("10.1.0.1"), uint16(1000+i))
		tc.recvFrom(from, chControl, []byte("connect?"))
		tc.echoChallengeFrom(from)
		ev := tc.wantEvent("connected", EventConnected)
		if seen[ev.ID] || ev.ID == 0 {
			t.Fatalf("ID %d reused or zero", ev.ID)
		}
		seen[ev.ID] = true
	}
}

// D15: the accept hook refuses with its reason; the connection limit
// refuses with "server full".
func TestServerRefuses(t *testing.T) {
	cfg := serverConfig()
	cfg.MaxConnections = 1
	banned := netip.MustParseAddrPort("10.9.9.9:1")
	cfg.Accept = func(a netip.AddrPort) error {
		if a == banned {
			return errors.New("you are banned")
		}
		return nil
	}
	tc := newTestEndpoint(t, cfg)
	tc.recvFrom(banned, chControl, []byte("connect?"))
	tc.wantControl("hook refusal", control{kind: ctlAbort, text: "you are banned"})
	// N67: the application hears of each refusal.
	wantRejected := func(what string, addr netip.AddrPort, reason string) {
		t.Helper()
		ev := tc.wantEvent(what, EventRejected)
		var re *RefusedError
		if ev.Addr != addr || ev.Conn != 0 || !errors.As(ev.Err, &re) || re.Reason != reason {
			t.Fatalf("%s: event %+v, want %v refused with %q", what, ev, addr, reason)
		}
	}
	wantRejected("hook refusal", banned, "you are banned")
	tc.wantNoEvent("refused: nothing more")
	tc.connectServer()
	tc.skipChannel(chHeartbeat)
	late := netip.MustParseAddrPort("10.0.0.3:1")
	tc.recvFrom(late, chControl, []byte("connect?"))
	tc.wantControl("limit", control{kind: ctlAbort, text: "server full"})
	wantRejected("limit", late, "server full")
	if got := tc.ep.EndpointStats().ConnectionsRefused; got != 2 {
		t.Errorf("ConnectionsRefused = %d, want 2", got)
	}
}

// Spec: "Servers must ignore any packets not involved in an active
// connection."
func TestServerIgnoresStrangers(t *testing.T) {
	tc := newTestEndpoint(t, serverConfig())
	tc.recv(0, []byte{3, 0, 0, 0, 0, 0, 0, 1, 0, 0xfe})
	tc.recv(chAck, []byte{0, 0, 0, 0, 0})
	tc.recv(chHeartbeat, []byte{0xff, 0xff})
	tc.wantNoPacket("strangers get nothing")
	tc.wantNoEvent("strangers make no event")
	if d := tc.ep.Dropped(); d[DropNotConnected] != 3 {
		t.Fatalf("dropped %v", d)
	}
}

// D18: "disconnect" + reason from the peer is reported at once as closed by
// peer, and nothing is sent back.
func TestPeerDisconnect(t *testing.T) {
	tc := newTestEndpoint(t, serverConfig())
	h, _ := tc.connectServer()
	tc.sent = nil
	tc.recvControl(control{kind: ctlDisconnect, text: "gone home"})
	ev := tc.wantEvent("disconnect", EventDisconnected)
	var pe *PeerClosedError
	if ev.Conn != h || !errors.As(ev.Err, &pe) || pe.Reason != "gone home" {
		t.Fatalf("event %+v", ev)
	}
	tc.wantNoPacket("nothing sent back")
	// Spec: the server then rejects packets from this client.
	tc.recv(chHeartbeat, []byte{0xff, 0xff})
	tc.wantNoPacket("no echo after disconnect")
}

// D18: Close with nothing in flight sends "disconnect" with the reason and
// reports a local close.
func TestCloseSendsDisconnect(t *testing.T) {
	tc := newTestEndpoint(t, clientConfig())
	h := tc.connectClient(7)
	tc.sent = nil
	if err := tc.ep.Close(tc.now, h, "quit"); err != nil {
		t.Fatal(err)
	}
	tc.drain()
	tc.wantControl("disconnect", control{kind: ctlDisconnect, text: "quit"})
	ev := tc.wantEvent("closed", EventDisconnected)
	if !errors.Is(ev.Err, ErrClosed) {
		t.Fatalf("err %v", ev.Err)
	}
	if err := tc.ep.Send(tc.now, h, 0, []byte("x"), true); !errors.Is(err, ErrUnknownConn) {
		t.Fatalf("Send after close: %v", err)
	}
}

// Misuse is an error that leaves the endpoint unchanged.
func TestSendErrors(t *testing.T) {
	tc := newTestEndpoint(t, clientConfig())
	h, _ := tc.ep.Connect(tc.now, serverAddr)
	tests := []struct {
		ch   int
		size int
		h    Handle
		want error
	}{
		{-1, 1, h, ErrBadChannel},
		{32768, 1, h, ErrBadChannel},
		{0, DefaultMaxMessageSize + 1, h, ErrMessageTooLarge},
		{0, 1, h + 1, ErrUnknownConn},
		{0, 1, h, ErrNotConnected},
	}
	for _, tt := range tests {
		if err := tc.ep.Send(tc.now, tt.h, tt.ch, make([]byte, tt.size), true); !errors.Is(err, tt.want) {
			t.Errorf("Send(ch %d, %d bytes) = %v, want %v", tt.ch, tt.size, err, tt.want)
		}
	}
	if _, err := tc.ep.Connect(tc.now, serverAddr); !errors.Is(err, ErrAlreadyConnected) {
		t.Errorf("second Connect to the same server = %v", err)
	}
	srv := newTestEndpoint(t, serverConfig())
	if _, err := srv.ep.Connect(srv.now, serverAddr); !errors.Is(err, ErrWrongRole) {
		t.Errorf("Connect on a server = %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"defaults client", Config{Role: Client}, true},
		{"defaults server stream", Config{Role: Server, Transport: Stream}, true},
		{"no role", Config{}, false},
		{"small packets", Config{Role: Client, MaxPacketSize: 1000}, false},
		{"huge datagram", Config{Role: Client, MaxPacketSize: 70000}, false},
		{"mtu below 32", Config{Role: Client, InitialPayloadMTU: 31}, false},
		{"window too big", Config{Role: Client, ReceiveWindow: 4199304}, false},
		{"message beyond window at the peer's MTU 32 (D9, D22)", Config{Role: Client, MaxMessageSize: 4 << 20, ReceiveWindow: 65536}, false},
		{"a bigger local MTU does not help: the peer may cut at 32", Config{Role: Client, MaxMessageSize: 4 << 20, ReceiveWindow: 65536, InitialPayloadMTU: 1200}, false},
		{"defaults grow with MaxMessageSize", Config{Role: Client, MaxMessageSize: 16 << 20}, true},
		{"message beyond channel memory", Config{Role: Client, ChannelReceiveMemory: 1 << 20}, false},
		{"queue smaller than a message", Config{Role: Client, SendQueueSize: 1000}, false},
		{"conn memory below channel", Config{Role: Client, ConnReceiveMemory: 1}, false},
		{"one holding channel (N25)", Config{Role: Client, MaxHoldingChannels: 1}, true},
		{"negative holding channels", Config{Role: Client, MaxHoldingChannels: -1}, false},
		{"stream packet too small for message", Config{Role: Client, Transport: Stream, MaxPacketSize: 5000}, false},
		{"negative linger", Config{Role: Client, Linger: -1}, false},
		{"ack repeats off", Config{Role: Client, AckRepeats: -1}, true},
		{"ack repeats 8", Config{Role: Client, AckRepeats: 8}, true},
		{"ack repeats 9", Config{Role: Client, AckRepeats: 9}, false},
		{"ack repeats -2", Config{Role: Client, AckRepeats: -2}, false},
		{"tiny timeout", Config{Role: Client, Timeout: time.Millisecond}, false},
		// N109: refused at once, before defaults computed from them.
		{"message above 1 GiB", Config{Role: Client, MaxMessageSize: 1<<30 + 1}, false},
		{"message of 2^62 bytes", Config{Role: Client, MaxMessageSize: 1 << 62}, false},
		{"stream packet of 2^50 bytes", Config{Role: Client, Transport: Stream, MaxPacketSize: 1 << 50}, false},
		{"connect retry 1 ms", Config{Role: Client, ConnectRetry: time.Millisecond}, true},
		{"connect retry below 1 ms", Config{Role: Client, ConnectRetry: time.Millisecond - 1}, false},
		{"connect retry 1 ns", Config{Role: Client, ConnectRetry: 1}, false},
	}
	for _, tt := range tests {
		err := tt.cfg.Validate()
		if (err == nil) != tt.ok {
			t.Errorf("%s: Validate() = %v", tt.name, err)
		}
	}
}
