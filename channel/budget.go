package channel

import "github.com/fastnet-engine/fastnet/internal/bufpool"

// Budget is a receive memory budget (D22): the bytes the receivers sharing
// it hold, as Receiver.Bytes counts them, plus whatever else its owner
// charges with Take or Add (a connection's state for each channel). Its
// zero value has no limit.
//
// Budgets nest: a connection's budget may have as Parent a budget shared
// by every connection of an endpoint. Every change of Used, and of the
// memory promised to messages already begun (the grants, see
// Receiver.Handle), is passed on to the parent, and nothing is admitted
// that would take any budget on the way past its Limit.
//
// The receivers sharing a budget keep the free packet buffers of its root
// (the budget without a parent) for reuse. Those buffers are counted
// against the root's Limit beside Used: a buffer is kept only while the
// root has room for it, and kept buffers are given up, largest first, as
// soon as a charge needs their room. So the memory a tree of budgets
// holds is Used plus Free at its root, within the root's Limit.
type Budget struct {
	// Used is the sum of the Bytes of the receivers sharing the budget,
	// those of the budgets below it, and what Take and Add charged.
	Used int
	// Limit bounds Used, the grants and, at the root, the free buffers
	// kept; 0 or less means no limit.
	Limit int
	// Parent, if not nil, is a budget this one is part of.
	Parent *Budget
	// Reserve is memory that only grants may take (N20, N50): a packet
	// that no grant covers must leave min(Reserve, Limit) free, while a
	// packet that begins a reliable message at the head of its queue with
	// the grant of the rest may use it. So once every granted message has
	// completed, the messages begun and not granted cannot hold the
	// memory that the next grant needs, and one of them, if it needs no
	// more than the reserve, is granted. Take leaves min(Reserve,
	// Limit/2) free: what it charges, a connection's state for each
	// channel and its receivers, must not starve its packets either. It
	// should be the memory a message of the largest size needs
	// (MessageMemory).
	Reserve int
	// MaxFree bounds the bytes of free packet buffers a root budget keeps
	// for reuse; 0 means Limit (or, without a Limit, the largest MaxBytes
	// of its receivers).
	MaxFree int

	// MaxHolders bounds how many of the receivers sharing the budget hold
	// queued packets at once (each needs HoldOverhead beyond its packets);
	// a packet that would make one more receiver hold some is refused as
	// NoMemory, and past half of MaxHolders only a packet that starts a
	// message and waits for nothing may (see mayHold). A receiver already
	// holding packets takes the rest of its messages within Limit, so the
	// bound cannot stall a message once it has begun. 0 or less means no
	// bound. It applies to the receivers of this budget only, not to those
	// of the budgets below it.
	MaxHolders int

	// committed is the sum of the grants below the budget: memory
	// promised to the messages at the heads of receivers' queues, which no
	// other packet may take.
	committed int
	holders   int // receivers of this budget holding queued packets
	pool      bufpool.Pool
}

// Holders returns how many receivers sharing the budget hold queued
// packets.
func (b *Budget) Holders() int { return b.holders }

// Granted returns the bytes promised to messages already begun by the
// receivers sharing the budget and those below it (N20): memory no other
// packet may take.
func (b *Budget) Granted() int { return b.committed }

// Free returns the bytes of free packet buffers the budget keeps for reuse
// (at a root; 0 below one).
func (b *Budget) Free() int { return b.pool.Retained }

// Take charges n bytes to b, and to its parents, if they fit beside what
// the budgets hold and have promised, and their Reserve; it reports
// whether they did.
func (b *Budget) Take(n int) bool {
	if !b.fits(n, 0, forState) {
		return false
	}
	b.add(n, 0)
	return true
}

// Fits reports whether n more bytes would fit b and its parents now, their
// Reserve left free.
func (b *Budget) Fits(n int) bool { return b.fits(n, 0, forState) }

// What a charge is for, which says how much of the Reserve it must leave
// free (Budget.Reserve).
type chargeKind uint8

const (
	forPacket  chargeKind = iota // a packet no grant covers: all of it
	forState                     // Take: up to half the Limit
	forGranted                   // a grant, or what it covers: none
)

// Add charges n bytes to b and its parents whether they fit or not: for
// memory already held that moves from one account to another (a message
// delivered by a receiver and kept by its connection).
func (b *Budget) Add(n int) { b.add(n, 0) }

// Give returns n bytes charged with Take or Add.
func (b *Budget) Give(n int) { b.add(-n, 0) }

// Detach gives everything b holds and has promised back to its parents and
// leaves them: its receivers and their memory are being dropped together
// (a connection that ends). b keeps its own counts, so that receivers that
// still run against it stay consistent.
func (b *Budget) Detach() {
	if b.Parent != nil {
		b.Parent.add(-b.Used, -b.committed)
		b.Parent = nil
	}
}

// root returns the budget at the top of b's tree.
func (b *Budget) root() *Budget {
	for b.Parent != nil {
		b = b.Parent
	}
	return b
}

// add passes a change of the bytes used and promised to b and its parents.
func (b *Budget) add(used, committed int) {
	for x := b; x != nil; x = x.Parent {
		x.Used += used
		x.committed += committed
	}
}

// fits reports whether b and its parents can take used more bytes and
// committed more bytes of grants (either may be negative) for a charge of
// the given kind, leaving as much of their Reserve free as it must. A root
// gives up free buffers to make the room. A change that adds nothing
// always fits.
func (b *Budget) fits(used, committed int, kind chargeKind) bool {
	d := used + committed
	if d <= 0 {
		return true
	}
	for x := b; x != nil; x = x.Parent {
		if x.Limit <= 0 {
			continue
		}
		switch kind {
		case forPacket:
			d = used + committed + min(x.Reserve, x.Limit)
		case forState:
			d = used + committed + min(x.Reserve, x.Limit/2)
		}
		over := x.Used + x.committed + x.pool.Retained + d - x.Limit
		if over > 0 && x.pool.Retained > 0 {
			x.pool.Trim(max(x.pool.Retained-over, 0))
			over = x.Used + x.committed + x.pool.Retained + d - x.Limit
		}
		if over > 0 {
			return false
		}
	}
	return true
}

// roomToKeep reports whether the root r may keep a free buffer that is
// still counted in Used: the buffers it keeps and what its tree holds
// and has promised stay within its Limit.
func (r *Budget) roomToKeep() bool {
	return r.Limit <= 0 || r.Used+r.committed+r.pool.Retained <= r.Limit
}

// rootOrNil returns the root of b's tree, or nil if b is nil.
func (b *Budget) rootOrNil() *Budget {
	if b == nil {
		return nil
	}
	return b.root()
}
