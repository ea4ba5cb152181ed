package fuzz

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/fastnet"
)

// FuzzBundle feeds a server connection that negotiated bundles (D24) an
// arbitrary channel -6 payload: no input may panic or grow memory past
// the limits, and a bundle whose lengths do not add up, or that holds a
// nested bundle, is counted exactly once as such, whatever its inner
// packets did before.
func FuzzBundle(f *testing.F) {
	f.Add([]byte("\x00\x04\xff\xfe\xff\xf9"))
	f.Add([]byte("\x00\x04\xff\xfe\xff\xf9\x00\x09\xff\xfb\x00"))
	f.Add([]byte("\x00\x04\xff\xfe\xff\xf9\x00\x06\xff\xfa\x00\x02\xff\xfe"))
	f.Add([]byte("\x00\x0c\x00\x01\x03\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x04\xff\xfe\xff\xf8"))
	f.Add([]byte("\x00\x12\xff\xffquery:ext:bundle\x00\x0c\xff\xffdisconnect"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		runBundle(t, data)
	})
}

// bundleServer is the configuration of the server endpoints that
// FuzzBundle and FuzzBatch feed bundles to: small limits, so that hostile
// input meets them.
func bundleServer() fastnet.Config {
	return fastnet.Config{
		Role:                  fastnet.Server,
		MaxMessageSize:        4096,
		ChannelReceiveMemory:  32 << 10,
		ConnReceiveMemory:     128 << 10,
		EndpointReceiveMemory: 1 << 20,
		ReceiveWindow:         1024,
	}
}

func runBundle(t *testing.T, data []byte) {
	cfg := bundleServer()
	ep, err := fastnet.NewEndpoint(cfg)
	if err != nil {
		t.Fatal(err)
	}
	from := fuzzAddrs[0]
	now := clock.Epoch
	buf := make([]byte, 65536)
	var h fastnet.Handle
	var beat []byte
	drain := func() {
		for i := 0; ; i++ {
			if i > 1<<16 {
				t.Fatal("PollTransmit never returns false")
			}
			tr, ok := ep.PollTransmit(now, buf)
			if !ok {
				break
			}
			if tr.N == 4 && tr.To == from && buf[0] == 0xff && buf[1] == 0xfe && beat == nil {
				beat = append([]byte(nil), buf[:4]...)
			}
		}
		for {
			ev, ok := ep.PollEvent()
			if !ok {
				break
			}
			if ev.Kind == fastnet.EventConnected {
				h = ev.Conn
			}
		}
	}
	send := func(to netip.AddrPort, b []byte) {
		ep.HandleDatagram(now, to, b)
		drain()
	}
	send(from, []byte("\xff\xffconnect?"))
	if beat == nil {
		t.Fatal("no challenge")
	}
	send(from, beat) // the echo validates (D25)
	send(from, []byte("\xff\xffquery:ext:bundle"))
	before, ok := ep.Stats(h)
	if !ok {
		t.Fatal("not connected")
	}

	send(from, append([]byte{0xff, 0xfa}, data...))

	if m := ep.ReceiveMemory(); m > cfg.EndpointReceiveMemory {
		t.Fatalf("receive memory %d above the limit %d", m, cfg.EndpointReceiveMemory)
	}
	after, ok := ep.Stats(h)
	if !ok {
		return // an inner "disconnect" ended it; the rest went elsewhere
	}
	malformed, nested := splitBundle(data)
	if got := after.Dropped[fastnet.DropBundleMalformed] - before.Dropped[fastnet.DropBundleMalformed]; got != malformed {
		t.Fatalf("bundle-malformed counted %d, want %d", got, malformed)
	}
	if got := after.Dropped[fastnet.DropBundleNested] - before.Dropped[fastnet.DropBundleNested]; got != nested {
		t.Fatalf("bundle-nested counted %d, want %d", got, nested)
	}
	if after.BundlesReceived != before.BundlesReceived+1 {
		t.Fatalf("BundlesReceived went from %d to %d", before.BundlesReceived, after.BundlesReceived)
	}
}

// splitBundle walks a bundle's payload as D24 reads it, independently of
// the engine, and says whether it ends malformed or at a nested bundle.
func splitBundle(p []byte) (malformed, nested uint64) {
	if len(p) == 0 {
		return 1, 0
	}
	for len(p) > 0 {
		if len(p) < 2 {
			return 1, 0
		}
		n := int(binary.BigEndian.Uint16(p))
		if n > len(p)-2 {
			return 1, 0
		}
		inner := p[2 : 2+n]
		p = p[2+n:]
		if len(inner) >= 2 && int16(binary.BigEndian.Uint16(inner)) == -6 {
			return 0, 1
		}
	}
	return 0, 0
}
