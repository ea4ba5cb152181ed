package fastnet

import (
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/fastnet-engine/fastnet/channel"
	"github.com/fastnet-engine/fastnet/clock"
)

// onAcks leaves the controller as onAck does called for each ack of the
// row in turn, with the bytes in flight acksInOrder gave it before
// (each never resent packet taking its bytes and wireOverhead off), and
// returns the counts and the newest R that acksInOrder kept: on random
// controllers, on or off, with a fixed rate or none, in slow start or
// congestion avoidance, sampled or not, and random rows, several rows
// one after the other on the same controller.
func TestOnAcks(t *testing.T) {
	opts := cmp.AllowUnexported(congestion{}, baseBucket{}, echoMark{})
	rapid.Check(t, func(t *rapid.T) {
		ms := func(label string, lo, hi int) time.Duration {
			return time.Duration(rapid.IntRange(lo, hi).Draw(t, label)) * time.Millisecond
		}
		now := clock.Time(rapid.Int64Range(0, int64(time.Second)).Draw(t, "start"))
		cc := congestion{
			on:           rapid.IntRange(0, 9).Draw(t, "off") > 0,
			cwnd:         rapid.IntRange(ccMinWindow, 200000).Draw(t, "cwnd"),
			ssthresh:     math.MaxInt,
			acked:        rapid.IntRange(0, 20000).Draw(t, "acked"),
			sampled:      rapid.Bool().Draw(t, "sampled"),
			srtt:         ms("srtt", 0, 200),
			roundStart:   now.Add(-ms("round", -20, 200)),
			roundMin:     ms("roundMin", 0, 200),
			lastRound:    ms("lastRound", 0, 200),
			roundSamples: rapid.IntRange(0, 12).Draw(t, "roundSamples"),
		}
		if rapid.IntRange(0, 9).Draw(t, "fixed") == 0 {
			cc.fixed = 1e6
		}
		if rapid.Bool().Draw(t, "avoidance") {
			cc.ssthresh = cc.cwnd + rapid.IntRange(-50000, 50000).Draw(t, "ssthresh")
		}
		mtu := rapid.IntRange(1, 9000).Draw(t, "mtu") + wireOverhead
		inFlight := rapid.IntRange(0, 300000).Draw(t, "inFlight")
		rel := channel.Seq(rapid.Int32Range(int32(channel.MinSeq), int32(channel.MaxSeq)).Draw(t, "rel"))
		want := cc
		wantIn, wantRel := inFlight, rel
		for r := range rapid.IntRange(1, 4).Draw(t, "rows") {
			now = now.Add(ms("step", 0, 50))
			row := make([]channel.Acked, rapid.IntRange(0, ackRowLen).Draw(t, "len"))
			for i := range row {
				// Sent within the last 300 ms, resent sometimes, a few
				// last sent after now (a clock that went back).
				last := now.Add(-ms("age", -5, 300))
				ak := channel.Acked{
					Bytes: rapid.IntRange(0, 9000).Draw(t, "bytes"),
					First: last.Add(-ms("first", 0, 300)),
					Last:  last,
				}
				if rapid.IntRange(0, 7).Draw(t, "resent") == 0 {
					ak.Resends = uint32(rapid.IntRange(1, 5).Draw(t, "resends"))
				}
				// Near rel, before or after it.
				ak.Rel = rel.Add(rapid.IntRange(-100, 1000).Draw(t, "rel step"))
				row[i] = ak
			}

			// What acksInOrder did with onAck.
			wantBytes := 0
			for i := range row {
				ak := &row[i]
				want.onAck(now, ak.First, ak.Last, ak.Resends, ak.Bytes+wireOverhead, wantIn, mtu)
				wantBytes += ak.Bytes
				if ak.Resends == 0 {
					wantIn -= ak.Bytes + wireOverhead
				}
			}
			for i := range row {
				if channel.Distance(wantRel, row[i].Rel) < channel.SeqSpace/2 {
					wantRel = row[i].Rel
				}
			}

			in, bytes, rel2 := cc.onAcks(now, row, inFlight, mtu, rel)
			if diff := cmp.Diff(want, cc, opts); diff != "" {
				t.Fatalf("row %d: controller differs (-onAck +onAcks):\n%s", r, diff)
			}
			if in != wantIn || bytes != wantBytes || rel2 != wantRel {
				t.Fatalf("row %d: onAcks returned in flight %d, bytes %d, R %d; want %d, %d, %d", r, in, bytes, rel2, wantIn, wantBytes, wantRel)
			}
			inFlight, rel = in, rel2
		}
	})
}

// onAck is the controller's ack of one reliable packet as the engine
// folded it in before onAcks, which TestOnAcks holds onAcks to: the ack of
// a packet of n bytes first sent at first and last sent at last, resent
// resends times, while inFlight bytes (it included) were in flight (N77,
// N78).
func (cc *congestion) onAck(now, first, last clock.Time, resends uint32, n, inFlight, mtu int) {
	if !cc.on || cc.fixed > 0 {
		return
	}
	if resends == 0 && now >= last {
		// An RTT sample (Karn): smoothed as RFC 6298, and HyStart++'s
		// delay test in slow start. Written here, not in a function of
		// its own, so that an ack makes one call to the controller.
		r := now.Sub(last)
		if !cc.sampled {
			cc.sampled = true
			cc.srtt = r
			cc.roundStart = now
		} else {
			cc.srtt = (7*cc.srtt + r) / 8
		}
		if cc.roundSamples == 0 || r < cc.roundMin {
			cc.roundMin = r
		}
		cc.roundSamples++
		if cc.cwnd < cc.ssthresh && cc.lastRound > 0 && cc.roundSamples >= hsMinSamples {
			eta := min(max(cc.lastRound/8, hsMinEta), hsMaxEta)
			if cc.roundMin >= cc.lastRound+eta {
				cc.ssthresh = cc.cwnd // the queue has begun to grow
			}
		}
	}
	if first >= cc.roundStart && cc.roundSamples > 0 {
		// The first ack of a packet sent in the round: a round trip
		// has passed since it began.
		cc.lastRound, cc.roundMin, cc.roundSamples = cc.roundMin, 0, 0
		cc.roundStart = now
	}
	if cc.cwnd < cc.ssthresh {
		// Slow start: grow while the window is what limits the sender.
		if 2*inFlight >= cc.cwnd {
			cc.cwnd += n
		}
		return
	}
	if inFlight+3*mtu < cc.cwnd {
		return // the application, not the window, limits the sender
	}
	// One datagram a window, of the path's common size at least: the
	// payload MTU is small until estimation has grown it (D19).
	cc.acked += n
	if cc.acked >= cc.cwnd {
		cc.acked -= cc.cwnd
		cc.cwnd += max(mtu, ccSegment)
	}
}
