package main

import (
	"bytes"
	"net"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestVersion checks that version describes the build, and that
// --version is the same.
func TestVersion(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"version"}, {"--version"}} {
		r := runBin(t, "", 10*time.Second, args...)
		if r.code != 0 || r.stderr != "" {
			t.Fatalf("%q: exit %d, stderr %q", args, r.code, r.stderr)
		}
		lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
		want := []string{"fastnet ", "module:   github.com/fastnet-engine/fastnet ", "revision: ", "go:       go1.", "protocol: Fastnet 1.0"}
		if len(lines) != len(want) {
			t.Fatalf("%q printed %q, want %d lines", args, r.stdout, len(want))
		}
		for i, w := range want {
			if !strings.HasPrefix(lines[i], w) {
				t.Errorf("%q: line %d is %q, want it to begin %q", args, i+1, lines[i], w)
			}
		}
	}
}

// TestVersionVCS builds the command with its version-control information
// (the environment may turn it off) and checks the revision line.
func TestVersionVCS(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "fastnet")
	if out, err := exec.Command("go", "build", "-buildvcs=true", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Skipf("no build with version-control information here: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "revision: not recorded") {
		t.Skip("not built in a checkout")
	}
	re := regexp.MustCompile(`(?m)^revision: [0-9a-f]{12} \S+( \(modified\))?$`)
	if !re.MatchString(string(out)) {
		t.Errorf("version printed\n%s\nwant a line like %q", out, "revision: 785119ea92db 2026-11-25T20:00:33Z (modified)")
	}
}

// TestConnectTimeout checks that --timeout bounds the handshake, and that
// the error names the address and the time, and says what was missing:
// a handshake, not an answer, since a UDP echo server answers every query
// with the query itself.
func TestConnectTimeout(t *testing.T) {
	t.Parallel()
	for _, echo := range []bool{false, true} {
		silent, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer silent.Close()
		if echo {
			go func() {
				b := make([]byte, 2048)
				for {
					n, from, err := silent.ReadFrom(b)
					if err != nil {
						return
					}
					silent.WriteTo(b[:n], from)
				}
			}()
		}
		addr := silent.LocalAddr().String()
		r := runBin(t, "", 10*time.Second, "connect", addr, "--timeout", "300ms")
		want := "fastnet connect: " + addr + ": timed out: no Fastnet handshake over udp within 300ms"
		if r.code != 1 || !strings.HasPrefix(r.stderr, want) || !strings.Contains(r.stderr, "fastnet probe "+addr) || !strings.Contains(r.stderr, "try --tcp") {
			t.Errorf("echo %v: exit %d, stderr %q; want 1 and %q with hints to probe and to try --tcp", echo, r.code, r.stderr, want)
		}
		if r.took > 3*time.Second {
			t.Errorf("echo %v: a 300ms timeout took %v", echo, r.took)
		}
	}
}

// TestListenPrint checks that --print prints every message, quoted, with
// and without --echo, and that lines keep or drop a CR as documented: a CR
// just before the newline is part of the line ending, any other is data.
func TestListenPrint(t *testing.T) {
	t.Parallel()
	in := "plain\r\nb\rc\n\n\x00\x01\xff \"q\" ✓\\\nlast\r"
	sent := []string{"plain", "b\rc", "", "\x00\x01\xff \"q\" ✓\\", "last\r"}
	for _, echo := range []bool{false, true} {
		args := []string{"--print", "--udp", "127.0.0.1:0"}
		if echo {
			args = append(args, "--echo")
		}
		srv := startServer(t, args...)
		r := runBin(t, in, 20*time.Second, "connect", srv.udp)
		if r.code != 0 {
			t.Fatalf("echo %v: connect exited %d: %s", echo, r.code, r.stderr)
		}
		wantOut := ""
		if echo {
			wantOut = strings.Join(sent, "\n") + "\n"
		}
		if r.stdout != wantOut {
			t.Errorf("echo %v: connect printed %q, want %q", echo, r.stdout, wantOut)
		}
		c := connectedRE.FindStringSubmatch(srv.waitLine(t, "connected "))
		for _, m := range sent {
			want := "message udp " + c[2] + " id=" + c[3] + " channel=0 reliable " + strconv.Quote(m)
			if l := srv.waitLine(t, "message "); l != want {
				t.Errorf("echo %v: listen printed %q, want %q", echo, l, want)
			}
		}
	}
}

// TestLongLines checks that a line as long as the largest message goes
// through, and that a longer one stops connect with an error naming the
// limit and the line.
func TestLongLines(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "--echo", "--tcp", "127.0.0.1:0")
	const max = 1 << 20
	longest := strings.Repeat("x", max)
	// Its echo takes a while under the race detector on a loaded
	// machine: connect waits for it up to --drain of quiet.
	r := runBin(t, longest+"\r\n", 30*time.Second, "connect", "--tcp", "--drain", "3s", srv.tcp)
	if r.code != 0 || r.stdout != longest+"\n" {
		t.Errorf("a line of %d bytes: exit %d, %d bytes back, stderr %q; want 0 and the line", max, r.code, len(r.stdout), r.stderr)
	}
	r = runBin(t, "first\n"+longest+"y\nlast\n", 30*time.Second, "connect", "--tcp", srv.tcp)
	want := "input line 2 is longer than 1048576 bytes, the largest message"
	if r.code != 1 || !strings.Contains(r.stderr, want) || strings.Contains(r.stderr, "token too long") {
		t.Errorf("a line of %d bytes: exit %d, stderr %q; want 1 and %q", max+1, r.code, r.stderr, want)
	}
	// The line before it was sent.
	srv.waitLine(t, "disconnected ") // the first connection
	d := disconnectedRE.FindStringSubmatch(srv.waitLine(t, "disconnected "))
	if d == nil || d[4] != "1" {
		t.Errorf("listen said %q, want 1 message", d)
	}
}

// TestConnectRaw sends binary data, every byte value with NUL, CR and LF
// among them, through an echo server in chunks, over UDP and TCP, and checks
// that it comes back byte for byte, in messages of --chunk bytes.
func TestConnectRaw(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "--echo", "--print", "--udp", "127.0.0.1:0", "--tcp", "127.0.0.1:0")
	var data []byte
	for i := range 3000 {
		data = append(data, byte(i*7), '\r', '\n', 0)
	}
	for _, args := range [][]string{{srv.udp}, {"--tcp", srv.tcp}} {
		r := runBinReader(t, bytes.NewReader(data), 30*time.Second, append([]string{"connect", "--raw", "--chunk", "1000"}, args...)...)
		if r.code != 0 {
			t.Fatalf("%q: exit %d: %s", args, r.code, r.stderr)
		}
		if r.stdout != string(data) {
			t.Errorf("%q: %d bytes back, equal %v; want the %d sent", args, len(r.stdout), r.stdout == string(data), len(data))
		}
		srv.waitLine(t, "connected ")
		first := srv.waitLine(t, "message ")
		if want := "reliable " + strconv.Quote(string(data[:1000])); !strings.HasSuffix(first, want) {
			t.Errorf("%q: first message %q, want the first 1000 bytes", args, trim(first))
		}
		d := disconnectedRE.FindStringSubmatch(srv.waitLine(t, "disconnected "))
		if d == nil || d[4] != "12" {
			t.Errorf("%q: listen said %q, want 12 messages", args, d)
		}
	}
}

// TestEmptyHost checks that connect and probe take ":PORT" for the local
// host.
func TestEmptyHost(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "--echo", "--udp", "127.0.0.1:0")
	_, port, _ := net.SplitHostPort(srv.udp)
	r := runBin(t, "hi\n", 20*time.Second, "connect", ":"+port)
	if r.code != 0 || r.stdout != "hi\n" || !strings.Contains(r.stderr, "connected to 127.0.0.1:"+port) {
		t.Errorf("connect :%s: exit %d, stdout %q, stderr %q", port, r.code, r.stdout, r.stderr)
	}
	r = runBin(t, "", 10*time.Second, "probe", ":"+port)
	if r.code != 0 || !strings.Contains(r.stdout, "address: 127.0.0.1:"+port+" (udp)") {
		t.Errorf("probe :%s: exit %d, stdout %q, stderr %q", port, r.code, r.stdout, r.stderr)
	}
}

// TestProbeForeign checks that probe tells a server that answers, but not
// as Fastnet does, from one that does not answer, over UDP and TCP.
func TestProbeForeign(t *testing.T) {
	t.Parallel()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	go func() {
		buf := make([]byte, 2048)
		for {
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			pc.WriteTo([]byte("\x00\x07not fastnet"), from)
		}
	}()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Read(make([]byte, 100))
			c.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\n"))
			c.Close()
		}
	}()
	tests := []struct {
		args []string
		want *regexp.Regexp
	}{
		// Each query is answered: 13 bytes each.
		{[]string{pc.LocalAddr().String()}, regexp.MustCompile(`(?m)^fastnet: no \(an answer that is not Fastnet 1\.0: (13 bytes in 1 datagram|\d+ bytes in \d+ datagrams), starting "\\x00\\anot fastnet"\)$`)},
		{[]string{"--tcp", ln.Addr().String()}, regexp.MustCompile(`(?m)^fastnet: no \(an answer that is not Fastnet 1\.0: 28 bytes, starting "HTTP/1\.1 400 Bad Request\\r\\n\\r\\n"\)$`)},
	}
	for _, tt := range tests {
		r := runBin(t, "", 10*time.Second, append([]string{"probe", "--timeout", "5s"}, tt.args...)...)
		if r.code != 3 || !tt.want.MatchString(r.stdout) || !strings.Contains(r.stderr, "not a Fastnet 1.0 server") {
			t.Errorf("probe %q: exit %d, stdout %q, stderr %q; want 3 and %q", tt.args, r.code, r.stdout, r.stderr, tt.want)
		}
		if r.took > 3*time.Second {
			t.Errorf("probe %q took %v: it should not wait for the timeout once something answered", tt.args, r.took)
		}
	}
}

// TestTransportHints checks the hint at the other transport when a client
// uses the wrong one.
func TestTransportHints(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "--udp", "127.0.0.1:0")
	_, port, _ := net.SplitHostPort(srv.udp)
	// The UDP port's number over TCP: nothing listens there.
	r := runBin(t, "", 10*time.Second, "connect", "--tcp", "127.0.0.1:"+port)
	if r.code != 1 || !strings.Contains(r.stderr, "try without --tcp") {
		t.Errorf("connect --tcp to a UDP server: exit %d, stderr %q; want a hint to try without --tcp", r.code, r.stderr)
	}
	tcpOnly := startServer(t, "--tcp", "127.0.0.1:0")
	r = runBin(t, "", 10*time.Second, "connect", "--timeout", "300ms", tcpOnly.tcp)
	if r.code != 1 || !strings.Contains(r.stderr, "try --tcp") {
		t.Errorf("connect over UDP to a TCP server: exit %d, stderr %q; want a hint to try --tcp", r.code, r.stderr)
	}
}

// TestImpair relays an echo through "fastnet impair" with a delay and some
// loss, and checks the echoes, the delay, and the report at the end.
func TestImpair(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "--echo", "--udp", "127.0.0.1:0")
	imp := startCmd(t, "impair", "127.0.0.1:0", "--to", srv.udp, "--delay", "20ms", "--loss", "0.05", "--seed", "7")
	l := imp.waitLine(t, "impairing ")
	m := regexp.MustCompile(`^impairing udp (127\.0\.0\.1:\d+) to (127\.0\.0\.1:\d+): loss 5%, delay 20ms ± 0s, duplication 0%, reordering 0%, any size, seed 7$`).FindStringSubmatch(l)
	if m == nil || m[2] != srv.udp {
		t.Fatalf("impair said %q", l)
	}
	in := "one\ntwo\nthree\n"
	// A drain of 2 s, not the default 250 ms: with 5 % lost each way, the
	// echoes' datagram and its first resend are both lost about once in
	// 400 runs, and the next resend comes later than 250 ms (it failed so
	// in one run of the whole suite).
	r := runBin(t, in, 20*time.Second, "connect", "--drain", "2s", m[1])
	if r.code != 0 || r.stdout != in {
		t.Errorf("connect through the relay: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	p := runBin(t, "", 10*time.Second, "probe", m[1])
	rtt := regexp.MustCompile(`rtt: +\S+ \(min (\S+),`).FindStringSubmatch(p.stdout)
	if p.code != 0 || rtt == nil {
		t.Fatalf("probe through the relay: exit %d, stdout %q", p.code, p.stdout)
	}
	if d, err := time.ParseDuration(rtt[1]); err != nil || d < 40*time.Millisecond {
		t.Errorf("round trip through a 20ms relay: %s, want at least 40ms", rtt[1])
	}
	if code := imp.stop(t, syscall.SIGINT); code != 0 {
		t.Errorf("impair exited %d after SIGINT", code)
	}
	end := imp.waitLine(t, "relayed ")
	if !regexp.MustCompile(`^relayed [1-9]\d* datagrams: \d+ lost, 0 too big, 0 duplicated, 0 held back, 0 overflowed, 0 without room; clients active at the end: 2$`).MatchString(end) {
		t.Errorf("impair ended with %q", end)
	}
}

// TestImpairBadTarget checks that impair reports an address it cannot
// listen on, with exit status 1.
func TestImpairBadTarget(t *testing.T) {
	t.Parallel()
	busy, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	r := runBin(t, "", 10*time.Second, "impair", busy.LocalAddr().String(), "--to", ":7000")
	if r.code != 1 || !strings.Contains(r.stderr, "address already in use") {
		t.Errorf("exit %d, stderr %q; want 1 and the address in use", r.code, r.stderr)
	}
}
