package fastnet

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/fastnet-engine/fastnet/channel"
	"github.com/fastnet-engine/fastnet/mtu"
)

// Role says whether an endpoint is a client, a server or a peer. The
// specification makes every entity one or the other, never both; the
// project reads that per connection (X19, docs/nat.md): each connection
// has exactly one client and one server, and a Peer endpoint holds
// connections of both roles on one transport.
type Role uint8

// The roles.
const (
	Client Role = iota + 1
	Server
	// Peer is an endpoint that both dials and accepts on one socket: its
	// Connect opens client-role connections, and a "connect?" from an
	// address without a connection opens a server-role one if it is
	// accepted (by default only an introduced peer is, X12, X19).
	Peer
)

func (r Role) String() string {
	switch r {
	case Client:
		return "client"
	case Server:
		return "server"
	case Peer:
		return "peer"
	}
	return "Role(?)"
}

// Transport says what the datagrams handed to and taken from an endpoint
// travel over.
type Transport uint8

// The two kinds of transport.
const (
	// Datagram is an unreliable, unordered transport such as UDP: message
	// channels carry sequence headers, reliable packets are acked and
	// resent, and the payload MTU is estimated (D4, D12-D14, D19).
	Datagram Transport = iota
	// Stream is a reliable, ordered transport such as TCP: every message is
	// one packet with no sequence header, no acks and no resends (D4). The
	// driver frames packets (D20) and reports a dropped transport
	// connection with Endpoint.HandleTransportClosed.
	Stream
)

func (t Transport) String() string {
	switch t {
	case Datagram:
		return "datagram"
	case Stream:
		return "stream"
	}
	return "Transport(?)"
}

// Config holds every setting and limit of an endpoint. The zero value of a
// field means its default (the Default constants below); Validate checks
// the result.
//
// A duration may be as large as math.MaxInt64: deadlines saturate at
// clock.Never instead of overflowing, so a duration too long for the
// clock's range (math.MaxInt64, or about 290 years) means "never" (N36).
type Config struct {
	// Role is Client, Server or Peer. Required.
	Role Role
	// Transport is Datagram (default) or Stream.
	Transport Transport

	// Rand is the source of every random choice (connection IDs, MTU probe
	// contents), so that a run replays from a seed. The default is a PCG
	// with a fixed seed: drivers seed it from crypto/rand. An endpoint uses
	// it from one goroutine only.
	Rand *rand.Rand

	// Accept, on a server, decides whether to accept a connection from addr.
	// A non-nil error refuses it, and the error's text is sent to the client
	// as the "abort" reason. Nil accepts everything. On a Peer it is asked
	// only about addresses it may accept at all: introduced ones, and
	// strangers if AcceptStrangers is set (X19). It runs inside
	// HandleDatagram (or HandleDatagrams) and must not call the endpoint.
	Accept func(addr netip.AddrPort) error
	// AcceptStrangers lets a Peer accept a "connect?" from an address no
	// introduction proved, as a server does (subject to Accept). Default
	// false: a Peer refuses strangers with the reason "not introduced"
	// (X12, X19).
	AcceptStrangers bool

	// MaxPacketSize is the largest packet, channel id included, this
	// endpoint sends (the specification's "maximum packet size", advertised
	// as Config().MaxPacketSize) and so the ceiling of MTU estimation. For
	// Datagram the default is 9216, enough for jumbo frames, and at most
	// 65507 (D21); endpoints accept datagrams of any size up to 65507
	// whatever it is. For Stream it is MaxMessageSize plus the message and
	// packet overhead (D20), and at most that of a message of 1 GiB. At
	// least 4096.
	MaxPacketSize int
	// InitialPayloadMTU is the payload MTU (bytes after the channel id) a
	// Datagram connection starts with, before MTU estimation. Default 32,
	// the specification's default; at least 32.
	InitialPayloadMTU int
	// MaxMessageSize is the largest message payload Send accepts and a
	// receiver reassembles. Default 1 MiB.
	MaxMessageSize int

	// ReceiveWindow is W of D9: packets more than W after a channel's ignore
	// number are dropped unacked. Default 65536, or more if a message of
	// MaxMessageSize cut at payload MTU 32 needs more; below 8,398,608/2.
	ReceiveWindow int
	// ChannelReceiveMemory bounds the bytes one channel holds for
	// reassembly: its queued packets in their buffers, its receive queue's
	// arrays and the messages it delivered and the endpoint has not yet
	// taken, each at its size in memory (N49). Default 3*MaxMessageSize +
	// 64 KiB, or more if a message of MaxMessageSize cut at payload MTU 32
	// needs more (for the default MaxMessageSize, 4.06 MB).
	ChannelReceiveMemory int
	// ConnReceiveMemory bounds the bytes one connection holds for what its
	// peer sent: what its channels hold for reassembly, their receivers
	// (ChannelHoldMemory) and the state of every channel the peer has
	// used (ChannelStateMemory), and the messages completed before it is
	// validated (D25). Default 4*ChannelReceiveMemory.
	ConnReceiveMemory int
	// EndpointReceiveMemory bounds what all the connections of the
	// endpoint hold, as ConnReceiveMemory counts it, together with the
	// free packet buffers the endpoint keeps for reuse (D22, N50): many
	// peers, each within its connection's limit, cannot make the endpoint
	// hold more. A packet that does not fit is dropped unacked
	// (DropMemory), and its sender resends it later; a reliable message
	// whose memory was promised once its first packet arrived still
	// completes (N20). Default 256 MiB, or ConnReceiveMemory if larger:
	// room for about 16 connections at their full default limit at once,
	// or for the state of every channel of 65 connections (N50), while
	// the default MaxConnections of 1024 at their full limits would be
	// 17 GB. At least ConnReceiveMemory.
	EndpointReceiveMemory int
	// MaxHoldingChannels bounds the channels of one connection that hold
	// queued packets at once (an incomplete message, or packets waiting for
	// earlier ones); each needs about ChannelHoldMemory beyond its packets.
	// A packet that would make one more channel hold packets is dropped
	// unacked (DropMemory) and its sender resends it later; a message
	// arriving whole in one packet is still delivered, and past half the
	// bound only a packet that starts a message and waits for nothing may
	// begin holding. Default 32768: no bound. A lower bound caps what a
	// hostile peer can pin (about ChannelHoldMemory a channel), but must
	// stay above the channels an honest peer may have messages in flight
	// on at once: the packets refused stay in the peer's in-flight window
	// (its MaxInFlight), and once they fill it the messages already begun
	// cannot be finished. See N25 of docs/protocol.md.
	MaxHoldingChannels int
	// SendQueueSize bounds the encoded bytes of one connection's messages
	// waiting to be sent for the first time. A Send that would pass it
	// fails with ErrQueueFull. Default 1 MiB, and at least one message of
	// MaxMessageSize (with the defaults, 1 MiB and 21 bytes); it was 4 MiB
	// before N96.
	SendQueueSize int
	// MaxInFlight bounds the bytes of reliable packets sent and not yet
	// acknowledged on one connection; new packets wait while it is reached.
	// Default 1 MiB.
	MaxInFlight int

	// MaxConnections bounds a server's established connections; a
	// "connect?" beyond it is refused with the reason "server full".
	// Default 1024.
	MaxConnections int
	// MaxPendingHandshakes bounds a client's connections still in their
	// handshake. Default 16.
	MaxPendingHandshakes int
	// MaxUnvalidated bounds a server's unvalidated connections: those
	// whose client has not yet echoed a heartbeat the server originated,
	// and so has not proved that it receives at its address (D25). They
	// do not count against MaxConnections; when the bound is reached, the
	// oldest is dropped silently to make room for a new one. Default
	// 1024.
	MaxUnvalidated int
	// ValidationTimeout ends an unvalidated connection silently this long
	// after its "connect?" (D25). Default 10 s: a client echoes the first
	// heartbeat one round trip after "connected", but on a path losing
	// half the datagrams each way a challenge and its echo both arrive
	// only one time in four, and the server may answer only as many bytes
	// as it heard (N33). A client sends its own heartbeats every
	// ConnectRetry for its first ValidationTimeout, which gives the
	// server those bytes.
	ValidationTimeout time.Duration
	// UnvalidatedReceiveMemory bounds the bytes an unvalidated connection
	// holds for its client: packets queued for reassembly and messages
	// complete but not yet reported, which are delivered once the
	// connection is validated (D25). A reliable packet that does not fit
	// is not acked, so the client resends it after validation. Default
	// 64 KiB; at most ConnReceiveMemory.
	UnvalidatedReceiveMemory int

	// Timeout ends a connection whose peer sent no heartbeat for this long
	// (default 20 s), and one with a reliable packet unacknowledged this
	// long (D14).
	Timeout time.Duration
	// ConnectTimeout bounds the client's handshake (default 5 s).
	ConnectTimeout time.Duration
	// ConnectRetry is the interval between the client's queries and
	// "connect?" on a Datagram transport (default 200 ms, at least 1 ms).
	ConnectRetry time.Duration
	// CoalesceInterval is the MCI of D11: an incomplete unreliable message
	// is dropped this long after its newest packet arrived (default 25 ms).
	CoalesceInterval time.Duration
	// MinResendRTT is the floor of the RTT used for resend intervals (D14).
	// Default 10 ms.
	MinResendRTT time.Duration
	// MaxResendInterval caps the interval between resends of one packet
	// (D14). Default 5 s.
	MaxResendInterval time.Duration
	// Linger bounds how long a graceful Close waits for its reliable data to
	// be acknowledged before it sends "disconnect" (D18). Default 2 s.
	Linger time.Duration
	// AckRepeats is how many later ack packets repeat each ack entry in
	// the room they have left (N29), on Datagram transports, so that one
	// lost ack packet does not cost a resend. Repeats never add a packet.
	// Default 2; -1 sends each entry once; at most 8.
	AckRepeats int

	// QualityInterval, if positive, makes the endpoint report an
	// EventQuality for each established connection every interval, and
	// is the window Stats.SendRate and ReceiveRate are measured over
	// (N57, N58). Default 0: no quality events, and rates over windows
	// of one second. Otherwise at least 1 ms: a shorter interval only
	// makes the endpoint wake to report figures of a packet or two.
	QualityInterval time.Duration

	// NoBundles turns bundles (D24) off: the endpoint neither asks its
	// peers "query:ext:bundle" nor answers it, so it never sends nor
	// accepts a channel -6 bundle, as a strict 1.0 peer (N69). Default
	// false: bundles are negotiated on every Datagram connection.
	NoBundles bool

	// ReuseMessageBuffers makes the endpoint lend the buffers of the
	// messages it delivers rather than give them: the Data of an
	// EventMessage is then valid only until the next call of
	// HandleDatagram, HandleDatagrams or HandleTimeout after PollEvent
	// (or NextEvent) returned it, and the application copies what it
	// keeps longer. Receiving small messages then allocates nothing,
	// where otherwise every message is new memory for the garbage
	// collector (N103). For an application that handles each message as
	// it polls it; a driver that hands messages to other goroutines
	// leaves it off. Default false: Data is the application's to keep.
	ReuseMessageBuffers bool

	// Congestion control (D30), on Datagram transports.
	Congestion CongestionConfig
	// Punch holds the settings of introductions and hole punching
	// (docs/nat.md), on Datagram transports.
	Punch PunchConfig

	// UnreliableMaxDelay bounds how long an unreliable message may wait
	// to be sent, behind the pacer, a full window or the messages queued
	// before it: one that waited longer is dropped at the sender when its
	// turn comes, counted in Stats.UnreliableExpired and reported
	// OutcomeDropped if tracked, since it would arrive too late to be of
	// use (D30, N80). Default 100 ms; a message already partly sent is
	// never dropped.
	UnreliableMaxDelay time.Duration

	// MTU estimation (D19), on Datagram transports.
	MTU MTUConfig

	// defaultRand records that Rand was left to its predictable default.
	defaultRand bool
}

// CongestionConfig holds the settings of congestion control (D30, N76-N83).
// The zero value is the default: a NewReno window with a delay-based end
// of slow start, and every packet paced.
type CongestionConfig struct {
	// Disabled turns congestion control off: the connection sends as
	// fast as the transport takes its datagrams, within MaxInFlight, as
	// the engine did before D30. Only for links the application controls
	// end to end; on any shared path it floods the bottleneck.
	Disabled bool
	// FixedRate, in bytes per second of datagram payload, replaces the
	// controller with a pacer at exactly that rate, for an application
	// that knows its link: losses do not slow it. 0: the controller runs.
	FixedRate int
	// MaxRate caps the pacing rate the controller reaches, in bytes per
	// second of datagram payload. 0: no cap.
	MaxRate int
	// InitialWindow is the window a connection starts with, in bytes of
	// reliable data in flight. Default 14600 (RFC 6928's ten segments).
	InitialWindow int
	// MinWindow is the smallest window losses reduce it to. Default 2400
	// (two datagrams of a common path).
	MinWindow int
	// QueueDelay is how much longer than the path's smallest round trip
	// a heartbeat's echo may take before a connection that no ack times
	// (one sending only unreliable data) cuts its rate to what the
	// echoes show the peer takes in (N90): the queue its flood may build
	// in the peer's socket or at a bottleneck. Default 5 ms; negative:
	// never cut, the rate stays twice the initial window per round trip
	// (N85).
	QueueDelay time.Duration
}

// PunchConfig holds the settings of the punch extension: introductions
// through a server both peers are connected to, and hole punching between
// them (docs/nat.md, X1-X23). An endpoint speaks it, and so asks and
// answers "query:ext:punch" (X2), when it is an introducer or a Peer; a
// plain Client or Server endpoint does not.
type PunchConfig struct {
	// Disabled makes the endpoint a strict 1.0 peer for this extension
	// whatever else is set: it neither asks nor answers
	// "query:ext:punch", and drops both literals as bad-control, as 1.0
	// drops any unknown one (X2, X20).
	Disabled bool
	// Introducer makes a Server or Peer endpoint an introducer (S of docs/nat.md):
	// it negotiates the extension with its clients. An introducer draws
	// intro ids and tokens from Config.Rand, which must then be set: the
	// default PCG is predictable (X16). Not for a Client.
	Introducer bool
	// Relay, on an introducer, is the "host:port" of a URP relay named to
	// both peers in "intro=" for when punching fails (X6, X13): at most
	// 255 printable ASCII bytes. Empty: none.
	Relay string
	// Candidates are a Peer's local candidates (X9): the addresses of its
	// socket on its own interfaces, at most 4, reported to the introducer
	// and so to the other peer. A driver fills them in; only private,
	// unique-local and global addresses are kept on the way.
	Candidates []netip.AddrPort
	// Consent, on a Peer, decides whether to take part in an introduction
	// another peer asked for (X5): nil accepts, an error refuses and its
	// text (cut to 64 bytes) is the reason the initiator gets. It is
	// called once per introduction, inside HandleDatagram, and must not
	// call the endpoint. Nil refuses every offer with the reason "no
	// consent": an introduction happens only with the target's consent
	// (X1).
	Consent func(IntroOffer) error
	// TTL is an introduction's lifetime from "intro=", sent by the
	// introducer (X6, X7). Default 30 s; at most 2^32-1 ms.
	TTL time.Duration
	// IntroTimeout bounds an initiator's wait for the introducer's
	// answer (X7). Default 10 s.
	IntroTimeout time.Duration
	// ConsentTimeout bounds an introducer's wait for the target's
	// answer; and a target that accepted forgets the introduction this
	// long after without an "intro=" (X7). Default 5 s.
	ConsentTimeout time.Duration
	// PunchTimeout bounds the checks of each side after its go, and is
	// when the target gives up if no "connect?" came (X11, X13). Default
	// 3 s.
	PunchTimeout time.Duration
	// MaxIntros bounds the live introductions one requester may have at
	// an introducer, and that a Peer asks for at once (X4). Default 4.
	MaxIntros int
	// IntroRate and IntroBurst are the bucket of X4: a requester may
	// start IntroBurst introductions at once and IntroRate a second.
	// Defaults 2 and 4.
	IntroRate, IntroBurst int
	// MaxOffers bounds the live offers to one target at an introducer,
	// and the live introductions a Peer takes part in as a target (it
	// refuses more with the reason "busy") (X4, X5). Default 8.
	MaxOffers int
}

// MTUConfig holds the settings of MTU estimation (D19).
type MTUConfig struct {
	// Disabled turns estimation off: the payload MTU stays at
	// InitialPayloadMTU. The responder still answers the peer's probes.
	Disabled bool
	// Path, if set, is asked what the transport knows about the path to
	// a connection's peer when the connection's estimation starts (D29,
	// N43, N45): the UDP driver sets it. It runs inside the endpoint's
	// calls and must not call the endpoint.
	Path func(peer netip.AddrPort) PathInfo
	// ProbeInterval is the wait between probes of one round (default
	// 2 ms).
	ProbeInterval time.Duration
	// FinalTimeout is the wait after a round's last probe (default
	// 250 ms).
	FinalTimeout time.Duration
	// MaxConcurrent bounds the estimations an endpoint runs at once, the
	// rest waiting their turn (the first of each connection, the
	// periodic ones and the restarts alike, N108); it answers half as many peers' estimations
	// at once, refusing the resets of others until one ends, so that
	// thousands of connections starting together do not flood the socket
	// with probes (N53). Default 128, measured in W5 (docs/scale.md).
	MaxConcurrent int
	// Period is the time between the end of one estimation and the start of
	// the next (default 10 min). A connection whose large reliable packets
	// stop being acknowledged re-estimates at once (see docs/protocol.md,
	// N16).
	Period time.Duration
}

// Defaults of the fields of Config.
const (
	DefaultMaxDatagram       = 65507 // the largest UDP payload (D21)
	DefaultMaxPacketSize     = 9216  // the Datagram default of MaxPacketSize
	DefaultPayloadMTU        = 32
	DefaultMaxMessageSize    = 1 << 20
	DefaultReceiveWindow     = 65536
	DefaultSendQueueSize     = 1 << 20
	DefaultMaxInFlight       = 1 << 20
	DefaultMaxConnections    = 1024
	DefaultMaxPendingConnect = 16
	DefaultMaxUnvalidated    = 1024
	DefaultValidationTimeout = 10 * time.Second
	DefaultUnvalidatedMemory = 64 << 10
	DefaultEndpointMemory    = 256 << 20
	DefaultTimeout           = 20 * time.Second
	DefaultConnectTimeout    = 5 * time.Second
	DefaultConnectRetry      = 200 * time.Millisecond
	// minConnectRetry is the least ConnectRetry: a shorter one would
	// flood the path with queries and heartbeats (N109).
	minConnectRetry          = time.Millisecond
	DefaultCoalesceInterval  = 25 * time.Millisecond
	DefaultMinResendRTT      = 10 * time.Millisecond
	DefaultMaxResendInterval = 5 * time.Second
	DefaultLinger            = 2 * time.Second
	DefaultAckRepeats        = 2
	// DefaultUnreliableMaxDelay is the default of UnreliableMaxDelay.
	DefaultUnreliableMaxDelay = 100 * time.Millisecond
	// DefaultInitialWindow and DefaultMinWindow are the defaults of
	// CongestionConfig's windows.
	DefaultInitialWindow = ccInitialWindow
	DefaultMinWindow     = ccMinWindow
	// DefaultQueueDelay is the default of CongestionConfig.QueueDelay.
	DefaultQueueDelay = 5 * time.Millisecond
	// The MTU estimation defaults are the mtu package's, chosen by
	// measurement (see its documentation).
	DefaultMTUProbeInterval = mtu.DefaultProbeInterval
	DefaultMTUFinalTimeout  = mtu.DefaultFinalTimeout
	DefaultMTUPeriod        = mtu.DefaultPeriod
	// The defaults of PunchConfig (X4-X7).
	DefaultIntroTTL       = 30 * time.Second
	DefaultIntroTimeout   = 10 * time.Second
	DefaultConsentTimeout = 5 * time.Second
	DefaultPunchTimeout   = 3 * time.Second
	DefaultMaxIntros      = 4
	DefaultIntroRate      = 2
	DefaultIntroBurst     = 4
	DefaultMaxOffers      = 8
	// DefaultMTUMaxConcurrent is the default of MTUConfig.MaxConcurrent.
	DefaultMTUMaxConcurrent = 128

	// maxAckRepeats bounds Config.AckRepeats.
	maxAckRepeats = 8
	// minSendRate is the lowest rate CongestionConfig takes: below a
	// kilobyte a second, heartbeats alone would use it up.
	minSendRate = 1000
	// maxQueueDelay bounds CongestionConfig.QueueDelay: a queue of more
	// than a second is no limit.
	maxQueueDelay = time.Second
	// minQualityInterval is the shortest Config.QualityInterval.
	minQualityInterval = time.Millisecond

	// seqSpace is M of D5.
	seqSpace = 8398608
	// packetOverhead is the channel id plus the channel data header (D12).
	packetOverhead = 2 + 7
	// maxMessageOverhead is the longest message header and checksum (D2,
	// D3): flags, a 4-byte length and an MD5 digest.
	maxMessageOverhead = 1 + 4 + 16
	// maxStreamPacket is the largest MaxPacketSize: a packet of the
	// largest message, 1 GiB, channel id included.
	maxStreamPacket = 1<<30 + maxMessageOverhead + 2
)

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	if c.Rand == nil {
		c.defaultRand = true
		c.Rand = rand.New(rand.NewPCG(0x66617374, 0x6e6574))
	}
	if c.MaxMessageSize == 0 {
		c.MaxMessageSize = DefaultMaxMessageSize
	}
	if c.MaxPacketSize == 0 {
		if c.Transport == Stream {
			c.MaxPacketSize = c.MaxMessageSize + maxMessageOverhead + 2
		} else {
			c.MaxPacketSize = DefaultMaxPacketSize
		}
	}
	if c.InitialPayloadMTU == 0 {
		c.InitialPayloadMTU = DefaultPayloadMTU
	}
	// A message of MaxMessageSize cut at the peer's smallest payload MTU
	// (32) must fit the receive window and memory (D9, D22).
	packets := (c.MaxMessageSize + maxMessageOverhead + DefaultPayloadMTU - 8) / (DefaultPayloadMTU - 7)
	if c.ReceiveWindow == 0 {
		c.ReceiveWindow = min(max(DefaultReceiveWindow, packets+packets/8), seqSpace/2-1)
	}
	if c.ChannelReceiveMemory == 0 {
		c.ChannelReceiveMemory = 3*c.MaxMessageSize + 64<<10
		c.ChannelReceiveMemory = max(c.ChannelReceiveMemory, c.messageMemory()+64<<10)
	}
	if c.ConnReceiveMemory == 0 {
		c.ConnReceiveMemory = 4 * c.ChannelReceiveMemory
	}
	if c.EndpointReceiveMemory == 0 {
		c.EndpointReceiveMemory = max(DefaultEndpointMemory, c.ConnReceiveMemory)
	}
	if c.MaxHoldingChannels == 0 {
		c.MaxHoldingChannels = MaxChannel + 1
	}
	if c.SendQueueSize == 0 {
		c.SendQueueSize = max(DefaultSendQueueSize, c.MaxMessageSize+maxMessageOverhead)
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	if c.MaxConnections == 0 {
		c.MaxConnections = DefaultMaxConnections
	}
	if c.MaxPendingHandshakes == 0 {
		c.MaxPendingHandshakes = DefaultMaxPendingConnect
	}
	if c.MaxUnvalidated == 0 {
		c.MaxUnvalidated = DefaultMaxUnvalidated
	}
	if c.ValidationTimeout == 0 {
		c.ValidationTimeout = DefaultValidationTimeout
	}
	if c.UnvalidatedReceiveMemory == 0 {
		c.UnvalidatedReceiveMemory = min(DefaultUnvalidatedMemory, c.ConnReceiveMemory)
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = DefaultConnectTimeout
	}
	if c.ConnectRetry == 0 {
		c.ConnectRetry = DefaultConnectRetry
	}
	if c.CoalesceInterval == 0 {
		c.CoalesceInterval = DefaultCoalesceInterval
	}
	if c.MinResendRTT == 0 {
		c.MinResendRTT = DefaultMinResendRTT
	}
	if c.MaxResendInterval == 0 {
		c.MaxResendInterval = DefaultMaxResendInterval
	}
	if c.Linger == 0 {
		c.Linger = DefaultLinger
	}
	if c.AckRepeats == 0 {
		c.AckRepeats = DefaultAckRepeats
	}
	if c.UnreliableMaxDelay == 0 {
		c.UnreliableMaxDelay = DefaultUnreliableMaxDelay
	}
	if c.Congestion.InitialWindow == 0 {
		c.Congestion.InitialWindow = DefaultInitialWindow
	}
	if c.Congestion.QueueDelay == 0 {
		c.Congestion.QueueDelay = DefaultQueueDelay
	}
	if c.Congestion.MinWindow == 0 {
		c.Congestion.MinWindow = DefaultMinWindow
	}
	if c.Punch.TTL == 0 {
		c.Punch.TTL = DefaultIntroTTL
	}
	if c.Punch.IntroTimeout == 0 {
		c.Punch.IntroTimeout = DefaultIntroTimeout
	}
	if c.Punch.ConsentTimeout == 0 {
		c.Punch.ConsentTimeout = DefaultConsentTimeout
	}
	if c.Punch.PunchTimeout == 0 {
		c.Punch.PunchTimeout = DefaultPunchTimeout
	}
	if c.Punch.MaxIntros == 0 {
		c.Punch.MaxIntros = DefaultMaxIntros
	}
	if c.Punch.IntroRate == 0 {
		c.Punch.IntroRate = DefaultIntroRate
	}
	if c.Punch.IntroBurst == 0 {
		c.Punch.IntroBurst = DefaultIntroBurst
	}
	if c.Punch.MaxOffers == 0 {
		c.Punch.MaxOffers = DefaultMaxOffers
	}
	if c.MTU.ProbeInterval == 0 {
		c.MTU.ProbeInterval = DefaultMTUProbeInterval
	}
	if c.MTU.FinalTimeout == 0 {
		c.MTU.FinalTimeout = DefaultMTUFinalTimeout
	}
	if c.MTU.Period == 0 {
		c.MTU.Period = DefaultMTUPeriod
	}
	if c.MTU.MaxConcurrent == 0 {
		c.MTU.MaxConcurrent = DefaultMTUMaxConcurrent
	}
	return c
}

// Validate reports the first field of c, with defaults applied, that is out
// of range, or a combination that could never work (D22).
func (c Config) Validate() error {
	_, err := c.resolve()
	return err
}

func (c Config) resolve() (Config, error) {
	bad := func(format string, args ...any) (Config, error) {
		return c, errors.New("fastnet: invalid config: " + fmt.Sprintf(format, args...))
	}
	// Checked before the defaults, some of which are computed from it
	// (ChannelReceiveMemory's takes time in proportion to a size past
	// the largest buffer class).
	if c.MaxMessageSize > 1<<30 {
		return bad("MaxMessageSize %d is above 1 GiB", c.MaxMessageSize)
	}
	c = c.withDefaults()
	switch {
	case c.Role != Client && c.Role != Server && c.Role != Peer:
		return bad("Role must be Client, Server or Peer")
	case c.Transport != Datagram && c.Transport != Stream:
		return bad("unknown Transport %d", c.Transport)
	case c.MaxPacketSize < 4096:
		return bad("MaxPacketSize %d is below the 4096 every transport must carry", c.MaxPacketSize)
	case c.Transport == Datagram && c.MaxPacketSize > DefaultMaxDatagram:
		return bad("MaxPacketSize %d is above the largest UDP payload, %d", c.MaxPacketSize, DefaultMaxDatagram)
	case c.MaxPacketSize > maxStreamPacket:
		// A stream's driver reads a packet into one buffer of this
		// size: a packet of the largest message is all it needs.
		return bad("MaxPacketSize %d is above %d, a packet of a message of 1 GiB", c.MaxPacketSize, maxStreamPacket)
	case c.InitialPayloadMTU < 32:
		return bad("InitialPayloadMTU %d is below 32", c.InitialPayloadMTU)
	case c.InitialPayloadMTU > c.MaxPacketSize-2:
		return bad("InitialPayloadMTU %d is above MaxPacketSize-2", c.InitialPayloadMTU)
	case c.MaxMessageSize < 1:
		return bad("MaxMessageSize must be positive")
	case c.MaxMessageSize > 1<<30:
		return bad("MaxMessageSize %d is above 1 GiB", c.MaxMessageSize)
	case c.ReceiveWindow < 1 || c.ReceiveWindow >= seqSpace/2:
		return bad("ReceiveWindow %d is outside 1..%d", c.ReceiveWindow, seqSpace/2-1)
	case c.ChannelReceiveMemory < 1 || c.ConnReceiveMemory < 1:
		return bad("receive memory limits must be positive")
	case c.ConnReceiveMemory < c.ChannelReceiveMemory:
		return bad("ConnReceiveMemory %d is below ChannelReceiveMemory %d", c.ConnReceiveMemory, c.ChannelReceiveMemory)
	case c.EndpointReceiveMemory < c.ConnReceiveMemory:
		return bad("EndpointReceiveMemory %d is below ConnReceiveMemory %d", c.EndpointReceiveMemory, c.ConnReceiveMemory)
	case c.MaxHoldingChannels < 1:
		return bad("MaxHoldingChannels %d is not positive", c.MaxHoldingChannels)
	case c.SendQueueSize < c.MaxMessageSize+maxMessageOverhead:
		return bad("SendQueueSize %d cannot hold one message of MaxMessageSize %d", c.SendQueueSize, c.MaxMessageSize)
	case c.MaxInFlight < c.MaxPacketSize && c.Transport == Datagram && c.MaxInFlight < 64<<10:
		return bad("MaxInFlight %d is below 64 KiB", c.MaxInFlight)
	case c.MaxConnections < 1 || c.MaxPendingHandshakes < 1:
		return bad("MaxConnections and MaxPendingHandshakes must be positive")
	case c.MaxUnvalidated < 1:
		return bad("MaxUnvalidated %d is not positive", c.MaxUnvalidated)
	case c.ValidationTimeout <= 0:
		return bad("ValidationTimeout must be positive")
	case c.UnvalidatedReceiveMemory < 1 || c.UnvalidatedReceiveMemory > c.ConnReceiveMemory:
		return bad("UnvalidatedReceiveMemory %d is outside 1..ConnReceiveMemory (%d)", c.UnvalidatedReceiveMemory, c.ConnReceiveMemory)
	case c.Timeout < 100*time.Millisecond:
		return bad("Timeout %v is below 100ms", c.Timeout)
	case c.ConnectTimeout <= 0 || c.ConnectRetry <= 0 || c.CoalesceInterval <= 0:
		return bad("ConnectTimeout, ConnectRetry and CoalesceInterval must be positive")
	case c.ConnectRetry < minConnectRetry:
		// It paces the client's handshake and early heartbeats, and
		// the server's validation challenges go half of it apart.
		return bad("ConnectRetry %v is below %v", c.ConnectRetry, minConnectRetry)
	case c.MinResendRTT <= 0 || c.MaxResendInterval < c.MinResendRTT:
		return bad("MinResendRTT must be positive and at most MaxResendInterval")
	case c.Linger < 0:
		return bad("Linger must not be negative")
	case c.QualityInterval < 0 || c.QualityInterval > 0 && c.QualityInterval < minQualityInterval:
		return bad("QualityInterval %v: want 0 (off) or at least %v", c.QualityInterval, minQualityInterval)
	case c.AckRepeats < -1 || c.AckRepeats > maxAckRepeats:
		return bad("AckRepeats %d: want -1..%d", c.AckRepeats, maxAckRepeats)
	case c.UnreliableMaxDelay < 0:
		return bad("UnreliableMaxDelay must not be negative")
	case c.Congestion.FixedRate < 0 || c.Congestion.MaxRate < 0:
		return bad("Congestion.FixedRate and MaxRate must not be negative")
	case c.Congestion.FixedRate > 0 && c.Congestion.FixedRate < minSendRate,
		c.Congestion.MaxRate > 0 && c.Congestion.MaxRate < minSendRate:
		return bad("Congestion rates must be at least %d bytes per second", minSendRate)
	case c.Congestion.QueueDelay > maxQueueDelay:
		return bad("Congestion.QueueDelay must be at most %v", maxQueueDelay)
	case c.Congestion.MinWindow < 2*DefaultPayloadMTU || c.Congestion.InitialWindow < c.Congestion.MinWindow:
		return bad("Congestion windows: want %d <= MinWindow <= InitialWindow", 2*DefaultPayloadMTU)
	case c.MTU.ProbeInterval <= 0 || c.MTU.FinalTimeout <= 0 || c.MTU.Period <= 0:
		return bad("MTU intervals must be positive")
	case c.MTU.MaxConcurrent < 1:
		return bad("MTU.MaxConcurrent %d is not positive", c.MTU.MaxConcurrent)
	case c.Punch.Introducer && c.Role == Client:
		return bad("Punch.Introducer: a Client cannot introduce; want a Server or a Peer")
	case c.Punch.TTL < time.Millisecond || c.Punch.TTL > 0xffffffff*time.Millisecond:
		return bad("Punch.TTL %v is outside 1ms..2^32-1 ms", c.Punch.TTL)
	case c.Punch.IntroTimeout <= 0 || c.Punch.ConsentTimeout <= 0 || c.Punch.PunchTimeout <= 0:
		return bad("Punch.IntroTimeout, ConsentTimeout and PunchTimeout must be positive")
	case c.Punch.MaxIntros < 1 || c.Punch.IntroRate < 1 || c.Punch.IntroBurst < 1 || c.Punch.MaxOffers < 1:
		return bad("Punch.MaxIntros, IntroRate, IntroBurst and MaxOffers must be positive")
	case !validRelay(c.Punch.Relay):
		return bad("Punch.Relay %q: want at most 255 printable ASCII bytes", c.Punch.Relay)
	case len(c.Punch.Candidates) > maxCands:
		return bad("Punch.Candidates: %d addresses, at most %d", len(c.Punch.Candidates), maxCands)
	case c.Transport == Stream && c.Role == Peer:
		return bad("Role Peer needs a Datagram transport: a stream is one connection of one role")
	case c.Punch.Introducer && c.defaultRand:
		return bad("Punch.Introducer needs Rand: intro ids and tokens must be unguessable (X16)")
	}
	if c.Transport == Datagram {
		if err := c.mtuConfig().Validate(); err != nil {
			return bad("MTU: %v", err)
		}
	}
	if c.Transport == Stream {
		if need := c.MaxMessageSize + maxMessageOverhead + 2; c.MaxPacketSize < need {
			return bad("MaxPacketSize %d cannot carry a message of MaxMessageSize %d as one packet (D20)", c.MaxPacketSize, c.MaxMessageSize)
		}
		return c, nil
	}
	// Datagram: a reliable message is delivered only once all of its packets
	// are queued, so the largest one must fit the receive window and memory
	// when the peer cuts it at the smallest payload MTU it may use, 32: a
	// receiver cannot know the peer's MTU in advance (D9, D12, D22).
	encoded := c.MaxMessageSize + maxMessageOverhead
	chunk := DefaultPayloadMTU - 7
	packets := (encoded + chunk - 1) / chunk
	if packets > c.ReceiveWindow {
		return bad("a message of MaxMessageSize %d is %d packets when the peer cuts it at payload MTU 32, above ReceiveWindow %d", c.MaxMessageSize, packets, c.ReceiveWindow)
	}
	if need := channel.MessageMemory(encoded, chunk); need > c.ChannelReceiveMemory {
		return bad("a message of MaxMessageSize %d needs %d bytes of receive memory at payload MTU 32, above ChannelReceiveMemory %d", c.MaxMessageSize, need, c.ChannelReceiveMemory)
	}
	return c, nil
}

// messageMemory returns what a receiver needs at most to hold a message of
// MaxMessageSize cut at the smallest payload MTU a peer may use, 32, or
// more: what a grant may need, kept free of the packets no grant covers
// (channel.Budget.Reserve, N50).
func (c *Config) messageMemory() int {
	return channel.MessageMemory(c.MaxMessageSize+maxMessageOverhead, DefaultPayloadMTU-7)
}

// PacketMemoryOverhead bounds what one queued packet of a message of two or
// more packets costs a receiver beyond its chunk bytes, as counted against
// the receive memory limits, when the message is cut at payload MTU 32 or
// more: its buffer (a power of two of at least 32 bytes), its place in the
// receive queue's ring (up to two places of 40 bytes, on 64-bit
// platforms) and its share of the ring's base arrays (N49). A
// ChannelReceiveMemory of the encoded message's length plus its packets at
// payload MTU 32 times PacketMemoryOverhead always holds it; Validate asks
// for the exact worst case, channel.MessageMemory, which is less.
const PacketMemoryOverhead = channel.PacketOverhead

// ChannelHoldMemory is what a channel's receiving half needs at least
// while it holds queued packets, beyond their buffers, as counted against
// the receive memory limits: its receiver and the smallest arrays of its
// receive queue, 1,192 bytes on 64-bit platforms (Config.MaxHoldingChannels,
// N25, N49). An idle receiver the connection keeps costs the same, and up
// to 2.6 KiB more for the arrays of a queue that grew. It is computed from
// the types at initialization; it is not a setting.
var ChannelHoldMemory = channel.HoldOverhead

// ChannelStateMemory is what each channel the peer has used costs its
// connection, as counted against the receive memory limits, for the life
// of the connection: the channel's state with its four numbers (N25), its
// entry in the connection's map of channels, and its place in the queue of
// idle channels, on this platform (N49). It is computed from the types at
// initialization; it is not a setting.
var ChannelStateMemory = chanStateMemory
