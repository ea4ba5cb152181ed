package fastnet

import (
	"errors"
	"math"
	"net/netip"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// D25, N33: a refusal goes to an address not yet validated, so its reason
// is cut to keep the answer within 3 times the "connect?".
func TestRefusalWithinAmplification(t *testing.T) {
	cfg := serverConfig()
	cfg.Accept = func(netip.AddrPort) error { return errors.New(strings.Repeat("no entry for you ", 30)) }
	tc := newTestEndpoint(t, cfg)
	tc.recvControl(control{kind: ctlConnect})
	if len(tc.sent) != 1 {
		t.Fatalf("%d packets sent, want one abort", len(tc.sent))
	}
	p := tc.sent[0]
	if got, limit := 2+len(p.payload), 3*(2+len("connect?")); got > limit {
		t.Fatalf("abort of %d bytes for a connect? of 10, above %d", got, limit)
	}
	m, err := parseControl(p.payload)
	if err != nil || m.kind != ctlAbort || !strings.HasPrefix("no entry for you ", m.text[:min(len(m.text), 17)]) {
		t.Fatalf("abort %q (%v)", p.payload, err)
	}
}

// N33: over a Stream transport the transport's handshake proved the
// address: the server reports the connection at once.
func TestStreamNeedsNoValidation(t *testing.T) {
	cfg := serverConfig()
	cfg.Transport = Stream
	tc := newTestEndpoint(t, cfg)
	tc.recvControl(control{kind: ctlConnect})
	tc.wantEvent("connected at once", EventConnected)
}

// N35: "connected", "abort" and "disconnect" go before query answers, and
// a query flood that fills the answer queue does not crowd them out.
func TestOnceRepliesSurviveQueryFlood(t *testing.T) {
	tc := newTestEndpoint(t, serverConfig())
	stranger := netip.MustParseAddrPort("10.7.7.7:7")
	for range 2 * maxCtlOut {
		tc.ep.HandleDatagram(tc.now, stranger, append(appendPacketHeader(nil, chControl), "query:fastnet"...))
	}
	tc.recvControl(control{kind: ctlConnect})
	m, err := parseControl(tc.sent[0].payload)
	if err != nil || m.kind != ctlConnected || tc.sent[0].to != clientAddr {
		t.Fatalf("first packet after the flood: %q to %v, want connected", tc.sent[0].payload, tc.sent[0].to)
	}
	if answers := len(tc.sent) - 1; answers > maxCtlOut+2 {
		t.Fatalf("%d packets queued for a flood, above the bound %d", answers, maxCtlOut)
	}
}

// Handles wrap after 2^32 connections without naming two live ones alike.
func TestHandlesSkipLiveOnWrap(t *testing.T) {
	tc := newTestEndpoint(t, clientConfig())
	first, err := tc.ep.Connect(tc.now, serverAddr)
	if err != nil {
		t.Fatal(err)
	}
	// 32 bits are not the end (N143): a flood of forged "connect?" got
	// there in hours.
	tc.ep.nextHandle = math.MaxUint32
	past, err := tc.ep.Connect(tc.now, netip.MustParseAddrPort("10.0.0.8:1"))
	if err != nil {
		t.Fatal(err)
	}
	if past != math.MaxUint32+1 {
		t.Errorf("handle %d after 2^32-1, want 2^32", past)
	}
	tc.ep.nextHandle = math.MaxUint64
	second, err := tc.ep.Connect(tc.now, netip.MustParseAddrPort("10.0.0.9:1"))
	if err != nil {
		t.Fatal(err)
	}
	if second == first || second == 0 {
		t.Fatalf("handle %d after wrap, with %d live", second, first)
	}
	// The event, with a handle of 64 bits, is as large as it was with
	// one of 32 (its fields of one byte and ID first).
	if want := uintptr(136); unsafe.Sizeof(uintptr(0)) == 8 && unsafe.Sizeof(Event{}) != want {
		t.Errorf("Event takes %d bytes, want %d", unsafe.Sizeof(Event{}), want)
	}
}

// N36: a duration of math.MaxInt64 means "never": no deadline in the past,
// no connection timed out at once, no timer loop spinning.
func TestHugeDurationsMeanNever(t *testing.T) {
	cfg := serverConfig()
	cfg.Timeout = math.MaxInt64
	cfg.CoalesceInterval = math.MaxInt64
	cfg.MaxResendInterval = math.MaxInt64
	cfg.Linger = math.MaxInt64
	cfg.ValidationTimeout = math.MaxInt64
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	tc := newTestEndpoint(t, cfg)
	h, _ := tc.connectServer()
	// An unreliable fragment that never completes: its MCI deadline is
	// "never".
	tc.recv(1, []byte{0x02, 0, 0, 0, 0, 0, 0, 0x00, 0x20})
	tc.advance(time.Hour)
	if _, ok := tc.ep.Stats(h); !ok {
		t.Fatal("connection timed out with Timeout math.MaxInt64")
	}
	for _, ev := range tc.evs {
		if ev.Kind == EventDisconnected {
			t.Fatalf("disconnected: %v", ev.Err)
		}
	}
}
