#!/usr/bin/env bash
# instructions.sh counts the instructions an engine benchmark executes per
# message, function by function, under valgrind's cachegrind: a figure
# that a busy or noisy machine does not move, for comparing two builds
# where timings cannot be trusted. The counts are not times (under
# valgrind the processor's features, and with them some code paths,
# differ, and the garbage collector marks for longer), but a change that
# removes work shows as fewer instructions.
#
# Usage, from the repository's root:
#
#   bench/instructions.sh [benchmark] [rev]
#
# benchmark is a regular expression for -test.bench (by default
# 'Engine64UnreliableBurst32$'). With rev, the same benchmark is counted
# for that revision too, built from a temporary worktree, and the
# functions whose counts differ are listed side by side.
#
# It needs valgrind (apt-get install valgrind).
set -euo pipefail

bench=${1:-'Engine64UnreliableBurst32$'}
rev=${2:-}
small=100000
large=300000
work=$(mktemp -d)
trap 'rm -rf "$work"; if [[ -n "$rev" ]]; then git worktree remove --force "$work/base" 2>/dev/null || true; fi' EXIT

command -v valgrind >/dev/null || { echo "instructions.sh: valgrind is not installed" >&2; exit 1; }

# count builds ./fastnet's test binary in dir and writes the instructions
# per message of each function to out: those of a run of large messages
# less those of a run of small, divided by the difference.
count() {
	local dir=$1 out=$2
	(cd "$dir" && go test -c -o "$work/t.test" ./fastnet/)
	for n in $small $large; do
		valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file="$work/cg.$n" \
			"$work/t.test" -test.run '^$' -test.bench "$bench" -test.benchtime "${n}x" -test.cpu 1 >/dev/null 2>&1
	done
	cg_diff "$work/cg.$small" "$work/cg.$large" >"$work/cg.diff" 2>/dev/null
	cg_annotate "$work/cg.diff" 2>/dev/null |
		grep -E '^ *-?[0-9,]+ \( *-?[0-9.]+%\) ' |
		sed -E 's/^ *(-?[0-9,]+) \( *-?[0-9.]+%\) +/\1 /; s/,//g' |
		awk -v n=$((large - small)) '{
			f = $2; k = split(f, a, ":"); f = a[k]
			sub(/github.com\/fastnet-engine\/fastnet\//, "", f)
			s[f] += $1
		} END { for (f in s) printf "%d %s\n", s[f] / n, f }' |
		grep -v '<counts' | sort -k2 >"$out"
}

count . "$work/head"
if [[ -z "$rev" ]]; then
	sort -rn "$work/head" | head -${TOP:-40}
	exit 0
fi
git worktree add -q --detach "$work/base" "$rev"
count "$work/base" "$work/base.counts"
printf '%8s %8s %6s  %s\n' "$rev" HEAD diff function
join -1 2 -2 2 -a1 -a2 -e0 -o 0,1.1,2.1 "$work/base.counts" "$work/head" |
	awk '{ d = $3 - $2; if (d * d >= 4 || $1 == "PROGRAM") printf "%8d %8d %+6d  %s\n", $2, $3, d, $1 }' |
	sort -k3 -n
