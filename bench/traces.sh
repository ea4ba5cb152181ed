#!/usr/bin/env bash
# traces.sh checks that a change meant to change only the engine's cost
# (a shortcut, a data structure, fewer calls) changed nothing else: it
# plays the same drawn simulations at two commits, the fastnet package's
# property-test cases with bursts of small messages and congestion
# control on, off and at fixed rates, and compares, case by case, the
# trace of every datagram, every delivery and both sides' statistics.
# A change of behaviour shows as a case that differs.
#
# Usage, from the repository's root:
#
#   bench/traces.sh REV [NEW] [checks] [seed]
#
# REV and NEW are commits (NEW is HEAD by default; uncommitted changes
# are not seen); checks is the number of cases (default 1000), seed
# rapid's seed (default 1). Both commits must have the simulator's
# property-test helpers (drawCase, drawBursts, play), as the project
# has had since N101.
set -euo pipefail

rev=${1:?usage: bench/traces.sh REV [NEW] [checks] [seed]}
new=${2:-HEAD}
checks=${3:-1000}
seed=${4:-1}
work=$(mktemp -d)
trap 'git worktree remove --force "$work/a" 2>/dev/null || true; git worktree remove --force "$work/b" 2>/dev/null || true; rm -rf "$work"' EXIT

cat >"$work/traces_test.go" <<'EOF'
package fastnet_test

import (
	"fmt"
	"hash/fnv"
	"os"
	"testing"

	"pgregory.net/rapid"

	"github.com/fastnet-engine/fastnet/fastnet"
)

func TestTracesForComparison(t *testing.T) {
	out, err := os.Create(os.Getenv("FASTNET_TRACES"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	rapid.Check(t, func(t *rapid.T) {
		c := drawCase(t, 0, 12, false)
		drawBursts(t, &c, 300, 96)
		for _, cfg := range []*fastnet.Config{&c.setup.Cli, &c.setup.Srv} {
			switch rapid.IntRange(0, 3).Draw(t, "congestion") {
			case 1:
				cfg.Congestion.Disabled = true
			case 2:
				cfg.Congestion.FixedRate = rapid.IntRange(20_000, 2_000_000).Draw(t, "fixedRate")
			}
		}
		c.setup.KeepMessages = true
		trace := &hashWriter{h: fnv.New64a()}
		c.setup.Trace = trace
		s := play(t, c)
		got := fnv.New64a()
		fmt.Fprint(got, s.got)
		fmt.Fprintf(out, "%v, deliveries %016x, statistics %+v %+v\n", trace, got.Sum64(), s.stats(0), s.stats(1))
		s.closeAndIdle()
	})
}
EOF

for side in a b; do
	commit=$rev
	[[ $side == b ]] && commit=$new
	git worktree add --detach -q "$work/$side" "$commit"
	cp "$work/traces_test.go" "$work/$side/fastnet/zz_traces_test.go"
	(cd "$work/$side" && FASTNET_TRACES="$work/$side.txt" go test -count=1 -run '^TestTracesForComparison$' \
		./fastnet/ -rapid.checks="$checks" -rapid.seed="$seed" >"$work/$side.log" 2>&1) || {
		echo "traces.sh: the cases failed at $commit:" >&2
		tail -20 "$work/$side.log" >&2
		exit 1
	}
done

n=$(wc -l <"$work/a.txt")
if cmp -s "$work/a.txt" "$work/b.txt"; then
	echo "$n cases (seed $seed): $rev and $new give the same traces, deliveries and statistics"
	exit 0
fi
differ=$(paste -d '\n' "$work/a.txt" "$work/b.txt" | paste - - | awk -F '\t' '$1 != $2 {print NR}')
echo "$n cases (seed $seed): $rev and $new differ in $(echo "$differ" | wc -l): cases $(echo "$differ" | head -10 | tr '\n' ' ')"
kept=$(mktemp -d)
cp "$work/a.txt" "$kept/$rev.txt"
cp "$work/b.txt" "$kept/$new.txt"
echo "(a line per case, at each commit: $kept)"
exit 1
