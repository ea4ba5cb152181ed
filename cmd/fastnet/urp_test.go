package main

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startRelay runs "fastnet relay" on a free port and returns it with its
// address.
func startRelay(t *testing.T, args ...string) (*server, string) {
	t.Helper()
	r := startCmd(t, append([]string{"relay", "--urp", "127.0.0.1:0"}, args...)...)
	m := regexp.MustCompile(`^relaying urp (127\.0\.0\.1:\d+) brand="(.*)"$`).FindStringSubmatch(r.waitLine(t, "relaying "))
	if m == nil {
		t.Fatalf("relay said %q", r.seenLines())
	}
	return r, m[1]
}

// hostVia runs "fastnet listen --via-urp" with args and returns it with
// the group's id and password.
func hostVia(t *testing.T, relay string, args ...string) (*server, string, string) {
	t.Helper()
	h := startCmd(t, append([]string{"listen", "--via-urp", relay}, args...)...)
	l := h.waitLine(t, "listening ")
	m := regexp.MustCompile(`^listening urp (\S+) group=(\d+) password=(\d+)$`).FindStringSubmatch(l)
	if m == nil || m[1] != relay {
		t.Fatalf("listen said %q", l)
	}
	return h, m[2], m[3]
}

var urpConnectedRE = regexp.MustCompile(`^connected urp (\[fd55:5250::[0-9a-f:]+\]:0) id=(\d+)$`)

// TestViaURP runs a relay, a host and a client through it: the client's
// lines come back as from a direct connection, and the relay and the host
// print a line for each event.
func TestViaURP(t *testing.T) {
	t.Parallel()
	relay, addr := startRelay(t, "--brand", "test relay")
	host, gid, pass := hostVia(t, addr, "--echo", "--print")
	in := "one\ntwo\r\n\nfour\n"
	r := runBin(t, in, 20*time.Second, "connect", "--via-urp", addr, "--group", gid, "--password", pass)
	if r.code != 0 || r.stdout != "one\ntwo\n\nfour\n" {
		t.Fatalf("connect: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if !regexp.MustCompile(`^connected to \[fd55:5250::[0-9a-f:]+\]:0 over urp, id \d+\n$`).MatchString(r.stderr) {
		t.Errorf("connect said %q", r.stderr)
	}
	c := urpConnectedRE.FindStringSubmatch(host.waitLine(t, "connected "))
	if c == nil {
		t.Fatalf("listen said %q", host.seenLines())
	}
	for _, m := range []string{"one", "two", "", "four"} {
		want := "message urp " + c[1] + " id=" + c[2] + " channel=0 reliable \"" + m + "\""
		if l := host.waitLine(t, "message "); l != want {
			t.Errorf("listen printed %q, want %q", l, want)
		}
	}
	if l := host.waitLine(t, "disconnected "); !strings.HasSuffix(l, `messages=4 reason="closed by peer"`) {
		t.Errorf("listen printed %q", l)
	}
	wantRelay := []string{
		`^connected uid=(\d+) addr=127\.0\.0\.1:\d+$`,
		`^made gid=` + gid + ` uid=\d+$`,
		`^set gid=` + gid + ` uid=\d+ key=GROUP_PASS$`,
		`^set gid=` + gid + ` uid=\d+ key=GROUP_FLAGS value=0x1c$`,
		`^connected uid=\d+ addr=127\.0\.0\.1:\d+$`,
		`^joined gid=` + gid + ` uid=\d+$`,
	}
	for _, w := range wantRelay {
		prefix := strings.Fields(strings.TrimPrefix(w, "^"))[0]
		if l := relay.waitLine(t, prefix); !regexp.MustCompile(w).MatchString(l) {
			t.Errorf("relay printed %q, want %s", l, w)
		}
	}
	relay.waitLine(t, "disconnected uid=")
	if code := host.stop(t, syscall.SIGINT); code != 0 {
		t.Errorf("listen exited %d", code)
	}
	if l := relay.waitLine(t, "disbanded "); !strings.HasPrefix(l, "disbanded gid="+gid) {
		t.Errorf("relay printed %q", l)
	}
	if code := relay.stop(t, syscall.SIGINT); code != 0 {
		t.Errorf("relay exited %d", code)
	}
	end := relay.waitLine(t, "stopped: ")
	if !regexp.MustCompile(`^stopped: 2 users connected, 0 refused; \d+ messages relayed \(\d+ bytes\); closed 0 for unknown packets, 0 for long messages, 0 not reading, 0 stalled, 0 guessing joins; 0 events not printed$`).MatchString(end) {
		t.Errorf("relay ended with %q", end)
	}
}

// TestViaURPRaw sends binary data through a relay in chunks, and checks
// that it comes back byte for byte, as TestConnectRaw does directly.
func TestViaURPRaw(t *testing.T) {
	t.Parallel()
	_, addr := startRelay(t)
	_, gid, pass := hostVia(t, addr, "--echo")
	var data []byte
	for i := range 3000 {
		data = append(data, byte(i*7), '\r', '\n', 0)
	}
	r := runBinReader(t, bytes.NewReader(data), 30*time.Second, "connect", "--raw", "--chunk", "1000", "--via-urp", addr, "--group", gid, "--password", pass)
	if r.code != 0 || r.stdout != string(data) {
		t.Errorf("exit %d, %d bytes back of %d, stderr %q", r.code, len(r.stdout), len(data), r.stderr)
	}
}

// TestViaURPFailures checks what connect and listen say when the relay,
// the group or the password is wrong, and when the relay goes away.
func TestViaURPFailures(t *testing.T) {
	t.Parallel()
	relay, addr := startRelay(t)
	host, gid, pass := hostVia(t, addr)
	p, _ := strconv.ParseUint(pass, 10, 32)
	wrong := strconv.FormatUint(uint64(uint32(p+1)), 10)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--group", gid, "--password", wrong}, "fastnet connect: relay " + addr + ": group " + gid + ": no such group, or wrong password"},
		{[]string{"--group", "1", "--password", pass}, "fastnet connect: relay " + addr + ": group 1: no such group, or wrong password"},
	}
	for _, tt := range tests {
		r := runBin(t, "", 10*time.Second, append([]string{"connect", "--via-urp", addr}, tt.args...)...)
		if r.code != 1 || strings.TrimSpace(r.stderr) != tt.want {
			t.Errorf("%q: exit %d, stderr %q; want 1 and %q", tt.args, r.code, r.stderr, tt.want)
		}
	}
	r := runBin(t, "", 10*time.Second, "connect", "--via-urp", "127.0.0.1:1", "--group", "1")
	if r.code != 1 || !strings.Contains(r.stderr, "fastnet connect: relay 127.0.0.1:1: ") || !strings.Contains(r.stderr, "connection refused") {
		t.Errorf("no relay: exit %d, stderr %q", r.code, r.stderr)
	}
	r = runBin(t, "", 10*time.Second, "listen", "--via-urp", "127.0.0.1:1")
	if r.code != 1 || !strings.Contains(r.stderr, "fastnet listen: relay 127.0.0.1:1: ") {
		t.Errorf("listen with no relay: exit %d, stderr %q", r.code, r.stderr)
	}
	relay.stop(t, syscall.SIGTERM)
	select {
	case <-host.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("listen goes on without its relay")
	}
	if host.exitCode != 1 || !strings.Contains(host.stderrText(), "fastnet listen: relay "+addr+": connection lost") {
		t.Errorf("listen exited %d: %q", host.exitCode, host.stderrText())
	}
}

// TestViaURPUsage checks the usage errors of the URP flags.
func TestViaURPUsage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"connect", "--via-urp", "127.0.0.1:7100"}, "--via-urp needs --group GID"},
		{[]string{"connect", "127.0.0.1:7000", "--via-urp", "127.0.0.1:7100", "--group", "1"}, `unexpected argument "127.0.0.1:7000": --via-urp names the relay`},
		{[]string{"connect", "--tcp", "--via-urp", "127.0.0.1:7100", "--group", "1"}, "--tcp is for a direct connection"},
		{[]string{"connect", "127.0.0.1:7000", "--group", "1"}, "--group and --password are for --via-urp"},
		{[]string{"connect", "--via-urp", "127.0.0.1:7100", "--group", "-1"}, "want a number 0..4294967295"},
		{[]string{"connect", "--via-urp", "nonsense", "--group", "1"}, `bad address "nonsense"`},
		{[]string{"listen", "--via-urp", "127.0.0.1:7100", "--tcp", ":0"}, "--via-urp serves through the relay, not on --udp or --tcp"},
		{[]string{"listen", "--via-urp", "x"}, `--via-urp: bad address "x"`},
		{[]string{"relay", "--max-message", "-1"}, "--max-message -1"},
		{[]string{"relay", "--max-users", "10", "--max-groups", "11"}, "--max-groups 11: want 1..--max-users (10)"},
		{[]string{"relay", "--max-output", "100"}, "--max-output 100 cannot hold one message"},
		{[]string{"relay", "--brand", strings.Repeat("b", 65)}, "--brand is 65 bytes, above 64"},
		{[]string{"relay", "--write-timeout", "0s"}, "--write-timeout 0s: must be positive"},
		{[]string{"relay", "--join-failures", "0"}, "--join-failures 0: want at least 1"},
		{[]string{"relay", "--join-failure-every", "-1s"}, "--join-failure-every -1s: must be positive"},
		{[]string{"relay", "--join-failures", "1000000000"}, "--join-failures 1000000000 times --join-failure-every 10s: too long a time"},
		{[]string{"relay", "--urp", "bad"}, `bad address "bad"`},
		{[]string{"relay", "extra"}, `unexpected argument "extra"`},
	}
	for _, tt := range tests {
		r := runBin(t, "", 10*time.Second, tt.args...)
		if r.code != 2 || !strings.Contains(r.stderr, tt.want) || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", tt.args, r.code, r.stderr, tt.want)
		}
	}
}

// TestRelayLimits checks that relay applies its flags: a third user is
// refused, and a message above --max-message closes its sender.
func TestRelayLimits(t *testing.T) {
	t.Parallel()
	relay, addr := startRelay(t, "--max-users", "2", "--max-message", "2000")
	_, gid, pass := hostVia(t, addr, "--echo")
	long := strings.Repeat("x", 3000)
	r := runBin(t, "short\n"+long+"\n", 20*time.Second, "connect", "--via-urp", addr, "--group", gid, "--password", pass)
	if r.code != 1 || !strings.Contains(r.stderr, "connection lost: transport connection lost") {
		t.Errorf("a long line: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if l := relay.waitLine(t, "disconnected "); !strings.Contains(l, `reason="message longer than the limit"`) {
		t.Errorf("relay printed %q", l)
	}
	host2 := startCmd(t, "listen", "--via-urp", addr)
	host2.waitLine(t, "listening ")
	host3 := startCmd(t, "listen", "--via-urp", addr)
	select {
	case <-host3.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("a third user was served")
	}
	if !strings.Contains(host3.stderrText(), "the relay closed the connection before its welcome (is it full?)") {
		t.Errorf("the third: %q", host3.stderrText())
	}
	if l := relay.waitLine(t, "refused "); !regexp.MustCompile(`^refused addr=127\.0\.0\.1:\d+ reason="too many users on the relay"$`).MatchString(l) {
		t.Errorf("relay printed %q", l)
	}
}

// connect --via-urp --stats names the relay as the transport, and prints
// no MTU estimation nor congestion control line: a relay is a stream.
func TestViaURPStats(t *testing.T) {
	t.Parallel()
	_, addr := startRelay(t)
	_, gid, pass := hostVia(t, addr, "--echo")
	r := runBin(t, "hello\n", 20*time.Second, "connect", "--via-urp", addr, "--group", gid, "--password", pass, "--stats")
	if r.code != 0 || r.stdout != "hello\n" {
		t.Fatalf("connect: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if !regexp.MustCompile(`(?m)^statistics of the connection to \[fd55:5250::[0-9a-f:]+\]:0 over urp:$`).MatchString(r.stderr) ||
		strings.Contains(r.stderr, "MTU estimation:") || strings.Contains(r.stderr, "congestion control:") {
		t.Errorf("connect --stats said %q", r.stderr)
	}
}
