package mtu

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
)

// estTest drives one Estimator by hand, as the endpoint would, in the
// style of a scripted connection test.
type estTest struct {
	t   *testing.T
	e   *Estimator
	now clock.Time
	rtt time.Duration
	buf []byte
}

func newEstTest(t *testing.T, cfg Config, rtt time.Duration) *estTest {
	t.Helper()
	if cfg.MaxPayload == 0 {
		cfg.MaxPayload = 65505
	}
	if cfg.FirstRoundProbes == 0 {
		cfg.FirstRoundProbes = ProbesPerRound // D19's round: these tests are about other rules
	}
	return &estTest{t: t, e: NewEstimator(cfg), now: clock.Epoch, rtt: rtt, buf: make([]byte, 0, 65536)}
}

// poll returns a copy of the payload due now, or nil.
func (tc *estTest) poll() []byte {
	tc.t.Helper()
	tc.e.HandleTimeout(tc.now)
	p, ok := tc.e.AppendPayload(tc.buf[:0], tc.now, tc.rtt)
	if !ok {
		return nil
	}
	return bytes.Clone(p)
}

// wantPayload checks that want, and only want, is due now.
func (tc *estTest) wantPayload(what string, want []byte) {
	tc.t.Helper()
	got := tc.poll()
	if !bytes.Equal(got, want) {
		tc.t.Fatalf("%s: at %v got payload %x, want %x", what, tc.now, got, want)
	}
	if p := tc.poll(); p != nil {
		tc.t.Fatalf("%s: at %v a second payload %x is due in the same instant", what, tc.now, p)
	}
}

// wantIdle checks that nothing is due now.
func (tc *estTest) wantIdle(what string) {
	tc.t.Helper()
	if p := tc.poll(); p != nil {
		tc.t.Fatalf("%s: at %v got payload %x, want none", what, tc.now, p)
	}
}

// wantDeadline checks that the next deadline is d after now, and moves
// there.
func (tc *estTest) wantDeadline(what string, d time.Duration) {
	tc.t.Helper()
	got := tc.e.NextDeadline()
	if want := tc.now.Add(d); got != want {
		tc.t.Fatalf("%s: at %v deadline %v, want %v (now+%v)", what, tc.now, got, want, d)
	}
	tc.now = got
}

// wantDeadlineWithin checks that the next deadline is lo to hi (excluded)
// from now, and moves to it.
func (tc *estTest) wantDeadlineWithin(what string, lo, hi time.Duration) {
	tc.t.Helper()
	got := tc.e.NextDeadline()
	if d := got.Sub(tc.now); d < lo || d >= hi {
		tc.t.Fatalf("%s: deadline in %v, want %v to %v", what, d, lo, hi)
	}
	tc.now = got
}

func (tc *estTest) deliver(p []byte) { tc.e.HandlePayload(tc.now, p) }

func count(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }

var (
	reset = []byte{0}
	ack   = []byte{1}
)

// TestEstimatorResets checks D19: "reset with a single 0 byte until a single
// 1 byte comes back, up to 10 tries, 3 RTTs apart", and that a peer that
// never answers leaves the MTU where it is until the next period.
func TestEstimatorResets(t *testing.T) {
	tests := []struct {
		name    string
		rtt     time.Duration
		tries   int
		wantGap time.Duration
	}{
		{"default tries, 50ms", 50 * time.Millisecond, 0, 150 * time.Millisecond},
		{"unknown rtt is 200ms (D17)", 0, 0, 600 * time.Millisecond},
		{"3 tries, 1s", time.Second, 3, 3 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc := newEstTest(t, Config{ResetTries: tt.tries, Period: time.Minute}, tt.rtt)
			if d := tc.e.NextDeadline(); d != 0 {
				t.Fatalf("before Start: deadline %v, want none", d)
			}
			tc.wantIdle("before Start")
			tc.e.Start(tc.now)
			tries := tt.tries
			if tries == 0 {
				tries = DefaultResetTries
			}
			for i := range tries {
				tc.wantPayload(fmt.Sprintf("reset %d", i+1), reset)
				tc.wantDeadline(fmt.Sprintf("after reset %d", i+1), tt.wantGap)
			}
			tc.e.HandleTimeout(tc.now)
			tc.wantIdle("after the last reset's wait")
			st := tc.e.Stats()
			if st.GaveUp != 1 || st.Estimations != 1 || st.Searching || st.ResetsSent != uint64(tries) {
				t.Fatalf("stats %+v, want 1 estimation given up after %d resets", st, tries)
			}
			if m := tc.e.MTU(); m != DefaultInitial {
				t.Fatalf("MTU %d, want it left at %d", m, DefaultInitial)
			}
			// Nothing measured: the next try comes after about 1 s, then
			// 2 s, 4 s, 8 s, each spread by half of itself (N44).
			tc.wantDeadlineWithin("next estimation after a give-up", time.Second/2, 3*time.Second/2)
			for i := range tries {
				tc.wantPayload(fmt.Sprintf("retry's reset %d", i+1), reset)
				tc.wantDeadline(fmt.Sprintf("after retry's reset %d", i+1), tt.wantGap)
			}
			tc.e.HandleTimeout(tc.now)
			tc.wantDeadlineWithin("second retry", time.Second, 3*time.Second)
		})
	}
}

// TestEstimatorRound checks one round (D19): after the ack, 100 probes of
// the round's size, an interval apart, then the final wait, at least two
// RTTs.
func TestEstimatorRound(t *testing.T) {
	tests := []struct {
		name      string
		cfg       Config
		rtt       time.Duration
		wantFinal time.Duration
	}{
		{"defaults", Config{}, 50 * time.Millisecond, DefaultFinalTimeout},
		{"final wait at least 3 RTT", Config{}, 200 * time.Millisecond, 600 * time.Millisecond},
		{"custom", Config{Initial: 100, ProbeInterval: 7 * time.Millisecond, FinalTimeout: time.Second}, 50 * time.Millisecond, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc := newEstTest(t, tt.cfg, tt.rtt)
			cfg := tc.e.cfg
			tc.e.Start(tc.now)
			tc.wantPayload("reset", reset)
			tc.now = tc.now.Add(tt.rtt)
			tc.deliver(ack)
			var probes [][]byte
			for i := range ProbesPerRound {
				if i == 50 {
					tc.deliver(count(50))
				}
				p := tc.poll()
				if len(p) != cfg.Initial {
					t.Fatalf("probe %d: %d bytes, want %d", i+1, len(p), cfg.Initial)
				}
				probes = append(probes, p)
				tc.wantIdle(fmt.Sprintf("after probe %d", i+1))
				if i < ProbesPerRound-1 {
					tc.wantDeadline(fmt.Sprintf("probe %d", i+2), cfg.ProbeInterval)
				}
			}
			// Contents come from Rand: probes differ from one another.
			for i := 1; i < len(probes); i++ {
				if bytes.Equal(probes[i], probes[i-1]) {
					t.Fatalf("probes %d and %d are identical: %x", i, i+1, probes[i])
				}
			}
			tc.wantDeadline("end of the final wait", tt.wantFinal)
			tc.wantPayload("the next round's reset", reset)
			st := tc.e.Stats()
			if st.Rounds != 1 || st.ProbesSent != ProbesPerRound || st.ProbeBytes != uint64(ProbesPerRound*cfg.Initial) {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

// TestEstimatorEarlyEnd checks that a round ends as soon as its count
// reaches 100 during the final wait: nothing can raise it further.
func TestEstimatorEarlyEnd(t *testing.T) {
	tc := newEstTest(t, Config{}, 50*time.Millisecond)
	tc.e.Start(tc.now)
	tc.wantPayload("reset", reset)
	tc.deliver(ack)
	for range ProbesPerRound {
		tc.poll()
		tc.now = tc.now.Add(DefaultProbeInterval)
	}
	tc.deliver(count(99))
	tc.wantIdle("count 99 is not the end")
	tc.deliver(count(100))
	// The round ends at once; the next reset waits until three RTTs after
	// the last probe, for late copies of the counts (N44).
	tc.wantDeadline("the next reset, three RTTs after the last probe", 148*time.Millisecond)
	tc.wantPayload("count 100 ended the round", reset)
	if st := tc.e.Stats(); st.LastCount != 100 || st.LastSize != 32 || !st.LastPass || st.Size != 64 {
		t.Fatalf("stats %+v, want round 32 passed with 100, now probing 64", st)
	}
}

// TestEstimatorReplies checks which replies count (D19: count = largest
// 4-byte reply), and that everything else is ignored: counts above the
// probes sent so far, counts before the ack, late acks and other lengths.
func TestEstimatorReplies(t *testing.T) {
	type reply struct {
		after int // deliver after this many probes; -1 = before the ack
		p     []byte
	}
	tests := []struct {
		name           string
		replies        []reply
		wantCount      int
		wantBad        uint64
		wantIgnored    uint64
		wantFinishedMT bool
	}{
		{name: "largest wins", replies: []reply{{10, count(10)}, {50, count(50)}, {60, count(30)}, {100, count(90)}}, wantCount: 90},
		{name: "above sent is ignored", replies: []reply{{50, count(51)}, {60, count(40)}}, wantCount: 40, wantBad: 1},
		{name: "huge and negative i32 ignored", replies: []reply{{100, count(math.MaxUint32)}, {100, count(1 << 31)}, {100, count(101)}, {100, count(70)}}, wantCount: 70, wantBad: 3},
		{name: "zero ignored", replies: []reply{{5, count(0)}, {6, count(6)}}, wantCount: 6, wantBad: 1},
		{name: "before the ack is stale", replies: []reply{{-1, count(1)}, {10, count(10)}}, wantCount: 10, wantIgnored: 1},
		{name: "late ack ignored", replies: []reply{{3, ack}, {10, count(10)}}, wantCount: 10, wantIgnored: 1},
		{name: "other lengths ignored", replies: []reply{{20, nil}, {20, []byte{2}}, {20, reset}, {20, []byte{0, 50}}, {20, []byte{0, 0, 50}}, {20, []byte{0, 0, 0, 0, 50}}, {20, count(20)}}, wantCount: 20, wantIgnored: 6},
		{name: "no count: the first round fails and the estimation ends", replies: []reply{{100, count(101)}}, wantCount: 0, wantBad: 1, wantFinishedMT: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc := newEstTest(t, Config{}, 50*time.Millisecond)
			tc.e.Start(tc.now)
			deliver := func(after int) {
				for _, r := range tt.replies {
					if r.after == after {
						tc.deliver(r.p)
					}
				}
			}
			tc.wantPayload("reset", reset)
			deliver(-1)
			tc.deliver(ack)
			for i := range ProbesPerRound {
				if p := tc.poll(); len(p) != 32 {
					t.Fatalf("probe %d: got %x", i+1, p)
				}
				deliver(i + 1)
				tc.now = tc.now.Add(DefaultProbeInterval)
			}
			tc.now = tc.now.Add(DefaultFinalTimeout)
			tc.e.HandleTimeout(tc.now)
			st := tc.e.Stats()
			if st.Rounds != 1 || st.LastCount != tt.wantCount || st.BadCounts != tt.wantBad || st.Ignored != tt.wantIgnored {
				t.Fatalf("stats %+v, want count %d, %d bad counts, %d ignored", st, tt.wantCount, tt.wantBad, tt.wantIgnored)
			}
			if tt.wantFinishedMT {
				if st.Searching || st.Estimations != 1 || tc.e.MTU() != DefaultInitial {
					t.Fatalf("stats %+v, MTU %d: want the estimation over, MTU unchanged", st, tc.e.MTU())
				}
				tc.wantIdle("after a failed first round")
			}
		})
	}
}

// TestEstimatorUnresetResponder checks two guards against a responder
// whose counter did not start from this round's reset: an ack that comes
// before the round has sent a reset is ignored, and a round whose every
// count was refused as too high is measured again rather than failed.
func TestEstimatorUnresetResponder(t *testing.T) {
	tc := newEstTest(t, Config{}, 50*time.Millisecond)
	tc.e.Start(tc.now)
	tc.deliver(ack) // before the first reset went out
	tc.wantPayload("reset: the early ack did not start the probes", reset)
	tc.deliver(ack)
	for range ProbesPerRound {
		tc.poll()
		tc.now = tc.now.Add(DefaultProbeInterval)
	}
	tc.deliver(count(100))
	// The count of 100 ended round 32; round 64 starts with a reset, three
	// RTTs after round 32's last probe (N44).
	tc.wantDeadline("round 64 reset", 148*time.Millisecond)
	tc.wantPayload("round 64 reset", reset)
	tc.deliver(ack)
	for i := range ProbesPerRound {
		tc.poll()
		tc.deliver(count(uint32(150 + i))) // a counter that was never reset
		tc.now = tc.now.Add(DefaultProbeInterval)
	}
	tc.now = tc.now.Add(DefaultFinalTimeout)
	tc.wantPayload("the next round's reset", reset)
	st := tc.e.Stats()
	if st.LastSize != 64 || st.LastCount != 0 || st.Retries != 1 || st.Size != 32 || st.Ignored != 1 {
		t.Fatalf("stats %+v: want round 64 refused, then a refresh round of 32", st)
	}
}

// planResponder answers resets and, in round r, the first plan[r] probes
// with their count; probes beyond the plan, and every probe once the plan
// is used up, get no answer.
type planResponder struct {
	plan    []int
	round   int // rounds started, 1-based once the first reset came
	seen    int
	replies [][]byte
}

func (r *planResponder) HandlePayload(p []byte) {
	if isReset(p) {
		if r.seen > 0 || r.round == 0 {
			r.round++
		}
		r.seen = 0
		r.replies = append(r.replies, ack)
		return
	}
	r.seen++
	if r.round-1 < len(r.plan) && r.seen <= r.plan[r.round-1] {
		r.replies = append(r.replies, count(uint32(r.seen)))
	}
}

func (r *planResponder) AppendReply(b []byte) ([]byte, bool) {
	if len(r.replies) == 0 {
		return b, false
	}
	b = append(b, r.replies[0]...)
	r.replies = r.replies[1:]
	return b, true
}

// TestEstimatorPassRule checks D19's thresholds: "A size passes if it loses
// no more than 10 points against the first round and no more than 5 points
// against the last passing round", a count of 0 never passes, and a
// marginal failure is measured again after the last passing size (package
// documentation, "Decisions D19 leaves open").
func TestEstimatorPassRule(t *testing.T) {
	tests := []struct {
		name  string
		retry int
		plan  []int
		want  []string // the first rounds: size:count, + passed, - failed
	}{
		{"10 points against the first", 0, []int{90, 85, 80, 79},
			[]string{"32:90+", "64:85+", "128:80+", "256:79-", "192:0-"}},
		{"5 points against the last pass", 0, []int{90, 95, 90, 89},
			[]string{"32:90+", "64:95+", "128:90+", "256:89+"}},
		{"6 points against the last pass fail", 0, []int{90, 95, 89},
			[]string{"32:90+", "64:95+", "128:89-", "96:0-"}},
		{"gains always pass", 0, []int{50, 100, 100},
			[]string{"32:50+", "64:100+", "128:100+", "256:0-"}},
		{"no count fails at once", 4, []int{90, 0, 90},
			[]string{"32:90+", "64:0-", "48:90+"}},
		{"confirmed failure", 2, []int{90, 80, 90, 80, 90, 80, 95},
			[]string{"32:90+", "64:80-", "32:90+", "64:80-", "32:90+", "64:80-", "48:95+"}},
		{"refreshed reference passes the doubted size", 2, []int{90, 80, 84, 80},
			[]string{"32:90+", "64:80-", "32:84+", "64:80+", "128:0-"}},
		{"the 10-point rule still holds against the first", 1, []int{90, 79, 79, 79},
			[]string{"32:90+", "64:79-", "32:79+", "64:79-", "48:0-"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSim(t, 1, Config{MaxPayload: 65505}, 65535, 0, 50*time.Millisecond)
			s.est.retry = tt.retry
			s.resp = &planResponder{plan: tt.plan}
			s.estimate(time.Hour)
			if len(s.rounds) < len(tt.want) || !slices.Equal(s.rounds[:len(tt.want)], tt.want) {
				t.Fatalf("rounds %v\nwant prefix %v", s.rounds, tt.want)
			}
		})
	}
}

// TestEstimatorSearch checks the search of D19 on lossless paths: sizes
// double from Initial while they pass, then a binary search between the
// last pass and the first failure narrows to within 1 %, never above
// MaxPayload, and each passing size becomes the MTU at once.
func TestEstimatorSearch(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		path    int
		want    []int
		wantMTU int
	}{
		{"1500-byte path", Config{MaxPayload: 65505}, 1500,
			[]int{32, 64, 128, 256, 512, 1024, 2048, 1536, 1280, 1408, 1472, 1504, 1488, 1496}, 1496},
		{"MaxPayload caps the doubling", Config{MaxPayload: 1000}, 65535,
			[]int{32, 64, 128, 256, 512, 1000}, 1000},
		{"Initial at MaxPayload: one round", Config{MaxPayload: 1024, Initial: 1024}, 65535,
			[]int{1024}, 1024},
		{"Initial 100, path 576", Config{MaxPayload: 65505, Initial: 100}, 576,
			[]int{100, 200, 400, 800, 600, 500, 550, 575, 562, 568, 571}, 571},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSim(t, 1, tt.cfg, tt.path, 0, 50*time.Millisecond)
			var changes []int
			s.est.Changed()
			s.start()
			for s.est.Stats().Estimations == 0 && s.step(s.now.Add(time.Hour)) {
				if m, ok := s.est.Changed(); ok {
					changes = append(changes, m)
				}
			}
			var sizes, passed []int
			for _, r := range s.rounds {
				var size, n int
				var sign rune
				fmt.Sscanf(r, "%d:%d%c", &size, &n, &sign)
				sizes = append(sizes, size)
				if sign == '+' && size != s.est.cfg.Initial {
					passed = append(passed, size)
				}
			}
			if !slices.Equal(sizes, tt.want) {
				t.Fatalf("sizes %v\nwant    %v", sizes, tt.want)
			}
			if m := s.est.MTU(); m != tt.wantMTU {
				t.Fatalf("MTU %d, want %d", m, tt.wantMTU)
			}
			// Each passing size became the MTU at once, in order.
			if !slices.Equal(changes, passed) {
				t.Fatalf("MTU changes %v, want each passing size %v", changes, passed)
			}
			if _, ok := s.est.Changed(); ok {
				t.Fatal("Changed reported a change twice")
			}
		})
	}
}

// TestEstimatorReestimation checks the estimations after the first: they
// start Period after the end of the last, verify the MTU in use and the
// last failure, and keep the MTU in use unless a round refutes it.
func TestEstimatorReestimation(t *testing.T) {
	tests := []struct {
		name      string
		newPath   int
		want      []int
		wantMTU   int
		wantFloor int // the smallest MTU during the re-estimation
	}{
		{"unchanged", 1500, []int{32, 1496, 1504}, 1496, 1496},
		{"shrunk", 1280, []int{32, 1496, 764, 1130, 1313, 1221, 1267, 1290, 1278}, 1278, 32},
		{"grown", 1600, []int{32, 1496, 1504, 3008, 2256, 1880, 1692, 1598, 1645, 1621, 1609}, 1598, 1496},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSim(t, 1, Config{MaxPayload: 65505, Period: time.Minute}, 1500, 0, 50*time.Millisecond)
			s.estimate(time.Hour)
			if m := s.est.MTU(); m != 1496 {
				t.Fatalf("first estimation: MTU %d, want 1496", m)
			}
			end := s.now
			if d := s.est.NextDeadline(); d != end.Add(time.Minute) {
				t.Fatalf("next estimation at %v, want a Period after the end %v", d, end.Add(time.Minute))
			}
			s.fwd.path, s.back.path = tt.newPath, tt.newPath
			first := len(s.rounds)
			s.minMTU = s.est.MTU()
			s.rerun(time.Hour)
			var sizes []int
			for _, r := range s.rounds[first:] {
				var size int
				fmt.Sscanf(r, "%d:", &size)
				sizes = append(sizes, size)
			}
			t.Logf("rounds %v", s.rounds[first:])
			if tt.want != nil && !slices.Equal(sizes, tt.want) {
				t.Fatalf("sizes %v\nwant    %v", sizes, tt.want)
			}
			if m := s.est.MTU(); m != tt.wantMTU || m < within1(s.fits()) || m > s.fits() {
				t.Fatalf("MTU %d, want %d, within 1 %% of %d", m, tt.wantMTU, s.fits())
			}
			if s.minMTU != tt.wantFloor {
				t.Fatalf("MTU fell to %d during the re-estimation, want %d", s.minMTU, tt.wantFloor)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"defaults", Config{MaxPayload: 1400}, true},
		{"Initial at MaxPayload", Config{MaxPayload: 100, Initial: 100}, true},
		{"no MaxPayload", Config{}, false},
		{"MaxPayload below 32", Config{MaxPayload: 31, Initial: 31}, false},
		{"Initial below 32", Config{MaxPayload: 1400, Initial: 31}, false},
		{"Initial above MaxPayload", Config{MaxPayload: 1400, Initial: 1401}, false},
		{"negative interval", Config{MaxPayload: 1400, ProbeInterval: -1}, false},
		{"negative final timeout", Config{MaxPayload: 1400, FinalTimeout: -1}, false},
		{"negative period", Config{MaxPayload: 1400, Period: -1}, false},
		{"negative tries", Config{MaxPayload: 1400, ResetTries: -1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if (err == nil) != tt.ok || (err != nil && !errors.Is(err, ErrConfig)) {
				t.Fatalf("Validate() = %v, want ok=%v (errors wrap ErrConfig)", err, tt.ok)
			}
			if !tt.ok {
				defer func() {
					if recover() == nil {
						t.Fatal("NewEstimator accepted an invalid config")
					}
				}()
				NewEstimator(tt.cfg)
			}
		})
	}
}

// TestEstimatorAssume: a size assumed before the first estimation is the
// MTU at once and is reported by Changed; sizes at or below Initial, and
// calls once an estimation has started, change nothing; MaxPayload bounds
// it (N84 of the project's protocol notes).
func TestEstimatorAssume(t *testing.T) {
	for _, tc := range []struct {
		name    string
		size    int
		started bool
		want    int
	}{
		{"assumed", 546, false, 546},
		{"at initial", 32, false, 32},
		{"above max payload", 1 << 20, false, 65505},
		{"after start", 546, true, 32},
	} {
		tt := newEstTest(t, Config{}, 50*time.Millisecond)
		if tc.started {
			tt.e.Start(tt.now)
		}
		tt.e.Assume(tc.size)
		m, changed := tt.e.Changed()
		if tt.e.MTU() != tc.want || m != tc.want || changed != (tc.want != 32) {
			t.Errorf("%s: MTU %d, Changed %d %v; want %d", tc.name, tt.e.MTU(), m, changed, tc.want)
		}
	}
}
