// Command quic is the quic-go peer of the bench command (bench/): one QUIC
// connection with the library's default configuration and datagrams
// enabled (RFC 9221), TLS 1.3 with a self-signed certificate made in
// memory at start. W1-W3 go over one bidirectional stream, each message a
// 4-byte length and its bytes written through a buffer flushed after each
// W1 message and at the end of W2 and W3 (peerkit.StreamConn); W4's
// messages are QUIC datagrams, one a call to SendDatagram.
//
// The bench command builds it and starts it for both roles (see
// peerkit's child protocol).
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"os"
	"sync"
	"time"

	"github.com/fastnet-engine/fastnet/bench/peers/peerkit"
	"github.com/quic-go/quic-go"
)

// alpn is the application protocol both sides name.
const alpn = "fastnet-bench"

// drainWait is how long a datagram connection waits before closing, so
// that what SendDatagram queued (a few dozen datagrams at most) leaves
// first: closing discards the queue, and the library does not say when it
// is empty.
const drainWait = 200 * time.Millisecond

type peer struct{}

func (peer) Supports(w peerkit.Workload) bool {
	switch w.Name {
	case "W1", "W2", "W3", "W4":
		return true
	}
	return false
}

func config() *quic.Config { return &quic.Config{EnableDatagrams: true} }

func (peer) Listen(ctx context.Context, w peerkit.Workload) (string, func(context.Context) (peerkit.Conn, error), io.Closer, error) {
	cert, err := selfSigned()
	if err != nil {
		return "", nil, nil, err
	}
	tc := &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{alpn}}
	l, err := quic.ListenAddr("127.0.0.1:0", tc, config())
	if err != nil {
		return "", nil, nil, err
	}
	accept := func(ctx context.Context) (peerkit.Conn, error) {
		c, err := l.Accept(ctx)
		if err != nil {
			return nil, err
		}
		if w.Name == "W4" {
			return newDatagrams(c), nil
		}
		s, err := c.AcceptStream(ctx)
		if err != nil {
			c.CloseWithError(0, "")
			return nil, err
		}
		return streamConn(c, s), nil
	}
	return l.Addr().String(), accept, l, nil
}

func (peer) Dial(ctx context.Context, addr string, w peerkit.Workload) (peerkit.Conn, error) {
	tc := &tls.Config{InsecureSkipVerify: true, NextProtos: []string{alpn}}
	c, err := quic.DialAddr(ctx, addr, tc, config())
	if err != nil {
		return nil, err
	}
	if w.Name == "W4" {
		if !c.ConnectionState().SupportsDatagrams.Remote {
			c.CloseWithError(0, "")
			return nil, errors.New("the server does not take datagrams")
		}
		return newDatagrams(c), nil
	}
	s, err := c.OpenStreamSync(ctx)
	if err != nil {
		c.CloseWithError(0, "")
		return nil, err
	}
	return streamConn(c, s), nil
}

// streamConn frames messages over s, a stream of c.
func streamConn(c *quic.Conn, s *quic.Stream) *peerkit.StreamConn {
	sc := peerkit.NewStreamConn(s)
	sc.OnInterrupt = func() { s.SetReadDeadline(time.Now()) }
	sc.OnClose = func() error { return c.CloseWithError(0, "") }
	sc.ClosedBy = closedByPeer
	return sc
}

// closedByPeer reports whether err says the other side closed the
// connection.
func closedByPeer(err error) bool {
	var ae *quic.ApplicationError
	return errors.As(err, &ae) && ae.Remote
}

// datagrams is a connection's datagrams, unreliable only.
type datagrams struct {
	c      *quic.Conn
	ctx    context.Context
	cancel context.CancelFunc
	once   sync.Once
}

func newDatagrams(c *quic.Conn) *datagrams {
	ctx, cancel := context.WithCancel(context.Background())
	return &datagrams{c: c, ctx: ctx, cancel: cancel}
}

func (d *datagrams) Send(b []byte, reliable bool) error {
	if reliable {
		return errors.New("datagrams are unreliable")
	}
	return d.c.SendDatagram(b)
}

// Flush has nothing to do: the library sends queued datagrams as soon as
// congestion control allows.
func (d *datagrams) Flush() error { return nil }

func (d *datagrams) Receive() ([]byte, bool, error) {
	b, err := d.c.ReceiveDatagram(d.ctx)
	switch {
	case d.ctx.Err() != nil:
		return nil, false, peerkit.ErrInterrupted
	case closedByPeer(err):
		return nil, false, io.EOF
	}
	return b, false, err
}

func (d *datagrams) Interrupt() { d.cancel() }

func (d *datagrams) Close() error {
	var err error
	d.once.Do(func() {
		time.Sleep(drainWait)
		err = d.c.CloseWithError(0, "")
	})
	return err
}

// selfSigned makes a certificate for 127.0.0.1 signed by its own key.
func selfSigned() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "fastnet-bench"},
		DNSNames:     []string{"localhost"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

func main() {
	// The library warns on stderr when the kernel caps its socket
	// buffers; the bench measures with the machine's defaults, as for
	// every other system.
	os.Setenv("QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING", "true")
	peerkit.Main(peer{})
}
