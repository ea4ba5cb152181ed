// Package driver is the blocking, context-aware API of Fastnet connections:
// Conn, Listener, Message and the errors they return. The udpdriver and
// tcpdriver packages open the sockets and return these types:
//
//	l, err := udpdriver.Listen(ctx, ":7000", udpdriver.Config{})
//	c, err := l.Accept(ctx)                     // a *driver.Conn
//	m, err := c.Receive(ctx)                    // a driver.Message
//	err = c.Send(ctx, m.Channel, m.Data, m.Reliable)
//
//	c, err := udpdriver.Dial(ctx, "server:7000", udpdriver.Config{})
//
// # Connections
//
// A Conn carries 32,768 channels (0 to 32767). Send queues one message of
// any size up to fastnet.Config.MaxMessageSize on a channel, reliably
// (delivered once, intact and in order with the channel's other reliable
// messages) or unreliably (delivered at most once, intact). Send blocks
// only while the connection's send queue is full, and returns when the
// message is queued, not when it is delivered. Receive returns the next
// message of any channel. Every method of Conn and Listener may be called
// from any goroutine, and every blocking one returns when its context is
// done.
//
// # Ending
//
// Close is graceful (D18): what was sent gets up to
// fastnet.Config.Linger to be acknowledged, then the peer hears that the
// connection closed. Abort ends it at once. A connection also ends when the
// peer closes it, goes silent for fastnet.Config.Timeout, or breaks the
// protocol. Once it has ended, Send and Receive return a *CloseError, Done
// is closed and Err says why. Listener.Close closes every connection of
// the listener gracefully.
//
// # Errors
//
// Ask errors the Go way (N65):
//
//	errors.Is(err, fastnet.ErrClosed)        // the connection has ended
//	errors.Is(err, fastnet.ErrTimeout)       // the peer went away (whichever timer noticed)
//	errors.Is(err, fastnet.ErrPeerClosed)    // the peer closed it; errors.As gives *fastnet.PeerClosedError
//	errors.Is(err, fastnet.ErrRefused)       // Dial: the server refused; *fastnet.RefusedError has its reason
//	errors.Is(err, fastnet.ErrLingerExpired) // Close: data was left unacknowledged
//	errors.Is(err, net.ErrClosed)            // Accept after Listener.Close
//
// A *CloseError names the transport and the peer, and says whether this
// side ended the connection (Local). Dial failures are *net.OpError values
// that name the address.
//
// # Statistics
//
// Conn.Stats returns the engine's counters of the connection (round-trip
// time, packets and bytes sent, received, resent and dropped by reason,
// payload MTU each way); Conn.DriverStats and Listener.DriverStats the
// driver's own (socket write errors, the listener's backlog);
// Listener.EndpointStats and Listener.ValidationStats the endpoint's.
//
// # Writing a transport
//
// The rest of the package is for drivers. An Engine runs one
// fastnet.Endpoint behind a mutex for a Transport: inputs come from the
// transport's reader goroutines (Engine.Input, Engine.InputBatch,
// Engine.TransportClosed; Engine.InputEstablished for one that must know,
// with the packet that completes it, that a connection's handshake is
// over, as TCP's end of a connection does, N99), or, for a transport that
// is a Reader (UDP), from
// the engine's own reads of its socket, and from API calls. Each takes the
// lock, feeds the endpoint one input with one reading of the clock, drains
// PollTransmit into the transport and the events (NextEvent) into the
// connections, and
// re-arms the one timer goroutine, exactly as the fastnet package
// documentation asks (a batch of more than 256 KiB is the exception: it
// writes what the endpoint has to send every 256 KiB, letting the lock go,
// and reads the clock again after, N100). The optional interfaces (Reader, StreamReader,
// Backpressure, Pauser, Ender, StatsReporter) declare what the transport
// can do.
//
// The D- and N-numbers cited here are the project's protocol decisions and
// notes, in docs/decisions.md and docs/protocol.md.
package driver
