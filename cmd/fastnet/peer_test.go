package main

import (
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/urp"
	"github.com/fastnet-engine/fastnet/urp/urpdriver"
)

var (
	peerRE       = regexp.MustCompile(`^peer udp \S+ via (127\.0\.0\.1:\d+) id=(\d+)$`)
	introducedRE = regexp.MustCompile(`^introduced udp (127\.0\.0\.1:\d+) id=(\d+) peer=(\d+) path=direct$`)
)

// startIntroducer runs "fastnet introducer" on a free port and returns
// its address.
func startIntroducer(t *testing.T) (*server, string) {
	t.Helper()
	s := startCmd(t, "introducer", "127.0.0.1:0")
	f := strings.Fields(s.waitLine(t, "introducing "))
	if len(f) != 3 || f[1] != "udp" {
		t.Fatalf("introducer said %q", f)
	}
	return s, f[2]
}

// startPeer runs "fastnet peer --via" without --to and returns its id.
func startPeer(t *testing.T, via string, args ...string) (*server, string) {
	t.Helper()
	p := startCmd(t, append([]string{"peer", "--via", via}, args...)...)
	m := peerRE.FindStringSubmatch(p.waitLine(t, "peer "))
	if m == nil || m[1] != via {
		t.Fatalf("peer said %q", p.seenLines())
	}
	return p, m[2]
}

// TestPeerCommands runs an introducer and peers over loopback: one
// introduced peer talking to an accepting one through a punched path
// (X12, the connect behaviour over it), and the failures named (X4, X5,
// X2), each citing the design note.
func TestPeerCommands(t *testing.T) {
	t.Parallel()
	intro, s := startIntroducer(t)
	b, bID := startPeer(t, s, "--accept", "--echo", "--print")
	refusing, refusingID := startPeer(t, s, "--listen", "127.0.0.1:0")

	t.Run("X12 direct", func(t *testing.T) {
		in := "hello\nworld\n"
		r := runBin(t, in, 30*time.Second, "peer", "--via", s, "--to", bID)
		if r.code != 0 || r.stdout != in {
			t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		// B's candidates are every address of its socket (X9): the punch
		// may win on loopback or on another of the host's addresses.
		m := regexp.MustCompile(`(?m)^peer id (\d+) via ` + regexp.QuoteMeta(s) + `\nconnected to \S+ over udp \(direct path\), id (\d+)$`).FindStringSubmatch(r.stderr)
		if m == nil {
			t.Fatalf("stderr %q", r.stderr)
		}
		x := introducedRE.FindStringSubmatch(b.waitLine(t, "introduced "))
		if x == nil || x[2] != m[2] || x[3] != m[1] {
			t.Fatalf("B said %q; A is %s, its connection %s", b.seenLines(), m[1], m[2])
		}
		for _, want := range []string{"hello", "world"} {
			l := b.waitLine(t, "message ")
			if !strings.HasSuffix(l, "id="+x[2]+" channel=0 reliable "+strconv.Quote(want)) {
				t.Errorf("B printed %q, want %q", l, want)
			}
		}
		if d := disconnectedRE.FindStringSubmatch(b.waitLine(t, "disconnected ")); d == nil || d[4] != "2" || d[5] != "closed by peer" {
			t.Errorf("B said %q", d)
		}
		// The introducer saw both peers connect, and A leave.
		intro.waitLine(t, "connected ")
		intro.waitLine(t, "connected ")
		intro.waitLine(t, "connected ")
		if d := disconnectedRE.FindStringSubmatch(intro.waitLine(t, "disconnected ")); d == nil || d[3] != m[1] || d[5] != "closed by peer" {
			t.Errorf("introducer said %q", d)
		}
		// And it printed the introduction it made (X6), before A left.
		made := false
		for _, l := range intro.seenLines() {
			if strings.HasPrefix(l, "introduced udp ") && strings.HasSuffix(l, " id="+m[1]+" to="+bID) {
				made = true
			}
		}
		if !made {
			t.Errorf("the introducer printed no introduction of %s to %s: %q", m[1], bID, intro.seenLines())
		}
	})

	fails := []struct {
		name string
		args []string
		want string
	}{
		{"X5 refused", []string{"--to", refusingID}, "fastnet peer: introduction failed: refused by the target: no consent"},
		{"X4 unknown target", []string{"--to", "1"}, "fastnet peer: introduction failed: unknown target"},
	}
	for _, tc := range fails {
		t.Run(tc.name, func(t *testing.T) {
			r := runBin(t, "", 20*time.Second, append([]string{"peer", "--via", s}, tc.args...)...)
			if r.code != 1 || !strings.Contains(r.stderr, tc.want) || r.stdout != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want 1 and %q", r.code, r.stdout, r.stderr, tc.want)
			}
		})
	}

	t.Run("X2 not an introducer", func(t *testing.T) {
		plain := startServer(t, "--udp", "127.0.0.1:0")
		r := runBin(t, "", 20*time.Second, "peer", "--via", plain.udp, "--to", bID)
		if want := "the server does not introduce"; r.code != 1 || !strings.Contains(r.stderr, want) {
			t.Errorf("exit %d, stderr %q; want 1 and %q", r.code, r.stderr, want)
		}
	})

	for _, p := range []*server{b, refusing} {
		if code := p.stop(t, syscall.SIGINT); code != 0 {
			t.Errorf("peer exited %d after SIGINT", code)
		}
	}
	if code := intro.stop(t, syscall.SIGINT); code != 0 {
		t.Errorf("introducer exited %d after SIGINT", code)
	}
}

// TestPeerRelay runs the relayed fallback of X13 from the command line: an
// introducer naming a "fastnet relay" (--relay), a waiting peer on the IPv6
// loopback address and one on the IPv4 one asking for it. Neither socket
// can send to the other's family, so no punch gets through whatever the
// timing, as with a target whose socket hears only the introducer
// (udpdriver's TestPeerIntroduceRelay); the introducer, on every address,
// hears both. The target hosts a group on the relay, locks it once the
// other's connection is up, and the two talk through it.
func TestPeerRelay(t *testing.T) {
	t.Parallel()
	pc, err := net.ListenPacket("udp", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	pc.Close()
	relay, raddr := startRelay(t)
	intro := startCmd(t, "introducer", "[::]:0", "--relay", raddr)
	m := regexp.MustCompile(`^introducing udp \[::\]:(\d+) relay=` + regexp.QuoteMeta(raddr) + `$`).FindStringSubmatch(intro.waitLine(t, "introducing "))
	if m == nil {
		t.Fatalf("introducer said %q", intro.seenLines())
	}
	via4, via6 := "127.0.0.1:"+m[1], "[::1]:"+m[1]
	b := startCmd(t, "peer", "--via", via6, "--listen", "[::1]:0", "--accept", "--echo", "--print")
	bm := regexp.MustCompile(`^peer udp \[::1\]:\d+ via ` + regexp.QuoteMeta(via6) + ` id=(\d+)$`).FindStringSubmatch(b.waitLine(t, "peer "))
	if bm == nil {
		t.Fatalf("peer said %q", b.seenLines())
	}
	bID := bm[1]

	in := "hello\nworld\n"
	r := runBin(t, in, 60*time.Second, "peer", "--via", via4, "--listen", "127.0.0.1:0", "--to", bID, "--stats")
	if r.code != 0 || r.stdout != in {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	user := `\[fd55:5250::[0-9a-f:]+\]:0`
	a := regexp.MustCompile(`(?m)^peer id (\d+) via ` + regexp.QuoteMeta(via4) + `\nconnected to ` + user + ` over a urp relay \(relay path\), id (\d+)$`).FindStringSubmatch(r.stderr)
	if a == nil || !regexp.MustCompile(`(?m)^statistics of the connection to `+user+` over urp:$`).MatchString(r.stderr) {
		t.Fatalf("stderr %q", r.stderr)
	}
	x := regexp.MustCompile(`^introduced urp ` + user + ` id=(\d+) peer=(\d+) path=relay$`).FindStringSubmatch(b.waitLine(t, "introduced "))
	if x == nil || x[1] != a[2] || x[2] != a[1] {
		t.Fatalf("B said %q; A is %s, its connection %s", b.seenLines(), a[1], a[2])
	}
	for _, want := range []string{"hello", "world"} {
		l := b.waitLine(t, "message ")
		if !regexp.MustCompile(`^message urp ` + user + ` id=` + x[1] + ` channel=0 reliable ` + regexp.QuoteMeta(strconv.Quote(want)) + `$`).MatchString(l) {
			t.Errorf("B printed %q, want %q", l, want)
		}
	}
	if l := b.waitLine(t, "disconnected "); !regexp.MustCompile(`^disconnected urp ` + user + ` id=` + x[1] + ` messages=2 reason="closed by peer"$`).MatchString(l) {
		t.Errorf("B said %q", l)
	}
	// The relay saw B host the group, A join it, and B lock it (LOCK,
	// 0x01, on top of urpdriver's flags).
	made := regexp.MustCompile(`^made gid=(\d+) uid=\d+$`).FindStringSubmatch(relay.waitLine(t, "made "))
	if made == nil {
		t.Fatalf("relay said %q", relay.seenLines())
	}
	relay.waitLine(t, "joined gid="+made[1]+" ")
	lock := fmt.Sprintf("set gid=%s uid=", made[1])
	for {
		l := relay.waitLine(t, lock)
		if strings.HasSuffix(l, fmt.Sprintf(" key=GROUP_FLAGS value=%#x", urpdriver.GroupFlags|urp.FlagLock)) {
			break
		}
	}
	for _, p := range []*server{b, intro, relay} {
		if code := p.stop(t, syscall.SIGINT); code != 0 {
			t.Errorf("%q exited %d after SIGINT", p.cmd.Args[1:], code)
		}
	}
}

// TestPeerUsage checks the usage errors of introducer and peer.
func TestPeerUsage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"peer"}, "missing --via SERVER"},
		{[]string{"peer", "--via", "x"}, `bad address "x"`},
		{[]string{"peer", "--via", ":7000", "--to", "0"}, `--to "0": want a connection id`},
		{[]string{"peer", "--via", ":7000", "--to", "x"}, `--to "x"`},
		{[]string{"peer", "--via", ":7000", "--to", "5", "--accept"}, "--accept, --echo and --print are for a peer waiting"},
		{[]string{"peer", "--via", ":7000", "--raw"}, "are for --to"},
		{[]string{"peer", "--via", ":7000", "--to", "5", "--chunk", "9"}, "--chunk is for --raw input"},
		{[]string{"peer", "--via", ":7000", "extra"}, `unexpected argument "extra"`},
		{[]string{"introducer", "a:1", "b:2"}, `unexpected argument "b:2"`},
		{[]string{"introducer", "nonsense"}, `bad address "nonsense"`},
		{[]string{"introducer", "--max-conns", "0"}, "--max-conns 0"},
		{[]string{"introducer", "--relay", "x"}, `--relay: bad address "x"`},
		{[]string{"introducer", "--relay", ":7100"}, `--relay ":7100": want the relay's host`},
	}
	for _, tt := range tests {
		r := runBin(t, "", 10*time.Second, tt.args...)
		if r.code != 2 || !strings.Contains(r.stderr, tt.want) || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("fastnet %q: exit %d, stderr %q; want 2 and %q", tt.args, r.code, r.stderr, tt.want)
		}
	}
}
