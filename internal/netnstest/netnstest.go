// Package netnstest runs a test in a network namespace of its own whose
// loopback interface has a chosen MTU, so that tests can measure what
// sockets do on a path of a known size (D29 of the project's decisions):
// the test binary runs again in a child process made in a new network
// namespace (as root, or in a new user namespace where the system lets
// unprivileged users make one), and the test runs there.
//
//	func TestOn1500(t *testing.T) {
//		if !netnstest.Enter(t, 1500) {
//			return // the child ran the test; its result is reported here
//		}
//		// In the namespace: loopback is up, with MTU 1500.
//	}
//
// Where no namespace can be made (not Linux, no privilege), Enter skips the
// test and says why.
package netnstest

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

// envVar names the test, and the MTU, a child process is to run.
const envVar = "FASTNET_NETNS_TEST"

// Enter runs t in a new network namespace whose loopback is up with the
// given MTU. In the parent it runs the test binary again for t alone in
// such a namespace, reports the child's output and failure as t's, and
// returns false; in the child it sets the loopback up and returns true, and
// the test goes on there. It skips t where the namespace cannot be made.
func Enter(t *testing.T, mtu int) bool {
	t.Helper()
	want := fmt.Sprintf("%s=%d", t.Name(), mtu)
	if v, ok := os.LookupEnv(envVar); ok {
		if v != want {
			t.Skipf("a namespace child for %s, not this test", v)
		}
		if err := loopbackUp(mtu); err != nil {
			t.Fatalf("setting up loopback with MTU %d: %v", mtu, err)
		}
		return true
	}
	if testing.Short() {
		t.Skip("network namespace tests are skipped with -short")
	}
	out, err := runChild(t, want)
	if out != "" {
		t.Logf("in a network namespace, loopback MTU %d:\n%s", mtu, indent(out))
	}
	if err != nil {
		t.Fatalf("the test failed in its network namespace: %v", err)
	}
	return false
}

// runPattern returns the -test.run pattern that selects exactly the test
// or subtest named name.
func runPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

func indent(s string) string {
	return "\t" + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n\t")
}
