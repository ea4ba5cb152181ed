package channel

import (
	"bytes"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
	"pgregory.net/rapid"
)

// inflightModel is the naive model of one in-flight packet.
type inflightModel struct {
	wire        []byte
	first, last clock.Time
	resends     int
}

// TestSenderMatchesModel drives a Sender with random queueing, sending,
// acking, time, resends and shrinking (N95), and checks it against a naive model that scans
// every packet in flight: what is due when (D14), what is resent (the same
// bytes), which acks free what (D13), and the in-flight totals.
func TestSenderMatchesModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := NewSender(0)
		model := map[Seq]*inflightModel{}
		now := t0
		rtt := ms
		maxI := time.Duration(0)
		t.Repeat(map[string]func(*rapid.T){
			"queue": func(t *rapid.T) {
				s.Queue(payload(rapid.IntRange(0, 1000).Draw(t, "seed"), rapid.IntRange(0, 200).Draw(t, "n")),
					rapid.Bool().Draw(t, "reliable"))
			},
			"send": func(t *rapid.T) {
				if !s.HasNew() {
					t.Skip("nothing queued")
				}
				b, sent := s.AppendNew(nil, now, rapid.IntRange(1, 60).Draw(t, "mtu"))
				if sent.Reliable {
					model[sent.Seq] = &inflightModel{wire: b, first: now, last: now}
				}
			},
			"ack": func(t *rapid.T) {
				if len(model) == 0 {
					t.Skip("nothing in flight")
				}
				seqs := slices.Sorted(maps.Keys(model))
				q := rapid.SampledFrom(seqs).Draw(t, "seq")
				a, ok := s.HandleAck(q)
				n := a.Bytes
				if !ok || n != len(model[q].wire)-HeaderLen {
					t.Fatalf("HandleAck(%d) = %d, %v; want %d, true", q, n, ok, len(model[q].wire)-HeaderLen)
				}
				delete(model, q)
			},
			"ack oldest": func(t *rapid.T) {
				// Acks in order, which HandleAck takes at the front.
				if len(model) == 0 {
					t.Skip("nothing in flight")
				}
				q := slices.Min(slices.Collect(maps.Keys(model)))
				a, ok := s.HandleAck(q)
				if !ok || a.Bytes != len(model[q].wire)-HeaderLen || a.First != model[q].first || a.Last != model[q].last || int(a.Resends) != model[q].resends {
					t.Fatalf("HandleAck(%d) = %+v, %v; want %d bytes, first %v, last %v, %d resends", q, a, ok, len(model[q].wire)-HeaderLen, model[q].first, model[q].last, model[q].resends)
				}
				delete(model, q)
			},
			"ack junk": func(t *rapid.T) {
				q := Seq(rapid.IntRange(-20, 400).Draw(t, "seq"))
				_, ok := s.HandleAck(q)
				_, want := model[q]
				if ok != want {
					t.Fatalf("HandleAck(%d) = %v, want %v", q, ok, want)
				}
				delete(model, q)
			},
			"shrink": func(t *rapid.T) {
				// As after a burst (N95): an idle sender lets its
				// arrays go, a busy one moves its records into new
				// ones, which must change nothing the model sees.
				s.grown = true
				s.Shrink()
			},
			"tick": func(t *rapid.T) {
				now = now.Add(time.Duration(rapid.IntRange(0, 300).Draw(t, "ms")) * ms)
			},
			"rtt": func(t *rapid.T) {
				rtt = rapid.SampledFrom([]time.Duration{0, ms, 7 * ms, 100 * ms}).Draw(t, "rtt")
				maxI = rapid.SampledFrom([]time.Duration{0, 20 * ms, time.Second}).Draw(t, "max")
			},
			"resend": func(t *rapid.T) {
				due := clock.Time(0)
				for _, m := range model {
					d := m.last.Add(ResendInterval(m.resends, rtt, maxI))
					if due == 0 || d < due {
						due = d
					}
				}
				if got := s.NextResend(rtt, maxI); got != due {
					t.Fatalf("NextResend = %v, model %v", got, due)
				}
				b, _, ok := s.AppendResend(nil, now, rtt, maxI)
				if ok != (due != 0 && due <= now) {
					t.Fatalf("AppendResend at %v sent %v, model due %v", now, ok, due)
				}
				if !ok {
					return
				}
				h, _ := ParseHeader(b)
				m := model[h.Seq]
				if m == nil || !bytes.Equal(b, m.wire) {
					t.Fatalf("resent %x, not a packet in flight as first sent", b)
				}
				if d := m.last.Add(ResendInterval(m.resends, rtt, maxI)); d != due {
					t.Fatalf("resent seq %d due %v, but the earliest is due %v", h.Seq, d, due)
				}
				m.last = now
				m.resends++
			},
			"": func(t *rapid.T) {
				bytes, oldest := 0, clock.Time(0)
				for _, m := range model {
					bytes += len(m.wire) - HeaderLen
					if oldest == 0 || m.first < oldest {
						oldest = m.first
					}
				}
				if p, b := s.InFlight(); p != len(model) || b != bytes {
					t.Fatalf("InFlight = %d, %d; model %d, %d", p, b, len(model), bytes)
				}
				if got := s.OldestUnacked(); got != oldest {
					t.Fatalf("OldestUnacked = %v, model %v", got, oldest)
				}
				if s.Idle() != (len(model) == 0 && !s.HasNew()) {
					t.Fatalf("Idle = %v", s.Idle())
				}
				if err := checkSeqEntries(s); err != "" {
					t.Fatal(err)
				}
			},
		})
	})
}
