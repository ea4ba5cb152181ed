package main

import (
	"os"
	"regexp"
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

// TestRun runs a short measurement and checks its report: every message
// echoed, and each figure there.
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
	if m[1] != m[2] || m[1] == "0" {
		t.Fatalf("sent %s, echoed %s: want all echoed, at least one", m[1], m[2])
	}
}
