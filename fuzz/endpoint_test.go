package fuzz

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/fastnet"
)

// FuzzEndpoint feeds a server and a client endpoint arbitrary sequences of
// datagrams and time steps (D23): no input may panic, stall, or make the
// receive memory pass its limits.
//
// The input is a sequence of records: one byte op, then for op&3 == 0 a
// 2-byte length and that many datagram bytes from one of four addresses
// (op>>2 & 3); op&3 == 1 advances time by op>>2 milliseconds times 7;
// op&3 == 2 sends a message; op&3 == 3 closes.
func FuzzEndpoint(f *testing.F) {
	f.Add([]byte("\x00\x00\x0a\xff\xffconnect?"))
	f.Add([]byte("\x00\x00\x0f\xff\xffquery:fastnet\x00\x00\x0f\xff\xffquery:version"))
	f.Add([]byte("\x00\x00\x0a\xff\xffconnect?\x00\x00\x0c\x00\x00\x03\x00\x00\x00\x00\x00\x00\x01\x00\xfe\x01\xff\x02"))
	f.Add([]byte("\x00\x00\x0a\xff\xffconnect?\x00\x00\x07\xff\xfb\x00\x00\x00\x00\x00\x01\x80\x00\x00\x04\xff\xfe\xff\xff"))
	f.Add([]byte("\x00\x00\x0a\xff\xffconnect?\x00\x00\x0f\x00\x01\x01\x00\x00\x00\x00\x00\x01\x43\x00\x00\x00\xff\xff"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, role := range []fastnet.Role{fastnet.Server, fastnet.Client} {
			runEndpoint(t, role, data)
		}
	})
}

var fuzzAddrs = [4]netip.AddrPort{
	netip.MustParseAddrPort("10.0.0.1:1"),
	netip.MustParseAddrPort("10.0.0.2:2"),
	netip.MustParseAddrPort("[2001:db8::1]:3"),
	netip.MustParseAddrPort("10.0.0.4:4"),
}

func runEndpoint(t *testing.T, role fastnet.Role, data []byte) {
	cfg := fastnet.Config{
		Role:                 role,
		MaxMessageSize:       4096,
		ChannelReceiveMemory: 32 << 10, // a 4096-byte message at payload MTU 32 needs 18,240 (N49)
		ConnReceiveMemory:    128 << 10,
		ReceiveWindow:        1024,
		SendQueueSize:        64 << 10,
		MaxConnections:       3,
		Timeout:              2 * time.Second,
	}
	ep, err := fastnet.NewEndpoint(cfg)
	if err != nil {
		t.Fatal(err)
	}
	now := clock.Epoch
	buf := make([]byte, 65536)
	var handles []fastnet.Handle
	if role == fastnet.Client {
		for _, a := range fuzzAddrs[:2] {
			h, err := ep.Connect(now, a)
			if err != nil {
				t.Fatal(err)
			}
			handles = append(handles, h)
		}
	}
	drain := func() {
		for i := 0; ; i++ {
			if i > 1<<16 {
				t.Fatal("PollTransmit never returns false")
			}
			if _, ok := ep.PollTransmit(now, buf); !ok {
				break
			}
		}
		for {
			ev, ok := ep.PollEvent()
			if !ok {
				break
			}
			if ev.Kind == fastnet.EventConnected {
				handles = append(handles, ev.Conn)
			}
			if ev.Kind == fastnet.EventMessage && len(ev.Data) > cfg.MaxMessageSize {
				t.Fatalf("delivered %d bytes, above MaxMessageSize", len(ev.Data))
			}
		}
		for _, h := range handles {
			if st, ok := ep.Stats(h); ok && st.ReceiveBytes > cfg.ConnReceiveMemory {
				t.Fatalf("receive memory %d above the limit %d", st.ReceiveBytes, cfg.ConnReceiveMemory)
			}
		}
	}
	drain()
	for len(data) > 0 {
		op := data[0]
		data = data[1:]
		switch op & 3 {
		case 0:
			if len(data) < 2 {
				return
			}
			n := int(binary.BigEndian.Uint16(data))
			data = data[2:]
			n = min(n, len(data))
			ep.HandleDatagram(now, fuzzAddrs[op>>2&3], data[:n])
			data = data[n:]
		case 1:
			now = now.Add(time.Duration(op>>2) * 7 * time.Millisecond)
			ep.HandleTimeout(now)
		case 2:
			for _, h := range handles {
				ep.Send(now, h, int(op>>4), make([]byte, int(op)*13), op&4 != 0)
			}
		case 3:
			for _, h := range handles {
				ep.Close(now, h, "fuzz")
			}
		}
		drain()
	}
	// Whatever happened, time passing ends every connection or keeps it
	// healthy: deadlines always move forward (no livelock).
	for i := 0; i < 10000; i++ {
		d, ok := ep.NextDeadline()
		if !ok {
			return
		}
		if d < now {
			d = now
		}
		now = d.Add(time.Millisecond)
		ep.HandleTimeout(now)
		drain()
		if now > clock.Epoch.Add(time.Hour) {
			t.Fatal("endpoint still has deadlines an hour later")
		}
	}
}
