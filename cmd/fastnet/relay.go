package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/fastnet-engine/fastnet/urp"
	"github.com/fastnet-engine/fastnet/urp/urpserver"
)

// defaultRelay is where relay serves without --urp.
const defaultRelay = "127.0.0.1:7100"

// relayEventBacklog is the room of the relay's events channel; events
// beyond it while relay prints are counted, not printed.
const relayEventBacklog = 4096

func relayCommand() *command {
	return &command{
		name:    "relay",
		summary: "run a URP 1.0 relay, through which users form groups and exchange messages",
		usage:   "relay [--urp HOST:PORT] [--max-users N] [--max-groups N] [--max-group-size N] [--max-message BYTES] [--max-output BYTES] [--write-timeout D] [--join-failures N] [--join-failure-every D] [--brand TEXT]",
		details: `
Runs a User Relay Protocol 1.0 relay on a TCP address (without --urp:
` + defaultRelay + `) until SIGINT or SIGTERM. Users connect, make groups and
join them, and the relay passes their messages on: "fastnet listen --via-urp"
hosts a group through it and "fastnet connect --via-urp" joins one, for peers
that cannot reach each other directly. docs/urp.md has the protocol
decisions (U1, U2, ...).

Standard output has one line per user and group event:

	relaying urp 127.0.0.1:7100 brand="fastnet"
	connected uid=2813171306 addr=127.0.0.1:51234
	made gid=1630325441 uid=2813171306
	set gid=1630325441 uid=2813171306 key=GROUP_FLAGS value=0x1c
	joined gid=1630325441 uid=339180163
	join-failed gid=1630325441 uid=339180163 status=STAT_PASS
	left gid=1630325441 uid=339180163 kicked
	disbanded gid=1630325441 uid=2813171306 members=2
	disconnected uid=339180163 addr=127.0.0.1:51240 reason="closed by user"
	refused addr=127.0.0.1:51250 reason="too many users on the relay"

A password set with GROUP_PASS is not printed. At the end a line sums up:
users connected and refused, messages relayed, and users closed for bad
input or for not reading.

The limits: --max-users users at once (more are closed at once), groups
(a make beyond is answered STAT_LIMIT), users in a group, the host
included, bytes in a message (a user that announces a longer one is
closed) and bytes waiting for one user. While a user has more than half of
--max-output waiting, its group is not read, so that a slow reader slows its
group instead of losing messages; a user whose socket takes nothing for
--write-timeout is closed, and one with more than --max-output waiting is
closed at once. The users of one address may fail --join-failures joins
(guesses of a group's GID and password) at once and one more every
--join-failure-every; a user whose join finds that budget spent is closed.`,
		flags: func(fs *flag.FlagSet) func(context.Context, []string, *stdio) int {
			var o relayOptions
			fs.StringVar(&o.addr, "urp", defaultRelay, "serve URP on this TCP `HOST:PORT`")
			fs.IntVar(&o.cfg.Relay.MaxUsers, "max-users", urp.DefaultMaxUsers, "serve at most `N` users at once")
			fs.IntVar(&o.cfg.Relay.MaxGroups, "max-groups", urp.DefaultMaxGroups, "keep at most `N` groups open at once (at most --max-users)")
			fs.IntVar(&o.cfg.Relay.MaxGroupSize, "max-group-size", urp.DefaultMaxGroupSize, "at most `N` users in a group, the host included (at most --max-users)")
			fs.IntVar(&o.cfg.Relay.MaxMessage, "max-message", urp.DefaultMaxMessage, "the longest message, in `BYTES`")
			fs.IntVar(&o.cfg.Relay.MaxOutput, "max-output", urp.DefaultMaxOutput, "the most `BYTES` waiting to be written to one user")
			fs.DurationVar(&o.cfg.WriteTimeout, "write-timeout", 30*time.Second, "close a user whose socket takes nothing for `D`")
			fs.IntVar(&o.cfg.JoinFailures, "join-failures", urpserver.DefaultJoinFailures, "the users of one address may fail `N` joins at once (negative: no bound)")
			fs.DurationVar(&o.cfg.JoinFailureEvery, "join-failure-every", urpserver.DefaultJoinFailureEvery, "and one more every `D`")
			fs.StringVar(&o.cfg.Relay.Brand, "brand", urp.DefaultBrand, "the relay's name in its welcome, `TEXT` of at most 64 bytes")
			return func(ctx context.Context, args []string, s *stdio) int {
				if len(args) > 0 {
					return usageError(s, "relay", "unexpected argument %q", args[0])
				}
				if err := checkAddr(o.addr); err != nil {
					return usageError(s, "relay", "%v", err)
				}
				// Limits left at their defaults follow --max-users down.
				set := map[string]bool{}
				fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
				if !set["max-groups"] {
					o.cfg.Relay.MaxGroups = 0
				}
				if !set["max-group-size"] {
					o.cfg.Relay.MaxGroupSize = 0
				}
				if o.cfg.WriteTimeout <= 0 {
					return usageError(s, "relay", "--write-timeout %v: must be positive", o.cfg.WriteTimeout)
				}
				if o.cfg.JoinFailures == 0 {
					return usageError(s, "relay", "--join-failures 0: want at least 1, or negative for no bound")
				}
				if o.cfg.JoinFailureEvery <= 0 {
					return usageError(s, "relay", "--join-failure-every %v: must be positive", o.cfg.JoinFailureEvery)
				}
				if n := o.cfg.JoinFailures; n > 0 && o.cfg.JoinFailureEvery > math.MaxInt64/time.Duration(n) {
					return usageError(s, "relay", "--join-failures %d times --join-failure-every %v: too long a time", n, o.cfg.JoinFailureEvery)
				}
				if err := o.cfg.Relay.Validate(); err != nil {
					return usageError(s, "relay", "%s", flagWords(err))
				}
				return relay(ctx, s, o)
			}
		},
	}
}

// relayOptions are the settings of relay.
type relayOptions struct {
	addr string
	cfg  urpserver.Config
}

// flagWords says a config error with the flags' names.
func flagWords(err error) string {
	msg := strings.TrimPrefix(err.Error(), "urp: invalid config: ")
	for _, r := range [][2]string{
		{"MaxUsers", "--max-users"}, {"MaxGroups", "--max-groups"}, {"MaxGroupSize", "--max-group-size"},
		{"MaxMessage", "--max-message"}, {"MaxOutput", "--max-output"}, {"HighWater", "half of --max-output"}, {"Brand", "--brand"},
	} {
		msg = replaceWord(msg, r[0], r[1])
	}
	return msg
}

// replaceWord replaces the whole word old in s with new.
func replaceWord(s, old, new string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, old)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		end := i + len(old)
		whole := (i == 0 || !isWordByte(s[i-1])) && (end == len(s) || !isWordByte(s[end]))
		b.WriteString(s[:i])
		if whole {
			b.WriteString(new)
		} else {
			b.WriteString(old)
		}
		s = s[end:]
	}
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// relay is the relay command.
func relay(ctx context.Context, s *stdio, o relayOptions) int {
	events := make(chan urpserver.Event, relayEventBacklog)
	o.cfg.Events = events
	srv, err := urpserver.Listen(ctx, o.addr, o.cfg)
	if err != nil {
		s.errorf("fastnet relay: %v", err)
		return exitFailure
	}
	s.printf("relaying urp %s brand=%q", srv.Addr(), srv.Config().Brand)
	printed := make(chan struct{})
	go func() {
		defer close(printed)
		for ev := range events {
			if l := relayLine(ev); l != "" {
				s.printf("%s", l)
			}
		}
	}()
	<-ctx.Done()
	srv.Close()
	close(events) // the server's goroutines have returned
	<-printed
	st := srv.Stats()
	s.printf("stopped: %d users connected, %d refused; %d messages relayed (%d bytes); closed %d for unknown packets, %d for long messages, %d not reading, %d stalled, %d guessing joins; %d events not printed",
		st.Connects, st.Refused, st.Messages, st.MessageBytes, st.UnknownPacket, st.TooLong, st.Overflow, st.WriteTimeouts, st.Guessing, st.EventsDropped)
	return exitOK
}

// relayLine is the line relay prints for ev.
func relayLine(ev urpserver.Event) string {
	switch ev.Kind {
	case urp.EventConnected:
		return fmt.Sprintf("connected uid=%d addr=%s", ev.UID, ev.Addr)
	case urp.EventDisconnected:
		return fmt.Sprintf("disconnected uid=%d addr=%s reason=%q", ev.UID, ev.Addr, relayReason(ev.Err))
	case urp.EventRefused:
		return fmt.Sprintf("refused addr=%s reason=%q", ev.Addr, relayReason(ev.Err))
	case urp.EventMade:
		return fmt.Sprintf("made gid=%d uid=%d", ev.GID, ev.UID)
	case urp.EventMakeFailed:
		return fmt.Sprintf("make-failed uid=%d status=%v", ev.UID, ev.Status)
	case urp.EventJoined:
		return fmt.Sprintf("joined gid=%d uid=%d", ev.GID, ev.UID)
	case urp.EventJoinFailed:
		return fmt.Sprintf("join-failed gid=%d uid=%d status=%v", ev.GID, ev.UID, ev.Status)
	case urp.EventLeft:
		l := fmt.Sprintf("left gid=%d uid=%d", ev.GID, ev.UID)
		if ev.Kicked {
			l += " kicked"
		}
		return l
	case urp.EventDisbanded:
		return fmt.Sprintf("disbanded gid=%d uid=%d members=%d", ev.GID, ev.UID, ev.Members)
	case urp.EventSet:
		switch ev.Key {
		case urp.KeyGroupPass:
			return fmt.Sprintf("set gid=%d uid=%d key=%v", ev.GID, ev.UID, ev.Key)
		case urp.KeyGroupFlags:
			return fmt.Sprintf("set gid=%d uid=%d key=%v value=%#x", ev.GID, ev.UID, ev.Key, ev.Value)
		}
		return fmt.Sprintf("set gid=%d uid=%d key=%v value=%d", ev.GID, ev.UID, ev.Key, ev.Value)
	}
	return ""
}

// relayReason says in a few words why a user's connection ended.
func relayReason(err error) string {
	if err == nil {
		return "closed by user"
	}
	msg := err.Error()
	for _, p := range []string{"urp: ", "urpserver: "} {
		msg = strings.TrimPrefix(msg, p)
	}
	return msg
}
