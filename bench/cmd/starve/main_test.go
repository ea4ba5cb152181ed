package main

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary serve as the server process run starts.
func TestMain(m *testing.M) {
	if serverMain() {
		return
	}
	os.Exit(m.Run())
}

// TestRun runs a short measurement and checks its report: each figure
// there, and echoes of some messages and of no more than were sent (the
// last echoes may come after the reply that ends the count, on another
// channel).
func TestRun(t *testing.T) {
	var out strings.Builder
	if err := run(&out, 1, 2, 300*time.Millisecond, 5*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`^sent (\d+) echoed (\d+) p50 \S+ p99 \S+ p99\.9 \S+; resent: clients \d+ server \d+\n$`)
	m := re.FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("report %q", out.String())
	}
	sent, _ := strconv.Atoi(m[1])
	echoed, _ := strconv.Atoi(m[2])
	if echoed == 0 || echoed > sent {
		t.Fatalf("sent %d, echoed %d", sent, echoed)
	}
}
