#!/usr/bin/env bash
# abbench.sh runs the benchmark command (W1-W4, see docs/workloads.md) of
# two builds side by side: bench binaries built at REV and at the working
# tree, run one after the other, round after round, the order alternating,
# so that a machine whose speed drifts slows both alike. It prints, for
# each system and figure, the median of each build, the median of the
# rounds' ratios (the working tree's over REV's) and in how many rounds
# the working tree's figure was the higher.
#
# Usage, from the repository's root:
#
#   bench/abbench.sh REV ROUNDS [bench flags]
#
# e.g. bench/abbench.sh HEAD~3 16 -workloads W1,W2,W3,W4 -systems
# fastnet-udp,fastnet-tcp. The flags go to every run, with -runs 1. A
# flag the build at REV does not know fails its runs: compare builds that
# have the flags given. Leave the machine otherwise idle.
set -euo pipefail

rev=${1:?usage: bench/abbench.sh REV ROUNDS [bench flags]}
rounds=${2:?usage: bench/abbench.sh REV ROUNDS [bench flags]}
shift 2
work=$(mktemp -d)
trap 'git worktree remove --force "$work/base" 2>/dev/null || true; rm -rf "$work"' EXIT

git worktree add -q --detach "$work/base" "$rev"
(cd "$work/base/bench" && go build -o "$work/base.bin" .)
(cd bench && go build -o "$work/head.bin" .)

# Each line of $work/runs: round, build, figure, value.
for r in $(seq "$rounds"); do
	order="base head"
	if ((r % 2 == 0)); then order="head base"; fi
	for b in $order; do
		"$work/$b.bin" -runs 1 "$@" 2>&1 | grep '^run' | awk -v r="$r" -v b="$b" '
			{
				sys = $3; w = $4
				if (w == "W1") { print r, b, sys "/W1p50", $6; print r, b, sys "/W1p99", $9; next }
				v = $5; m = 1
				if (v ~ /M$/) m = 1e6; else if (v ~ /k$/) m = 1e3
				sub(/[Mk]$/, "", v)
				print r, b, sys "/" w, v * m
			}'
	done
done >"$work/runs"

# median reads numbers, one a line, and prints their median.
median() {
	sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

printf '%-24s %12s %12s %7s %8s\n' figure "$rev" HEAD ratio higher
for k in $(awk '{ print $3 }' "$work/runs" | sort -u); do
	base=$(awk -v k="$k" '$2 == "base" && $3 == k { print $4 }' "$work/runs" | median)
	head=$(awk -v k="$k" '$2 == "head" && $3 == k { print $4 }' "$work/runs" | median)
	ratio=$(awk -v k="$k" '$3 == k { t[$1, $2] = $4; r[$1] = 1 }
		END { for (i in r) if (t[i, "base"] > 0 && t[i, "head"] != "") print t[i, "head"] / t[i, "base"] }' "$work/runs" | median)
	higher=$(awk -v k="$k" '$3 == k { t[$1, $2] = $4; r[$1] = 1 }
		END { n = 0; m = 0; for (i in r) if (t[i, "base"] != "" && t[i, "head"] != "") { m++; if (t[i, "head"] > t[i, "base"]) n++ }; print n "/" m }' "$work/runs")
	printf '%-24s %12s %12s %7.3f %8s\n' "$k" "$base" "$head" "$ratio" "$higher"
done
