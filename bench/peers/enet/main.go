// Command enet is the ENet peer of the bench command (bench/): ENet 1.3
// (Debian's libenet-dev) through cgo, one host a side with one peer and
// one channel, no bandwidth limits, the library's throttling at its
// defaults. Reliable messages are packets with ENET_PACKET_FLAG_RELIABLE
// (W1-W3); W4's are ENET_PACKET_FLAG_UNSEQUENCED packets: with no flag
// (unreliable, sequenced) ENet sends every 65,536th packet reliably, to
// restart the sequence numbers, which would not be an unreliable message.
// Each side drives its host from one goroutine with
// enet_host_service: a receive waits in it, a burst of sends calls it
// without waiting every 64 packets, so that acknowledgements are taken in
// and the window moves, and a flush is enet_host_flush.
//
// It needs ENet's headers and library and a C compiler; the bench command
// leaves ENet out, saying why, when the build fails. The bench command
// builds it and starts it for both roles (see peerkit's child protocol).
package main

/*
#cgo LDFLAGS: -lenet
#include <enet/enet.h>
#include <stdlib.h>
#include <string.h>

// fb_host makes a host: a server bound to 127.0.0.1 (port chosen by the
// system) when server is set, a client otherwise.
static ENetHost *fb_host(int server) {
	if (!server)
		return enet_host_create(NULL, 1, 1, 0, 0);
	ENetAddress a;
	if (enet_address_set_host_ip(&a, "127.0.0.1") != 0)
		return NULL;
	a.port = 0;
	return enet_host_create(&a, 1, 1, 0, 0);
}

static unsigned short fb_port(ENetHost *h) { return h->address.port; }

static ENetPeer *fb_connect(ENetHost *h, const char *ip, unsigned short port) {
	ENetAddress a;
	if (enet_address_set_host_ip(&a, ip) != 0)
		return NULL;
	a.port = port;
	return enet_host_connect(h, &a, 1, 0);
}

static int fb_send(ENetPeer *p, const void *b, size_t n, int reliable) {
	ENetPacket *pk = enet_packet_create(b, n, reliable ? ENET_PACKET_FLAG_RELIABLE : ENET_PACKET_FLAG_UNSEQUENCED);
	if (pk == NULL)
		return -1;
	if (enet_peer_send(p, 0, pk) != 0) {
		enet_packet_destroy(pk);
		return -1;
	}
	return 0;
}

// fb_service waits up to timeout ms for one event. It returns the event's
// type (0: none), or a negative number on failure; a received packet is
// copied into buf (its length in *n, -1 if it did not fit) and destroyed,
// and the peer of a connection is stored in *peer.
static int fb_service(ENetHost *h, unsigned int timeout, void *buf, size_t cap, int *n, int *reliable, ENetPeer **peer) {
	ENetEvent ev;
	int r = enet_host_service(h, &ev, timeout);
	if (r <= 0)
		return r;
	*peer = ev.peer;
	if (ev.type == ENET_EVENT_TYPE_RECEIVE) {
		if (ev.packet->dataLength <= cap) {
			memcpy(buf, ev.packet->data, ev.packet->dataLength);
			*n = (int)ev.packet->dataLength;
		} else {
			*n = -1;
		}
		*reliable = (ev.packet->flags & ENET_PACKET_FLAG_RELIABLE) != 0;
		enet_packet_destroy(ev.packet);
	}
	return (int)ev.type;
}
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/fastnet-engine/fastnet/bench/peers/peerkit"
)

const (
	// wait bounds one wait in enet_host_service (ms): how soon a receive
	// sees an interrupt. Data ends the wait at once.
	wait = 10
	// pumpEvery is how many packets a burst queues between services.
	pumpEvery = 64
	// disconnectWait bounds how long Close waits for the other side to
	// acknowledge a disconnect, which comes after what was queued.
	disconnectWait = 2 * time.Second
	// bufSize is the largest message received.
	bufSize = 64 << 10
)

var initOnce = sync.OnceValue(func() error {
	if C.enet_initialize() != 0 {
		return errors.New("enet_initialize failed")
	}
	return nil
})

type peer struct{}

func (peer) Supports(w peerkit.Workload) bool {
	switch w.Name {
	case "W1", "W2", "W3", "W4":
		return true
	}
	return false
}

func (peer) Listen(ctx context.Context, w peerkit.Workload) (string, func(context.Context) (peerkit.Conn, error), io.Closer, error) {
	if err := initOnce(); err != nil {
		return "", nil, nil, err
	}
	h := C.fb_host(1)
	if h == nil {
		return "", nil, nil, errors.New("enet_host_create failed")
	}
	c := newConn(h)
	accept := func(ctx context.Context) (peerkit.Conn, error) {
		if err := c.awaitConnect(ctx); err != nil {
			return nil, err
		}
		return c, nil
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(C.fb_port(h))))
	return addr, accept, c, nil
}

func (peer) Dial(ctx context.Context, addr string, w peerkit.Workload) (peerkit.Conn, error) {
	if err := initOnce(); err != nil {
		return nil, err
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("port %q: %w", port, err)
	}
	h := C.fb_host(0)
	if h == nil {
		return nil, errors.New("enet_host_create failed")
	}
	c := newConn(h)
	ip := C.CString(host)
	defer C.free(unsafe.Pointer(ip))
	if C.fb_connect(h, ip, C.ushort(p)) == nil {
		c.Close()
		return nil, errors.New("enet_host_connect failed")
	}
	if err := c.awaitConnect(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// conn is a host with its one peer, used by one goroutine.
type conn struct {
	h           *C.ENetHost
	p           *C.ENetPeer
	buf         []byte
	pending     [][]byte // received while a burst pumped, not yet returned
	pendingRel  []bool
	sent        int
	closed      bool
	interrupted atomic.Bool
	eof         bool
}

func newConn(h *C.ENetHost) *conn { return &conn{h: h, buf: make([]byte, bufSize)} }

// service waits up to timeout ms for one event and handles it: it returns
// the type and, for a packet, its bytes (in c.buf) and reliability.
func (c *conn) service(timeout uint) (C.int, []byte, bool, error) {
	var n, rel C.int
	var p *C.ENetPeer
	t := C.fb_service(c.h, C.uint(timeout), unsafe.Pointer(&c.buf[0]), C.size_t(len(c.buf)), &n, &rel, &p)
	switch {
	case t < 0:
		return t, nil, false, errors.New("enet_host_service failed")
	case t == C.ENET_EVENT_TYPE_CONNECT:
		c.p = p
	case t == C.ENET_EVENT_TYPE_DISCONNECT:
		c.eof = true
	case t == C.ENET_EVENT_TYPE_RECEIVE:
		if n < 0 {
			return t, nil, false, fmt.Errorf("a packet of more than %d bytes", len(c.buf))
		}
		return t, c.buf[:n], rel != 0, nil
	}
	return t, nil, false, nil
}

func (c *conn) awaitConnect(ctx context.Context) error {
	for c.p == nil {
		if err := ctx.Err(); err != nil {
			return err
		}
		t, b, rel, err := c.service(wait)
		if err != nil {
			return err
		}
		if t == C.ENET_EVENT_TYPE_RECEIVE {
			c.keep(b, rel)
		}
		if c.eof {
			return errors.New("disconnected while connecting")
		}
	}
	return nil
}

// keep queues a packet received while not receiving.
func (c *conn) keep(b []byte, reliable bool) {
	c.pending = append(c.pending, append([]byte(nil), b...))
	c.pendingRel = append(c.pendingRel, reliable)
}

func (c *conn) Send(b []byte, reliable bool) error {
	if c.p == nil || len(b) == 0 {
		return errors.New("no connection, or an empty message")
	}
	if C.fb_send(c.p, unsafe.Pointer(&b[0]), C.size_t(len(b)), boolInt(reliable)) != 0 {
		return errors.New("enet_peer_send failed")
	}
	c.sent++
	if c.sent%pumpEvery == 0 {
		return c.pump()
	}
	return nil
}

// pump services the host without waiting until it has no event left:
// acknowledgements are taken in and what the window allows goes out.
func (c *conn) pump() error {
	for {
		t, b, rel, err := c.service(0)
		if err != nil {
			return err
		}
		switch t {
		case 0:
			return nil
		case C.ENET_EVENT_TYPE_RECEIVE:
			c.keep(b, rel)
		}
		if c.eof {
			return io.EOF
		}
	}
}

func (c *conn) Flush() error {
	C.enet_host_flush(c.h)
	return nil
}

func (c *conn) Receive() ([]byte, bool, error) {
	if len(c.pending) > 0 {
		b, rel := c.pending[0], c.pendingRel[0]
		c.pending, c.pendingRel = c.pending[1:], c.pendingRel[1:]
		return b, rel, nil
	}
	for {
		if c.interrupted.Load() {
			return nil, false, peerkit.ErrInterrupted
		}
		if c.eof {
			return nil, false, io.EOF
		}
		t, b, rel, err := c.service(wait)
		if err != nil {
			return nil, false, err
		}
		if t == C.ENET_EVENT_TYPE_RECEIVE {
			return b, rel, nil
		}
	}
}

func (c *conn) Interrupt() { c.interrupted.Store(true) }

// Close disconnects gracefully (the disconnect goes after what is queued)
// and destroys the host.
func (c *conn) Close() error {
	if c.closed {
		return nil
	}
	c.closed = true
	if c.p != nil && !c.eof {
		C.enet_peer_disconnect(c.p, 0)
		deadline := time.Now().Add(disconnectWait)
		for !c.eof && time.Now().Before(deadline) {
			if _, _, _, err := c.service(wait); err != nil {
				break
			}
		}
	}
	C.enet_host_destroy(c.h)
	return nil
}

func boolInt(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

func main() { peerkit.Main(peer{}) }
