package urp

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzDecoder feeds arbitrary bytes, cut in pieces, to the stream decoder
// of either direction. The packets must be those Parse finds in the
// whole stream, each must re-encode to what it was parsed from, the
// buffer must stay within one packet, and an error must be final.
func FuzzDecoder(f *testing.F) {
	for _, dir := range []Direction{ToRelay, ToUser} {
		_, stream := streamOf(f, dir)
		f.Add(byte(dir), byte(3), stream)
		f.Add(byte(dir)|0x80, byte(1), stream[:len(stream)-1])
	}
	for _, tt := range golden {
		f.Add(byte(dirOf(tt.p.ID)), byte(0), unhex(f, tt.hex))
	}
	f.Add(byte(ToRelay), byte(2), []byte{0x83, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0x7f})
	f.Fuzz(func(t *testing.T, mode, cut byte, b []byte) {
		dir := Direction(mode & 1)
		const maxData = 300
		// The reference: Parse over the whole stream.
		var want []Packet
		var wantErr error
		for rest := b; len(rest) > 0; {
			p, n, err := Parse(rest, dir, maxData)
			if err == ErrShort {
				break
			}
			if err != nil {
				wantErr = err
				break
			}
			if n != EncodedLen(p) {
				t.Fatalf("Parse took %d bytes of a packet of %d", n, EncodedLen(p))
			}
			enc := Append(nil, p)
			if p.ID == R2UWelc {
				// The brand's bytes after a NUL are not kept.
				q, _, err := Parse(enc, dir, maxData)
				if err != nil || !cmp.Equal(p, q, equateEmpty) || !bytes.Equal(enc[:9], rest[:9]) {
					t.Fatalf("R2U_WELC does not re-encode: %x from %x", enc, rest[:n])
				}
			} else if !bytes.Equal(enc, rest[:n]) {
				t.Fatalf("%v re-encodes to %x, parsed from %x", p.ID, enc, rest[:n])
			}
			p.Data = bytes.Clone(p.Data)
			want = append(want, p)
			rest = rest[n:]
		}
		// The decoder, fed pieces of 1 + cut%32 bytes.
		d := NewDecoder(dir, maxData)
		size := 1 + int(cut%32)
		var got []Packet
		var gotErr error
		for rest := b; len(rest) > 0 && gotErr == nil; {
			n := min(size, len(rest))
			d.Feed(rest[:n])
			rest = rest[n:]
			for {
				p, ok, err := d.Next()
				if err != nil {
					gotErr = err
					break
				}
				if !ok {
					break
				}
				p.Data = bytes.Clone(p.Data)
				got = append(got, p)
			}
			if d.Buffered() > MaxHeader+maxData {
				t.Fatalf("buffered %d bytes", d.Buffered())
			}
		}
		if gotErr != wantErr {
			t.Fatalf("decoder error %v, Parse %v", gotErr, wantErr)
		}
		if diff := cmp.Diff(want, got, equateEmpty); diff != "" {
			t.Fatalf("decoder and Parse disagree (-Parse +decoder):\n%s", diff)
		}
		if gotErr != nil {
			if _, _, err := d.Next(); err != gotErr {
				t.Fatalf("Next after %v: %v", gotErr, err)
			}
		}
	})
}

// FuzzRelay drives a relay with operations encoded as bytes: connect a
// user, end a user's stream, hand a user some bytes, which are mostly
// well-formed packets so that groups form, or have a user stop or start
// reading. After every operation the relay's state must hold together
// (roles match groups, ids unique and not 0, holds match outputs), every
// output taken must be a well-formed stream of relay packets within
// MaxOutput, and no user the relay closed may get more.
func FuzzRelay(f *testing.F) {
	var script []byte
	script = append(script, 0, 0, 0) // three users
	for _, p := range []Packet{
		{ID: U2RMake},
	} {
		script = append(script, 2, 0, byte(EncodedLen(p)))
		script = Append(script, p)
	}
	f.Add(script)
	f.Add([]byte{0, 0, 2, 0, 1, 0x80, 3, 1, 0, 3, 1, 1, 4, 0, 0, 0x83, 5, 1, 2, 0, 1})
	f.Add([]byte{0, 2, 0, 9, 0x83, 0, 0, 0, 0, 0xff, 0, 0, 0, 1, 0})
	f.Fuzz(func(t *testing.T, ops []byte) {
		r, err := NewRelay(Config{MaxUsers: 8, MaxGroups: 3, MaxGroupSize: 4, MaxMessage: 64, MaxOutput: 400, HighWater: 150})
		if err != nil {
			t.Fatal(err)
		}
		var uids []uint32
		gone := map[uint32]bool{}
		slow := map[uint32]bool{} // users whose output is not taken
		pick := func(b byte) uint32 {
			if len(uids) == 0 {
				return 0
			}
			return uids[int(b)%len(uids)]
		}
		next := func() byte {
			if len(ops) == 0 {
				return 0
			}
			b := ops[0]
			ops = ops[1:]
			return b
		}
		for len(ops) > 0 {
			switch op := next(); op % 7 {
			case 0:
				if uid, err := r.Connect(); err == nil {
					uids = append(uids, uid)
				}
			case 1:
				r.Disconnect(pick(next()), nil)
			case 2: // raw bytes
				uid := pick(next())
				n := min(int(next()), len(ops))
				r.HandleBytes(uid, ops[:n])
				ops = ops[n:]
			case 3: // make, quit or join the group of another user
				uid := pick(next())
				switch k := next(); k % 3 {
				case 0:
					r.HandleBytes(uid, Append(nil, Packet{ID: U2RMake}))
				case 1:
					r.HandleBytes(uid, Append(nil, Packet{ID: U2RQuit}))
				default:
					info, _ := r.User(pick(next()))
					g, _ := r.Group(info.GID)
					r.HandleBytes(uid, Append(nil, Packet{ID: U2RJoin, GID: info.GID, Password: g.Password}))
				}
			case 4: // broadcast or send to another user
				uid, to := pick(next()), pick(next())
				id := U2RBrod
				if op&0x80 != 0 {
					id = U2RSend
				}
				r.HandleBytes(uid, AppendMessage(nil, id, to, bytes.Repeat([]byte{op}, int(next())%80)))
			case 5: // a setting, or a kick
				uid := pick(next())
				k, v := next(), next()
				if k&0x80 != 0 {
					r.HandleBytes(uid, Append(nil, Packet{ID: U2RKick, UID: pick(v)}))
				} else {
					r.HandleBytes(uid, Append(nil, Packet{ID: U2RSets, Control: Control(k >> 4), Key: Key(k % 5), Value: uint32(v % 8)}))
				}
			case 6: // a user stops or starts reading
				uid := pick(next())
				slow[uid] = !slow[uid]
			}
			checkRelay(t, r, gone, slow)
		}
	})
}

// checkRelay checks the invariants of FuzzRelay, taking every user's
// output.
func checkRelay(t *testing.T, r *Relay, gone, slow map[uint32]bool) {
	t.Helper()
	// The holds of U11 match the outputs.
	for _, g := range r.groups {
		n := 0
		for _, m := range g.members {
			if m.group != g {
				t.Fatalf("user %d in group %d points to another", m.uid, g.gid)
			}
			if m.congested {
				n++
			}
		}
		if n != g.congested {
			t.Fatalf("group %d: %d users congested, counted %d", g.gid, n, g.congested)
		}
	}
	for _, u := range r.users {
		if u.congested != (len(u.out) > r.cfg.HighWater) {
			t.Fatalf("user %d: congested %v with %d bytes", u.uid, u.congested, len(u.out))
		}
	}
	for {
		ev, ok := r.PollEvent()
		if !ok {
			break
		}
		if ev.Kind == EventDisconnected {
			gone[ev.UID] = true
		}
	}
	users := r.Users()
	groups := map[uint32]GroupInfo{}
	for _, g := range r.Groups() {
		if g.GID == 0 || len(g.Members) == 0 || g.Members[0] != g.Host {
			t.Fatalf("group %+v", g)
		}
		groups[g.GID] = g
	}
	hosts := map[uint32]bool{}
	for i, u := range users {
		if u.UID == 0 || i > 0 && users[i-1].UID == u.UID || gone[u.UID] {
			t.Fatalf("user %+v", u)
		}
		if u.Queued > r.Config().MaxOutput {
			t.Fatalf("%d bytes queued for %d", u.Queued, u.UID)
		}
		g, in := groups[u.GID]
		switch {
		case u.Role == Connected && u.GID == 0:
		case u.Role == Host && in && g.Host == u.UID:
			hosts[u.UID] = true
		case u.Role == Member && in && g.Host != u.UID:
		default:
			t.Fatalf("user %+v in group %+v", u, g)
		}
		if slow[u.UID] {
			continue
		}
		d := NewDecoder(ToUser, r.Config().MaxMessage)
		d.Feed(r.TakeOutput(u.UID, nil))
		for {
			_, ok, err := d.Next()
			if err != nil {
				t.Fatalf("output to %d: %v", u.UID, err)
			}
			if !ok {
				break
			}
		}
		if d.End() != nil {
			t.Fatalf("output to %d ends inside a packet", u.UID)
		}
	}
	if len(hosts) != len(groups) {
		t.Fatalf("%d hosts for %d groups", len(hosts), len(groups))
	}
	for uid := range gone {
		if r.TakeOutput(uid, nil) != nil {
			t.Fatalf("output for %d, who is gone", uid)
		}
	}
}

// FuzzClient feeds a client arbitrary relay bytes after a welcome: it
// either fails with one of the package's errors and stays failed, or
// goes on, with a role that matches what it knows and at most MaxMembers
// members (U24).
func FuzzClient(f *testing.F) {
	_, stream := streamOf(f, ToUser)
	f.Add(stream)
	f.Add(Append(Append(nil, Packet{ID: R2UMade, Status: StatMade, GID: 1}), Packet{ID: R2UStat, Role: Host}))
	welc := Append(nil, Packet{ID: R2UWelc, Version: 1, UID: 9})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, _ := NewClient(ClientConfig{MaxMessage: 100, MaxMembers: 4})
		if err := c.HandleBytes(welc); err != nil {
			t.Fatal(err)
		}
		c.Make() // a MADE in b may answer it
		err := c.HandleBytes(b)
		switch err {
		case nil, ErrUnknownPacket, ErrMessageTooLong, ErrTooManyMembers:
		default:
			t.Fatalf("HandleBytes: %v", err)
		}
		if err != nil && (c.Make() != ErrClosed || c.Err() != err) {
			t.Fatal("the client goes on after an error")
		}
		inGroup := c.Role() == Member || c.Role() == Host
		if err == nil && (inGroup != (c.GID() != 0) || c.Role() != Host && len(c.Members()) > 0 || len(c.Members()) > 4) {
			t.Fatalf("role %v, group %d, members %v", c.Role(), c.GID(), c.Members())
		}
		for {
			if _, ok := c.PollEvent(); !ok {
				break
			}
		}
	})
}
