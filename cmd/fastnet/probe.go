package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/fastnet-engine/fastnet/fastnet"
	"github.com/fastnet-engine/fastnet/internal/frame"
)

// The status queries of channel -1 and their answers (D15).
const (
	queryFastnet  = "query:fastnet"
	answerFastnet = "query:fastnet=yes"
	queryVersion  = "query:version"
	answerVersion = "query:version=" // followed by the version
)

// Probing parameters.
const (
	probeRetry = 200 * time.Millisecond // between UDP retries (D15)
	probePings = 3                      // extra round trips for the RTT
	maxAnswer  = 4096                   // the longest framed packet read over TCP
	// foreignWait is how long probe still waits for a Fastnet answer once
	// something else answered.
	foreignWait = 500 * time.Millisecond
	sampleBytes = 32 // the bytes of a foreign answer shown
)

func probeCommand() *command {
	return &command{
		name:    "probe",
		summary: "ask a server whether it speaks Fastnet, and which version",
		usage:   "probe HOST:PORT [--tcp] [--timeout D]",
		status:  "0 a Fastnet 1.0 server answered; 1 no answer, nothing\nlistening or another failure; 2 usage error; 3 something answered that is not\na Fastnet 1.0 server.",
		details: `
Sends the status queries "query:fastnet" and "query:version" on channel -1
from a plain socket to HOST:PORT (UDP unless --tcp; over TCP each packet is
framed with its length as a u32, D20; an empty HOST, as in ":7000", is
` + localHost + `), every 200ms over UDP until both are answered, then a few more
"query:fastnet" to measure the round-trip time. Prints what the server
answered:

	address: 127.0.0.1:7000 (udp)
	fastnet: yes
	version: 1.0
	rtt:     95µs (min 80µs, max 120µs, 4 queries)

Something that answers but is not Fastnet (a DNS server, an HTTP server over
TCP) is reported as such, with the size and the first bytes of what it sent:

	fastnet: no (an answer that is not Fastnet 1.0: 9 bytes in 1 datagram, starting "\x00\x01garbage")

Exits 0 only for a Fastnet 1.0 server; 3 when something answered that is not
one (another version, or not Fastnet at all); 1 when nothing answers within
--timeout or nothing listens (a hint then suggests the other transport).`,
		flags: func(fs *flag.FlagSet) func(context.Context, []string, *stdio) int {
			tcp := fs.Bool("tcp", false, "probe over TCP instead of UDP")
			timeout := fs.Duration("timeout", 3*time.Second, "give up after `D` without both answers")
			return func(ctx context.Context, args []string, s *stdio) int {
				switch {
				case len(args) == 0:
					return usageError(s, "probe", "missing HOST:PORT")
				case len(args) > 1:
					return usageError(s, "probe", "unexpected argument %q", args[1])
				case *timeout <= 0:
					return usageError(s, "probe", "--timeout %v: must be positive", *timeout)
				}
				if err := checkAddr(args[0]); err != nil {
					return usageError(s, "probe", "%v", err)
				}
				return probe(ctx, s, dialAddr(args[0]), *tcp, *timeout)
			}
		},
	}
}

// probeResult is what a server answered.
type probeResult struct {
	fastnet bool   // it said "query:fastnet=yes"
	version string // its version, "" if it did not say
	rtts    []time.Duration
	foreign foreignAnswer
}

// foreignAnswer is what a server sent that is not a Fastnet answer.
type foreignAnswer struct {
	packets int    // datagrams (UDP) or frames (TCP)
	bytes   int    // in all
	sample  []byte // the first bytes of the first
	first   int    // the bytes of the first
	stream  bool   // over TCP: bytes, not datagrams
}

func (f *foreignAnswer) add(b []byte) {
	if f.packets == 0 {
		f.sample = append([]byte(nil), b[:min(len(b), sampleBytes)]...)
		f.first = len(b)
	}
	f.packets++
	f.bytes += len(b)
}

func (f foreignAnswer) String() string {
	var what string
	switch {
	case f.stream:
		what = fmt.Sprintf("%d bytes", f.bytes)
	case f.packets == 1:
		what = fmt.Sprintf("%d bytes in 1 datagram", f.bytes)
	default:
		what = fmt.Sprintf("%d bytes in %d datagrams", f.bytes, f.packets)
	}
	more := ""
	if f.first > len(f.sample) {
		more = "..."
	}
	return fmt.Sprintf("an answer that is not Fastnet 1.0: %s, starting %q%s", what, f.sample, more)
}

// errForeign ends a probe over TCP at bytes that cannot be Fastnet's.
var errForeign = errors.New("not a Fastnet answer")

// probe is the probe command.
func probe(ctx context.Context, s *stdio, addr string, tcp bool, timeout time.Duration) int {
	name := transportName(tcp)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	pc, err := dialProbe(ctx, tcp, addr)
	if err != nil {
		s.errorf("fastnet probe: %s (%s): %v", addr, name, probeErr(err, tcp))
		return exitFailure
	}
	defer pc.Close()
	res, err := query(ctx, pc)
	if err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, errForeign) {
		s.errorf("fastnet probe: %s (%s): %v", addr, name, probeErr(err, tcp))
		return exitFailure
	}
	if !res.fastnet && res.version == "" && res.foreign.packets == 0 {
		if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			s.errorf("fastnet probe: interrupted")
		} else if tcp {
			s.errorf("fastnet probe: %s (tcp): no answer within %v", addr, timeout)
		} else {
			s.errorf("fastnet probe: %s (udp): no answer within %v; is it a TCP server? try --tcp", addr, timeout)
		}
		return exitFailure
	}
	s.printf("address: %s (%s)", pc.RemoteAddr(), name)
	switch {
	case res.fastnet:
		s.printf("fastnet: yes")
	case res.foreign.packets > 0:
		s.printf("fastnet: no (%v)", res.foreign)
	default:
		s.printf("fastnet: no answer")
	}
	if res.version != "" {
		s.printf("version: %s", res.version)
	} else {
		s.printf("version: no answer")
	}
	if len(res.rtts) > 0 {
		r := slices.Clone(res.rtts)
		slices.Sort(r)
		s.printf("rtt:     %v (min %v, max %v, %d queries)", round(r[len(r)/2]), round(r[0]), round(r[len(r)-1]), len(r))
	}
	switch {
	case !res.fastnet && res.foreign.packets > 0 && res.version == "":
		s.errorf("fastnet probe: %s answered, but it is not a Fastnet 1.0 server", addr)
		return exitNotFastnet
	case !res.fastnet:
		s.errorf("fastnet probe: %s did not say it speaks Fastnet", addr)
		return exitNotFastnet
	case res.version != fastnet.Version:
		if res.version == "" {
			s.errorf("fastnet probe: %s did not say its version", addr)
		} else {
			s.errorf("fastnet probe: %s speaks Fastnet %s, not %s", addr, res.version, fastnet.Version)
		}
		return exitNotFastnet
	}
	return exitOK
}

// errNothingListening explains a refused connection or an ICMP port
// unreachable.
var errNothingListening = errors.New("nothing listening (connection refused)")

// probeErr explains a socket error, with a hint at the other transport
// for a refusal.
func probeErr(err error, tcp bool) error {
	if errors.Is(err, syscall.ECONNREFUSED) {
		if tcp {
			return fmt.Errorf("%w; is it a UDP server? try without --tcp", errNothingListening)
		}
		return fmt.Errorf("%w; is it a TCP server? try --tcp", errNothingListening)
	}
	return err
}

// round shortens d for display.
func round(d time.Duration) time.Duration {
	switch {
	case d >= 10*time.Millisecond:
		return d.Round(100 * time.Microsecond)
	case d >= 10*time.Microsecond:
		return d.Round(time.Microsecond)
	}
	return d
}

// probeConn carries channel -1 packets over a plain socket.
type probeConn interface {
	// send sends one packet on channel -1 for each payload.
	send(payloads ...string) error
	// recv returns the next packet, waiting until deadline at most (an
	// error matching os.ErrDeadlineExceeded). Bytes that cannot be a
	// packet end the stream with a *foreignBytes error.
	recv(deadline time.Time) ([]byte, error)
	// retries says whether the transport may lose packets, so that queries
	// are repeated.
	retries() bool
	RemoteAddr() net.Addr
	Close() error
}

func dialProbe(ctx context.Context, tcp bool, addr string) (probeConn, error) {
	var d net.Dialer
	if tcp {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, unwrapOp(err)
		}
		return newTCPProbe(c), nil
	}
	c, err := d.DialContext(ctx, "udp", addr)
	if err != nil {
		return nil, unwrapOp(err)
	}
	return &udpProbe{Conn: c}, nil
}

// unwrapOp drops the *net.OpError wrapping, whose text repeats the address.
func unwrapOp(err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) {
		return oe.Err
	}
	return err
}

// appendPacket appends a channel -1 packet with payload p: the channel id as
// a big-endian int16 (0xffff), then p.
func appendPacket(b []byte, p string) []byte {
	b = binary.BigEndian.AppendUint16(b, 0xffff)
	return append(b, p...)
}

// controlPayload returns the payload of a channel -1 packet.
func controlPayload(pkt []byte) ([]byte, bool) {
	if len(pkt) < 2 || int16(binary.BigEndian.Uint16(pkt)) != -1 {
		return nil, false
	}
	return pkt[2:], true
}

// foreignBytes is what a stream sent that cannot be Fastnet's framing.
type foreignBytes struct {
	b []byte // the first bytes
	n int    // the bytes read
}

func (f *foreignBytes) Error() string { return errForeign.Error() }
func (f *foreignBytes) Unwrap() error { return errForeign }

type udpProbe struct {
	net.Conn
	buf [65536]byte
}

func (u *udpProbe) send(payloads ...string) error {
	for _, p := range payloads {
		if _, err := u.Write(appendPacket(nil, p)); err != nil {
			return unwrapOp(err)
		}
	}
	return nil
}

func (u *udpProbe) recv(deadline time.Time) ([]byte, error) {
	u.SetReadDeadline(deadline)
	for {
		n, err := u.Read(u.buf[:])
		if err != nil {
			return nil, unwrapOp(err)
		}
		return u.buf[:n], nil
	}
}

func (u *udpProbe) retries() bool { return true }

// tcpProbe frames packets with their length as a u32 (D20), as the TCP
// driver does (internal/frame).
type tcpProbe struct {
	net.Conn
	fr   *frame.Reader
	seen *recorder
}

func newTCPProbe(c net.Conn) *tcpProbe {
	rec := &recorder{r: c}
	return &tcpProbe{Conn: c, fr: frame.NewReader(rec, maxAnswer, 0), seen: rec}
}

func (t *tcpProbe) send(payloads ...string) error {
	var b []byte
	for _, p := range payloads {
		b = frame.AppendHeader(b, 2+len(p))
		b = appendPacket(b, p)
	}
	_, err := t.Write(b)
	return unwrapOp(err)
}

func (t *tcpProbe) recv(deadline time.Time) ([]byte, error) {
	t.SetReadDeadline(deadline)
	p, err := t.fr.Next()
	switch {
	case errors.Is(err, frame.ErrTooLarge) || err == nil && len(p) < 2:
		// Not Fastnet's framing (D20): show what came.
		return nil, t.seen.foreign()
	case errors.Is(err, io.ErrUnexpectedEOF):
		// Closed in the middle of a frame, or of its length.
		return nil, t.seen.foreign()
	case errors.Is(err, io.EOF):
		return nil, errors.New("the server closed the connection")
	case err != nil:
		return nil, unwrapOp(err)
	}
	return p, nil
}

// recorder counts the bytes read through it and keeps the first
// sampleBytes, to show an answer that is not Fastnet's.
type recorder struct {
	r     io.Reader
	first []byte
	n     int
}

func (r *recorder) Read(b []byte) (int, error) {
	n, err := r.r.Read(b)
	r.n += n
	if room := sampleBytes - len(r.first); room > 0 {
		r.first = append(r.first, b[:min(n, room)]...)
	}
	return n, err
}

// foreign describes what was read as an answer that is not Fastnet's.
func (r *recorder) foreign() *foreignBytes {
	return &foreignBytes{b: r.first, n: r.n}
}

func (t *tcpProbe) retries() bool { return false }

// query asks pc both status queries until both are answered or ctx ends,
// then measures the round-trip time with a few more. It returns what was
// answered so far along with the error that stopped it.
func query(ctx context.Context, pc probeConn) (probeResult, error) {
	var res probeResult
	deadline, _ := ctx.Deadline()
	stop := context.AfterFunc(ctx, func() {
		// A signal ends the wait for an answer at once.
		if ctx.Err() != context.DeadlineExceeded {
			pc.Close()
		}
	})
	defer stop()
	timeout := func(err error) error {
		if errors.Is(err, os.ErrDeadlineExceeded) || ctx.Err() != nil {
			return context.DeadlineExceeded
		}
		return err
	}

	// What is not a Fastnet answer is kept in res.foreign; once some came,
	// probe waits foreignWait more for a Fastnet answer, not the whole
	// timeout.
	_, stream := pc.(*tcpProbe)
	res.foreign.stream = stream
	var foreignBy time.Time
	// foreign records the bytes of a *foreignBytes error, and says
	// whether err was one.
	foreign := func(err error) bool {
		var fb *foreignBytes
		if !errors.As(err, &fb) {
			return false
		}
		res.foreign.add(fb.b)
		res.foreign.bytes += fb.n - len(fb.b)
		res.foreign.first += fb.n - len(fb.b)
		return true
	}
	// answer records what pkt says, and reports whether it was
	// "query:fastnet=yes".
	answer := func(pkt []byte) (fastnetYes bool) {
		p, ok := controlPayload(pkt)
		switch a := string(p); {
		case ok && a == answerFastnet:
			return true
		case ok && strings.HasPrefix(a, answerVersion) && res.version == "":
			res.version = strings.TrimPrefix(a, answerVersion)
		case ok && strings.HasPrefix(a, answerVersion):
			// A late answer to a repeated query.
		default:
			res.foreign.add(pkt)
			if foreignBy.IsZero() {
				foreignBy = time.Now().Add(foreignWait)
			}
		}
		return false
	}

	var sentAt time.Time
	sends := 0
	for !res.fastnet || res.version == "" {
		now := time.Now()
		if sends == 0 || (pc.retries() && now.Sub(sentAt) >= probeRetry) {
			var qs []string
			if !res.fastnet {
				qs = append(qs, queryFastnet)
			}
			if res.version == "" {
				qs = append(qs, queryVersion)
			}
			if err := pc.send(qs...); err != nil {
				return res, timeout(err)
			}
			sentAt, sends = now, sends+1
		}
		stopAt := earliest(deadline, foreignBy)
		wait := stopAt
		if pc.retries() {
			wait = earliest(wait, sentAt.Add(probeRetry))
		}
		p, err := pc.recv(wait)
		if errors.Is(err, os.ErrDeadlineExceeded) && time.Now().Before(stopAt) {
			continue
		}
		if errors.Is(err, os.ErrDeadlineExceeded) && !foreignBy.IsZero() && ctx.Err() == nil {
			return res, nil // something foreign answered, and nothing else
		}
		if foreign(err) {
			return res, errForeign
		}
		if err != nil {
			return res, timeout(err)
		}
		if answer(p) {
			if !res.fastnet && sends == 1 {
				// Only an answer to the first send times a round trip
				// for sure.
				res.rtts = append(res.rtts, time.Since(sentAt))
			}
			res.fastnet = true
		}
	}

	// A few more round trips for the RTT, each answered before the next.
	for range probePings {
		start := time.Now()
		if err := pc.send(queryFastnet); err != nil {
			return res, timeout(err)
		}
		for {
			p, err := pc.recv(earliest(deadline, start.Add(time.Second)))
			if err != nil {
				if ctx.Err() != nil {
					return res, nil // the answers are in: no error
				}
				if errors.Is(err, os.ErrDeadlineExceeded) {
					break // lost: try the next
				}
				if foreign(err) {
					return res, nil // reported with the answers
				}
				return res, err
			}
			if answer(p) {
				res.rtts = append(res.rtts, time.Since(start))
				break
			}
		}
	}
	return res, nil
}

// earliest returns the earlier of a and b, a zero Time meaning neither.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}
