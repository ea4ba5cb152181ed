#!/usr/bin/env bash
# abtime.sh times the engine benchmarks of two builds side by side: test
# binaries of ./fastnet at REV and at the working tree, run one after
# the other, round after round, so that a machine whose speed drifts
# (these ones run the same work in anything from 1x to 2x the time
# within minutes) slows both alike. It prints, for each benchmark, the
# median time of each build, the median of the rounds' ratios (the
# working tree's over REV's) and in how many rounds the working tree was
# faster; and, for each engine benchmark, the median over rounds of its
# time less MD5Only64Batched's in the same round, for each build: a
# message's cost beyond its batched checksum work, which issue 19's
# engine-only target bounds (100 ns).
#
# Usage, from the repository's root:
#
#   bench/abtime.sh REV [rounds] [benchmarks] [cpu]
#
# rounds defaults to 20, benchmarks (a -test.bench expression) to
# 'MD5Only64Batched|Engine64(Unreliable|Reliable)FullBundle$', cpu (a
# -test.cpu list) to the number of processors. Each benchmark runs for
# 200 ms a round; leave the machine otherwise idle.
set -euo pipefail

rev=${1:?usage: bench/abtime.sh REV [rounds] [benchmarks] [cpu]}
rounds=${2:-20}
bench=${3:-'MD5Only64Batched|Engine64(Unreliable|Reliable)FullBundle$'}
cpu=${4:-$(getconf _NPROCESSORS_ONLN)}
work=$(mktemp -d)
trap 'git worktree remove --force "$work/base" 2>/dev/null || true; rm -rf "$work"' EXIT

git worktree add -q --detach "$work/base" "$rev"
(cd "$work/base" && go test -c -o "$work/base.test" ./fastnet/)
go test -c -o "$work/head.test" ./fastnet/

# Each line of $work/runs: round, build, benchmark, ns/op.
for r in $(seq "$rounds"); do
	for b in base head; do
		"$work/$b.test" -test.run '^$' -test.bench "$bench" -test.benchtime 200ms -test.cpu "$cpu" |
			awk -v r="$r" -v b="$b" '/^Benchmark/ { n = $1; sub(/^Benchmark/, "", n); sub(/-[0-9]+$/, "", n); print r, b, n, $3 }'
	done
done >"$work/runs"

# median reads numbers, one a line, and prints their median.
median() {
	sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# num prints the number $1 with $2 decimals, or "-" as it is.
num() {
	if [[ $1 == - ]]; then echo -; else printf "%.${2}f" "$1"; fi
}

printf '%-36s %10s %10s %7s %8s\n' benchmark "$rev" HEAD ratio faster
for n in $(awk '{ print $3 }' "$work/runs" | sort -u); do
	base=$(awk -v n="$n" '$2 == "base" && $3 == n { print $4 }' "$work/runs" | median)
	head=$(awk -v n="$n" '$2 == "head" && $3 == n { print $4 }' "$work/runs" | median)
	ratio=$(awk -v n="$n" '$3 == n { t[$1, $2] = $4; r[$1] = 1 }
		END { for (i in r) if (t[i, "base"] > 0 && t[i, "head"] != "") print t[i, "head"] / t[i, "base"] }' "$work/runs" | median)
	faster=$(awk -v n="$n" '$3 == n { t[$1, $2] = $4; r[$1] = 1 }
		END { k = 0; m = 0; for (i in r) if (t[i, "base"] != "" && t[i, "head"] != "") { m++; if (t[i, "head"] < t[i, "base"]) k++ }; print k "/" m }' "$work/runs")
	# A benchmark one build lacks shows "-" for it.
	printf '%-36s %10s %10s %7s %8s\n' "$n" "$(num "$base" 1)" "$(num "$head" 1)" "$(num "$ratio" 3)" "$faster"
done

echo
printf '%-36s %14s %14s  (ns beyond MD5Only64Batched, median of rounds)\n' benchmark "$rev" HEAD
for n in $(awk '$3 != "MD5Only64Batched" { print $3 }' "$work/runs" | sort -u); do
	for b in base head; do
		awk -v n="$n" -v b="$b" '$2 == b { t[$1, $3] = $4; r[$1] = 1 }
			END { for (i in r) if (t[i, n] != "" && t[i, "MD5Only64Batched"] != "") print t[i, n] - t[i, "MD5Only64Batched"] }' "$work/runs" | median
	done | paste -sd' ' | awk -v n="$n" '{ printf "%-36s %14s %14s\n", n, ($1 == "-" ? "-" : sprintf("%.1f", $1)), ($2 == "-" ? "-" : sprintf("%.1f", $2)) }'
done
