package channel

import (
	"bytes"
	"encoding/binary"
	"math"
	"reflect"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/internal/fifo"
)

// appendRunModel is what AppendRun is defined as (N111): AppendNew one
// packet after the other, each in a frame, while the sender may and lim
// allows. If costs is not nil, the cost of the reliable packets so far is
// appended to it at each.
func appendRunModel(s *Sender, b []byte, now clock.Time, tag uint16, lim RunLimit, costs *[]int) ([]byte, Run) {
	var r Run
	frames, cost := 0, 0
	for s.MayAppend() {
		n := s.NextLen(lim.MTU)
		size := 2 + HeaderLen + n
		if len(b)+2+size > lim.End {
			break
		}
		if r.Packets > 0 {
			if r.Packets >= lim.Max || frames >= lim.Frames {
				break
			}
			if s.NextReliable() {
				if cost > lim.Reliable {
					break
				}
			} else if lim.Expire && s.Expires(lim.Before) {
				break
			}
		}
		b = binary.BigEndian.AppendUint16(b, uint16(size))
		b = binary.BigEndian.AppendUint16(b, tag)
		var sent Sent
		b, sent = s.AppendNew(b, now, lim.MTU)
		if sent.Bytes != n {
			panic("AppendNew sent another chunk than NextLen said")
		}
		if sent.Reliable {
			r.Reliable++
			r.ReliableBytes += n
			cost += n + lim.Overhead
			if costs != nil {
				*costs = append(*costs, cost)
			}
		}
		frames += size
		r.Packets++
		r.Bytes += n
	}
	return b, r
}

// N111: AppendRun appends what its model does, for any queue of
// messages, any state of the packets in flight and any limits, and
// leaves the sender as the model does: the packets that follow, the
// acks' outcomes and what is in flight are the same.
func TestAppendRunIsAppendNewInARow(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var ss [3]*Sender // AppendRun's, the model's, and one to try the run on
		for i := range ss {
			ss[i] = NewSender(3)
		}
		ahead := rapid.IntRange(0, 40).Draw(t, "ahead")
		mtu := rapid.IntRange(0, 400).Draw(t, "mtu")
		now := clock.Epoch.Add(time.Second)
		each := func(f func(s *Sender)) {
			for _, s := range ss {
				f(s)
			}
		}
		each(func(s *Sender) { s.SetMaxAhead(ahead) })
		// Some packets sent and some acked before: the oldest in
		// flight, if any, bounds how far the run goes.
		queue := func(label string) {
			for i := range rapid.IntRange(0, 30).Draw(t, label) {
				msg := bytes.Repeat([]byte{byte(i)}, rapid.IntRange(0, 150).Draw(t, "size"))
				reliable := rapid.Bool().Draw(t, "reliable")
				if rapid.IntRange(0, 4).Draw(t, "untimed") == 0 {
					each(func(s *Sender) { s.Queue(msg, reliable) }) // at 0: never expires
					continue
				}
				at := now.Add(-time.Duration(rapid.IntRange(0, 100).Draw(t, "age")) * time.Millisecond)
				each(func(s *Sender) { s.QueueAt(msg, reliable, at) })
			}
		}
		queue("before")
		for range rapid.IntRange(0, 20).Draw(t, "sentBefore") {
			each(func(s *Sender) { s.AppendNew(nil, now, mtu) })
		}
		for range rapid.IntRange(0, 10).Draw(t, "acks") {
			seq := Seq(rapid.IntRange(0, 20).Draw(t, "ackSeq"))
			each(func(s *Sender) { s.HandleAck(seq) })
		}
		queue("queued")
		lim := RunLimit{
			End:      rapid.IntRange(0, 2000).Draw(t, "end"),
			MTU:      mtu,
			Max:      rapid.SampledFrom([]int{0, 1, 2, 5, math.MaxInt}).Draw(t, "max"),
			Expire:   rapid.Bool().Draw(t, "expire"),
			Before:   now.Add(-time.Duration(rapid.IntRange(0, 100).Draw(t, "before")) * time.Millisecond),
			Overhead: rapid.IntRange(0, 50).Draw(t, "overhead"),
			Frames:   rapid.SampledFrom([]int{0, 1, 100, 1000, math.MaxInt}).Draw(t, "frames"),
		}
		// The reliable room: anything, or what the reliable packets of
		// the run up to one of them cost, or a byte less.
		try := lim
		try.Reliable = math.MaxInt
		costs := []int{-1, 0}
		appendRunModel(ss[2], nil, now, 0, try, &costs)
		if rapid.Bool().Draw(t, "roomAtACost") {
			lim.Reliable = rapid.SampledFrom(costs).Draw(t, "cost") - rapid.IntRange(0, 1).Draw(t, "less")
		} else {
			lim.Reliable = rapid.IntRange(-100, 600).Draw(t, "reliableRoom")
		}
		prefix := []byte{9, 9, 9}
		// Spare capacity or none: AppendRun writes the frames of
		// whole messages in place where they fit.
		spare := rapid.SampledFrom([]int{0, 100, 2000}).Draw(t, "spare")
		buf := append(make([]byte, 0, len(prefix)+spare), prefix...)
		got, gr := ss[0].AppendRun(buf, now, 0x1234, lim)
		want, wr := appendRunModel(ss[1], bytes.Clone(prefix), now, 0x1234, lim, nil)
		if !bytes.Equal(got, want) || gr != wr {
			t.Fatalf("AppendRun appended %x, %+v; one by one, %x, %+v", got, gr, want, wr)
		}
		// The messages sent are released alike.
		if len(ss[0].msgs) != len(ss[1].msgs) || ss[0].bufs.Retained != ss[1].bufs.Retained {
			t.Fatalf("free messages %d, retained %d; one by one %d, %d",
				len(ss[0].msgs), ss[0].bufs.Retained, len(ss[1].msgs), ss[1].bufs.Retained)
		}
		// The packets in flight are kept alike, record for record and
		// entry for entry: AppendRun writes out what track does.
		if a, b := inFlightBook(ss[0]), inFlightBook(ss[1]); !reflect.DeepEqual(a, b) {
			t.Fatalf("in flight after the run:\n%+v\none by one:\n%+v", a, b)
		}
		// What is left goes out alike, and the acks of everything sent
		// free the same.
		later := now.Add(time.Millisecond)
		for i := 0; ; i++ {
			a, as := ss[0].AppendNew(nil, later, mtu)
			b, bs := ss[1].AppendNew(nil, later, mtu)
			if !bytes.Equal(a, b) || as != bs {
				t.Fatalf("packet %d after the run: %x %+v, one by one %x %+v", i, a, as, b, bs)
			}
			if len(a) == 0 {
				break
			}
		}
		for seq := range Seq(100) {
			a, aok := ss[0].HandleAck(seq)
			b, bok := ss[1].HandleAck(seq)
			if aok != bok || a != b {
				t.Fatalf("ack of %d: %+v %v, one by one %+v %v", seq, a, aok, b, bok)
			}
		}
		ap, ab := ss[0].InFlight()
		bp, bb := ss[1].InFlight()
		if ap != bp || ab != bb || ss[0].QueuedBytes() != ss[1].QueuedBytes() {
			t.Fatalf("in flight %d packets %d bytes, queued %d; one by one %d, %d, %d",
				ap, ab, ss[0].QueuedBytes(), bp, bb, ss[1].QueuedBytes())
		}
	})
}

// inFlightBook returns the bookkeeping of a sender's packets in flight.
type inFlightBookkeeping struct {
	Recs                    []record
	FreeRecs                []int32
	BySeq                   fifo.Queue[seqEntry]
	DeadSeq                 int
	ZeroNo                  int64
	NonEmpty                uint64
	InFlight, InFlightBytes int
	SendNo, SentSum         int64
}

func inFlightBook(s *Sender) inFlightBookkeeping {
	return inFlightBookkeeping{s.recs, s.freeRecs, s.bySeq, s.deadSeq, s.zeroNo, s.nonEmpty, s.inFlight, s.inFlightBytes, s.sendNo, s.sentSum}
}
