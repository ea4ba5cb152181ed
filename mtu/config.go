package mtu

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Defaults of the fields of [Config], chosen by the measurements recorded in
// the package documentation.
const (
	// DefaultInitial is the payload MTU of the specification's unreliable
	// transports, and the smallest payload MTU it allows (D19).
	DefaultInitial = 32
	// DefaultProbeInterval is the wait between the probes of one round.
	DefaultProbeInterval = 2 * time.Millisecond
	// DefaultFinalTimeout is the wait after a round's last probe. The
	// estimator waits at least two round-trip times whatever this says.
	DefaultFinalTimeout = 250 * time.Millisecond
	// DefaultPeriod is the time from the end of one estimation to the start
	// of the next.
	DefaultPeriod = 10 * time.Minute
	// DefaultResetTries is how many resets a round sends, three round-trip
	// times apart, before the estimation gives up (D19).
	DefaultResetTries = 10
	// DefaultRoundBytes is the probe payload a round aims at: a round of
	// size s sends DefaultRoundBytes/s probes, between MinProbesPerRound
	// and ProbesPerRound (N44).
	DefaultRoundBytes = 32 << 10
)

// ProbesPerRound is the number of probes of a round of small probes, D19's
// 100, and the most any round sends. Larger probes go in fewer (see
// Config.RoundBytes); a round's count is read as a percentage of the probes
// it sent.
const ProbesPerRound = 100

// DefaultFirstRoundProbes is the probes of an estimation's first round:
// four of D19's rounds, so that at 20 % loss the reference of the 10-point
// rule varies by 2 points rather than 4; at the initial 32 bytes, 12.8 KB
// (N44).
const DefaultFirstRoundProbes = 4 * ProbesPerRound

// MinProbesPerRound is the fewest probes a round sends, however large its
// size: with 20 probes one lost probe costs 5 points, which D19's 5-point
// rule still lets pass, and two cost 10 (N44).
const MinProbesPerRound = 20

// MinPayload is the smallest payload MTU the specification allows.
const MinPayload = 32

// ErrConfig is returned by [Config.Validate] for a configuration no estimator
// can run with.
var ErrConfig = errors.New("mtu: invalid config")

// Config holds the settings of an [Estimator]. Zero fields take the defaults
// above; MaxPayload has no default and must be set.
type Config struct {
	// MaxPayload is the transport's maximum packet size minus the 2-byte
	// channel id (D12): the estimate never exceeds it.
	MaxPayload int
	// Initial is the payload MTU used before the first size passes, and the
	// size of each estimation's first round. At least MinPayload.
	Initial int
	// ProbeInterval is the wait between the probes of one round.
	ProbeInterval time.Duration
	// FinalTimeout is the wait after a round's last probe for the last
	// replies; the estimator waits at least two round-trip times.
	FinalTimeout time.Duration
	// Period is the time from the end of one estimation to the start of the
	// next.
	Period time.Duration
	// ResetTries is how many resets a round sends, three round-trip times
	// apart, before the estimation gives up until the next period.
	ResetTries int
	// RoundBytes bounds the probe payload of a round: a round of size s
	// sends RoundBytes/s probes, at least MinProbesPerRound and at most
	// ProbesPerRound (N44). Zero means DefaultRoundBytes.
	RoundBytes int
	// FirstRoundProbes is how many probes each estimation's first round
	// sends when Initial is small enough for a round of ProbesPerRound
	// (larger sizes scale it down as RoundBytes does the other rounds):
	// that round is the reference of D19's 10-point rule for the whole
	// estimation, so it is measured more closely than the others. Zero
	// means DefaultFirstRoundProbes (N44).
	FirstRoundProbes int
	// Rand seeds the generator that fills the probes. Nil means a
	// fixed-seed source: probe contents need not be secret, only
	// arbitrary.
	Rand *rand.Rand
}

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	if c.Initial == 0 {
		c.Initial = DefaultInitial
	}
	if c.ProbeInterval == 0 {
		c.ProbeInterval = DefaultProbeInterval
	}
	if c.FinalTimeout == 0 {
		c.FinalTimeout = DefaultFinalTimeout
	}
	if c.Period == 0 {
		c.Period = DefaultPeriod
	}
	if c.ResetTries == 0 {
		c.ResetTries = DefaultResetTries
	}
	if c.RoundBytes == 0 {
		c.RoundBytes = DefaultRoundBytes
	}
	if c.FirstRoundProbes == 0 {
		c.FirstRoundProbes = DefaultFirstRoundProbes
	}
	if c.Rand == nil {
		c.Rand = rand.New(rand.NewPCG(0x6d7475, 0x70726f6265))
	}
	return c
}

// Validate reports whether c, with its zero fields set to their defaults,
// is usable: MinPayload <= Initial <= MaxPayload, positive durations, a
// positive ResetTries and RoundBytes. The error wraps [ErrConfig].
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.MaxPayload < MinPayload:
		return fmt.Errorf("%w: MaxPayload %d is below %d", ErrConfig, c.MaxPayload, MinPayload)
	case c.Initial < MinPayload:
		return fmt.Errorf("%w: Initial %d is below %d", ErrConfig, c.Initial, MinPayload)
	case c.Initial > c.MaxPayload:
		return fmt.Errorf("%w: Initial %d is above MaxPayload %d", ErrConfig, c.Initial, c.MaxPayload)
	case c.ProbeInterval < 0 || c.FinalTimeout < 0 || c.Period < 0:
		return fmt.Errorf("%w: negative duration", ErrConfig)
	case c.ResetTries < 0:
		return fmt.Errorf("%w: ResetTries %d is negative", ErrConfig, c.ResetTries)
	case c.RoundBytes < 0:
		return fmt.Errorf("%w: RoundBytes %d is negative", ErrConfig, c.RoundBytes)
	case c.FirstRoundProbes < 0 || c.FirstRoundProbes > 10*ProbesPerRound:
		return fmt.Errorf("%w: FirstRoundProbes %d is outside 0..%d", ErrConfig, c.FirstRoundProbes, 10*ProbesPerRound)
	}
	return nil
}
