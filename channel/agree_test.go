package channel

import (
	"errors"
	"testing"

	"github.com/fastnet-engine/fastnet/coalesce"
)

// N155, D23, D26: one sender's packets agree with one another: of two
// packets a before b, b waits for (need, D7) at least a's R and at most
// one more for each place between them. A forged unreliable packet whose
// R is plausible where it lies (N154) but more than the sender's waited
// at the head of the queue for reliable packets that never come: the
// channel's messages queued behind it were never delivered, a reliable
// one among them acked all the same. It now meets the packets around it
// and gives way.
func TestForgedBlockerGivesWay(t *testing.T) {
	rel := func(s string) []byte { return coalesce.AppendMessage(nil, []byte(s), true) }
	unrel := func(s string) []byte { return coalesce.AppendMessage(nil, []byte(s), false) }
	t.Run("reliable after it", func(t *testing.T) {
		p := newPair(t, ReceiverConfig{})
		p.handle(Accepted, raw(true, true, 0, 1, rel("a"))) // L 1
		p.wantPoll("first", msgOf(true, []byte("a")))
		// Seq 1 and 2 lost; the forger guesses R 2 at seq 3.
		p.handle(Accepted, raw(false, true, 3, 2, unrel("forged")))
		// The sender's next reliable packet, R 2 at seq 5: it waits
		// for R 1, and the forged packet says R 2 lies before it.
		p.handle(Accepted, raw(true, true, 5, 2, rel("b")))
		p.wantPoll("the reliable message", msgOf(true, []byte("b")))
		if d := p.r.Drops(); d.Malformed != 1 {
			t.Errorf("Drops = %+v, want the forged packet counted as malformed", d)
		}
	})
	t.Run("unreliable after it", func(t *testing.T) {
		p := newPair(t, ReceiverConfig{})
		p.handle(Accepted, raw(true, true, 0, 1, rel("a")))
		p.wantPoll("first", msgOf(true, []byte("a")))
		p.handle(Accepted, raw(false, true, 3, 2, unrel("forged")))
		// The sender's unreliable packets carry R 1: the first to
		// meet the forged one is dropped with it, the next delivered.
		p.handle(Corrupt, raw(false, true, 4, 1, unrel("u4")))
		p.handle(Accepted, raw(false, true, 5, 1, unrel("u5")))
		p.wantPoll("past the forged packet", msgOf(false, []byte("u5")))
		p.handle(Accepted, raw(true, true, 6, 2, rel("b")))
		p.wantPoll("the reliable message", msgOf(true, []byte("b")))
		if d := p.r.Drops(); d.Malformed != 2 {
			t.Errorf("Drops = %+v, want the forged packet and the one it met", d)
		}
	})
	t.Run("unreliable before it", func(t *testing.T) {
		p := newPair(t, ReceiverConfig{})
		p.handle(Accepted, raw(true, true, 0, 1, rel("a")))
		p.wantPoll("first", msgOf(true, []byte("a")))
		// Seq 5 is queued behind the lost seq 1-4 (its message's
		// first packet at seq 4 lost; it waits for the MCI).
		p.handle(Accepted, raw(false, false, 5, 1, []byte{1}))
		p.handle(Corrupt, raw(false, true, 3, 2, unrel("forged")))
		p.handle(Accepted, raw(true, true, 6, 2, rel("b")))
		p.wantPoll("the reliable message", msgOf(true, []byte("b")))
	})
	t.Run("reliable meets reliable", func(t *testing.T) {
		p := newPair(t, ReceiverConfig{})
		p.handle(Accepted, raw(true, true, 0, 1, rel("a")))
		p.wantPoll("first", msgOf(true, []byte("a")))
		p.handle(Accepted, raw(true, true, 3, 3, rel("c"))) // R 2 owed at seq 1 or 2
		// R 3 at seq 5 cannot follow R 3 at seq 3: one of the two is
		// forged or damaged, and the one queued was acked. The
		// channel fails, as D26 ends it rather than lose a message.
		p.handle(Rejected, raw(true, true, 5, 3, rel("x")))
		if !errors.Is(p.r.Err(), ErrReliableSeq) {
			t.Fatalf("Err = %v, want ErrReliableSeq", p.r.Err())
		}
	})
	t.Run("reliable clears unreliable run", func(t *testing.T) {
		p := newPair(t, ReceiverConfig{})
		p.handle(Accepted, raw(true, true, 0, 1, rel("a")))
		p.wantPoll("first", msgOf(true, []byte("a")))
		// Forged packets agreeing with one another, R 4 at seq 6 and 7,
		// and with the sender's next reliable packet at seq 8 only if
		// it had R 5.
		p.handle(Accepted, raw(false, true, 6, 4, unrel("f6")))
		p.handle(Accepted, raw(false, true, 7, 4, unrel("f7")))
		p.handle(Accepted, raw(true, true, 8, 2, rel("b")))
		p.wantPoll("the reliable message", msgOf(true, []byte("b")))
		if d := p.r.Drops(); d.Malformed != 2 {
			t.Errorf("Drops = %+v, want both forged packets", d)
		}
	})
}
