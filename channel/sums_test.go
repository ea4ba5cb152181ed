package channel

import (
	"bytes"
	"testing"

	"github.com/fastnet-engine/fastnet/coalesce"
)

// The packets of messages whose checksums are deferred (N86) carry
// exactly the encoding AppendMessage gives, whether a message leaves in
// one packet or in many, alone or behind others, and whatever was sent,
// expired or dropped around it.
func TestDeferredSumsOnTheWire(t *testing.T) {
	for _, mtu := range []int{9000, 100, 17} {
		s := NewSender(3)
		var want [][]byte
		for i := range 70 {
			n := []int{64, 3, 16, 15, 200, 1000, 5000, 40}[i%8]
			p := bytes.Repeat([]byte{byte(i)}, n)
			rel := i%3 != 0
			s.QueueAt(p, rel, 0)
			want = append(want, coalesce.AppendMessage(nil, p, rel))
		}
		var got []byte
		var all []byte
		for _, w := range want {
			all = append(all, w...)
		}
		for s.MayAppend() {
			pkt, sent := s.AppendNew(nil, 1, mtu)
			if sent.Bytes == 0 {
				t.Fatal("nothing appended")
			}
			got = append(got, pkt[HeaderLen:]...)
			// Ack what is in flight now and then, so that the sender
			// never blocks on its sequence numbers.
			if sent.Reliable {
				s.HandleAck(sent.Seq)
			}
		}
		if !bytes.Equal(got, all) {
			t.Fatalf("MTU %d: the packets do not carry the messages' encodings", mtu)
		}
	}
}

// A busy sender reuses the message structs it frees: a queue of 20,000
// messages sent and acked in one go, then queued again, allocates nothing
// per message (acks of thousands at once are what a fast path gives).
func TestSenderReusesMessages(t *testing.T) {
	s := NewSender(1)
	msg := make([]byte, 64)
	const n = 20000
	s.QueueAt(msg, true, 0) // one always waits, so that the sender never idles
	buf := make([]byte, 0, 256)
	seqs := make([]Seq, 0, n)
	round := func() {
		for range n {
			s.QueueAt(msg, true, 0)
		}
		seqs = seqs[:0]
		for range n {
			_, sent := s.AppendNew(buf[:0], 1, 9000)
			seqs = append(seqs, sent.Seq)
		}
		for _, q := range seqs {
			s.HandleAck(q)
		}
	}
	round() // warm up
	allocs := testing.AllocsPerRun(3, round)
	if perMsg := allocs / n; perMsg > 0.05 {
		t.Errorf("%.2f allocations a message", perMsg)
	}
}

// What a sender keeps of its free message structs once idle: a burst of
// 20,000 unreliable messages, which no ack follows, leaves at most
// idleKeepSlots of them, and Trim 64, each in an array no larger than
// they need.
func TestSenderIdleKeepsFewMessages(t *testing.T) {
	s := NewSender(1)
	msg := make([]byte, 64)
	for range 20000 {
		s.QueueAt(msg, false, 0)
	}
	buf := make([]byte, 0, 256)
	for s.MayAppend() {
		s.AppendNew(buf[:0], 1, 9000)
	}
	if !s.Idle() {
		t.Fatal("not idle")
	}
	if len(s.msgs) > idleKeepSlots || cap(s.msgs) > idleKeepSlots {
		t.Errorf("idle: %d free structs in an array of %d, want at most %d", len(s.msgs), cap(s.msgs), idleKeepSlots)
	}
	s.Trim()
	if len(s.msgs) > 64 || cap(s.msgs) > 64 {
		t.Errorf("after Trim: %d free structs in an array of %d, want at most 64", len(s.msgs), cap(s.msgs))
	}
}
