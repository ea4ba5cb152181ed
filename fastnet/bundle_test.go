package fastnet

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fastnet-engine/fastnet/channel"
	"github.com/fastnet-engine/fastnet/coalesce"
)

// Golden vectors of the bundle format (D24): channel -6, then each inner
// packet as a big-endian u16 length and the packet, channel id included.
// Encoded from the inner packets, and cut back into them; the malformed
// ones only decode, to the inner packets before the bad length.
func TestBundleGolden(t *testing.T) {
	tests := []struct {
		name      string
		hex       string
		packets   []string // the inner packets, in hex
		malformed bool     // the bundle ends in a length that does not add up
	}{
		{"one heartbeat", "fffa0004fffe0001", []string{"fffe0001"}, false},
		{"heartbeat and query", "fffa0004fffe00010012ffff71756572793a6578743a62756e646c65",
			[]string{"fffe0001", "ffff71756572793a6578743a62756e646c65"}, false},
		{"ack of channel 1 sequence 5, echo", "fffa0007fffb00010000050004fffeffff",
			[]string{"fffb0001000005", "fffeffff"}, false},
		{"empty inner packet", "fffa0000", []string{""}, false},
		{"inner bundle (nested, refused when handled)", "fffa0004fffe00010006fffa0002fffe",
			[]string{"fffe0001", "fffa0002fffe"}, false},
		{"length past the end", "fffa0004fffe00010009fffb00", []string{"fffe0001"}, true},
		{"one stray byte", "fffa0004fffe000100", []string{"fffe0001"}, true},
		{"first length past the end", "fffa0100fffe0001", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := unhex(t, tt.hex)
			if !tt.malformed && len(tt.packets) > 0 {
				got := appendPacketHeader(nil, chBundle)
				for _, p := range tt.packets {
					got = appendBundled(got, unhex(t, p))
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("encode (-want +got):\n%s", diff)
				}
			}
			ch, p, err := parsePacket(want)
			if err != nil || ch != chBundle {
				t.Fatalf("parsePacket: channel %d, %v", ch, err)
			}
			var got []string
			malformed := false
			for len(p) > 0 {
				inner, rest, ok := cutBundle(p)
				if !ok {
					malformed = true
					break
				}
				got = append(got, hex.EncodeToString(inner))
				p = rest
			}
			if diff := cmp.Diff(tt.packets, got); diff != "" || malformed != tt.malformed {
				t.Errorf("decode (-want +got):\n%s malformed %v, want %v", diff, malformed, tt.malformed)
			}
		})
	}
}

// bundleServer returns a validated server connection whose scripted client
// asked "query:ext:bundle" and got "=yes", so that the server takes its
// bundles (D24).
func bundleServer(t *testing.T) (*testEndpoint, Handle) {
	t.Helper()
	tc := newTestEndpoint(t, Config{Role: Server, MTU: MTUConfig{Disabled: true}})
	h, _ := tc.connectServer()
	tc.recvControl(control{kind: ctlQueryBundle})
	if !tc.tookControl(ctlBundleYes) {
		t.Fatal(`server did not answer "query:ext:bundle=yes"`)
	}
	tc.sent = nil
	return tc, h
}

// tookControl consumes the first channel -1 packet of kind k sent, and
// reports whether there was one.
func (tc *testEndpoint) tookControl(k controlKind) bool {
	for i, p := range tc.sent {
		if m, err := parseControl(p.payload); p.ch == chControl && err == nil && m.kind == k {
			tc.sent = append(tc.sent[:i:i], tc.sent[i+1:]...)
			return true
		}
	}
	return false
}

// echoes returns the heartbeat values the endpoint sent, in order.
func (tc *testEndpoint) echoes() []int16 {
	var vs []int16
	for _, p := range tc.sent {
		if v, err := parseHeartbeat(p.payload); p.ch == chHeartbeat && err == nil && v < 0 {
			vs = append(vs, v)
		}
	}
	return vs
}

// Each inner packet of a bundle is handled as if it had arrived alone; a
// bad length, a nested bundle or an empty one drops what is left, counted
// (D24, N72).
func TestBundleReceive(t *testing.T) {
	hb := func(v int16) []byte { return appendHeartbeat(appendPacketHeader(nil, chHeartbeat), v) }
	cat := func(ps ...[]byte) []byte { return bytes.Join(ps, nil) }
	entry := func(p []byte) []byte { return appendBundled(nil, p) }
	tests := []struct {
		name    string
		payload []byte
		echoes  []int16
		reason  DropReason
		drops   uint64
	}{
		{"two heartbeats", cat(entry(hb(-7)), entry(hb(-8))), []int16{-7, -8}, DropBundleMalformed, 0},
		{"bad length keeps the prefix", cat(entry(hb(-7)), []byte{0, 9, 1, 2, 3}), []int16{-7}, DropBundleMalformed, 1},
		{"stray byte keeps the prefix", cat(entry(hb(-7)), []byte{0}), []int16{-7}, DropBundleMalformed, 1},
		{"empty bundle", nil, nil, DropBundleMalformed, 1},
		{"nested ends the bundle", cat(entry(hb(-7)), entry(cat(appendPacketHeader(nil, chBundle), entry(hb(-9)))), entry(hb(-8))),
			[]int16{-7}, DropBundleNested, 1},
		{"short inner packet, as alone", cat(entry(nil), entry(hb(-7))), []int16{-7}, DropShort, 1},
		{"bad heartbeat, as alone", cat(entry([]byte{0xff, 0xfe, 0}), entry(hb(-7))), []int16{-7}, DropBadControl, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc, h := bundleServer(t)
			before, _ := tc.ep.Stats(h)
			tc.recv(chBundle, tt.payload)
			if diff := cmp.Diff(tt.echoes, tc.echoes()); diff != "" {
				t.Errorf("echoes (-want +got):\n%s", diff)
			}
			st, _ := tc.ep.Stats(h)
			if got := st.Dropped[tt.reason] - before.Dropped[tt.reason]; got != tt.drops {
				t.Errorf("Dropped[%v] = %d, want %d", tt.reason, got, tt.drops)
			}
			if st.BundlesReceived != before.BundlesReceived+1 || st.PacketsReceived != before.PacketsReceived+1 {
				t.Errorf("BundlesReceived %d, PacketsReceived %d: want one more each", st.BundlesReceived-before.BundlesReceived, st.PacketsReceived-before.PacketsReceived)
			}
		})
	}
}

// A bundle from a peer never answered "=yes" is dropped whole, counted
// (D24); so is one over a Stream transport, and one from an address
// without a connection.
func TestBundleUnnegotiated(t *testing.T) {
	payload := appendBundled(nil, appendHeartbeat(appendPacketHeader(nil, chHeartbeat), -7))

	tc := newTestEndpoint(t, Config{Role: Server, MTU: MTUConfig{Disabled: true}})
	h, _ := tc.connectServer()
	tc.sent = nil
	tc.recv(chBundle, payload)
	if got := tc.echoes(); len(got) != 0 {
		t.Errorf("echoed %v of an unnegotiated bundle", got)
	}
	if st, _ := tc.ep.Stats(h); st.Dropped[DropBundleUnnegotiated] != 1 || st.BundlesReceived != 0 {
		t.Errorf("Dropped[bundle-unnegotiated] = %d, BundlesReceived %d; want 1, 0", st.Dropped[DropBundleUnnegotiated], st.BundlesReceived)
	}
	tc.recvFrom(serverAddr, chBundle, payload) // no connection there
	if got := tc.ep.Dropped()[DropBundleUnnegotiated]; got != 1 {
		t.Errorf("stray Dropped[bundle-unnegotiated] = %d, want 1", got)
	}

	for _, cfg := range []Config{{Role: Server, NoBundles: true}, {Role: Server, Transport: Stream}} {
		tc := newTestEndpoint(t, cfg)
		tc.recvControl(control{kind: ctlQueryBundle})
		tc.recvControl(control{kind: ctlBundleYes})
		tc.recv(chBundle, payload)
		if len(tc.sent) != 0 {
			t.Errorf("transport %v, NoBundles %v: sent %q", cfg.Transport, cfg.NoBundles, tc.sent[0].payload)
		}
		if d := tc.ep.Dropped(); d[DropBadControl] != 2 || d[DropBundleUnnegotiated] != 1 {
			t.Errorf("transport %v, NoBundles %v: dropped %v bad-control, %v bundle-unnegotiated; want 2, 1",
				cfg.Transport, cfg.NoBundles, d[DropBadControl], d[DropBundleUnnegotiated])
		}
	}
}

// echoProof takes the bundle of one heartbeat the endpoint sent to prove
// that its peer reads bundles, and echoes the heartbeat (N156).
func (tc *testEndpoint) echoProof() {
	tc.t.Helper()
	for i, p := range tc.sent {
		if p.ch != chBundle {
			continue
		}
		inner, rest, ok := cutBundle(p.payload)
		ch, v, err := parsePacket(inner)
		if !ok || len(rest) != 0 || err != nil || ch != chHeartbeat {
			tc.t.Fatalf("a bundle of %x, not one heartbeat", p.payload)
		}
		tc.sent = slices.Delete(tc.sent, i, i+1)
		tc.recv(chHeartbeat, v)
		return
	}
	tc.t.Fatal("no heartbeat went in a bundle")
}

// countQueries consumes the "query:ext:bundle" packets sent and counts
// them.
func (tc *testEndpoint) countQueries() int {
	n := 0
	for tc.tookControl(ctlQueryBundle) {
		n++
	}
	return n
}

// A connection asks with its first bundleAsks heartbeats, then gives up;
// an answer ends the asking (N69).
func TestBundleQueryRetries(t *testing.T) {
	tc := newTestEndpoint(t, Config{Role: Client, MTU: MTUConfig{Disabled: true}})
	tc.bundleQueries = true
	h := tc.connectClient(7)
	tc.advance(15 * time.Second)
	if n := tc.countQueries(); n != bundleAsks {
		t.Errorf("a peer that never answers was asked %d times, want %d", n, bundleAsks)
	}
	if to, _ := BundlesNegotiated(tc.ep, h); to {
		t.Error("bundles negotiated with a peer that never answered")
	}

	tc = newTestEndpoint(t, Config{Role: Client, MTU: MTUConfig{Disabled: true}})
	tc.bundleQueries = true
	h = tc.connectClient(7)
	tc.recvControl(control{kind: ctlBundleYes})
	if to, _ := BundlesNegotiated(tc.ep, h); to {
		t.Error("bundling on the answer alone, before the peer echoed a heartbeat that went in a bundle (N156)")
	}
	tc.echoProof()
	tc.advance(15 * time.Second)
	if n := tc.countQueries(); n != 1 {
		t.Errorf("a peer that answered at once was asked %d times, want 1", n)
	}
	if to, from := BundlesNegotiated(tc.ep, h); !to || from {
		t.Errorf("negotiated to %v, from %v; want true, false", to, from)
	}

	// A server asks only once the client's address is validated (D25,
	// N73).
	tc = newTestEndpoint(t, Config{Role: Server, MTU: MTUConfig{Disabled: true}})
	tc.bundleQueries = true
	tc.recvControl(control{kind: ctlConnect})
	tc.advance(300 * time.Millisecond)
	if n := tc.countQueries(); n != 0 {
		t.Errorf("server asked %d times before validation", n)
	}
	tc.echoChallenge()
	if n := tc.countQueries(); n != 1 {
		t.Errorf("server asked %d times at validation, want 1", n)
	}
}

// A server answers the query of a connection still proving its address
// within D25's budget: the answer is shorter than the query's 3 times.
func TestBundleAnswerUnvalidated(t *testing.T) {
	tc := newTestEndpoint(t, Config{Role: Server, MTU: MTUConfig{Disabled: true}})
	tc.recvControl(control{kind: ctlConnect})
	tc.sent = nil
	tc.recvControl(control{kind: ctlQueryBundle})
	if !tc.tookControl(ctlBundleYes) {
		t.Fatal("unvalidated connection's query not answered")
	}
	if n := len(appendControl(appendPacketHeader(nil, chControl), control{kind: ctlBundleYes})); n >= 3*(2+len(litQueryBundle)) {
		t.Errorf("answer of %d bytes, not under 3 times the query", n)
	}
	if w := tc.ep.ValidationStats().WithheldPackets; w != 0 {
		t.Errorf("%d packets withheld", w)
	}
}

// roundTrips runs n request/reply round trips of small reliable messages
// over a lossless pair whose application answers as soon as it reads a
// message, before its endpoint's next transmit, and returns the datagrams
// they took.
func roundTrips(t *testing.T, cfg Config, n int) int {
	t.Helper()
	p := newPair(t, cfg, cfg)
	p.advance(3 * time.Second) // negotiated (N69)
	msg := []byte("ping")
	xfer := func(from, to *Endpoint, addr netip.AddrPort) int {
		d := 0
		for {
			tr, ok := from.PollTransmit(p.now, p.buf)
			if !ok {
				return d
			}
			d++
			to.HandleDatagram(p.now, addr, p.buf[:tr.N])
		}
	}
	read := func(ep *Endpoint) int {
		m := 0
		for ev, ok := ep.PollEvent(); ok; ev, ok = ep.PollEvent() {
			if ev.Kind == EventMessage {
				m++
			}
		}
		return m
	}
	total := 0
	if err := p.cli.Send(p.now, p.ch, 1, msg, true); err != nil {
		t.Fatal(err)
	}
	for range n {
		total += xfer(p.cli, p.srv, clientAddr)
		if read(p.srv) != 1 {
			t.Fatal("request not delivered")
		}
		p.srv.Send(p.now, p.sh, 1, msg, true)
		total += xfer(p.srv, p.cli, serverAddr)
		if read(p.cli) != 1 {
			t.Fatal("reply not delivered")
		}
		p.cli.Send(p.now, p.ch, 1, msg, true)
	}
	return total
}

// With bundles, a reply carries the ack of the request it answers and a
// request the ack of the reply before: 2 datagrams a round trip instead of
// 4, when the application answers before the endpoint transmits (N74).
func TestBundleRoundTrip(t *testing.T) {
	cfg := Config{InitialPayloadMTU: 1200, MTU: MTUConfig{Disabled: true}}
	with := roundTrips(t, cfg, 20)
	cfg.NoBundles = true
	without := roundTrips(t, cfg, 20)
	// Without, the first request has no ack to carry: 4 a round trip
	// but the first.
	if with != 2*20 || without != 4*20-1 {
		t.Errorf("20 round trips took %d datagrams with bundles, %d without; want 40, 79", with, without)
	}
}

// A bundle never exceeds the payload MTU + 2, carries no packet of its
// sender's MTU estimation, and a packet that did not fit goes in the next
// datagram: every message arrives (N70, N71).
func TestBundleLimits(t *testing.T) {
	for _, mtuOn := range []bool{false, true} {
		cfg := Config{InitialPayloadMTU: 100, MTU: MTUConfig{Disabled: !mtuOn}}
		p := newPair(t, cfg, cfg)
		p.keep = false
		bundles := 0
		p.drop = func(from Role, b []byte) bool {
			ch, payload, _ := parsePacket(b)
			if ch != chBundle {
				return false
			}
			bundles++
			ep := p.cli
			own := chMTUClient
			if from == Server {
				ep, own = p.srv, chMTUServer
			}
			h := p.ch
			if from == Server {
				h = p.sh
			}
			if st, _ := ep.Stats(h); len(b) > st.PayloadMTU+2 {
				t.Errorf("%v sent a bundle of %d bytes at payload MTU %d", from, len(b), st.PayloadMTU)
			}
			for len(payload) > 0 {
				inner, rest, ok := cutBundle(payload)
				if !ok {
					t.Fatalf("%v sent a malformed bundle %x", from, b)
				}
				if ich, _, _ := parsePacket(inner); ich == own || ich == chBundle {
					t.Errorf("%v bundled a packet of channel %d", from, ich)
				}
				payload = rest
			}
			return false
		}
		p.advance(2 * time.Second)
		sent := 0
		for i := range 400 {
			for j := range 5 {
				if p.cli.Send(p.now, p.ch, j, make([]byte, (i*7+j*13)%90), j%2 == 0) == nil {
					sent++
				}
				if p.srv.Send(p.now, p.sh, j, make([]byte, (i*11+j)%40), true) == nil {
					sent++
				}
			}
			p.flush()
			p.advance(5 * time.Millisecond)
		}
		p.advance(5 * time.Second)
		if bundles == 0 || p.srvMsgs+p.cliMsgs != sent {
			t.Errorf("MTU estimation %v: %d bundles, %d of %d messages delivered", mtuOn, bundles, p.srvMsgs+p.cliMsgs, sent)
		}
	}
}

// The digests of the whole messages of a bundle are computed together
// before its packets are handled (N86), and each is still compared with
// its message's checksum: a bundle of reliable messages on 40 channels,
// one of them with a checksum that does not match, delivers the other 39
// and drops that one as corrupt, unacked, as it would alone (D3).
func TestBundleChecksums(t *testing.T) {
	tc, h := bundleServer(t)
	before, _ := tc.ep.Stats(h)
	var payload []byte
	const bad = 17
	for ch := int16(1); ch <= 40; ch++ {
		msg := bytes.Repeat([]byte{byte(ch)}, 16+int(ch)*3) // every one an MD5
		enc := coalesce.AppendMessage(nil, msg, true)
		if ch == bad {
			enc[len(enc)-1] ^= 0x40
		}
		payload = appendBundled(payload, append(appendPacketHeader(nil, ch), dataPacket(true, true, 0, 1, enc)...))
	}
	tc.recv(chBundle, payload)
	got := map[int16]bool{}
	for _, ev := range tc.evs {
		if ev.Kind != EventMessage {
			continue
		}
		ch := int16(ev.Channel)
		if want := bytes.Repeat([]byte{byte(ch)}, 16+int(ch)*3); !bytes.Equal(ev.Data, want) {
			t.Errorf("channel %d: delivered %x", ch, ev.Data)
		}
		got[ch] = true
	}
	if len(got) != 39 || got[bad] {
		t.Errorf("delivered on %d channels (channel %d: %v), want the 39 good ones", len(got), bad, got[bad])
	}
	st, _ := tc.ep.Stats(h)
	if n := st.Dropped[DropMalformedMessage] - before.Dropped[DropMalformedMessage]; n != 1 {
		t.Errorf("Dropped[malformed-message] grew by %d, want 1", n)
	}
}

// A bundle's runs of whole messages are taken by the receiver of their
// channel at once (N101): consecutive packets of one channel only, a run
// ending at a packet of another channel, at one that does not carry a
// message whole with an MD5 checksum, and at one the receiver would not
// hand over at once. Each bundle is handled by an endpoint taking runs
// and by one that does not, and both must deliver the same messages,
// send the same packets and count the same; taken is how many packets
// the first took in runs.
func TestBundleRuns(t *testing.T) {
	type pkt struct {
		ch        int16
		seq, rel  channel.Seq
		reliable  bool
		n         int  // payload bytes; 15 or fewer: no MD5 (D3)
		cut, flip bool // the message's first packet only; its checksum broken
	}
	unrel := func(ch int16, seq channel.Seq) pkt { return pkt{ch: ch, seq: seq, n: 20 + int(seq)} }
	rel := func(ch int16, seq, r channel.Seq) pkt {
		return pkt{ch: ch, seq: seq, rel: r, reliable: true, n: 20 + int(seq)}
	}
	with := func(p pkt, f func(*pkt)) pkt { f(&p); return p }
	hb := appendHeartbeat(appendPacketHeader(nil, chHeartbeat), -7)
	tests := []struct {
		name  string
		pkts  []pkt  // an entry on channel -1 is a heartbeat
		taken uint64 // the first packet of a channel makes its receiver, never in a run
	}{
		{"one channel", []pkt{unrel(1, 0), unrel(1, 1), unrel(1, 2), unrel(1, 3)}, 3},
		{"two channels, numbers running on", []pkt{unrel(1, 0), unrel(1, 1), unrel(2, 2), unrel(2, 3)}, 2},
		{"two channels from their starts", []pkt{unrel(1, 0), unrel(1, 1), unrel(2, 0), unrel(2, 1)}, 2},
		{"channels alternating", []pkt{unrel(1, 0), unrel(2, 1), unrel(1, 1), unrel(2, 2)}, 2},
		{"a short message between", []pkt{unrel(1, 0), unrel(1, 1), with(unrel(1, 2), func(p *pkt) { p.n = 10 }), unrel(1, 3), unrel(1, 4)}, 3},
		{"a message begun between", []pkt{unrel(1, 0), unrel(1, 1), with(unrel(1, 2), func(p *pkt) { p.cut = true }), unrel(1, 3), unrel(1, 4)}, 2},
		{"a heartbeat between", []pkt{unrel(1, 0), unrel(1, 1), {ch: -1}, unrel(1, 2), unrel(1, 3)}, 3},
		{"a duplicate between", []pkt{unrel(1, 0), unrel(1, 1), unrel(1, 1), unrel(1, 2)}, 2},
		{"reliable, one broken", []pkt{rel(1, 0, 1), rel(1, 1, 2), with(rel(1, 2, 3), func(p *pkt) { p.flip = true }), rel(1, 3, 4)}, 1},
		{"reliable, one ahead", []pkt{rel(1, 0, 1), rel(1, 2, 3), rel(1, 1, 2), rel(1, 3, 4)}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var payload []byte
			for _, p := range tt.pkts {
				if p.ch < 0 {
					payload = appendBundled(payload, hb)
					continue
				}
				enc := coalesce.AppendMessage(nil, bytes.Repeat([]byte{byte(p.seq)}, p.n), p.reliable)
				if p.flip {
					enc[len(enc)-1] ^= 1
				}
				if p.cut {
					enc = enc[:len(enc)/2]
				}
				payload = appendBundled(payload, append(appendPacketHeader(nil, p.ch), dataPacket(p.reliable, true, p.seq, p.rel, enc)...))
			}
			type result struct {
				Evs, Sent []string
				Stats     Stats
			}
			var got [2]result
			for i := range got {
				tc, h := bundleServer(t)
				tc.ep.noRuns = i == 1
				tc.evs = nil
				tc.recv(chBundle, payload)
				tc.advance(time.Second) // the acks go
				for _, ev := range tc.evs {
					got[i].Evs = append(got[i].Evs, fmt.Sprintf("%v channel %d reliable %v %x", ev.Kind, ev.Channel, ev.Reliable, ev.Data))
				}
				for _, p := range tc.sent {
					got[i].Sent = append(got[i].Sent, fmt.Sprintf("channel %d %x", p.ch, p.payload))
				}
				got[i].Stats, _ = tc.ep.Stats(h)
				if i == 0 && tc.ep.runTaken != tt.taken {
					t.Errorf("taken in runs: %d packets, want %d", tc.ep.runTaken, tt.taken)
				}
			}
			if diff := cmp.Diff(got[1], got[0]); diff != "" {
				t.Errorf("with runs and without (-without +with):\n%s", diff)
			}
		})
	}
}

// A connection still proving its address holds the messages it completes
// (D25), charged to its budget: a bundle's whole messages are then taken
// one at a time, each one's memory test seeing those held before it, and
// the connection holds, acks and drops exactly what it does on an
// endpoint taking no runs (N101).
func TestBundleRunsUnvalidated(t *testing.T) {
	var payload []byte
	for i := range 40 {
		enc := coalesce.AppendMessage(nil, bytes.Repeat([]byte{byte(i)}, 100), true)
		pkt := dataPacket(true, true, channel.Seq(i), channel.Seq(i+1), enc)
		payload = appendBundled(payload, append(appendPacketHeader(nil, 1), pkt...))
	}
	for _, limit := range []int{4000, 6000, 8000, 1 << 20} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			var got [2]string
			for i := range got {
				tc := newTestEndpoint(t, Config{Role: Server, MTU: MTUConfig{Disabled: true}, UnvalidatedReceiveMemory: limit})
				tc.recvControl(control{kind: ctlConnect})
				tc.recvControl(control{kind: ctlQueryBundle})
				tc.ep.noRuns = i == 1
				tc.recv(chBundle, payload)
				c := tc.ep.lastConn
				if c == nil || !c.unvalidated {
					t.Fatal("setup: no unvalidated connection")
				}
				acks := c.pendingAcks()
				for _, p := range tc.sent {
					if p.ch == chAck {
						acks += len(p.payload) / channel.AckLen
					}
				}
				got[i] = fmt.Sprintf("held %d (%d bytes, %d in all), acks %d, dropped %v", len(c.held), c.heldCharge, c.recvBudget.Used, acks, c.stats.Dropped)
			}
			if got[0] != got[1] {
				t.Errorf("with runs: %s\nwithout:   %s", got[0], got[1])
			}
		})
	}
}

// A run of reliable whole messages queues an ack of each as handleParsed
// does one at a time (N101): with the acks waiting near maxPendingAcks,
// and their array full or with room for some or all of the run, the same
// acks wait with runs and without.
func TestBundleRunAcksQueued(t *testing.T) {
	var payload []byte
	for s := range channel.Seq(6) {
		enc := coalesce.AppendMessage(nil, bytes.Repeat([]byte{byte(s)}, 20), true)
		payload = appendBundled(payload, append(appendPacketHeader(nil, 1), dataPacket(true, true, s, s+1, enc)...))
	}
	for _, pending := range []int{0, 7, maxPendingAcks - 10, maxPendingAcks - 4, maxPendingAcks - 1} {
		for _, room := range []int{0, 4, 5, 6, 100} {
			var got [2][]channel.Ack
			for i := range got {
				tc, h := bundleServer(t)
				tc.ep.noRuns = i == 1
				c := tc.ep.conns[h]
				acks := make([]channel.Ack, pending+1, pending+1+room)
				for j := range acks {
					acks[j] = channel.Ack{Channel: 2, Seq: channel.Seq(j % 1000)}
				}
				c.acks, c.acksHead = acks, 1 // one already sent
				// Not drained: the acks would go.
				tc.ep.HandleDatagram(tc.now, tc.peer, append(appendPacketHeader(nil, chBundle), payload...))
				got[i] = slices.Clone(c.acks[c.acksHead:])
				if i == 0 && tc.ep.runTaken != 5 {
					t.Fatalf("pending %d, room %d: taken in runs: %d packets, want 5", pending, room, tc.ep.runTaken)
				}
			}
			if want := min(pending+6, maxPendingAcks); len(got[1]) != want {
				t.Errorf("pending %d, room %d: %d acks wait without runs, want %d", pending, room, len(got[1]), want)
			}
			if !slices.Equal(got[0], got[1]) {
				t.Errorf("pending %d, room %d: with runs %d acks wait, ending %v; without %d, ending %v",
					pending, room, len(got[0]), got[0][max(0, len(got[0])-7):], len(got[1]), got[1][max(0, len(got[1])-7):])
			}
		}
	}
}
