package fastnet

import (
	"encoding/binary"
	"math"
	"net/netip"
	"slices"
	"time"

	"github.com/fastnet-engine/fastnet/channel"
	"github.com/fastnet-engine/fastnet/clock"
	"github.com/fastnet-engine/fastnet/coalesce"
)

// Bundles (channel -6, D24). Once connected, each side asks its peer the
// channel -1 query "query:ext:bundle"; a peer that supports bundles
// answers "query:ext:bundle=yes", and once it has also echoed a heartbeat
// sent to it in a bundle of its own (the answer may be forged, N156), the
// side that got the answer may pack packets for that peer into one
// datagram:
//
//	 0               1               2               3
//	+-------+-------+-------+-------+-------+-------+---------------
//	| channel -6    | length (u16)  | packet (channel id, payload)...
//	+-------+-------+-------+-------+-------+-------+---------------
//	                | length (u16)  | packet ... (one or more)
//
// never nested, never longer than the sender's payload MTU + 2. Each
// inner packet is handled exactly as if it had arrived alone. A strict
// 1.0 peer never answers, so it gets no bundle but, if an answer is
// forged, the few proofs; a bundle from a peer this side never answered
// "=yes" is dropped. Over a Stream transport bundles are not used
// (N69-N74).

// bundleAsks is how many times a connection asks "query:ext:bundle": with
// each of its first bundleAsks heartbeats originated while the peer has not
// answered, then never again (N69).
const bundleAsks = 6

// bundleLenSize is the size of the length before each inner packet.
const bundleLenSize = 2

// bundlesOn reports whether the endpoint negotiates bundles at all: on a
// Datagram transport, unless Config.NoBundles (N69).
func (e *Endpoint) bundlesOn() bool {
	return e.cfg.Transport == Datagram && !e.cfg.NoBundles
}

// askBundles queues "query:ext:bundle" for c's peer while c may still
// ask: established and (a server's) validated, not yet answered, and
// fewer than bundleAsks times so far. It is called when c originates a
// heartbeat, and when a server's connection is validated (N69).
func (c *conn) askBundles() {
	c.askExtension(c.bundleYes, &c.bundleAsks, c.ep.bundlesOn(), ctlQueryBundle)
}

// askExtension queues the query of an extension negotiated in the style
// of D24 (bundles, N69; the punch extension, X2) for c's peer, and counts
// it in asks, unless the peer answered already, it was asked bundleAsks
// times, c is not established or (a server's) not validated, or the
// endpoint does not speak the extension (on).
func (c *conn) askExtension(answered bool, asks *uint8, on bool, query controlKind) {
	if answered || *asks >= bundleAsks || c.unvalidated || !c.established() || !on {
		return
	}
	*asks++
	c.ep.queueCtl(c.addr, control{kind: query})
}

// bundleControl handles the channel -1 literals of D24 from addr, whose
// connection, if any, is c. Like every query, "query:ext:bundle" is
// answered for anyone (D15), statelessly: the answer, 22 bytes, is less
// than 3 times the 18 of the query (D25); to a connection still proving
// its address it goes within that connection's budget (PollTransmit).
// An endpoint that does not negotiate bundles treats both literals as a
// strict 1.0 peer does: unknown, dropped (N69).
func (e *Endpoint) bundleControl(now clock.Time, from netip.AddrPort, c *conn, m control) {
	if !e.bundlesOn() {
		e.drop(c, DropBadControl)
		return
	}
	switch m.kind {
	case ctlQueryBundle:
		e.queueCtl(from, control{kind: ctlBundleYes})
		if c != nil {
			c.bundleFrom = true
		}
	case ctlBundleYes:
		if c == nil || !c.established() {
			e.drop(c, DropNotConnected)
			return
		}
		if c.bundleAsks == 0 {
			// An answer to a question never asked (a server asks
			// only once it validated the client, N73): forged.
			e.drop(c, DropBadControl)
			return
		}
		if !c.bundleYes {
			// The answer is a literal anyone can forge: bundles go
			// to the peer only once it has shown it reads them, by
			// echoing a heartbeat that went in one. The first such
			// heartbeat goes at once (N156).
			c.bundleYes = true
			c.hb.nextSend = min(c.hb.nextSend, now)
			e.touch(c, now)
		}
	}
}

// bundleProofs is how many of its heartbeats a connection sends in
// bundles of their own, while its peer answered "query:ext:bundle=yes"
// but has not yet shown it reads bundles: one at once, then each
// proofWait after the last, until one is echoed (N156).
const bundleProofs = 10

// proving reports whether c's heartbeat originated at now goes in a
// bundle of its own, to prove that the peer reads bundles (N156).
func (c *conn) proving(now clock.Time) bool {
	return c.bundleYes && !c.bundleTo && !c.bundleForged && c.bundleProofs < bundleProofs && now >= c.hb.proofAt
}

// appendProof appends to buf a bundle of one packet, the heartbeat of
// value v (N156).
func appendProof(buf []byte, v int16) []byte {
	var hb [2 + 2]byte
	pkt := appendHeartbeat(appendPacketHeader(hb[:0], chHeartbeat), v)
	return appendBundled(appendPacketHeader(buf, chBundle), pkt)
}

// sentProof notes that the heartbeat just originated goes in a bundle of
// its own, and has the next heartbeat go proofWait after it, while c may
// prove again (N156).
func (c *conn) sentProof(now clock.Time) {
	c.bundleProofs++
	c.hb.sentBundled()
	c.hb.proofAt = 0
	if c.bundleProofs < bundleProofs {
		c.hb.proofAt = now.Add(c.proofWait())
		c.hb.nextSend = min(c.hb.nextSend, c.hb.proofAt)
	}
}

// proofWait is how long the proof just sent, the bundleProofs-th, waits
// for its echo before the next goes: two of the RTTs resends wait by (at
// least minProofWait), doubled with each proof, within the heartbeat
// interval; so the proofs span an outage of seconds, as the queries do
// (N69, N156).
func (c *conn) proofWait() time.Duration {
	base := max(2*c.resendRTT(), minProofWait)
	return min(base<<min(c.bundleProofs-1, 20), heartbeatInterval(c.ep.cfg.Timeout))
}

// minProofWait is the least wait between two proofs (proofWait).
const minProofWait = 50 * time.Millisecond

// forgedEcho notes that the peer "echoed" a heartbeat value c never
// originated: forged (as D25's challenge counts it). While c is proving,
// a forger may be trying values for its proof: it stops proving, and
// never bundles to this peer (N156).
func (c *conn) forgedEcho() {
	if c.bundleYes && !c.bundleTo {
		c.bundleForged = true
		c.hb.proofAt = 0
	}
}

// proved notes that the peer echoed b, a heartbeat of c's: if it went in
// a bundle, the peer reads bundles, and c bundles from now on (N156).
func (c *conn) proved(b sentBeat) {
	if b.bundled && c.bundleYes && !c.bundleForged {
		c.bundleTo = true
		c.hb.proofAt = 0
	}
}

// handleBundle handles the payload p of a channel -6 datagram from addr,
// whose connection, if any, is c (N72). Each inner packet goes to
// handlePacket as a datagram of its own would, connection lookup
// included; the datagram itself was counted once, as received, by
// HandleDatagram.
func (e *Endpoint) handleBundle(now clock.Time, from netip.AddrPort, c *conn, p []byte) {
	if c == nil || !c.bundleFrom || !e.bundlesOn() {
		e.drop(c, DropBundleUnnegotiated)
		if c != nil && e.bundlesOn() {
			// The peer bundles without this side's answer: its query
			// was lost and an answer forged, or it came late. A peer
			// stops asking once answered, so without this answer its
			// bundles would be dropped for good. Answered as if asked
			// (what a forged query gets anyway); the bundle itself
			// stays dropped (D24, N69).
			e.queueCtl(from, control{kind: ctlBundleYes})
			c.bundleFrom = true
		}
		return
	}
	c.stats.BundlesReceived++
	if len(p) == 0 {
		e.drop(c, DropBundleMalformed) // one or more packets (D24)
		return
	}
	var (
		s    *bundleSums
		sums int
		view bundleSums
	)
	if v := e.pre; v != nil && v.hi > v.lo && sameBytes(v.p, p) {
		// Computed with those of the other bundles of a batch.
		view = e.batch.sums.sub(v.lo, v.hi)
		s, sums = &view, v.hi-v.lo
		e.batched++
	} else {
		s, sums = &e.sums, e.presum(p)
	}
	// Each kind of channel -1 packet is handled once a bundle (N139).
	e.inBundle, e.bundleCtl = true, 0
	defer e.endBundle()
	all := p
	j := 0 // the next of s
	// The connection the last packets went to, touched once they are
	// handled, or before a packet for another.
	var touched *conn
	for len(p) > 0 {
		inner, rest, ok := cutBundle(p)
		if !ok {
			// The lengths do not add up: what came before stands,
			// the rest is dropped (D24).
			e.drop(e.connAt(from), DropBundleMalformed)
			break
		}
		p = rest
		cur := e.connAt(from)
		ch, payload, err := parsePacket(inner)
		if err != nil {
			e.drop(cur, DropShort)
			continue
		}
		if ch == chBundle {
			e.drop(cur, DropBundleNested) // and the rest with it (D24)
			break
		}
		// s.ws[j] is this packet's if it ends where this one does.
		end := len(all) - len(p)
		if j < sums && s.ws[j].End == end && cur != nil && cur.established() {
			// A run of whole messages of one channel, taken in one
			// step while the receiver hands each over at once (N101):
			// each packet begins where the one before ends.
			ws := s.ws[j:sums]
			n, next := 1, ws[0].End+runGap
			for n < len(ws) && ws[n].Off == next && packetChannel(all, next) == ch {
				next = ws[n].End + runGap
				n++
			}
			if taken := cur.takeWhole(ch, all, s, j, n); taken > 0 {
				j += taken
				p = all[s.ws[j-1].End:]
				touchBefore(&touched, cur, now)
				continue
			}
		}
		if j < sums && s.ws[j].End == end {
			e.presums.Set(s.payloads[j], s.digests[j])
			h := s.ws[j].H
			j++
			// A data packet presum parsed already: what handleUntouched
			// and handlePacket would do with it, without parsing it
			// again (N101).
			if cur == nil || !cur.established() {
				e.drop(cur, DropNotConnected)
				continue
			}
			cur.handleParsed(now, ch, payload, h)
			touchBefore(&touched, cur, now)
			continue
		}
		e.presums.Clear()
		if e.handleUntouched(now, from, cur, ch, payload) {
			touchBefore(&touched, cur, now)
		}
	}
	if touched != nil {
		e.touch(touched, now)
	}
}

// runGap is how far the chunk of a data packet in a bundle begins after
// the end of the packet before it: its length, channel id and header.
const runGap = bundleLenSize + 2 + channel.HeaderLen

// packetChannel returns the channel id of the data packet in bundle
// payload b whose chunk begins at off.
func packetChannel(b []byte, off int) int16 {
	return int16(binary.BigEndian.Uint16(b[off-channel.HeaderLen-2 : off-channel.HeaderLen]))
}

// touchBefore makes cur, which a bundle's packet just changed, the
// connection *touched that handleBundle touches once its packets are
// handled, touching the one before first if it is another.
func touchBefore(touched **conn, cur *conn, now clock.Time) {
	if prev := *touched; cur != prev {
		if prev != nil {
			prev.ep.touch(prev, now)
		}
		*touched = cur
	}
}

// endBundle ends the handling of a bundle: it forgets the bundle's
// digests, and the payloads of it that e.sums, kept for the next bundle,
// still holds (the endpoint keeps nothing of a datagram after handling
// it), and what kinds of channel -1 packet it held (N139).
func (e *Endpoint) endBundle() {
	e.presums.Clear()
	clear(e.sums.payloads)
	e.inBundle = false
}

// bundleSums is what presum computed for the bundle being handled: for
// each inner packet that carries a message whole, in the order of the
// packets, its headers and where its chunk lies (ws, for
// channel.Receiver.TakeWhole, and for handleBundle to find the packet
// by), the message's payload and its digest. The arrays are kept for
// the next bundle.
type bundleSums struct {
	ws       []channel.Whole
	payloads [][]byte
	digests  [][coalesce.MD5Len]byte
}

// presum computes together, where that is faster (coalesce.Batched), the
// MD5 digests of the messages that the data packets of bundle payload p
// carry whole, into e.sums, and returns how many there are: handleBundle
// hands each to the receiver through e.presums as its packet is handled,
// so that it is not computed again alone (D3, N86). Packets that are not
// such a message, and what follows a malformed length, are left to the
// receiver as they are. The work is at most one digest per byte of the
// bundle, as the receiver's own would be.
func (e *Endpoint) presum(p []byte) int {
	if !coalesce.Batched() {
		return 0
	}
	s := &e.sums
	s.reset()
	e.parseSums(s, p)
	return s.digest()
}

// reset empties s, keeping its arrays.
func (s *bundleSums) reset() {
	s.ws, s.payloads = s.ws[:0], s.payloads[:0]
}

// sub returns the part of s from lo to hi, sharing its arrays.
func (s *bundleSums) sub(lo, hi int) bundleSums {
	return bundleSums{ws: s.ws[lo:hi], payloads: s.payloads[lo:hi], digests: s.digests[lo:hi]}
}

// digest computes the digests of the payloads s holds together and
// returns how many there are, or 0, computing nothing, if there are
// fewer than two: one digest alone is computed where it always was.
func (s *bundleSums) digest() int {
	n := len(s.ws)
	if n < 2 {
		clear(s.payloads)
		return 0
	}
	if cap(s.digests) < n {
		s.digests = make([][coalesce.MD5Len]byte, n)
	}
	s.digests = s.digests[:n]
	coalesce.Digests(s.digests, s.payloads)
	return n
}

// parseSums appends to s what presum computes the digests of: the whole
// messages that the data packets of bundle payload p carry. Their
// positions (Whole.Off and End) are within p.
func (e *Endpoint) parseSums(s *bundleSums, p []byte) {
	// A message qualifies with a length from ShortChecksumMax+1 to
	// MaxMessageSize: less the least, its length, unsigned, is at most
	// span, one test for each packet rather than two and a clamp of
	// MaxMessageSize (8 instructions a message).
	if e.cfg.MaxMessageSize <= coalesce.ShortChecksumMax {
		return // none does
	}
	span := uint64(e.cfg.MaxMessageSize - (coalesce.ShortChecksumMax + 1))
	// The records are appended to in a variable, stored back once: s.ws
	// read and written for each cost more than the tests.
	ws := s.ws
	// The packets are walked by their offsets in p, as cutBundle and
	// parsePacket would cut them; only a packet that may qualify is cut
	// out as a slice (pk).
	for off := 0; off+bundleLenSize <= len(p); {
		n := int(p[off])<<8 | int(p[off+1])
		pkt, end := off+bundleLenSize, off+bundleLenSize+n
		if end > len(p) {
			break // a bad length: the rest is not taken apart (D24)
		}
		off = end
		// A data packet (channel id not negative) with its header and a
		// chunk long enough for a message with an MD5 checksum, the
		// least a whole one that qualifies fills: its parts are then
		// cut from it without a test of their bounds.
		pk := p[pkt:end]
		if len(pk) < 2+channel.HeaderLen+minWholeChunk || pk[0]&0x80 != 0 {
			continue
		}
		// The headers are written into the next record's place, kept
		// only if the packet qualifies. The channel header is read as
		// channel.ParseHeader reads it, with the same tests (a 24-bit
		// value is MaxSeq at most: only the low end is tested), and
		// written once it and the start flag pass: returned by
		// ParseHeader with its error, it went through the stack, 11
		// instructions a message more, and returned into variables,
		// its fields went to the stack one by one and came back
		// together, which stalls on the store forwarding (N101).
		if len(ws) == cap(ws) {
			ws = append(ws, channel.Whole{})[:len(ws)]
		}
		w := &ws[:len(ws)+1][len(ws)]
		x, y := binary.BigEndian.Uint32(pk[2:]), binary.BigEndian.Uint32(pk[5:])
		seq, rel := channel.Seq(int32(x<<8)>>8), channel.Seq(int32(y<<8)>>8)
		if seq < channel.MinSeq || rel < channel.MinSeq || x&(channel.FlagStart<<24) == 0 {
			continue
		}
		w.H = channel.Header{Reliable: x&(channel.FlagReliable<<24) != 0, Start: true, Seq: seq, Rel: rel}
		// The message's header, as coalesce.ParseHeader parses it (D2),
		// and the same tests, with no change of behaviour: the chunk
		// holds its longest header, so the length field is read as the
		// 4 bytes after the flags byte, what follows it shifted out,
		// without a loop over its bytes (N101).
		chunk := pk[2+channel.HeaderLen:]
		flags := chunk[0]
		hl := 2 + int(flags>>6) // the length-of-length (D2)
		ln := uint64(binary.BigEndian.Uint32(chunk[1:coalesce.MaxHeaderLen]) >> (8 * (coalesce.MaxHeaderLen - hl)))
		if ln-(coalesce.ShortChecksumMax+1) > span || hl+int(ln)+coalesce.MD5Len != len(chunk) {
			continue
		}
		w.Msg = coalesce.Header{Reliable: flags&coalesce.FlagReliable != 0, Len: int(ln), HeaderLen: hl}
		w.Off, w.End = pkt+2+channel.HeaderLen, end
		ws = ws[:len(ws)+1]
	}
	s.ws = ws
	// The payloads, for the digests, once the packets are found: appended
	// to one at a time beside the records, they cost twice as much.
	k := len(s.payloads)
	ps := slices.Grow(s.payloads, len(ws)-k)[:len(ws)]
	for i := k; i < len(ps); i++ {
		ps[i] = ws[i].Payload(p)
	}
	s.payloads = ps
}

// minWholeChunk is the shortest chunk that carries a message whole with
// an MD5 checksum (D3): the flags byte, a 1-byte length, a payload longer
// than coalesce.ShortChecksumMax bytes and the digest.
const minWholeChunk = 2 + coalesce.ShortChecksumMax + 1 + coalesce.MD5Len

// Batches (HandleDatagrams, N102). The bundles of a batch of datagrams
// have their whole messages' digests computed together, up to
// maxBatchSums messages at a time (and the whole of the bundle that
// reaches it), so that bundles of a few messages each fill the vector
// lanes (N86) as one large bundle does.
const maxBatchSums = 8 * coalesce.BatchLanes

// batchSums is what presumBatch computed for a batch of datagrams: the
// digests of the bundles' whole messages, in the order of the datagrams
// (sums), and for each datagram the part of sums that is its (views).
type batchSums struct {
	sums  bundleSums
	views []batchView
}

// batchView is the part of a batch's sums, from lo to hi, that is bundle
// payload p's; lo == hi when the datagram is no bundle presumBatch took.
type batchView struct {
	p      []byte
	lo, hi int
}

// presumBatch computes together the digests of the whole messages of the
// bundles at the start of ds, and returns how many datagrams it took, at
// least one: for each, e.batch.views says which digests are its bundle's.
// It takes only bundles that handleBundle would take apart as things
// stand (from a connection that negotiated them); a datagram before them
// that changes that, or ends the connection, makes what it computed for
// them go unused, and the bundles are handled as they would be alone.
func (e *Endpoint) presumBatch(ds []Incoming) int {
	b := &e.batch
	b.sums.reset()
	b.views = b.views[:0]
	if !coalesce.Batched() || !e.bundlesOn() || len(ds) < 2 {
		return len(ds)
	}
	k := 0
	for ; k < len(ds) && len(b.sums.ws) < maxBatchSums; k++ {
		v := batchView{lo: len(b.sums.ws)}
		if p, ok := e.batchBundle(ds[k]); ok {
			e.parseSums(&b.sums, p)
			v.p = p
		}
		v.hi = len(b.sums.ws)
		b.views = append(b.views, v)
	}
	if b.sums.digest() == 0 {
		b.views = b.views[:0]
	}
	return k
}

// batchBundle returns the payload of d if it is a bundle that
// HandleDatagram would hand to handleBundle and handleBundle take apart
// as things stand.
func (e *Endpoint) batchBundle(d Incoming) ([]byte, bool) {
	if len(d.Data) > e.maxIncoming() {
		return nil, false
	}
	ch, payload, err := parsePacket(d.Data)
	if err != nil || ch != chBundle || len(payload) == 0 {
		return nil, false
	}
	if c := e.connAt(d.From); c == nil || !c.bundleFrom {
		return nil, false
	}
	return payload, true
}

// endBatch forgets a batch's digests and the payloads it held, once its
// datagrams are handled.
func (e *Endpoint) endBatch() {
	clear(e.batch.sums.payloads)
	for i := range e.batch.views {
		e.batch.views[i].p = nil
	}
}

// sameBytes reports whether a and b are the same bytes in memory.
func sameBytes(a, b []byte) bool {
	return len(a) == len(b) && len(a) > 0 && &a[0] == &b[0]
}

// cutBundle takes the first inner packet off p, a bundle's payload or
// what is left of it: its 16-bit length, then that many bytes. ok is
// false when p is too short for the length or for what it says.
func cutBundle(p []byte) (inner, rest []byte, ok bool) {
	if len(p) < bundleLenSize {
		return nil, p, false
	}
	n := int(binary.BigEndian.Uint16(p))
	if n > len(p)-bundleLenSize {
		return nil, p, false
	}
	return p[bundleLenSize : bundleLenSize+n], p[bundleLenSize+n:], true
}

// appendBundled appends pkt, a whole packet, channel id included, to a
// bundle's payload b: its 16-bit length, then the packet.
func appendBundled(b, pkt []byte) []byte {
	return append(binary.BigEndian.AppendUint16(b, uint16(len(pkt))), pkt...)
}

// connAt returns the connection with address from, nil if none, through
// the one-entry cache of the latest datagram's connection.
func (e *Endpoint) connAt(from netip.AddrPort) *conn {
	c := e.lastConn
	if c == nil || c.addr != from {
		c = e.byAddr[from]
		e.lastConn = c
	}
	return c
}

// minPacket is the shortest packet conn.poll writes: an MTU reply of one
// byte (D19).
const minPacket = 3

// bundle returns the datagram to send to c's peer, which takes bundles,
// starting with first, a packet c.poll just wrote at the start of the
// caller's buffer: first alone if nothing else is ready or fits, or a
// channel -6 bundle of first and the packets c has ready after it, in
// conn.poll's order, within c's payload MTU + 2 (D24). A packet polled
// that does not fit, or must travel alone, waits in e.scratch for the
// next datagram (N70, N71). paced says whether the pacer let data go when
// the datagram began: then data fills it; otherwise only what never waits
// for the pacer (acks, heartbeats) joins first (N79).
func (c *conn) bundle(now clock.Time, first []byte, paced bool) []byte {
	e := c.ep
	c.bundling = paced
	defer func() { c.bundling = false }()
	if c.alone(first) || len(first)+2*bundleLenSize+2+minPacket > c.payloadMTU+2 || !c.wantsTransmit(now) {
		return first
	}
	if e.scratch == nil {
		e.scratch = make([]byte, 0, e.cfg.MaxPacketSize)
	}
	b := first
	n := 1
	for {
		if cs := c.runChannel(now); cs != nil {
			var k int
			if b, k = c.appendRun(now, b, first, n == 1, cs); k > 0 {
				n += k
				if c.state == 0 {
					break
				}
				continue
			}
		}
		if n > 1 && !c.wantsTransmit(now) {
			break
		}
		p, ok := c.poll(now, e.scratch[:0])
		if !ok {
			break
		}
		size := len(b) + bundleLenSize + len(p)
		if n == 1 {
			size += 2 + bundleLenSize // the -6 channel id and first's length
		}
		if c.alone(p) || size > c.payloadMTU+2 {
			e.pendingConn, e.pendingN = c, len(p)
			break
		}
		if n == 1 {
			b = wrapBundle(b, first)
		}
		b = appendBundled(b, p)
		n++
		if c.state == 0 {
			break
		}
	}
	if n > 1 {
		c.stats.BundlesSent++
		c.stats.BundledPackets += uint64(n)
	}
	return b
}

// wrapBundle makes b, which holds first, a bundle of it: first moves 4
// bytes on, behind the bundle's channel id and its length.
func wrapBundle(b, first []byte) []byte {
	b = b[:2+bundleLenSize+len(first)]
	copy(b[2+bundleLenSize:], first)
	binary.BigEndian.PutUint16(b[2:], uint16(len(first)))
	appendPacketHeader(b[:0], chBundle)
	return b
}

// unwrapBundle undoes wrapBundle: b, a bundle of one packet of n bytes,
// becomes that packet again, at its start.
func unwrapBundle(b []byte, n int) []byte {
	copy(b, b[2+bundleLenSize:2+bundleLenSize+n])
	return b[:n]
}

// runChannel returns the channel whose first-time packet c.poll would
// write next at now, with nothing before it in pollPacket's order and
// nothing of the channel's dropped first (pollNew), or nil if that is not
// plain without polling: while a bundle is filled (N79), with no echo,
// heartbeat, ack, repeat, MTU estimation packet (an estimator between
// estimations has none, mtuQuiet) or (unless first sends have their
// turn, N80) resend due, and no channel held. It is the channel at the
// ring's position, whose turn goes on or begins (N122). bundle then has
// appendRun write its packets in place (N101).
func (c *conn) runChannel(now clock.Time) *chanState {
	if !c.bundling || len(c.ring) == 0 || c.holdCh != nil || c.ep.noRuns || !c.established() {
		return nil
	}
	if c.hb.echoN > 0 || now >= c.hb.nextSend || c.pendingAcks() > 0 || c.ackRepeatAt != 0 && now >= c.ackRepeatAt {
		return nil
	}
	if c.responder != nil && c.responder.Pending() || c.estimator != nil && !c.mtuQuiet(now) && c.probeReady(now) {
		return nil
	}
	if !c.newTurn && c.resendDue(now) {
		return nil
	}
	pos := c.ringPos
	if pos >= len(c.ring) {
		pos = 0 // as pollNew turns the ring
	}
	cs := c.ring[pos]
	if !cs.snd.MayAppend() || c.cc.on && cs.snd.Expires(now.Add(-c.ep.cfg.UnreliableMaxDelay)) {
		return nil
	}
	if cs.snd.NextReliable() && !c.roomNext(cs, c.payloadMTU-channel.HeaderLen) {
		return nil
	}
	return cs
}

// appendRun appends to bundle b the first-time packets of cs that poll
// would write next, one after the other, as long as they fit and cs's
// turn lasts (N122), in place (N101); runChannel found cs. If wrap is
// set, b holds only first so far, and becomes a bundle of it before the
// first packet goes in. It returns b and the number of packets appended.
// What poll would check before each packet is checked here only where a
// packet of cs can change it: the heartbeat a flooding connection brings
// forward (floodBeat, at most once: called again within the run it would
// find what it found, or, after a reliable packet, no flood), the ring,
// the window, and the messages that expire behind a reliable one. The
// packets between two such checks that cannot change their outcome are
// written by the sender in one call (channel.Sender.AppendRun, N111).
func (c *conn) appendRun(now clock.Time, b, first []byte, wrap bool, cs *chanState) ([]byte, int) {
	mtu := c.payloadMTU - channel.HeaderLen
	limit := c.payloadMTU + 2
	expired := now.Add(-c.ep.cfg.UnreliableMaxDelay)
	flooded := false
	shared := len(c.ring) > 1
	k := 0
	// A run that had first sends' turn (N80) takes one packet if a
	// resend is due: the next is the resend's. Packets of the run are
	// resent later than now, so the test holds for the run.
	one := c.newTurn && c.resendDue(now)
	for {
		size := len(b) + bundleLenSize + 2 + channel.HeaderLen + cs.snd.NextLen(mtu)
		if wrap {
			size += 2 + bundleLenSize
		}
		if size > limit {
			return b, k
		}
		wrapped := wrap
		if wrap {
			b, wrap = wrapBundle(b, first), false
		}
		c.newTurn = false // as pollPacket gives first sends their turn
		if c.ringPos >= len(c.ring) {
			c.ringPos = 0 // as pollNew turns the ring
		}
		at := len(b)
		n := 1
		if one || cs.tracked {
			b = c.sendNew(now, append(b, 0, 0), cs, mtu)
			binary.BigEndian.PutUint16(b[at:], uint16(len(b)-at-bundleLenSize))
		} else {
			// The packets the checks below would let go one by one,
			// in one call (N111): within the bundle, while the
			// sender may, up to the first that may flood, and the
			// reliable ones while roomNext holds for sure.
			lim := channel.RunLimit{End: limit, MTU: mtu, Max: math.MaxInt,
				Expire: c.cc.on, Before: expired,
				Reliable: c.reliableRoom(), Overhead: wireOverhead, Frames: math.MaxInt}
			// Within cs's turn as takeTurn counts it. The next packet
			// goes even if it does not fit that, as pollNew sends it,
			// and alone: a turn's first packet may be larger than the
			// share, and a channel joining the ring may have cut the
			// turn under way below it (joinRing).
			if left := c.turnRoom(); turnOverhead+cs.snd.NextLen(mtu) <= left {
				lim.End = min(lim.End, len(b)+left)
			} else {
				lim.Max = 1
			}
			if !flooded {
				lim.Frames = c.floodRoom()
			}
			var r channel.Run
			b, r = cs.snd.AppendRun(b, now, uint16(cs.id), lim)
			c.sentRun(now, cs, r)
			if n = r.Packets; n == 0 {
				if k == 0 && wrapped {
					// Wrapped for a packet that did not go: the
					// tests above make sure one does, and should
					// they not, first goes alone rather than as a
					// bundle that bundle would wrap again.
					b = unwrapBundle(b, len(first))
				}
				return b, k
			}
		}
		k += n
		c.ep.runSent += uint64(n)
		if shared {
			c.ep.runShared += uint64(n)
		}
		c.cc.spendRun(b[at:], c.payloadMTU+2)
		if !flooded && c.flooding() {
			c.floodBeat() // as spent does
			flooded = true
		}
		// sendNew took cs out of the ring if it may not append, and
		// takeTurn moved the ring on if its turn is over.
		if one || c.state == 0 || !cs.inRing || c.turnLeft == 0 || now >= c.hb.nextSend {
			return b, k
		}
		if c.cc.on && cs.snd.Expires(expired) {
			return b, k
		}
		if cs.snd.NextReliable() && !c.roomNext(cs, mtu) {
			return b, k
		}
	}
}

// alone reports whether packet p, polled for c's peer, must travel in a
// datagram of its own: the packets of this side's MTU estimation, whose
// probes measure the path by their size (D19, N70).
func (c *conn) alone(p []byte) bool {
	own, _ := c.mtuChannels()
	return int16(binary.BigEndian.Uint16(p)) == own
}
