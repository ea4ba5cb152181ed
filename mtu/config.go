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
)

// ProbesPerRound is the number of probes of one round (D19): a round's count
// is out of this many, so a count is also a percentage.
const ProbesPerRound = 100

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
	// Rand fills the probes. Nil means a fixed-seed source: probe contents
	// need not be secret, only arbitrary.
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
	if c.Rand == nil {
		c.Rand = rand.New(rand.NewPCG(0x6d7475, 0x70726f6265))
	}
	return c
}

// Validate reports whether c, with its zero fields set to their defaults,
// is usable: MinPayload <= Initial <= MaxPayload, positive durations and
// a positive ResetTries. The error wraps [ErrConfig].
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
	}
	return nil
}
