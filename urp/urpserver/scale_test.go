package urpserver_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/urp"
	"github.com/fastnet-engine/fastnet/urp/urpclient"
	"github.com/fastnet-engine/fastnet/urp/urpserver"
)

// TestStorm: 1,000 users in 100 groups of 10 over real sockets, every user
// broadcasting at once. Each user must get every message of its group,
// its own included (U7), once, in the order each sender sent them, and
// nothing from another group.
func TestStorm(t *testing.T) {
	const (
		groups   = 100
		size     = 10
		messages = 20
	)
	s := start(t, urpserver.Config{Relay: urp.Config{MaxUsers: groups * size}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := time.Now()

	// Connect and form the groups, ten groups at a time.
	users := make([][]*urpclient.Conn, groups)
	var wg sync.WaitGroup
	errs := make(chan error, groups)
	sem := make(chan struct{}, 10)
	for g := range groups {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := formGroup(ctx, s.Addr().String(), size, &users[g]); err != nil {
				errs <- fmt.Errorf("group %d: %w", g, err)
			}
		})
	}
	wg.Wait()
	for _, g := range users {
		for _, c := range g {
			defer c.Abort()
		}
	}
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	if st := s.Stats(); st.Users != groups*size || st.Groups != groups {
		t.Fatalf("stats %+v", st)
	}
	formed := time.Since(start)

	// The storm: every user broadcasts, and reads what its group sends.
	start = time.Now()
	for g := range groups {
		for i, c := range users[g] {
			wg.Go(func() {
				if err := storm(ctx, c, users[g], i, messages); err != nil {
					errs <- fmt.Errorf("group %d user %d: %w", g, i, err)
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	st := s.Stats()
	if want := uint64(groups * size * messages * size); st.Messages != want || st.Overflow != 0 {
		t.Errorf("relayed %d messages, want %d; stats %+v", st.Messages, want, st)
	}
	t.Logf("%d users in %d groups formed in %v; %d messages relayed in %v", groups*size, groups, formed, st.Messages, time.Since(start))
}

// formGroup connects size users to the relay at addr, the first making a
// group and the others joining it.
func formGroup(ctx context.Context, addr string, size int, out *[]*urpclient.Conn) error {
	h, err := urpclient.Dial(ctx, addr, urpclient.Config{})
	if err != nil {
		return err
	}
	*out = append(*out, h)
	gid, err := h.Make(ctx)
	if err != nil {
		return err
	}
	for range size - 1 {
		m, err := urpclient.Dial(ctx, addr, urpclient.Config{})
		if err != nil {
			return err
		}
		*out = append(*out, m)
		if err := m.Join(ctx, gid, 0); err != nil {
			return err
		}
		if ev, err := h.Receive(ctx); err != nil || ev.Kind != urp.GotJoined {
			return fmt.Errorf("the host heard %v, %v", ev.Kind, err)
		}
	}
	return nil
}

// storm broadcasts n numbered messages from c, the i-th user of group,
// and checks what c receives: n from each user of the group, in order.
func storm(ctx context.Context, c *urpclient.Conn, group []*urpclient.Conn, i, n int) error {
	sendErr := make(chan error, 1)
	go func() {
		for k := range n {
			msg := binary.LittleEndian.AppendUint32([]byte{byte(i)}, uint32(k))
			if err := c.Broadcast(ctx, 0, append(msg, make([]byte, 100)...)); err != nil {
				sendErr <- err
				return
			}
		}
		sendErr <- nil
	}()
	next := make([]uint32, len(group))
	byUID := map[uint32]int{}
	for j, m := range group {
		byUID[m.UID()] = j
	}
	for range n * len(group) {
		ev, err := c.Receive(ctx)
		if err != nil {
			return err
		}
		j, ok := byUID[ev.UID]
		if ev.Kind != urp.GotText || !ok || int(ev.Data[0]) != j {
			return fmt.Errorf("got %v from %d, not of the group", ev.Kind, ev.UID)
		}
		if k := binary.LittleEndian.Uint32(ev.Data[1:]); k != next[j] {
			return fmt.Errorf("from user %d: message %d, want %d", j, k, next[j])
		}
		next[j]++
	}
	return <-sendErr
}
