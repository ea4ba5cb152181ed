package fastnet

import "time"

// DropReason says why an incoming packet was dropped (D23). Statistics count
// drops per reason.
type DropReason uint8

// Reasons for dropping a packet.
const (
	DropShort              DropReason = iota // shorter than its format allows
	DropUnknownChannel                       // a channel id no format is defined for
	DropBadHeader                            // a malformed channel data header or sequence number (D5)
	DropBadControl                           // a malformed packet on channels -1..-5
	DropNotConnected                         // from an address with no connection (server) or before connecting (client)
	DropStale                                // unreliable, at or before the ignore number (D8)
	DropDuplicate                            // a reliable packet already received (acked again, D8)
	DropWindow                               // beyond the receive window (D9)
	DropMemory                               // no receive memory left (D22)
	DropMalformedMessage                     // an unreliable message with a bad length or checksum (D11)
	DropExpired                              // an incomplete unreliable message dropped after the MCI (D11)
	DropTooLarge                             // a datagram longer than any transport carries (D20, D21)
	DropOrphaned                             // an unreliable message whose first packet was lost (D11)
	DropSkipped                              // queued unreliable packets the receive window moved past (D9)
	DropPaused                               // a message channel packet while the application's queue is full (not acked, D22)
	DropBundleUnnegotiated                   // a channel -6 bundle from a peer never answered "query:ext:bundle=yes", or over a Stream transport (D24, N72)
	DropBundleMalformed                      // the rest of a bundle from a length that does not add up, or an empty bundle (D24, N72)
	DropBundleNested                         // the rest of a bundle from an inner packet on channel -6 (D24, N72)
	DropBadIntro                             // a well-formed introduction message that answers nothing, or from a connection it does not belong to (X16, X18)
	DropBadPunch                             // a punch packet naming no live introduction, of the wrong role, or whose mac does not verify (X10)
	DropRepeatedControl                      // a channel -1 packet of a kind already handled in the same bundle: answered once (N139)
	numDropReasons
)

var dropReasonNames = [...]string{
	DropShort:            "short",
	DropUnknownChannel:   "unknown-channel",
	DropBadHeader:        "bad-header",
	DropBadControl:       "bad-control",
	DropNotConnected:     "not-connected",
	DropStale:            "stale",
	DropDuplicate:        "duplicate",
	DropWindow:           "window",
	DropMemory:           "memory",
	DropMalformedMessage: "malformed-message",
	DropExpired:          "expired",
	DropTooLarge:         "too-large",
	DropOrphaned:         "orphaned",
	DropSkipped:          "skipped",
	DropPaused:           "paused",

	DropBundleUnnegotiated: "bundle-unnegotiated",
	DropBundleMalformed:    "bundle-malformed",
	DropBundleNested:       "bundle-nested",
	DropBadIntro:           "bad-intro",
	DropBadPunch:           "bad-punch",
	DropRepeatedControl:    "repeated-control",
}

func (r DropReason) String() string {
	if int(r) < len(dropReasonNames) {
		return dropReasonNames[r]
	}
	return "DropReason(?)"
}

// NumDropReasons is the number of DropReason values, the length of
// Stats.Dropped.
const NumDropReasons = int(numDropReasons)

// Stats are the counters and estimates of one connection, read with
// Endpoint.Stats.
type Stats struct {
	// RTT is the smoothed round-trip time (D17), RTTVar its variation and
	// MinRTT the smallest sample; 200 ms, 100 ms and 0 before any sample.
	RTT, RTTVar, MinRTT time.Duration

	PacketsSent, PacketsReceived uint64 // datagrams of every channel
	BytesSent, BytesReceived     uint64 // their sizes
	PacketsResent                uint64 // reliable packets sent again (D14)
	BytesResent                  uint64
	ReliablePacketsSent          uint64 // reliable data packets sent the first time
	AcksSent, AcksReceived       uint64 // ack entries (D13), not ack packets; received: those that freed a packet
	AcksRepeated                 uint64 // ack entries sent again in an ack packet's spare room (N29)
	MessagesSent                 uint64 // messages accepted by Send
	MessagesDelivered            uint64 // messages delivered to the application
	// BundlesSent counts the channel -6 datagrams sent, BundledPackets
	// the packets they carried, and BundlesReceived the bundles taken
	// from the peer (D24, N69-N74); all stay 0 unless both sides
	// negotiated bundles.
	BundlesSent, BundledPackets, BundlesReceived uint64
	// Dropped counts incoming packets dropped, indexed by DropReason.
	Dropped [NumDropReasons]uint64

	// PayloadMTU is the payload MTU this side sends with; PeerPayloadMTU
	// the largest payload the peer has been seen to send (D19).
	PayloadMTU, PeerPayloadMTU int
	// MTURestarts counts estimations started early because large reliable
	// packets went unacknowledged while heartbeats arrived (N16).
	MTURestarts uint64
	// MTUSearching reports that an MTU estimation of this side (D19) is
	// under way: PayloadMTU may still grow, and probes as large as
	// MaxPacketSize allows share the path with the connection's traffic.
	// MTURetrying reports that, between estimations, the last one
	// measured nothing or had a reset go unanswered (the peer busy with
	// others' estimations, N53): the next starts within seconds, not
	// MTUConfig.Period later (N44, N157). MTUEstimations counts the
	// estimations finished (given up included), MTUProbes the probes
	// sent and MTUProbeBytes their payload bytes. All stay zero with
	// estimation off.
	MTUSearching   bool
	MTURetrying    bool
	MTUEstimations uint64
	MTUProbes      uint64
	MTUProbeBytes  uint64
	// MTUHint is the payload MTU the transport said the path carries
	// (MTUConfig.Path, Endpoint.SetPathMTUHint; D29, N43), which
	// estimation probes first; 0 if none.
	MTUHint int
	// MTULimited says why this side does not estimate its payload MTU on
	// a Datagram connection, so that PayloadMTU stays at
	// InitialPayloadMTU: "estimation disabled" (MTUConfig.Disabled), or
	// "no don't-fragment bit: " and the transport's reason, when the
	// system cannot keep probes from being fragmented (D29, N45). Empty
	// when estimation runs, and on Stream transports.
	MTULimited string

	// CongestionWindow is the reliable bytes in flight congestion control
	// allows now, within MaxInFlight, and PacingRate the bytes per second
	// of datagram payload its pacer lets go; SlowStart reports that the
	// window still doubles each round trip. CongestionEvents counts the
	// reductions of the window, at most one per round trip of losses.
	// UnreliableExpired counts the unreliable messages dropped at the
	// sender for waiting longer than Config.UnreliableMaxDelay (D30,
	// N76-N83). The first three are zero when congestion control is off
	// or on a Stream transport.
	CongestionWindow  int
	PacingRate        float64
	SlowStart         bool
	CongestionEvents  uint64
	UnreliableExpired uint64

	// Path says how the connection reaches its peer (docs/nat.md X12,
	// X13): PathDirect over a path an introduction punched; PathRelay
	// through a group on a URP relay, which the engine never makes itself
	// but a driver over a relay reports (urpdriver, driver.Options.Path);
	// 0 otherwise.
	Path IntroPath

	SendQueueBytes  int // encoded message bytes waiting to be sent
	InFlightBytes   int // reliable bytes sent and not acknowledged
	InFlightPackets int // reliable packets sent and not acknowledged
	// ReceiveBytes is the memory the peer makes the connection hold, as
	// counted against ConnReceiveMemory: packets held for reassembly and
	// their receivers, the state of every channel the peer used, and
	// messages held until the connection is validated (N49, N50).
	ReceiveBytes int
	OpenChannels int // channels with state on this connection

	// Loss is the share of the reliable data packets sent over the
	// connection's life that were resends: PacketsResent over
	// ReliablePacketsSent plus PacketsResent, 0..1 (N58). A resend follows
	// the loss of the packet or of its ack, or an ack late beyond the
	// resend interval (D14); 0 on a Stream transport.
	Loss float64
	// SendRate and ReceiveRate are the bytes of whole datagrams sent and
	// received per second over the last window closed: windows of
	// Config.QualityInterval, or of one second when it is 0, back to back
	// from the connection's start, as of the latest time the endpoint was
	// given (N58).
	SendRate, ReceiveRate float64
}

// TotalDropped returns the sum of s.Dropped.
func (s *Stats) TotalDropped() uint64 {
	var n uint64
	for _, d := range s.Dropped {
		n += d
	}
	return n
}
