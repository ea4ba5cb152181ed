package driver

import (
	"slices"
	"testing"
	"time"

	"github.com/fastnet-engine/fastnet/clock"
)

// TestOverdueStep runs the put-off of an overdue deadline (N129) in
// virtual time: each row is the timer firing at a time (ms from the
// start) with the deadline armed then, and whether input waits, and the
// decision expected. Each sequence starts from a deadline not put off.
func TestOverdueStep(t *testing.T) {
	type fire struct {
		at, deadline float64 // ms; deadline 0: none armed
		waiting      bool
		wait, held   bool
		asked        bool // waiting was asked
	}
	const d = 1000.0 // the deadline of most rows
	// run is n fires step ms apart from at, with input waiting, each
	// put off again.
	run := func(at, step float64, n int) []fire {
		fs := make([]fire, n)
		for i := range fs {
			fs[i] = fire{at: at + step*float64(i), deadline: d, waiting: true, wait: true, asked: true}
		}
		return fs
	}
	tests := []struct {
		name  string
		fires []fire
	}{
		{"on time", []fire{{at: d, deadline: d, waiting: true}}},
		{"late by less than overdueAfter", []fire{{at: d + 19.9, deadline: d, waiting: true}}},
		{"none armed", []fire{{at: d + 500, deadline: 0, waiting: true}}},
		{"early (a stale value of the alarm)", []fire{{at: d - 5, deadline: d, waiting: true}}},
		{"overdue, nothing waits: put off until two checks find none", []fire{
			{at: d + 20, deadline: d, wait: true, held: true},
			{at: d + 22, deadline: d, wait: true, asked: true},
			{at: d + 24, deadline: d, asked: true},
		}},
		{"input seen between two checks that find none", []fire{
			{at: d + 100, deadline: d, wait: true, held: true},
			{at: d + 102, deadline: d, wait: true, asked: true},
			{at: d + 104, deadline: d, waiting: true, wait: true, asked: true},
			{at: d + 106, deadline: d, wait: true, asked: true},
			{at: d + 108, deadline: d, asked: true},
		}},
		{"overdue by 20 ms: a budget of 5 ms", []fire{
			{at: d + 20, deadline: d, wait: true, held: true},
			{at: d + 22, deadline: d, waiting: true, wait: true, asked: true},
			{at: d + 24, deadline: d, waiting: true, wait: true, asked: true},
			{at: d + 25, deadline: d, waiting: true}, // 5 ms run: not asked
		}},
		{"overdue by 2 s: a budget of overdueMax", slices.Concat([]fire{
			{at: d + 2000, deadline: d, wait: true, held: true},
		}, run(d+2002, 2, 99), []fire{ // 198 ms run
			{at: d + 2200, deadline: d, waiting: true}, // 200 ms run: not asked
		})},
		{"input stops waiting", []fire{
			{at: d + 400, deadline: d, wait: true, held: true},
			{at: d + 402, deadline: d, waiting: true, wait: true, asked: true},
			{at: d + 404, deadline: d, wait: true, asked: true},
			{at: d + 406, deadline: d, asked: true},
			// Handled: the next deadline starts anew.
			{at: d + 1010, deadline: d + 1000},
		}},
		{"a put-off held up again: the budget of that delay", []fire{
			{at: d + 40, deadline: d, wait: true, held: true}, // 10 ms
			{at: d + 42, deadline: d, waiting: true, wait: true, asked: true},
			// Stopped 100 ms within the put-off: 25 ms more, not the 8
			// left of the first.
			{at: d + 142, deadline: d, wait: true, held: true},
			{at: d + 161, deadline: d, waiting: true, wait: true, asked: true}, // 19 ms run
			{at: d + 167, deadline: d, waiting: true},                          // 25 ms run: not asked
		}},
		{"a put-off held up again: what is left of the first, if more", slices.Concat([]fire{
			{at: d + 800, deadline: d, wait: true, held: true}, // 200 ms
			{at: d + 802, deadline: d, waiting: true, wait: true, asked: true},
			// Stopped 20 ms: 198 ms left, more than 5.
			{at: d + 822, deadline: d, wait: true, held: true},
		}, run(d+841, 19, 10), []fire{ // 190 ms run
			{at: d + 1020.1, deadline: d, waiting: true}, // 198.1 ms run: not asked
		})},
		{"a put-off held up again: never more than overdueMax", slices.Concat([]fire{
			{at: d + 800, deadline: d, wait: true, held: true}, // 200 ms
			// Stopped 2 s: 200 ms, no more.
			{at: d + 2800, deadline: d, wait: true, held: true},
		}, run(d+2819, 19, 10), []fire{ // 190 ms run
			{at: d + 3000, deadline: d, waiting: true}, // 200 ms run: not asked
		})},
		// A process starved of processor time is late at every step
		// (N130): past overdueAgain budgets anew, a delay spends the
		// budget.
		{"held up again a third time: the delay spends the budget", []fire{
			{at: d + 40, deadline: d, wait: true, held: true},          // 10 ms
			{at: d + 140, deadline: d, wait: true, held: true},         // again: 25 ms
			{at: d + 240, deadline: d, wait: true, held: true},         // again: 25 ms
			{at: d + 340, deadline: d, waiting: true},                  // 100 ms spent of 25: not asked, handled
			{at: d + 1040, deadline: d + 1000, wait: true, held: true}, // the next deadline late: a put-off of its own,
			{at: d + 1140, deadline: d + 1000, wait: true, held: true}, // held up again: a budget anew,
			{at: d + 1240, deadline: d + 1000, wait: true, held: true}, // twice
		}},
		{"held up again twice, then input stops waiting: the next put-off starts anew", []fire{
			{at: d + 40, deadline: d, wait: true, held: true},          // 10 ms
			{at: d + 140, deadline: d, wait: true, held: true},         // again: 25 ms
			{at: d + 240, deadline: d, wait: true, held: true},         // again: 25 ms
			{at: d + 242, deadline: d, wait: true, asked: true},        // quiet
			{at: d + 244, deadline: d, asked: true},                    // quiet again: handled
			{at: d + 1040, deadline: d + 1000, wait: true, held: true}, // a put-off of its own,
			{at: d + 1140, deadline: d + 1000, wait: true, held: true}, // held up again: a budget anew,
			{at: d + 1240, deadline: d + 1000, wait: true, held: true}, // twice
		}},
		{"held up again twice, then no deadline: the next put-off starts anew", []fire{
			{at: d + 40, deadline: d, wait: true, held: true},  // 10 ms
			{at: d + 140, deadline: d, wait: true, held: true}, // again: 25 ms
			{at: d + 240, deadline: d, wait: true, held: true}, // again: 25 ms
			{at: d + 242}, // none armed: ended
			{at: d + 1040, deadline: d + 1000, wait: true, held: true}, // a put-off of its own,
			{at: d + 1140, deadline: d + 1000, wait: true, held: true}, // held up again: a budget anew,
			{at: d + 1240, deadline: d + 1000, wait: true, held: true}, // twice
		}},
		{"held up again a third time, within what is left", []fire{
			{at: d + 800, deadline: d, wait: true, held: true},                  // 200 ms
			{at: d + 830, deadline: d, wait: true, held: true},                  // again: 200 ms
			{at: d + 860, deadline: d, wait: true, held: true},                  // again: 200 ms
			{at: d + 890, deadline: d, waiting: true, wait: true, asked: true},  // 30 ms spent: 170 left
			{at: d + 1000, deadline: d, waiting: true, wait: true, asked: true}, // 110 spent: 60 left
			{at: d + 1060, deadline: d, waiting: true},                          // 60 spent: none left, not asked
		}},
		{"held up by just less than overdueAfter: the budget runs on", []fire{
			{at: d + 40, deadline: d, wait: true, held: true}, // 10 ms
			{at: d + 49.9, deadline: d, waiting: true, wait: true, asked: true},
			{at: d + 51, deadline: d, waiting: true}, // 11 ms run: not asked
		}},
		{"an earlier deadline armed during a put-off", []fire{
			{at: d + 100, deadline: d, wait: true, held: true},
			{at: d + 101, deadline: d + 99, waiting: true, wait: true, asked: true},
			{at: d + 103, deadline: d + 99, wait: true, asked: true},
			{at: d + 105, deadline: d + 99, asked: true},
		}},
	}
	ms := func(v float64) clock.Time { return clock.Time(v * float64(time.Millisecond)) }
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var o overdue
			for i, f := range tt.fires {
				asked := false
				wait, held := o.step(ms(f.at), ms(f.deadline), func() bool {
					asked = true
					return f.waiting
				})
				if wait != f.wait || held != f.held || asked != f.asked {
					t.Fatalf("fire %d at %v ms: step = %v, %v, waiting asked %v; want %v, %v, %v",
						i, f.at, wait, held, asked, f.wait, f.held, f.asked)
				}
				if !wait && o.last != 0 {
					t.Fatalf("fire %d: handled, but still marked as put off", i)
				}
			}
		})
	}
}
