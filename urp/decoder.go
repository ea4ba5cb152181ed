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
}

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

func (d *Decoder) fail(err error) (Packet, bool, error) {
	d.err = err
	d.in, d.buf = nil, nil
	return Packet{}, false, err
}

// Buffered returns the number of bytes held of a packet not yet complete.
func (d *Decoder) Buffered() int {
	if d.spent {
		return len(d.in)
	}
	return len(d.buf) + len(d.in)
}

// End reports how the stream ended: nil at a packet boundary,
// ErrTruncated inside a packet, or the error that broke it before.
func (d *Decoder) End() error {
	switch {
	case d.err != nil:
		return d.err
	case d.Buffered() > 0:
		return ErrTruncated
	}
	return nil
}
