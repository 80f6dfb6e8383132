#!/usr/bin/env bash
# bench/compare.sh OLD_BUILD NEW_BUILD: two builds of cprof-attach side by
# side, interleaved (old, new, old, new, ...), as ratios new/old of counts
# a noisy machine cannot move much: cprof-attach's own CPU time and system
# calls per sample (CPU mode at 999 Hz, the workload of bench/run.sh at
# depth 30), per malloc+free pair (heap mode on fixtures/heap-pairs), and
# per --dump; and the target's median stopped time per sample.  For a
# refactoring: the figures of make bench, before and after, in one run.
#
# Build the old one with e.g.:
#   git worktree add /tmp/old <commit> && make -C /tmp/old BUILD=/tmp/old/build
# Environment: REPS [5] interleaved repetitions, RUN_SECONDS [3] per CPU run,
# PAIRS [100000] heap pairs per run.
# Exit status: 0 measured, 1 a run failed, 2 usage.
set -euo pipefail

if [[ $# -ne 2 ]]; then
	echo "usage: bash bench/compare.sh OLD_BUILD NEW_BUILD" >&2
	exit 2
fi
OLD=$1 NEW=$2
REPS=${REPS:-5}
RUN_SECONDS=${RUN_SECONDS:-3}
PAIRS=${PAIRS:-100000}
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TMP=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$TMP"' EXIT

for b in "$OLD" "$NEW"; do
	[[ -x $b/cprof-attach ]] || { echo "compare: $b/cprof-attach not found" >&2; exit 2; }
done
command -v perf >/dev/null || { echo "compare: needs perf (perf stat)" >&2; exit 2; }
WORKLOAD=$TMP/workload
gcc -std=gnu11 -O2 -g -fomit-frame-pointer -fasynchronous-unwind-tables -pthread \
	"$SRC/workload.c" -o "$WORKLOAD"
PAIRS_BIN=$NEW/fixtures/heap-pairs
[[ -x $PAIRS_BIN ]] || { echo "compare: $PAIRS_BIN not found (make fixtures)" >&2; exit 2; }

# perf stat of a command: "TASK_CLOCK_MS SYSCALLS" on stdout.
stat_of() {
	local out=$TMP/stat
	perf stat -x, -o "$out" -e task-clock,raw_syscalls:sys_enter -- "$@" \
		>"$TMP/cmd.out" 2>"$TMP/cmd.err" || return 1
	awk -F, '/task-clock/ { ms = $1 } /sys_enter/ { sc = $1 } END { print ms, sc }' "$out"
}

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }

declare -A VALUES
add() { VALUES[$1]+="$2 "; }

for ((rep = 1; rep <= REPS; rep++)); do
	for which in old new; do
		b=$OLD; [[ $which == new ]] && b=$NEW
		# CPU mode, 999 Hz, one busy thread at depth 30.
		"$WORKLOAD" --forever --threads 1 --depth 30 >"$TMP/ready" &
		wpid=$!
		for _ in $(seq 100); do grep -q ready "$TMP/ready" 2>/dev/null && break; sleep 0.05; done
		read -r ms sc < <(stat_of "$b/cprof-attach" -F 999 -d "$RUN_SECONDS" -o /dev/null "$wpid") ||
			{ cat "$TMP/cmd.err" >&2; exit 1; }
		samples=$(awk '/samples from/ { print $2; exit }' "$TMP/cmd.err")
		stopped=$(sed -n 's/.*stopped per sample: median \([0-9.]*\) us.*/\1/p' "$TMP/cmd.err")
		[[ -n $samples && $samples -gt 0 ]] || { cat "$TMP/cmd.err" >&2; exit 1; }
		add "$which.cpu_us" "$(awk -v m="$ms" -v n="$samples" 'BEGIN { print m * 1000 / n }')"
		add "$which.sys" "$(awk -v s="$sc" -v n="$samples" 'BEGIN { print s / n }')"
		add "$which.stopped" "${stopped:-0}"
		# --dump of the same workload.
		read -r ms sc < <(stat_of "$b/cprof-attach" --dump -o /dev/null "$wpid") ||
			{ cat "$TMP/cmd.err" >&2; exit 1; }
		add "$which.dump_ms" "$ms"
		kill "$wpid"; wait "$wpid" 2>/dev/null || true
		# Heap mode: PAIRS malloc+free pairs at depth 30, launched.
		read -r ms sc < <(stat_of "$b/cprof-attach" --heap -q -o /dev/null -- "$PAIRS_BIN" "$PAIRS" 30) ||
			{ cat "$TMP/cmd.err" >&2; exit 1; }
		add "$which.heap_us" "$(awk -v m="$ms" -v n="$PAIRS" 'BEGIN { print m * 1000 / n }')"
		add "$which.heap_sys" "$(awk -v s="$sc" -v n="$PAIRS" 'BEGIN { print s / n }')"
	done
done

printf '%-44s %12s %12s %8s\n' "median of $REPS interleaved runs" old new new/old
row() {
	local o n
	o=$(tr ' ' '\n' <<<"${VALUES[old.$1]}" | grep . | median)
	n=$(tr ' ' '\n' <<<"${VALUES[new.$1]}" | grep . | median)
	printf '%-44s %12.2f %12.2f %8.2f\n' "$2" "$o" "$n" "$(awk -v o="$o" -v n="$n" 'BEGIN { print (o > 0 ? n / o : 0) }')"
}
row cpu_us "cprof CPU per sample, us (999 Hz)"
row sys "cprof system calls per sample"
row stopped "target stopped per sample, median us"
row dump_ms "--dump, cprof CPU ms"
row heap_us "heap: cprof CPU per malloc+free pair, us"
row heap_sys "heap: system calls per pair"
