package fastnet

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/channel"
)

// Acks a peer makes up (D13: "acks for unknown packets are ignored"):
// of sequence numbers never sent, of unreliable packets, of packets
// already acked, repeated hundreds of times in one ack packet and across
// many, between inputs at the same instant and after long pauses. The
// sender's bookkeeping of what is in flight, the window's included, stays
// that of the packets really in flight; once the peer acks everything
// honestly, nothing is in flight and nothing waits (D30, N76).
func TestHostileAcksKeepBookkeeping(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		cfg := Config{Role: Client, InitialPayloadMTU: 200, Timeout: time.Hour, MTU: MTUConfig{Disabled: true}}
		tc := newTestEndpoint(t, cfg)
		h := tc.connectClient(1)
		c := tc.ep.conns[h]
		type sent struct {
			ch  int16
			seq channel.Seq
		}
		var data []sent
		take := func() {
			for _, p := range tc.sent {
				if p.ch >= 0 {
					hd, err := channel.ParseHeader(p.payload)
					if err != nil {
						t.Fatal(err)
					}
					data = append(data, sent{p.ch, hd.Seq})
				}
			}
			tc.sent = tc.sent[:0]
		}
		check := func(what string) {
			t.Helper()
			bytes, packets := 0, 0
			for _, cs := range c.sendChans {
				p, b := cs.snd.InFlight()
				bytes += b
				packets += p
			}
			if c.inFlight != bytes || c.ccInFlight < 0 || c.ccInFlight > bytes+packets*wireOverhead {
				t.Fatalf("seed %d, %s: in flight %d (senders %d in %d packets), window's count %d", seed, what, c.inFlight, bytes, packets, c.ccInFlight)
			}
			if c.cc.cwnd < c.cc.minWnd || c.cc.srtt < 0 {
				t.Fatalf("seed %d, %s: window %d, srtt %v", seed, what, c.cc.cwnd, c.cc.srtt)
			}
		}
		msg := make([]byte, 500)
		for round := 0; round < 40; round++ {
			for range rng.IntN(20) {
				ch := rng.IntN(4)
				if err := tc.ep.Send(tc.now, h, ch, msg[:1+rng.IntN(len(msg)-1)], rng.IntN(3) > 0); err != nil {
					break
				}
			}
			tc.drain()
			take()
			// A made-up ack packet.
			var acks []channel.Ack
			for range 1 + rng.IntN(200) {
				a := channel.Ack{Channel: int16(rng.IntN(5)), Seq: channel.Seq(rng.IntN(2000) - 1000)}
				if len(data) > 0 && rng.IntN(2) == 0 {
					d := data[rng.IntN(len(data))]
					a = channel.Ack{Channel: d.ch, Seq: d.seq}
				}
				for range 1 + rng.IntN(3) {
					acks = append(acks, a)
				}
			}
			p := channel.AppendAcks(nil, acks)
			for range 1 + rng.IntN(5) {
				tc.recv(chAck, p)
				take()
				check("after a made-up ack packet")
			}
			switch rng.IntN(4) {
			case 0:
			case 1:
				tc.advance(time.Duration(rng.IntN(50)) * time.Millisecond)
			case 2:
				tc.advance(time.Duration(rng.IntN(10)) * time.Second)
			case 3:
				tc.now = tc.now.Add(time.Duration(rng.IntN(15)) * time.Second)
				tc.recv(chHeartbeat, []byte{0, 1})
			}
			take()
			check("after time passed")
		}
		// Honest acks of everything, resends included, until nothing
		// is left.
		for i := 0; i < 200 && (c.inFlight > 0 || c.queued > 0); i++ {
			var acks []channel.Ack
			for _, d := range data {
				acks = append(acks, channel.Ack{Channel: d.ch, Seq: d.seq})
			}
			data = data[:0]
			for len(acks) > 0 {
				n := min(len(acks), 30)
				tc.recv(chAck, channel.AppendAcks(nil, acks[:n]))
				acks = acks[n:]
			}
			take()
			tc.advance(100 * time.Millisecond)
			take()
			check("while acking honestly")
		}
		if c.state == 0 {
			t.Fatalf("seed %d: connection ended: %v", seed, tc.evs)
		}
		if c.inFlight != 0 || c.ccInFlight != 0 || c.queued != 0 {
			t.Fatalf("seed %d: after every packet was acked: %d in flight, window's count %d, %d queued; srtt %v, heartbeats %v (min %v), window %d, rate %.1f B/s", seed, c.inFlight, c.ccInFlight, c.queued, c.cc.srtt, c.hb.srtt, c.hb.minRTT, c.cc.cwnd, c.paceRate())
		}
	}
}
