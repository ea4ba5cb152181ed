package urp

import (
	"fmt"
	"math/rand/v2"
)

// Defaults of Config and ClientConfig.
const (
	// DefaultMaxUsers bounds the users connected to a relay at once.
	DefaultMaxUsers = 16384
	// DefaultMaxGroups bounds the groups open on a relay at once.
	DefaultMaxGroups = 4096
	// DefaultMaxGroupSize bounds the users of a group, its host included.
	DefaultMaxGroupSize = 256
	// DefaultMaxMessage is the longest message: 1 MiB and 1 KiB, so that
	// a Fastnet packet carrying a message of Fastnet's default largest
	// size (1 MiB) fits one URP message (U18).
	DefaultMaxMessage = 1<<20 + 1<<10
	// DefaultMaxOutput bounds the bytes a relay holds for one user that
	// does not read them (U11).
	DefaultMaxOutput = 4 << 20
	// DefaultMaxPartial bounds what a relay holds of packets partly
	// received, all users together: 256 messages of the default
	// largest size under way at once.
	DefaultMaxPartial = 256 * (DefaultMaxMessage + messageHead)
	// DefaultBrand is the brand a relay sends in R2U_WELC.
	DefaultBrand = "fastnet"
	// DefaultMaxMembers bounds the members a host's client keeps (U24):
	// four times the users the project's relay takes at once by default
	// (DefaultMaxUsers), which bounds its groups, and far above its
	// default group size (DefaultMaxGroupSize), so that a host meets it
	// only on a relay configured for groups that large, or a broken one.
	// At the limit the members take about 1 MB.
	DefaultMaxMembers = 1 << 16
)

// Upper bounds of the limits, far above any real use, so that a limit
// cannot overflow what it sizes.
const (
	maxMaxUsers   = 1 << 24
	maxMaxMessage = 1 << 30
)

// Config holds the limits of a relay. The zero value of a field means its
// default; Validate checks the result.
type Config struct {
	// MaxUsers bounds the users connected at once; Connect refuses
	// more (U13). Default DefaultMaxUsers, at most 16777216.
	MaxUsers int
	// MaxGroups bounds the groups open at once: U2R_MAKE beyond it is
	// answered STAT_LIMIT. Default DefaultMaxGroups, at most MaxUsers.
	MaxGroups int
	// MaxGroupSize bounds the users of one group, its host included: the
	// relay's limit, which GROUP_MAX can only lower (U12). Default
	// DefaultMaxGroupSize, at least 1, at most MaxUsers.
	MaxGroupSize int
	// MaxMessage is the longest message of U2R_BROD and U2R_SEND; a user
	// that announces a longer one is closed (U6). Default
	// DefaultMaxMessage, at most 1 GiB.
	MaxMessage int
	// MaxOutput bounds the bytes waiting to be written to one user; a
	// user that lets more pile up is closed (U11). Default
	// DefaultMaxOutput, at least one R2U_TEXT of MaxMessage bytes.
	MaxOutput int
	// MaxPartial bounds the bytes the relay holds of packets not yet
	// complete, all users together: a user whose packet takes it past
	// the bound is closed (U23). Each user holds at most one packet's
	// (MaxMessage and its header), and may hold it as long as it
	// likes; without the bound, users who each sent all of a long
	// message but its last byte would hold MaxUsers times MaxMessage.
	// Default DefaultMaxPartial, or one message of MaxMessage if more;
	// at least that.
	MaxPartial int
	// HighWater is the output above which a user holds its group: while
	// a user of a group has more than HighWater bytes waiting, the relay
	// asks the driver not to read the group's users (Relay.Held), so
	// that a slow reader slows its group down instead of being closed
	// (U11). Default MaxOutput/2; at most MaxOutput (which turns holds
	// off: the output limit is reached first).
	HighWater int
	// Brand is the relay's name in R2U_WELC: at most BrandSize bytes, no
	// NUL. Default DefaultBrand.
	Brand string
	// Rand draws UIDs and GIDs (U3). The default is a PCG with a fixed
	// seed, so that runs replay; drivers seed it from crypto/rand.
	Rand *rand.Rand
	// JoinGuard, if not nil, bounds the joins users may fail (U26): the
	// relay asks it before it checks each U2R_JOIN, and tells it of
	// each that fails for its GID or password. Without one, a user may
	// guess without bound. urpserver sets one that counts failures by
	// address; a driver of its own should set one too.
	JoinGuard JoinGuard
}

// A JoinGuard bounds the joins users may fail (U26). A U2R_JOIN names a
// group and its password, and one answered STAT_PASS tells its sender
// only that the pair was wrong, so failed joins are guesses: a user who
// could make them without bound, hundreds of thousands a second in one
// stream, would soon find a group of another's, first one whose host set
// no password (its GID is then all there is to guess). The relay calls
// a JoinGuard from HandleBytes, with the UID of the user whose join it
// handles; what it decides on (an address, a clock) is the driver's.
type JoinGuard interface {
	// MayFail reports whether user uid may have one more join fail. If
	// not, the relay closes the user (ErrGuessing) without checking the
	// join, so that the join tells it nothing, right or wrong.
	MayFail(uid uint32) bool
	// Failed records that a join of user uid was answered STAT_PASS: no
	// open group has the GID and password it gave.
	Failed(uid uint32)
}

func (c Config) withDefaults() Config {
	if c.MaxUsers == 0 {
		c.MaxUsers = DefaultMaxUsers
	}
	if c.MaxGroups == 0 {
		c.MaxGroups = min(DefaultMaxGroups, c.MaxUsers)
	}
	if c.MaxGroupSize == 0 {
		c.MaxGroupSize = min(DefaultMaxGroupSize, c.MaxUsers)
	}
	if c.MaxMessage == 0 {
		c.MaxMessage = DefaultMaxMessage
	}
	if c.MaxOutput == 0 {
		c.MaxOutput = max(DefaultMaxOutput, messageHead+c.MaxMessage)
	}
	if c.HighWater == 0 {
		c.HighWater = c.MaxOutput / 2
	}
	if c.MaxPartial == 0 {
		c.MaxPartial = max(DefaultMaxPartial, messageHead+c.MaxMessage)
	}
	if c.Brand == "" {
		c.Brand = DefaultBrand
	}
	if c.Rand == nil {
		c.Rand = rand.New(rand.NewPCG(0x757270, 0x72656c6179))
	}
	return c
}

// Validate reports whether c, with its defaults filled in, is usable.
func (c Config) Validate() error {
	_, err := c.resolve()
	return err
}

func (c Config) resolve() (Config, error) {
	c = c.withDefaults()
	bad := func(format string, args ...any) (Config, error) {
		return c, fmt.Errorf("urp: invalid config: "+format, args...)
	}
	switch {
	case c.MaxUsers < 1 || c.MaxUsers > maxMaxUsers:
		return bad("MaxUsers %d: want 1..%d", c.MaxUsers, maxMaxUsers)
	case c.MaxGroups < 1 || c.MaxGroups > c.MaxUsers:
		return bad("MaxGroups %d: want 1..MaxUsers (%d)", c.MaxGroups, c.MaxUsers)
	case c.MaxGroupSize < 1 || c.MaxGroupSize > c.MaxUsers:
		return bad("MaxGroupSize %d: want 1..MaxUsers (%d)", c.MaxGroupSize, c.MaxUsers)
	case c.MaxMessage < 0 || c.MaxMessage > maxMaxMessage:
		return bad("MaxMessage %d: want 0..%d", c.MaxMessage, maxMaxMessage)
	case c.MaxOutput < messageHead+c.MaxMessage:
		return bad("MaxOutput %d cannot hold one message of MaxMessage %d (%d bytes)", c.MaxOutput, c.MaxMessage, messageHead+c.MaxMessage)
	case c.MaxPartial < messageHead+c.MaxMessage:
		return bad("MaxPartial %d cannot hold one message of MaxMessage %d (%d bytes)", c.MaxPartial, c.MaxMessage, messageHead+c.MaxMessage)
	case c.HighWater < 1 || c.HighWater > c.MaxOutput:
		return bad("HighWater %d: want 1..MaxOutput (%d)", c.HighWater, c.MaxOutput)
	case len(c.Brand) > BrandSize:
		return bad("Brand is %d bytes, above %d", len(c.Brand), BrandSize)
	}
	for i := range len(c.Brand) {
		if c.Brand[i] == 0 {
			return bad("Brand holds a NUL byte")
		}
	}
	return c, nil
}

// ClientConfig holds the limits of a Client.
type ClientConfig struct {
	// MaxMessage is the longest message the client sends or accepts;
	// a relay that announces a longer one is a broken relay. Default
	// DefaultMaxMessage, at most 1 GiB.
	MaxMessage int
	// MaxMembers bounds the members a host knows, itself excluded: a
	// relay that announces one more (an R2U_JOIN of a UID that is not a
	// member yet) is a broken relay, and the client ends with
	// ErrTooManyMembers, as it does for a message above MaxMessage (U24).
	// The specification leaves the group size limit to the relay, so a
	// host that wants larger groups raises it. Default DefaultMaxMembers;
	// negative is refused.
	MaxMembers int
}

func (c ClientConfig) resolve() (ClientConfig, error) {
	if c.MaxMessage == 0 {
		c.MaxMessage = DefaultMaxMessage
	}
	if c.MaxMembers == 0 {
		c.MaxMembers = DefaultMaxMembers
	}
	switch {
	case c.MaxMessage < 0 || c.MaxMessage > maxMaxMessage:
		return c, fmt.Errorf("urp: invalid config: MaxMessage %d: want 0..%d", c.MaxMessage, maxMaxMessage)
	case c.MaxMembers < 0:
		return c, fmt.Errorf("urp: invalid config: MaxMembers %d is negative", c.MaxMembers)
	}
	return c, nil
}

// Validate reports whether c, with its defaults filled in, is usable.
func (c ClientConfig) Validate() error {
	_, err := c.resolve()
	return err
}
