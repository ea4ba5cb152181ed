package fastnet

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"testing"
	"time"
)

// An application that polls one event for each one queued, but is always
// some events behind, never empties the queue: the places of the events
// it polled are reused, and the queue's memory stays proportional to the
// events it holds (N106). Each message comes out once, in order, with its
// own bytes, lent buffers included (N103).
func TestEventQueueBehind(t *testing.T) {
	for _, reuse := range []bool{false, true} {
		for _, behind := range []int{1, 7, 100} {
			t.Run(fmt.Sprintf("reuse=%v/behind=%d", reuse, behind), func(t *testing.T) {
				testEventQueueBehind(t, behind, reuse)
			})
		}
	}
}

func testEventQueueBehind(t *testing.T, behind int, reuse bool) {
	const rounds = 20000
	cfg := Config{InitialPayloadMTU: 1200, MTU: MTUConfig{Disabled: true}, ReuseMessageBuffers: reuse}
	p := newPair(t, cfg, cfg)
	p.keep = false
	srv := p.srv
	sent, next := 0, 0
	send := func() {
		t.Helper()
		msg := binary.BigEndian.AppendUint64(make([]byte, 0, 40), uint64(sent))
		msg = append(msg, make([]byte, 32)...) // a checksum of its own (D3)
		if err := p.cli.Send(p.now, p.ch, 1, msg, true); err != nil {
			t.Fatal(err)
		}
		sent++
		// The pair's flush, but for the server's events, which the
		// test polls itself.
		p.now = p.now.Add(time.Millisecond)
		for _, ep := range []*Endpoint{p.cli, srv} {
			if d, ok := ep.NextDeadline(); ok && d <= p.now {
				ep.HandleTimeout(p.now)
			}
		}
		for moved := true; moved; {
			moved = p.pump(Client, p.cli, srv, clientAddr)
			moved = p.pump(Server, srv, p.cli, serverAddr) || moved
			p.events(p.cli, &p.cliEvs, &p.cliMsgs, &p.cliBytes)
		}
	}
	var ev Event
	poll := func() bool {
		t.Helper()
		// Both ways of polling, in turn: NextEvent into one variable,
		// which holds the last event polled until the next.
		var ok bool
		if next%2 == 0 {
			ok = srv.NextEvent(&ev)
		} else {
			ev, ok = srv.PollEvent()
		}
		if ok && ev.Kind == EventMessage {
			if got := binary.BigEndian.Uint64(ev.Data); got != uint64(next) || len(ev.Data) != 40 {
				t.Fatalf("message %d: got %d, %d bytes", next, got, len(ev.Data))
			}
			next++
		}
		return ok
	}
	for range behind {
		send()
	}
	for i := range rounds {
		send()
		if !poll() {
			t.Fatalf("round %d: no event", i)
		}
		if n := len(srv.events) - srv.evHead; n > behind+8 {
			t.Fatalf("round %d: %d events queued", i, n)
		}
	}
	if c := cap(srv.events); c > 4*(behind+8) {
		t.Errorf("the queue holds %d places for %d events", c, len(srv.events)-srv.evHead)
	}
	for poll() {
	}
	if next != sent {
		t.Errorf("%d messages, want %d", next, sent)
	}
}

// A place of the event queue is reused field by field (N117): a message
// event set in a place that held any other event is that message's event
// and nothing more, whatever the place held; and a polled place refers to
// nothing, so that the queue keeps no message, error or statistics alive.
func TestEventPlacesReused(t *testing.T) {
	c := &conn{handle: 7, addr: netip.MustParseAddrPort("192.0.2.1:4000")}
	data := []byte("payload")
	want := Event{Kind: EventMessage, Conn: 7, Addr: c.addr, Channel: 12, Reliable: true, Data: data}
	olds := []Event{{}, fullEvent(), {Kind: EventMessage, Addr: netip.MustParseAddrPort("[2001:db8::1]:9"), Data: []byte("old")}}
	// Each of the references setMessage tests together, alone, in a
	// place that held an event of another kind (a message event holds
	// none of them).
	full := fullEvent()
	for _, k := range []EventKind{0, EventConnected, EventDisconnected} {
		olds = append(olds, Event{Kind: k, Err: full.Err}, Event{Kind: k, Quality: full.Quality},
			Event{Kind: k, Stats: full.Stats}, Event{Kind: k, Intro: full.Intro})
	}
	for _, old := range olds {
		ev := old
		ev.setMessage(c, 12, true, data)
		if !reflect.DeepEqual(ev, want) {
			t.Errorf("set over %+v:\n got %+v\nwant %+v", old, ev, want)
		}
	}
	for name, poll := range polls {
		e := &Endpoint{}
		for _, ev := range []Event{fullEvent(), want} {
			e.events = append(e.events[:0], ev, ev)
			e.evHead = 0
			if got, ok := poll(e, fullEvent()); !ok || !reflect.DeepEqual(got, ev) {
				t.Fatalf("%s: polled %+v, %v; want %+v", name, got, ok, ev)
			}
			if p := e.events[0]; p.Data != nil || p.Err != nil || p.Quality != nil || p.Stats != nil || p.Intro != nil {
				t.Errorf("%s: polled place of a %v event still refers to %+v", name, ev.Kind, p)
			}
			// The second, then none: the queue is empty, its places
			// kept, and the events polled counted.
			if _, ok := poll(e, fullEvent()); !ok || len(e.events) != 0 || e.evHead != 0 || cap(e.events) < 2 {
				t.Fatalf("%s: second poll %v; queue %d of %d, head %d", name, ok, len(e.events), cap(e.events), e.evHead)
			}
			if got, ok := poll(e, fullEvent()); ok || !reflect.DeepEqual(got, fullEvent()) {
				t.Errorf("%s: polled %+v, %v from an empty queue; want false and the variable as it was", name, got, ok)
			}
		}
		if e.evBase != 4 {
			t.Errorf("%s: %d events counted as polled, want 4", name, e.evBase)
		}
	}
}

// polls are the two ways of polling an event, each given what the
// caller's variable held before: PollEvent, which returns the zero Event
// when there is none, and NextEvent, which leaves the variable as it was.
var polls = map[string]func(e *Endpoint, old Event) (Event, bool){
	"PollEvent": func(e *Endpoint, old Event) (Event, bool) {
		ev, ok := e.PollEvent()
		if !ok {
			if !reflect.DeepEqual(ev, Event{}) {
				return ev, true // reported as a failure
			}
			return old, false
		}
		return ev, true
	},
	"NextEvent": func(e *Endpoint, old Event) (Event, bool) {
		ev := old
		ok := e.NextEvent(&ev)
		return ev, ok
	},
}

// fullEvent returns an event each field of which is set, whichever the
// kind: every field Event has, so that a field added later is covered.
func fullEvent() Event {
	var ev Event
	v := reflect.ValueOf(&ev).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Int, reflect.Int64:
			f.SetInt(3)
		case reflect.Uint8, reflect.Uint32, reflect.Uint64:
			f.SetUint(3)
		case reflect.Slice:
			f.SetBytes([]byte("x"))
		case reflect.Pointer:
			f.Set(reflect.New(f.Type().Elem()))
		case reflect.Interface:
			f.Set(reflect.ValueOf(errors.New("e")))
		case reflect.Struct:
			f.Set(reflect.ValueOf(netip.MustParseAddrPort("198.51.100.2:5")))
		default:
			panic(fmt.Sprintf("field %s of kind %v: set it here", v.Type().Field(i).Name, f.Kind()))
		}
	}
	return ev
}

// copySmall copies as copy does, for every length about the sizes it
// moves at once and past them.
func TestCopySmall(t *testing.T) {
	src := make([]byte, 200)
	for i := range src {
		src[i] = byte(i*7 + 1)
	}
	for n := range len(src) {
		dst := make([]byte, n+2)
		dst[n], dst[n+1] = 0xaa, 0xbb
		copySmall(dst[:n], src[:n])
		if !bytes.Equal(dst[:n], src[:n]) || dst[n] != 0xaa || dst[n+1] != 0xbb {
			t.Fatalf("%d bytes: %x", n, dst)
		}
	}
}
