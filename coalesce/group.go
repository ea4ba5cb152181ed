package coalesce

import (
	"time"

	"github.com/fastnet-engine/fastnet/clock"
)

// Group describes the current message group (CMG, D10) as the receiver of a
// message channel sees it: the queued packets from the head of its queue
// (the first packet after the ignore number) that may make up one message.
// Package channel gathers these facts; [Decide] applies the rules.
type Group struct {
	// Blocked reports that the head is blocked (D7): reliable packets it
	// depends on have not been consumed yet.
	Blocked bool
	// Unblockable reports that the head is blocked and can never become
	// unblocked: its reliable sequence number needs more reliable packets
	// than there are free sequence numbers between the ignore number and
	// the head, or lies before the last consumed one. Only a peer that
	// breaks the protocol produces this (D23: nothing stalls forever).
	Unblockable bool
	// Gap reports that packets between the ignore number and the head are
	// missing: they may still arrive, so an unreliable head that does not
	// start a message may yet be preceded by its start.
	Gap bool
	// Start reports that the head starts a message.
	Start bool
	// Reliable is the reliability of the group's packets.
	Reliable bool
	// Complete reports that the group's sequence numbers have no hole and
	// its bytes reach the encoded size its message header announces (D11
	// rule 2).
	Complete bool
	// Malformed reports that the group can never be a valid message: its
	// header announces more than the maximum message size, it holds more
	// bytes than announced, it ends (at the start of another message, a
	// packet of other reliability or reliable sequence, or the edge of the
	// receive window or memory) before it is complete, or, once decoded,
	// its checksum or its message's reliability flag is wrong (D11).
	Malformed bool
	// Newest is the arrival time of the group's most recent packet (the
	// CMG's "last modified time").
	Newest clock.Time
}

// Action is what the receiver must do with the current message group.
type Action uint8

// The outcomes of [Decide].
const (
	// Wait: leave the group queued. More packets may still come (D11
	// rule 1, or an incomplete group not yet expired).
	Wait Action = iota
	// Deliver: decode the group's message, verify it, hand it to the
	// application, set the ignore number to the group's last sequence
	// number and, for a reliable group, L to its last reliable sequence
	// number (D11 rule 2). If verification fails, decide again with
	// Malformed set.
	Deliver
	// Expire: drop the unreliable group, whose newest packet is at least
	// the MCI old, and set the ignore number to its last sequence number
	// (D11 rule 3).
	Expire
	// Discard: drop the unreliable group, which can never become a valid
	// message (malformed, its start packet already lost, or unblockable),
	// and set the ignore number to its last sequence number (D11).
	Discard
	// Fail: the group is reliable and can never become a valid message; the
	// peer has broken the protocol and the connection must be closed (D11,
	// last paragraph).
	Fail
)

func (a Action) String() string {
	switch a {
	case Wait:
		return "Wait"
	case Deliver:
		return "Deliver"
	case Expire:
		return "Expire"
	case Discard:
		return "Discard"
	case Fail:
		return "Fail"
	}
	return "Action(?)"
}

// Decide applies the coalescing rules of D11 to the current message group g
// at time now, with message coalescing interval mci. The receiver calls it
// whenever a packet arrives and when the MCI timer fires, and acts on the
// answer, repeating while the answer is not Wait. An unreliable group
// expires once now-g.Newest >= mci, so the timer may be set at exactly
// g.Newest+mci.
func Decide(g Group, now clock.Time, mci time.Duration) Action {
	switch {
	case g.Blocked && !g.Unblockable:
		// Rule 1: reliable packets are still on their way.
		return Wait
	case g.Blocked:
		// Unblockable: never a valid message.
		return failOrDiscard(g)
	case !g.Start:
		// A head that does not start a message. A reliable one can never
		// be completed (its start would have been consumed already); an
		// unreliable one can only if its start may still arrive, in the gap
		// before it, and then waits for it no longer than the MCI. Its
		// other facts (Complete, Malformed) mean nothing.
		if g.Reliable || !g.Gap {
			return failOrDiscard(g)
		}
		if now.Sub(g.Newest) >= mci {
			return Expire
		}
		return Wait
	case g.Malformed:
		return failOrDiscard(g)
	case g.Complete:
		// Rule 2.
		return Deliver
	case !g.Reliable && now.Sub(g.Newest) >= mci:
		// Rule 3.
		return Expire
	}
	return Wait
}

// failOrDiscard is the outcome for a group that can never be a valid
// message.
func failOrDiscard(g Group) Action {
	if g.Reliable {
		return Fail
	}
	return Discard
}
