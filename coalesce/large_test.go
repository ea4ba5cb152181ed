//go:build (linux || darwin) && (amd64 || arm64)

package coalesce

import (
	"syscall"
	"testing"
)

// A payload of 4 GiB or more cannot be encoded (D2): AppendMessage and
// PutMessageDeferred panic saying so, PutMessageDeferred even into a
// buffer too short for it, whose own test would otherwise panic first,
// so that no 4-byte length field ever carries only the low 32 bits of
// a length (N128). The payloads are address space reserved and never
// touched: only their lengths are read.
func TestEncodeTooLarge(t *testing.T) {
	const want = "coalesce: payload of 4 GiB or more"
	for _, n := range []int{1 << 32, 1<<32 + 300} {
		p, err := syscall.Mmap(-1, 0, n, syscall.PROT_NONE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
		if err != nil {
			t.Skipf("no %d bytes of address space: %v", n, err)
		}
		for _, tc := range []struct {
			name string
			f    func()
		}{
			{"AppendMessage", func() { AppendMessage(nil, p, true) }},
			{"PutMessageDeferred", func() { PutMessageDeferred(make([]byte, 64), p, true) }},
		} {
			func() {
				defer func() {
					if r := recover(); r != want {
						t.Errorf("%s of %d bytes: panic %v, want %q", tc.name, n, r, want)
					}
				}()
				tc.f()
			}()
		}
		if err := syscall.Munmap(p); err != nil {
			t.Fatal(err)
		}
	}
}
