package fuzz

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/channel"
	"github.com/fastnet-engine/fastnet/clock"
)

// FuzzParseChannelHeader parses arbitrary bytes as a data packet (D4). A
// valid header must re-encode to the input's first 7 bytes, up to the
// reserved flag bits, and carry valid sequence numbers (D5).
func FuzzParseChannelHeader(f *testing.F) {
	for _, s := range []string{
		"03000000000001aabb", "00000001000000", "007fffff7fffff", "01ffd8f0ffd8f0",
		"02ffffff010000", "ff000005000001", "00ffd8ef000000", "00800000000000", "030000000000",
	} {
		f.Add(unhex(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := channel.ParseHeader(b)
		if err != nil {
			switch {
			case len(b) < channel.HeaderLen && err == channel.ErrShort:
			case len(b) >= channel.HeaderLen && err == channel.ErrBadSeq:
				seq := int32(binary.BigEndian.Uint32(append([]byte{0}, b[1:4]...))<<8) >> 8
				rel := int32(binary.BigEndian.Uint32(append([]byte{0}, b[4:7]...))<<8) >> 8
				if seq >= -10000 && rel >= -10000 {
					t.Fatalf("ErrBadSeq for seq %d, rel %d", seq, rel)
				}
			default:
				t.Fatalf("ParseHeader(%d bytes) = %v", len(b), err)
			}
			return
		}
		if !h.Seq.Valid() || !h.Rel.Valid() {
			t.Fatalf("invalid sequence numbers accepted: %+v", h)
		}
		want := append([]byte{b[0] & 0x03}, b[1:channel.HeaderLen]...)
		if got := h.Append(nil); !bytes.Equal(got, want) {
			t.Fatalf("re-encoded %x, want %x", got, want)
		}
	})
}

// FuzzParseAcks parses arbitrary bytes as an ack payload (D13): the length
// rule, and the acks yielded are exactly the valid 5-byte pairs in order.
func FuzzParseAcks(f *testing.F) {
	for _, s := range []string{"0000000000", "7fff7fffff", "0005ffd8f0", "000100000100020001020100ffffff", "fffb000001", "00", ""} {
		f.Add(unhex(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		it, err := channel.ParseAcks(b)
		if bad := len(b) == 0 || len(b)%channel.AckLen != 0; bad != errors.Is(err, channel.ErrBadAcks) || bad != (err != nil) {
			t.Fatalf("ParseAcks(%d bytes) = %v", len(b), err)
		}
		if err != nil {
			return
		}
		var want []byte
		for i := 0; i+channel.AckLen <= len(b); i += channel.AckLen {
			p := b[i : i+channel.AckLen]
			seq := int32(binary.BigEndian.Uint32(append([]byte{0}, p[2:5]...))<<8) >> 8
			if p[0]&0x80 == 0 && seq >= -10000 {
				want = append(want, p...)
			}
		}
		var got []byte
		for it.Next() {
			a := it.Ack()
			if a.Channel < 0 || !a.Seq.Valid() {
				t.Fatalf("invalid ack yielded: %+v", a)
			}
			got = channel.AppendAck(got, a)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("acks %x, want %x", got, want)
		}
	})
}

// receiverSeed returns FuzzReceiver input carrying the packets a real
// Sender makes for a few messages, with some time steps and polls.
func receiverSeed(reorder bool, msgs ...int) []byte {
	s := channel.NewSender(0)
	var out []byte
	var pkts [][]byte
	for i, n := range msgs {
		s.Queue(bytes.Repeat([]byte{byte(i)}, n), i%2 == 0)
		for s.HasNew() {
			b, _ := s.AppendNew(nil, clock.Epoch, 40)
			pkts = append(pkts, b)
		}
	}
	if reorder {
		for i := 0; i+1 < len(pkts); i += 2 {
			pkts[i], pkts[i+1] = pkts[i+1], pkts[i]
		}
	}
	for _, p := range pkts {
		out = append(out, 0, byte(len(p)))
		out = append(out, p...)
		out = append(out, 2)
	}
	return append(out, 1|30<<2, 2)
}

// FuzzReceiver drives two Receivers sharing a memory budget with operations
// encoded as bytes (D23): op&3 == 0: a packet to receiver op>>2&1, its
// length in the next byte, then the packet (header and chunk); op&3 == 1:
// time advances op>>2 milliseconds; op&3 == 2: poll both; op&3 == 3: a
// packet of 0..63 filler bytes after a header with the next 7 bytes. An
// input of odd length lets only one of them hold queued packets at a time
// (Budget.MaxHolders, N25). No input may panic, let memory pass the limits,
// let more receivers hold packets than MaxHolders, deliver a message
// larger than the maximum, or leave a deadline in the past after a poll.
func FuzzReceiver(f *testing.F) {
	f.Add(receiverSeed(false, 3, 100, 0, 15, 16))
	f.Add(receiverSeed(true, 200, 1, 50, 300))
	f.Add([]byte{0, 9, 3, 0, 0, 0, 0, 0, 1, 1, 127, 2})
	f.Add([]byte{3 | 20<<2, 0, 0, 0, 5, 0, 0, 0, 1 | 63<<2, 2})
	f.Fuzz(func(t *testing.T, data []byte) {
		const maxBytes, maxMsg = 4096, 512
		budget := &channel.Budget{Limit: 6000, MaxHolders: 2 - len(data)%2}
		cfg := channel.ReceiverConfig{Window: 128, MaxMessage: maxMsg, MaxBytes: maxBytes, Budget: budget, MCI: 25 * time.Millisecond}
		rs := [2]*channel.Receiver{channel.NewReceiver(cfg), channel.NewReceiver(cfg)}
		now := clock.Epoch
		poll := func() {
			for _, r := range rs {
				for {
					m, ok := r.Poll(now)
					if !ok {
						break
					}
					if len(m.Data) > maxMsg {
						t.Fatalf("delivered %d bytes, max %d", len(m.Data), maxMsg)
					}
				}
				if d := r.NextDeadline(); d != 0 && d <= now {
					t.Fatalf("deadline %v not after now %v after a poll: stalled", d, now)
				}
			}
		}
		check := func() {
			for _, r := range rs {
				if r.Bytes() < 0 || r.Bytes() > maxBytes {
					t.Fatalf("receiver holds %d bytes, limit %d", r.Bytes(), maxBytes)
				}
			}
			if budget.Used != rs[0].Bytes()+rs[1].Bytes() || budget.Used > budget.Limit {
				t.Fatalf("budget %d/%d, receivers %d + %d", budget.Used, budget.Limit, rs[0].Bytes(), rs[1].Bytes())
			}
			if h := budget.Holders(); h < 0 || h > budget.MaxHolders || h > 0 && budget.Used == 0 {
				t.Fatalf("%d receivers hold packets (at most %d), budget %d", h, budget.MaxHolders, budget.Used)
			}
		}
		for len(data) > 0 {
			op := data[0]
			data = data[1:]
			switch op & 3 {
			case 0, 3:
				var pkt []byte
				if op&3 == 0 {
					if len(data) == 0 {
						return
					}
					n := min(int(data[0]), len(data)-1)
					pkt, data = data[1:1+n], data[1+n:]
				} else {
					n := min(7, len(data))
					pkt = append(append([]byte(nil), data[:n]...), make([]byte, op>>2)...)
					data = data[n:]
				}
				h, err := channel.ParseHeader(pkt)
				if err != nil {
					continue
				}
				rs[op>>2&1].Handle(now, h, pkt[channel.HeaderLen:])
			case 1:
				now = now.Add(time.Duration(op>>2) * time.Millisecond)
			case 2:
				poll()
			}
			check()
		}
		now = now.Add(time.Hour)
		poll()
		check()
	})
}
