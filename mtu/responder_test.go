package mtu

import (
	"bytes"
	"fmt"
	"math"
	"testing"
)

// drain returns every reply the responder has pending.
func drain(r *Responder) [][]byte {
	var out [][]byte
	for {
		b, ok := r.AppendReply(nil)
		if !ok {
			return out
		}
		out = append(out, b)
	}
}

// TestResponder checks the specification's responder: "When the responder
// sees a packet whose payload is the single byte 0, it must immediately set
// an internal counter to 0 and respond with a packet whose payload is the
// single byte 1 on the channel. For all other packets, it must increment
// the count and respond with a packet whose payload is the count as a
// 4-byte integer" (big-endian, D1, D19).
func TestResponder(t *testing.T) {
	probe := []byte("0123456789abcdef0123456789abcdef")
	tests := []struct {
		name string
		in   [][]byte // payloads, each followed by draining the replies
		want []string // the replies to each payload, as hex
	}{
		{"reset then probes", [][]byte{{0}, probe, probe, probe},
			[]string{"01", "00000001", "00000002", "00000003"}},
		{"reset restarts the count", [][]byte{probe, probe, {0}, probe},
			[]string{"00000001", "00000002", "01", "00000001"}},
		{"every other payload is a probe", [][]byte{{0}, {}, {1}, {0, 0}, {2}},
			[]string{"01", "00000001", "00000002", "00000003", "00000004"}},
		{"repeated resets each get an ack", [][]byte{{0}, {0}},
			[]string{"01", "01"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r Responder // the zero value is ready
			for i, p := range tt.in {
				r.HandlePayload(p)
				got := drain(&r)
				if len(got) != 1 || fmt.Sprintf("%x", got[0]) != tt.want[i] {
					t.Fatalf("payload %d (%x): replies %x, want [%s]", i, p, got, tt.want[i])
				}
			}
		})
	}
}

// TestResponderBounded checks that a peer that floods the responder without
// the replies being drained cannot grow it: at most a reset ack and the
// latest count are pending, in that order.
func TestResponderBounded(t *testing.T) {
	probe := make([]byte, 1400)
	tests := []struct {
		name string
		in   func(r *Responder)
		want []string
	}{
		{"100000 probes: only the latest count", func(r *Responder) {
			for range 100000 {
				r.HandlePayload(probe)
			}
		}, []string{"000186a0"}},
		{"a reset drops the older count", func(r *Responder) {
			r.HandlePayload(probe)
			r.HandlePayload(probe)
			r.HandlePayload([]byte{0})
		}, []string{"01"}},
		{"ack first, then the count since the reset", func(r *Responder) {
			r.HandlePayload(probe)
			r.HandlePayload([]byte{0})
			r.HandlePayload(probe)
			r.HandlePayload(probe)
		}, []string{"01", "00000002"}},
		{"many resets: one ack", func(r *Responder) {
			for range 1000 {
				r.HandlePayload([]byte{0})
			}
		}, []string{"01"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewResponder()
			tt.in(r)
			if !r.Pending() {
				t.Fatal("nothing pending")
			}
			got := drain(r)
			var hex []string
			for _, b := range got {
				hex = append(hex, fmt.Sprintf("%x", b))
			}
			if fmt.Sprint(hex) != fmt.Sprint(tt.want) {
				t.Fatalf("replies %v, want %v", hex, tt.want)
			}
			if r.Pending() {
				t.Fatal("still pending after draining")
			}
		})
	}
}

// TestResponderSaturates checks that the counter stops at the largest i32
// rather than wrapping to a count that reads as negative or small.
func TestResponderSaturates(t *testing.T) {
	r := NewResponder()
	r.counter = math.MaxInt32 - 1
	for range 3 {
		r.HandlePayload([]byte("probe"))
	}
	got := drain(r)
	if len(got) != 1 || !bytes.Equal(got[0], []byte{0x7f, 0xff, 0xff, 0xff}) {
		t.Fatalf("replies %x, want [7fffffff]", got)
	}
	if st := r.Stats(); st.Probes != 3 || st.Replies != 1 || st.Superseded != 2 {
		t.Fatalf("stats %+v", st)
	}
}

func TestResponderAppends(t *testing.T) {
	r := NewResponder()
	r.HandlePayload([]byte{0})
	b, ok := r.AppendReply([]byte{0xff, 0xfd}) // a channel id in front
	if !ok || !bytes.Equal(b, []byte{0xff, 0xfd, 1}) {
		t.Fatalf("AppendReply = %x, %v; want fffd01, true", b, ok)
	}
}

// TestResponderAckPending: AckPending tells a pending reset ack, which the
// endpoint sends at once, from a pending count, which it may hold back
// beside data (N94).
func TestResponderAckPending(t *testing.T) {
	var r Responder
	probe := make([]byte, 32)
	steps := []struct {
		in       []byte // nil: take one reply
		ack, any bool
	}{
		{probe, false, true},
		{nil, false, false},
		{[]byte{0}, true, true},
		{probe, true, true}, // the ack goes first, the count after it
		{nil, false, true},
		{nil, false, false},
	}
	for i, s := range steps {
		if s.in != nil {
			r.HandlePayload(s.in)
		} else {
			r.AppendReply(nil)
		}
		if r.AckPending() != s.ack || r.Pending() != s.any {
			t.Fatalf("step %d: AckPending %v, Pending %v; want %v, %v", i, r.AckPending(), r.Pending(), s.ack, s.any)
		}
	}
}
