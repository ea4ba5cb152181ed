package urp

// keepBuffer is the largest buffer a Decoder keeps once the packet it held
// is consumed: a user that sent one long message does not keep its memory
// for the rest of its connection.
const keepBuffer = 16 << 10

// Decoder cuts a byte stream (TCP) into packets. URP packets carry no
// length prefix, so each is found by its identifier and its structure.
//
// Feed hands it the bytes of one read; Next then returns the packets
// they complete, one at a time, until it reports false. Complete packets
// are parsed where they lie in the fed bytes; only the start of a packet
// that the bytes do not finish is copied, into a buffer that never holds
// more than one packet: MaxHeader bytes, or the header and data of one
// message of at most the maximum length. A message announced longer than
// that is an error found from its header, before any of its data.
//
// An error is final: the stream cannot be resynchronised, and every later
// Next returns it again.
type Decoder struct {
	dir     Direction
	maxData int
	in      []byte // what Feed gave and Next has not consumed
	buf     []byte // the start of a packet in holds no more of
	need    int    // the length buf needs at least (Parse's n)
	spent   bool   // the packet in buf was returned: empty it first
	err     error
	// ignore, if set, says of a message's identifier that its data
	// would be ignored (SetIgnore); skip is how many bytes of such a
	// message's data are still to be skipped, and skipped the message,
	// its data left out.
	ignore  func(ID) bool
	skip    int
	skipped Packet
}

// SetIgnore has the decoder ask ignore, of each message (U2R_BROD,
// U2R_SEND, R2U_TEXT) whose header has come and whose data the bytes fed
// so far do not complete, whether the message will be ignored: if so,
// its data are skipped as they come rather than held, and Next returns
// the message with Data nil once they have all come. A relay so holds
// nothing of a message it would ignore (a CONNECTED user's, U14), which
// otherwise could keep MaxMessage bytes of its memory as long as the
// user liked, by sending all of a message but its last byte.
func (d *Decoder) SetIgnore(ignore func(ID) bool) { d.ignore = ignore }

// NewDecoder returns a decoder of packets travelling in direction dir with
// messages of at most maxData bytes.
func NewDecoder(dir Direction, maxData int) *Decoder {
	return &Decoder{dir: dir, maxData: maxData}
}

// Feed hands the decoder the next bytes of the stream. Call it only once
// Next has reported false for the previous ones. The decoder reads b until
// then and keeps no reference to it after.
func (d *Decoder) Feed(b []byte) {
	if len(d.in) > 0 {
		panic("urp: Decoder.Feed before Next consumed the previous bytes")
	}
	d.in = b
}

// Next returns the next complete packet, or false when the bytes fed so
// far hold no more, or an error (see the Err variables) if the stream is
// broken. The packet's Data aliases the fed bytes or the decoder's
// buffer: it is valid until the next call of Next or Feed.
func (d *Decoder) Next() (Packet, bool, error) {
	if d.err != nil {
		return Packet{}, false, d.err
	}
	if d.spent {
		d.spent = false
		d.buf = d.buf[:0]
		if cap(d.buf) > keepBuffer {
			d.buf = nil
		}
	}
	if d.skip > 0 {
		take := min(d.skip, len(d.in))
		d.in = d.in[take:]
		if d.skip -= take; d.skip > 0 {
			return Packet{}, false, nil
		}
		p := d.skipped
		d.skipped = Packet{}
		return p, true, nil
	}
	if len(d.buf) > 0 {
		for {
			take := min(d.need-len(d.buf), len(d.in))
			d.buf = append(d.buf, d.in[:take]...)
			d.in = d.in[take:]
			if len(d.buf) < d.need {
				return Packet{}, false, nil
			}
			p, n, err := Parse(d.buf, d.dir, d.maxData)
			switch {
			case err == ErrShort && d.skipping(d.buf, n):
				d.buf = d.buf[:0]
				return d.Next()
			case err == ErrShort:
				d.need = n
				continue
			case err != nil:
				return d.fail(err)
			}
			d.spent = true
			return p, true, nil
		}
	}
	if len(d.in) == 0 {
		return Packet{}, false, nil
	}
	p, n, err := Parse(d.in, d.dir, d.maxData)
	switch {
	case err == ErrShort && d.skipping(d.in, n):
		d.in = nil
		return Packet{}, false, nil
	case err == ErrShort:
		d.buf = append(d.buf[:0], d.in...)
		d.need = n
		d.in = nil
		return Packet{}, false, nil
	case err != nil:
		return d.fail(err)
	}
	d.in = d.in[n:]
	return p, true, nil
}

// skipping reports whether b, the start of a packet that needs n bytes
// in all, is a message whose header has come and whose data are to be
// ignored (SetIgnore); if so, it is to be skipped: what is left of its
// data, past b, is counted in d.skip.
func (d *Decoder) skipping(b []byte, n int) bool {
	if d.ignore == nil || len(b) < messageHead {
		return false
	}
	id := ID(b[0])
	if id != U2RBrod && id != U2RSend && id != R2UText || !d.ignore(id) {
		return false
	}
	d.skipped = Packet{ID: id, UID: le.Uint32(b[1:])}
	d.skip = n - len(b)
	return true
}

func (d *Decoder) fail(err error) (Packet, bool, error) {
	d.err = err
	d.in, d.buf = nil, nil
	return Packet{}, false, err
}

// Buffered returns the number of bytes held of a packet not yet complete.
// Those of a message being skipped (SetIgnore) are not held.
func (d *Decoder) Buffered() int {
	if d.spent {
		return len(d.in)
	}
	return len(d.buf) + len(d.in)
}

// InPacket reports whether the stream is inside a packet: some of it has
// come, not all.
func (d *Decoder) InPacket() bool { return d.Buffered() > 0 || d.skip > 0 }

// End reports how the stream ended: nil at a packet boundary,
// ErrTruncated inside a packet, or the error that broke it before.
func (d *Decoder) End() error {
	switch {
	case d.err != nil:
		return d.err
	case d.InPacket():
		return ErrTruncated
	}
	return nil
}
