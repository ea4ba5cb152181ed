package urpdriver_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/urp"
	"github.com/fastnet-engine/fastnet/urp/urpdriver"
)

// hostileRelay answers a Listen as a relay would (a group, its password
// and flags set) and returns the listener and the relay's end of the
// connection, which the test then writes and reads as it likes.
func hostileRelay(t *testing.T, cfg urpdriver.Config) (*urpdriver.Listener, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	conns := make(chan net.Conn, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			close(conns)
			return
		}
		nc.Write(urp.Append(urp.Append(nil, urp.Packet{ID: urp.R2UWelc, Version: 1, UID: 1}), urp.Packet{ID: urp.R2UStat, Role: urp.Connected}))
		d := urp.NewDecoder(urp.ToRelay, 1<<20)
		buf := make([]byte, 4096)
		for sets := 0; sets < 2; {
			n, err := nc.Read(buf)
			if err != nil {
				nc.Close()
				close(conns)
				return
			}
			d.Feed(buf[:n])
			for p, ok, err := d.Next(); ok && err == nil; p, ok, err = d.Next() {
				var b []byte
				switch p.ID {
				case urp.U2RMake:
					b = urp.Append(urp.Append(nil, urp.Packet{ID: urp.R2UMade, Status: urp.StatMade, GID: 7}), urp.Packet{ID: urp.R2UStat, Role: urp.Host})
				case urp.U2RSets:
					b = urp.Append(nil, urp.Packet{ID: urp.R2UVals, Key: p.Key, Value: p.Value})
					sets++
				}
				nc.Write(b)
			}
		}
		conns <- nc
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := urpdriver.Listen(ctx, ln.Addr().String(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	nc := <-conns
	t.Cleanup(func() {
		nc.Close()
		l.Close()
	})
	return l, nc
}

// TestHostHearsOnlyMembers: a relay that sends messages from users that
// never joined gives the host no state for them; before, each sender's
// UID stayed among the host's peers for good (U25).
func TestHostHearsOnlyMembers(t *testing.T) {
	l, nc := hostileRelay(t, urpdriver.Config{})
	const n = 1000
	var b []byte
	for uid := uint32(100); uid < 100+n; uid++ {
		b = urp.Append(b, urp.Packet{ID: urp.R2UText, UID: uid, Data: []byte("not fastnet")})
	}
	const member = 5
	b = urp.Append(b, urp.Packet{ID: urp.R2UJoin, UID: member})
	if _, err := nc.Write(b); err != nil {
		t.Fatal(err)
	}
	// The host handles the relay's packets in order: once it greets the
	// member, it has handled the messages before.
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	d := urp.NewDecoder(urp.ToRelay, 1<<20)
	buf := make([]byte, 4096)
	for greeted := false; !greeted; {
		m, err := nc.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		d.Feed(buf[:m])
		for p, ok, err := d.Next(); ok && err == nil; p, ok, err = d.Next() {
			greeted = greeted || p.ID == urp.U2RSend && p.UID == member && len(p.Data) == 0
		}
	}
	if peers, members, _ := urpdriver.Peers(l); peers != 0 || members != 1 {
		t.Errorf("after messages from %d users that never joined: %d peers, %d members", n, peers, members)
	}
}

// TestGreetingsWithinWriteQueue: a relay that announces a member again
// and again and reads nothing does not grow the host's write queue past
// WriteQueue with greetings: at most one waits for each member, none for
// a member that left, and the greeting of a member that stays goes once
// the relay reads (U25). Before, every R2U_JOIN queued a greeting at once
// (9 MB of them here, more than the sockets hold).
func TestGreetingsWithinWriteQueue(t *testing.T) {
	const wq = 4 << 10
	l, nc := hostileRelay(t, urpdriver.Config{WriteQueue: wq})
	rc := urpdriver.RelayConn(l)
	const n = 1_000_000
	const again, member = 4, 5
	written := make(chan error, 1)
	go func() {
		var b []byte
		for i := range n {
			b = urp.Append(b, urp.Packet{ID: urp.R2UJoin, UID: again})
			if len(b) >= 64<<10 || i == n-1 {
				if _, err := nc.Write(b); err != nil {
					written <- err
					return
				}
				b = b[:0]
			}
		}
		b = urp.Append(b, urp.Packet{ID: urp.R2ULeft, UID: again})
		b = urp.Append(b, urp.Packet{ID: urp.R2UJoin, UID: member})
		_, err := nc.Write(b)
		written <- err
	}()
	most := 0
	deadline := time.Now().Add(60 * time.Second)
	for !urpdriver.IsMember(l, member) {
		most = max(most, rc.Queued())
		if time.Now().After(deadline) {
			t.Fatalf("timed out: %d bytes queued for the relay", rc.Queued())
		}
		time.Sleep(time.Millisecond)
	}
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	most = max(most, rc.Queued())
	// One greeting (9 bytes) may be queued while WriteQueue is not
	// exceeded.
	if most > wq+9 {
		t.Errorf("%d bytes queued for the relay, WriteQueue %d", most, wq)
	}
	if _, members, greet := urpdriver.Peers(l); members != 1 || greet > 1 {
		t.Errorf("%d members, %d greetings waiting", members, greet)
	}
	// The relay reads again: the member's greeting comes.
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	d := urp.NewDecoder(urp.ToRelay, 1<<20)
	buf := make([]byte, 64<<10)
	for greeted := false; !greeted; {
		m, err := nc.Read(buf)
		if err != nil {
			t.Fatalf("no greeting for the member that stayed: %v", err)
		}
		d.Feed(buf[:m])
		for p, ok, err := d.Next(); ok && err == nil; p, ok, err = d.Next() {
			greeted = greeted || p.ID == urp.U2RSend && p.UID == member && len(p.Data) == 0
		}
	}
}
