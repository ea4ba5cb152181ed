package fastnet

import (
	"errors"
	"strings"
	"testing"
)

// TestErrorsMatch is the errors.Is table of the engine's errors (N65): a
// peer that went away matches ErrTimeout whichever timer noticed, and each
// error type matches its sentinel.
func TestErrorsMatch(t *testing.T) {
	tests := []struct {
		name  string
		err   error
		is    []error
		isNot []error
	}{
		{"not acknowledging", ErrNotAcknowledging, []error{ErrTimeout, ErrNotAcknowledging}, []error{ErrClosed, ErrPathMTU}},
		{"path MTU", ErrPathMTU, []error{ErrTimeout, ErrNotAcknowledging, ErrPathMTU}, []error{ErrClosed}},
		{"timeout", ErrTimeout, []error{ErrTimeout}, []error{ErrNotAcknowledging}},
		{"refused", &RefusedError{Reason: "full"}, []error{ErrRefused}, []error{ErrClosed}},
		{"peer closed", &PeerClosedError{Reason: "bye"}, []error{ErrPeerClosed}, []error{ErrClosed}},
		{"protocol", &ProtocolError{Reason: "bad"}, []error{ErrProtocol}, nil},
		{"local close", &LocalCloseError{Reason: "done"}, []error{ErrClosed}, []error{ErrLingerExpired}},
		{"linger expired", &LocalCloseError{Reason: "done", Unacknowledged: true}, []error{ErrClosed, ErrLingerExpired}, []error{ErrTimeout}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, target := range tt.is {
				if !errors.Is(tt.err, target) {
					t.Errorf("errors.Is(%v, %v) = false, want true", tt.err, target)
				}
			}
			for _, target := range tt.isNot {
				if errors.Is(tt.err, target) {
					t.Errorf("errors.Is(%v, %v) = true, want false", tt.err, target)
				}
			}
			if s := tt.err.Error(); strings.Count(s, "fastnet:") != 1 {
				t.Errorf("%q should say \"fastnet:\" once", s)
			}
		})
	}
}
