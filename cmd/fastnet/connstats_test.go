package main

import (
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/fastnet"
)

// payloadMTURE is the payload MTU line of connect --stats.
var (
	payloadMTURE = regexp.MustCompile(`(?m)^  payload MTU: (\d+) sent; largest payload received (\d+)`)
	congestionRE = regexp.MustCompile(`(?m)^  congestion control: (slow start|congestion avoidance), window \d+ bytes, pacing \d+ kB/s, \d+ reductions, \d+ unreliable messages expired$`)
)

// TestConnectStats checks connect --stats: at exit it prints the
// connection's statistics on standard error, the payload MTU each way
// among them. Over UDP, with input that lasts past the estimation, the
// payload MTU it reports has grown past the initial 32 bytes (D19, D29)
// and the estimation is reported finished; over TCP the payload MTU is the
// transport's. Without --stats nothing of this is printed.
func TestConnectStats(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "--echo", "--udp", "127.0.0.1:0", "--tcp", "127.0.0.1:0")
	tests := []struct {
		name    string
		args    []string
		delay   time.Duration
		grown   bool // the payload MTU must be above the initial one
		udpLine bool // the MTU estimation line is printed
	}{
		{"udp", []string{srv.udp, "--stats"}, 1500 * time.Millisecond, true, true},
		{"tcp", []string{srv.tcp, "--tcp", "--stats"}, 0, true, false},
		{"udp without --stats", []string{srv.udp}, 0, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runBinReader(t, &delayedReader{d: tt.delay, r: strings.NewReader("hello\n")}, 20*time.Second, append([]string{"connect"}, tt.args...)...)
			if r.code != 0 || r.stdout != "hello\n" {
				t.Fatalf("connect exited %d, printed %q; stderr:\n%s", r.code, r.stdout, r.stderr)
			}
			m := payloadMTURE.FindStringSubmatch(r.stderr)
			stats := strings.Contains(r.stderr, "statistics of the connection to ")
			if !strings.Contains(strings.Join(tt.args, " "), "--stats") {
				if stats || m != nil {
					t.Fatalf("statistics printed without --stats:\n%s", r.stderr)
				}
				return
			}
			if !stats || m == nil {
				t.Fatalf("no statistics with the payload MTU on stderr:\n%s", r.stderr)
			}
			sent, _ := strconv.Atoi(m[1])
			if tt.grown && sent <= fastnet.DefaultPayloadMTU {
				t.Errorf("payload MTU sent %d, want it grown past %d:\n%s", sent, fastnet.DefaultPayloadMTU, r.stderr)
			}
			if est := strings.Contains(r.stderr, "  MTU estimation: 1 finished, searching false"); est != tt.udpLine {
				t.Errorf("estimation line finished: %v, want %v:\n%s", est, tt.udpLine, r.stderr)
			}
			// D30: over UDP the controller's state; over TCP, TCP's own.
			if cc := congestionRE.MatchString(r.stderr); cc != tt.udpLine {
				t.Errorf("congestion control line: %v, want %v:\n%s", cc, tt.udpLine, r.stderr)
			}
			t.Logf("stderr:\n%s", r.stderr)
		})
	}
	if code := srv.stop(t, syscall.SIGINT); code != 0 {
		t.Errorf("listen exited %d after SIGINT, want 0; stderr:\n%s", code, srv.stderrText())
	}
}
