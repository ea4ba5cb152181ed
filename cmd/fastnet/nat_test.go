package main

import (
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/fastnet/fastnettest"
)

// The outside addresses of the NATs of these tests are 127.0.0.51 and
// up, each test its own: a NAT's outside is an address only it uses.

var (
	natStartRE   = regexp.MustCompile(`^nat (\S+) udp (127\.0\.0\.1:\d+) outside=(\S+) timeout=(\S+) hairpinning=(on|off)$`)
	natSummaryRE = regexp.MustCompile(`^translated (\d+) datagrams out, (\d+) in \((\d+) hairpinned\); dropped in: (\d+) without a mapping, (\d+) filtered, (\d+) hairpinned without hairpinning; (\d+) mappings made, (\d+) live at the end; (\d+) malformed from inside$`)
)

// startNAT runs "fastnet nat" of type typ with args, its outside
// 127.0.0.x and its inside on a free port, and returns it with its
// inside address and its outside IP. It skips the test where 127.0.0.x
// is not an address of this host.
func startNAT(t *testing.T, x byte, typ string, args ...string) (*server, string, string) {
	t.Helper()
	outside := netip.AddrFrom4([4]byte{127, 0, 0, x}).String()
	c, err := net.ListenPacket("udp4", outside+":0")
	if err != nil {
		t.Skipf("no loopback address %s here: %v", outside, err)
	}
	c.Close()
	n := startCmd(t, append([]string{"nat", "--outside", outside, "--inside", "127.0.0.1:0", "--type", typ}, args...)...)
	m := natStartRE.FindStringSubmatch(n.waitLine(t, "nat "))
	if m == nil || m[1] != typ || m[3] != outside {
		t.Fatalf("nat said %q", n.seenLines())
	}
	return n, m[2], outside
}

// stopNAT stops a nat and returns the counters of its last line.
func stopNAT(t *testing.T, n *server) []int {
	t.Helper()
	if code := n.stop(t, syscall.SIGINT); code != 0 {
		t.Errorf("nat exited %d after SIGINT", code)
	}
	m := natSummaryRE.FindStringSubmatch(n.waitLine(t, "translated "))
	if m == nil {
		t.Fatalf("nat said %q", n.seenLines())
	}
	var c []int
	for _, s := range m[1:] {
		v, _ := strconv.Atoi(s)
		c = append(c, v)
	}
	return c
}

// The counters of stopNAT, by index.
const (
	natOut = iota
	natIn
	natHairpinned
	natNoMapping
	natFiltered
	natHairpinDropped
	natMade
	natLive
	natMalformed
)

// waitMatch returns the submatches of the next line of s that re
// matches.
func (s *server) waitMatch(t *testing.T, re *regexp.Regexp) []string {
	t.Helper()
	for {
		if m := re.FindStringSubmatch(s.waitLine(t, "")); m != nil {
			return m
		}
	}
}

// startPeerBehind runs "fastnet peer --via via --nat nat" without --to and
// returns it with its id.
func startPeerBehind(t *testing.T, via, nat string, args ...string) (*server, string) {
	t.Helper()
	return startPeer(t, via, append([]string{"--nat", nat, "--listen", "127.0.0.1:0"}, args...)...)
}

// TestNATPairs runs "fastnet nat" processes and peers behind them over
// loopback: an introducer, and two peers each behind a NAT of its own,
// A asking to be introduced to B. Where X23 of docs/nat.md opens a path
// (fastnettest.OpensDirectPath), A gets a direct one to B's NAT's mapping
// and B hears A from A's NAT; where it does not, A finds no path, or with
// the introducer's --relay a relayed one; and the NATs report the mappings
// the peers made.
func TestNATPairs(t *testing.T) {
	t.Parallel()
	cases := []struct {
		a, b  fastnettest.NATType
		relay bool
	}{
		{fastnettest.FullCone, fastnettest.FullCone, false},
		{fastnettest.PortRestricted, fastnettest.PortRestricted, false},
		{fastnettest.Symmetric, fastnettest.PortRestricted, false},
		{fastnettest.Symmetric, fastnettest.PortRestricted, true},
	}
	for i, tc := range cases {
		name := natFlag(tc.a) + "/" + natFlag(tc.b)
		if tc.relay {
			name += " relay"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			args := []string{"introducer", "127.0.0.1:0"}
			if tc.relay {
				_, raddr := startRelay(t)
				args = append(args, "--relay", raddr)
			}
			intro := startCmd(t, args...)
			s := strings.Fields(intro.waitLine(t, "introducing "))[2]
			natA, insideA, outA := startNAT(t, byte(51+2*i), natFlag(tc.a))
			natB, insideB, outB := startNAT(t, byte(52+2*i), natFlag(tc.b))
			b, bID := startPeerBehind(t, s, insideB, "--accept", "--echo", "--print")
			// B's NAT mapped B for the introducer, which sees B there.
			mb := natB.waitMatch(t, regexp.MustCompile(`^mapped udp (127\.0\.0\.1:\d+) external=(`+regexp.QuoteMeta(outB)+`:\d+) remote=`+regexp.QuoteMeta(s)+`$`))
			if l := intro.waitLine(t, "connected "); l != "connected udp "+mb[2]+" id="+bID {
				t.Fatalf("introducer said %q, want B at %s", l, mb[2])
			}

			in := "hello\nworld\n"
			r := runBin(t, in, 30*time.Second, "peer", "--via", s, "--nat", insideA, "--listen", "127.0.0.1:0", "--to", bID)
			ma := natA.waitMatch(t, regexp.MustCompile(`^mapped udp (127\.0\.0\.1:\d+) external=(`+regexp.QuoteMeta(outA)+`:\d+) remote=`+regexp.QuoteMeta(s)+`$`))
			if tc.a == fastnettest.Symmetric {
				// A's punch towards B's mapping took a mapping of its
				// own.
				natA.waitMatch(t, regexp.MustCompile(`^mapped udp `+regexp.QuoteMeta(ma[1])+` external=`+regexp.QuoteMeta(outA)+`:\d+ remote=`+regexp.QuoteMeta(mb[2])+`$`))
			}
			switch {
			case fastnettest.OpensDirectPath(tc.a, tc.b):
				if r.code != 0 || r.stdout != in {
					t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
				}
				if !strings.Contains(r.stderr, "\nconnected to "+mb[2]+" over udp (direct path), id ") {
					t.Fatalf("A's stderr %q; want a direct path to B's mapping %s", r.stderr, mb[2])
				}
				x := regexp.MustCompile(`^introduced udp (` + regexp.QuoteMeta(outA) + `:\d+) id=(\d+) peer=\d+ path=direct$`).FindStringSubmatch(b.waitLine(t, "introduced "))
				if x == nil {
					t.Fatalf("B said %q; want A from its NAT %s", b.seenLines(), outA)
				}
				for _, want := range []string{"hello", "world"} {
					if l := b.waitLine(t, "message "); l != "message udp "+x[1]+" id="+x[2]+" channel=0 reliable "+strconv.Quote(want) {
						t.Errorf("B printed %q, want %q", l, want)
					}
				}
			case tc.relay:
				if r.code != 0 || r.stdout != in || !strings.Contains(r.stderr, " over a urp relay (relay path), id ") {
					t.Fatalf("exit %d, stdout %q, stderr %q; want the relay path", r.code, r.stdout, r.stderr)
				}
				if l := b.waitLine(t, "introduced "); !regexp.MustCompile(`^introduced urp \S+ id=\d+ peer=\d+ path=relay$`).MatchString(l) {
					t.Fatalf("B said %q", l)
				}
			default:
				if want := "fastnet peer: introduction failed: no direct path and no relay"; r.code != 1 || !strings.Contains(r.stderr, want) {
					t.Fatalf("exit %d, stderr %q; want 1 and %q", r.code, r.stderr, want)
				}
			}
			if code := b.stop(t, syscall.SIGINT); code != 0 {
				t.Errorf("B exited %d after SIGINT", code)
			}
			cb := stopNAT(t, natB)
			stopNAT(t, natA)
			if !fastnettest.OpensDirectPath(tc.a, tc.b) && cb[natFiltered]+cb[natNoMapping] == 0 {
				t.Errorf("B's NAT kept nothing out: %v", natB.seenLines())
			}
			if cb[natMalformed] != 0 {
				t.Errorf("B's NAT counted malformed datagrams: %v", cb)
			}
		})
	}
}

// natFlag is nat's --type for t.
func natFlag(t fastnettest.NATType) string {
	for name, v := range natTypes {
		if v == t {
			return name
		}
	}
	panic(t.String())
}

// quiet reads s's output for d and fails the test if a line starting
// with prefix comes.
func (s *server) quiet(t *testing.T, prefix string, d time.Duration) {
	t.Helper()
	end := time.After(d)
	for {
		select {
		case l, ok := <-s.lines:
			if !ok {
				t.Fatalf("ended while it was to be quiet; stderr:\n%s", s.stderrText())
			}
			s.mu.Lock()
			s.seen = append(s.seen, l)
			s.mu.Unlock()
			if strings.HasPrefix(l, prefix) {
				t.Fatalf("said %q within %v", l, d)
			}
		case <-end:
			return
		}
	}
}

// TestNATHairpinning puts two peers behind one port-restricted nat, so
// that each reaches the other only at the other's mapping on the NAT's
// own outside address, and the peers report no local candidates (X9):
// with --hairpinning the NAT passes A's punches back inside and the path
// is direct, from A's mapping; without, it drops them and no direct path
// opens (X23, two peers behind the same NAT).
func TestNATHairpinning(t *testing.T) {
	t.Parallel()
	for i, hp := range []bool{true, false} {
		t.Run(map[bool]string{true: "on", false: "off"}[hp], func(t *testing.T) {
			t.Parallel()
			intro, s := startIntroducer(t)
			var args []string
			if hp {
				args = []string{"--hairpinning"}
			}
			nat, inside, out := startNAT(t, byte(61+i), "port-restricted", args...)
			b, bID := startPeerBehind(t, s, inside, "--accept", "--echo", "--print")
			mb := nat.waitMatch(t, regexp.MustCompile(`^mapped udp (127\.0\.0\.1:\d+) external=(`+regexp.QuoteMeta(out)+`:\d+) remote=`+regexp.QuoteMeta(s)+`$`))
			r := runBin(t, "hairpin\n", 30*time.Second, "peer", "--via", s, "--nat", inside, "--listen", "127.0.0.1:0", "--to", bID)
			ma := nat.waitMatch(t, regexp.MustCompile(`^mapped udp (127\.0\.0\.1:\d+) external=(`+regexp.QuoteMeta(out)+`:\d+) remote=`+regexp.QuoteMeta(s)+`$`))
			if hp {
				if r.code != 0 || r.stdout != "hairpin\n" || !strings.Contains(r.stderr, "\nconnected to "+mb[2]+" over udp (direct path), id ") {
					t.Fatalf("exit %d, stdout %q, stderr %q; want a direct path to %s", r.code, r.stdout, r.stderr, mb[2])
				}
				x := regexp.MustCompile(`^introduced udp ` + regexp.QuoteMeta(ma[2]) + ` id=(\d+) peer=\d+ path=direct$`).FindStringSubmatch(b.waitLine(t, "introduced "))
				if x == nil {
					t.Fatalf("B said %q; want A from its mapping %s", b.seenLines(), ma[2])
				}
				if l := b.waitLine(t, "message "); l != "message udp "+ma[2]+" id="+x[1]+` channel=0 reliable "hairpin"` {
					t.Errorf("B printed %q", l)
				}
			} else if r.code != 1 || !strings.Contains(r.stderr, "fastnet peer: introduction failed: no direct path and no relay") &&
				!strings.Contains(r.stderr, "fastnet peer: introduction failed: no answer from the peer") {
				// B gives up punching 3 s after its go, A waits 3 s
				// more for B's word through the introducer: a stall
				// of 3 s or more of any of the four processes (a
				// loaded machine) lets A give up first, with "no
				// answer"; either way no direct path opened, which
				// the nat's counters below show.
				t.Fatalf("exit %d, stderr %q; want 1 and no direct path and no relay, or no answer from the peer", r.code, r.stderr)
			}
			b.stop(t, syscall.SIGINT)
			c := stopNAT(t, nat)
			if hp && (c[natHairpinned] == 0 || c[natHairpinDropped] != 0) || !hp && (c[natHairpinned] != 0 || c[natHairpinDropped] == 0) {
				t.Errorf("nat counted %d hairpinned, %d dropped for hairpinning off", c[natHairpinned], c[natHairpinDropped])
			}
			intro.stop(t, syscall.SIGINT)
		})
	}
}

// TestNATMappingTimeout runs peers behind nats whose mappings lapse after
// --timeout without a datagram out. A connection's heartbeats, one a
// second (D16), hold a 3-second mapping: the peer is reached at it long
// after, and it lapses once the peer is gone. They cannot hold a 300 ms
// one: it lapses while the peer is connected, the peer's next datagram
// takes a new mapping on another port that the introducer does not know,
// and the introducer's query for an introduction gets no answer (X19).
func TestNATMappingTimeout(t *testing.T) {
	t.Parallel()
	mapped := func(inside, out, s string) *regexp.Regexp {
		return regexp.MustCompile(`^mapped udp (` + inside + `) external=(` + regexp.QuoteMeta(out) + `:\d+) remote=` + regexp.QuoteMeta(s) + `$`)
	}
	t.Run("held", func(t *testing.T) {
		t.Parallel()
		const timeout = 3 * time.Second
		intro, s := startIntroducer(t)
		nat, inside, out := startNAT(t, 63, "full-cone", "--timeout", timeout.String())
		b, bID := startPeerBehind(t, s, inside, "--accept", "--print")
		mb := nat.waitMatch(t, mapped(`127\.0\.0\.1:\d+`, out, s))
		// Past its timeout, the mapping holds.
		nat.quiet(t, "expired ", timeout+time.Second)
		r := runBin(t, "held\n", 30*time.Second, "peer", "--via", s, "--listen", "127.0.0.1:0", "--to", bID)
		if r.code != 0 || !strings.Contains(r.stderr, "\nconnected to "+mb[2]+" over udp (direct path), id ") {
			t.Fatalf("exit %d, stdout %q, stderr %q; want a direct path to %s", r.code, r.stdout, r.stderr, mb[2])
		}
		b.waitLine(t, `message `)
		b.stop(t, syscall.SIGINT)
		if l := nat.waitLine(t, "expired "); l != "expired udp "+mb[1]+" external="+mb[2] {
			t.Fatalf("nat said %q, want the end of %s", l, mb[2])
		}
		if c := stopNAT(t, nat); c[natMade] != 1 || c[natLive] != 0 {
			t.Errorf("nat made %d mappings, %d live at the end; want 1 and 0", c[natMade], c[natLive])
		}
		intro.stop(t, syscall.SIGINT)
	})
	t.Run("lapsed", func(t *testing.T) {
		t.Parallel()
		intro, s := startIntroducer(t)
		nat, inside, out := startNAT(t, 64, "full-cone", "--timeout", "300ms")
		_, bID := startPeerBehind(t, s, inside, "--accept")
		mb := nat.waitMatch(t, mapped(`127\.0\.0\.1:\d+`, out, s))
		if l := nat.waitLine(t, "expired "); l != "expired udp "+mb[1]+" external="+mb[2] {
			t.Fatalf("nat said %q, want the end of %s", l, mb[2])
		}
		again := nat.waitMatch(t, mapped(regexp.QuoteMeta(mb[1]), out, s))
		if again[2] == mb[2] {
			t.Fatalf("the new mapping %s is the old one's", again[2])
		}
		r := runBin(t, "", 30*time.Second, "peer", "--via", s, "--listen", "127.0.0.1:0", "--to", bID)
		if want := "fastnet peer: introduction failed: no answer from the target"; r.code != 1 || !strings.Contains(r.stderr, want) {
			t.Fatalf("exit %d, stderr %q; want 1 and %q", r.code, r.stderr, want)
		}
		stopNAT(t, nat)
		intro.stop(t, syscall.SIGINT)
	})
}

// TestNATUsage checks the usage errors of nat and of peer --nat, and an
// outside address that is not this host's.
func TestNATUsage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"nat"}, "missing --outside IP"},
		{[]string{"nat", "--outside", "127.0.0.2", "extra"}, `unexpected argument "extra"`},
		{[]string{"nat", "--outside", "127.0.0.2", "--type", "cone"}, `--type "cone": want full-cone`},
		{[]string{"nat", "--outside", "127.0.0.2", "--timeout", "0s"}, "--timeout 0s: must be positive"},
		{[]string{"nat", "--outside", "127.0.0.2", "--first-port", "0"}, "--first-port 0: want 1..65535"},
		{[]string{"nat", "--outside", "127.0.0.2:7"}, `--outside "127.0.0.2:7": want one IP address`},
		{[]string{"nat", "--outside", "0.0.0.0"}, `--outside "0.0.0.0": want one IP address`},
		{[]string{"nat", "--outside", "127.0.0.2", "--inside", "x"}, `--inside: bad address "x"`},
		{[]string{"peer", "--via", ":7000", "--nat", "x"}, `--nat: bad address "x"`},
	}
	for _, tt := range tests {
		r := runBin(t, "", 10*time.Second, tt.args...)
		if r.code != 2 || !strings.Contains(r.stderr, tt.want) || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("fastnet %q: exit %d, stderr %q; want 2 and %q", tt.args, r.code, r.stderr, tt.want)
		}
	}
	// 192.0.2.1 (TEST-NET-1) is no address of this host.
	r := runBin(t, "", 10*time.Second, "nat", "--outside", "192.0.2.1", "--inside", "127.0.0.1:0")
	if want := "fastnet nat: outside address 192.0.2.1: "; r.code != 1 || !strings.HasPrefix(r.stderr, want) || r.stdout != "" {
		t.Errorf("exit %d, stdout %q, stderr %q; want 1 and %q", r.code, r.stdout, r.stderr, want)
	}
}
