package main

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/impair"
)

// TestImpairRateUsage checks the usage errors of --rate and --queue.
func TestImpairRateUsage(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--rate", "20"}, "--rate: rate \"20\" has no unit"},
		{[]string{"--rate", "20mb"}, `unknown unit "mb"`},
		{[]string{"--rate", "0mbit"}, "--rate: rate \"0mbit\": want 8bit"},
		{[]string{"--rate", "-1mbit"}, "--rate: rate"},
		{[]string{"--queue", "100kB"}, "--queue 100kB without --rate"},
		{[]string{"--rate", "20mbit", "--queue", "0"}, "--queue 0: want 1 byte to 67108864 bytes"},
		{[]string{"--rate", "20mbit", "--queue", "1GB"}, "--queue 1GB: want 1 byte"},
		{[]string{"--rate", "20mbit", "--queue", "100kbit"}, `--queue: size "100kbit": unknown unit`},
	} {
		var out, errb syncBuffer
		args := append([]string{"impair", "127.0.0.1:0", "--to", ":7000"}, tt.args...)
		code := run(context.Background(), args, &stdio{out: &out, err: &errb})
		if code != 2 || !strings.Contains(errb.String(), tt.want) || strings.Count(errb.String(), "\n") != 1 {
			t.Errorf("fastnet %q: exit %d, stderr %q; want 2 and one line with %q", args, code, errb.String(), tt.want)
		}
	}
}

// TestImpairRate runs the relay with a rate and a queue and checks what it
// says at the start and at the end, with an echo through it.
func TestImpairRate(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "--echo", "--udp", "127.0.0.1:0")
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var iout, ierr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"impair", "127.0.0.1:0", "--to", srv.udp, "--delay", "5ms", "--rate", "20mbit", "--queue", "64KiB"}, &stdio{out: &iout, err: &ierr})
	}()
	var first string
	for deadline := time.Now().Add(5 * time.Second); first == ""; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("impair did not start: %q %q", iout.String(), ierr.String())
		}
		if i := strings.IndexByte(iout.String(), '\n'); i > 0 {
			first = iout.String()[:i]
		}
	}
	m := regexp.MustCompile(`^impairing udp (127\.0\.0\.1:\d+) to .*, any size, rate 20 Mbit/s each way, queue 65536 bytes, seed 1$`).FindStringSubmatch(first)
	if m == nil {
		t.Fatalf("impair said %q", first)
	}
	in := "one\ntwo\nthree\n"
	var out, errb syncBuffer
	if code := run(context.Background(), []string{"connect", m[1]}, &stdio{in: strings.NewReader(in), out: &out, err: &errb}); code != 0 || out.String() != in {
		t.Errorf("connect through the relay: exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
	stop()
	if code := <-done; code != 0 {
		t.Fatalf("impair: exit %d, stderr %q", code, ierr.String())
	}
	end := regexp.MustCompile(`(?m)^relayed .*; clients active at the end: \d+; queue up: 0 dropped, deepest \d+ bytes, delay p50 \d+\.\dms p99 \d+\.\dms; queue down: 0 dropped, deepest \d+ bytes, delay p50 \d+\.\dms p99 \d+\.\dms$`)
	if !end.MatchString(iout.String()) {
		t.Errorf("impair ended with %q", iout.String())
	}
}

func TestDescribeRate(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in   string
		want string
	}{
		{"20mbit", "20 Mbit/s"},
		{"5mbit", "5 Mbit/s"},
		{"1gbit", "1 Gbit/s"},
		{"512kbit", "512 kbit/s"},
		{"1MiB", "8.389 Mbit/s"},
		{"100B", "800 bit/s"},
	} {
		r, err := impair.ParseRate(tt.in)
		if err != nil {
			t.Fatal(err)
		}
		if got := describeRate(r); got != tt.want {
			t.Errorf("describeRate(%d) = %q, want %q", r, got, tt.want)
		}
	}
}
