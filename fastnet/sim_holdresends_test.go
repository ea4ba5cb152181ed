package fastnet_test

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/fastnet"
)

// holdingResends is an endpoint that holds its resends back
// (Endpoint.HoldResends) for a while after some of its inputs, as a
// driver does while a deadline is put off and input waits (N130): after
// every input that finds it not holding, and not within as long as its
// last hold lasted since that ended, it holds them for a time drawn up to
// max from its own sequence. Holds so take at most half of the time, and
// each ends.
type holdingResends struct {
	*fastnet.Endpoint
	max           time.Duration
	rng           uint64
	until, freeAt clock.Time // the hold's end (0: none), and when a next may start
	holds         int        // holds started
	heldSent      int        // datagrams sent while holding
}

// input starts a hold at now if one may start.
func (h *holdingResends) input(now clock.Time) {
	if h.until != 0 || now < h.freeAt {
		return
	}
	h.rng = h.rng*6364136223846793005 + 1442695040888963407 // a fixed sequence (PCG's multiplier)
	d := time.Duration(h.rng>>33)%h.max + 1
	h.until, h.freeAt = now.Add(d), now.Add(2*d)
	h.holds++
	h.Endpoint.HoldResends(now, true)
}

func (h *holdingResends) HandleDatagram(now clock.Time, from netip.AddrPort, b []byte) {
	h.Endpoint.HandleDatagram(now, from, b)
	h.input(now)
}

func (h *holdingResends) HandleDatagrams(now clock.Time, ds []fastnet.Incoming) {
	h.Endpoint.HandleDatagrams(now, ds)
	h.input(now)
}

func (h *holdingResends) NextDeadline() (clock.Time, bool) {
	d, ok := h.Endpoint.NextDeadline()
	if h.until != 0 && (!ok || h.until < d) {
		return h.until, true
	}
	return d, ok
}

func (h *holdingResends) HandleTimeout(now clock.Time) {
	if h.until != 0 && now >= h.until {
		h.until = 0
		h.Endpoint.HoldResends(now, false)
	}
	h.Endpoint.HandleTimeout(now)
}

func (h *holdingResends) PollTransmit(now clock.Time, buf []byte) (fastnet.Transmit, bool) {
	tx, ok := h.Endpoint.PollTransmit(now, buf)
	if ok && h.until != 0 {
		h.heldSent++
	}
	return tx, ok
}

// P1 with resends held back (N130): over any network without corruption
// and any workload, with each side holding its resends back for up to
// 1-500 ms after its inputs, every reliable message still arrives
// exactly once and in order, the connection survives, and a graceful
// close ends both sides: a resend held back is only late. Across the
// cases, datagrams must have gone while resends were held, and packets
// been resent, or the property proves nothing.
func TestPropertyHeldResendsDeliver(t *testing.T) {
	var holds, heldSent, resent int
	rapid.Check(t, func(t *rapid.T) {
		c := drawCase(t, 0, 20, false)
		c.setup.HoldResends = ms(t, 1, 500, "hold")
		c.setup.Batch = rapid.Bool().Draw(t, "batch")
		s := play(t, c)
		for side := range 2 {
			if s.ended[side] != nil {
				t.Fatalf("%s: connection lost: %v (at %v)", sideName(side), s.ended[side], s.endAt[side].Sub(clock.Epoch))
			}
			holds += s.holds[side].holds
			heldSent += s.holds[side].heldSent
			resent += int(s.stats(side).PacketsResent)
		}
		s.closeAndIdle()
		for side := range 2 {
			if !errors.Is(s.ended[side], fastnet.ErrClosed) && !errors.Is(s.ended[side], fastnet.ErrPeerClosed) &&
				!errors.Is(s.ended[side], fastnet.ErrTimeout) {
				t.Errorf("%s ended with %v after a graceful close", sideName(side), s.ended[side])
			}
		}
	})
	if holds == 0 || heldSent == 0 || resent == 0 {
		t.Fatalf("%d holds, %d datagrams sent while holding, %d packets resent: all must be some", holds, heldSent, resent)
	}
	t.Logf("%d holds, %d datagrams sent while holding, %d packets resent", holds, heldSent, resent)
}
