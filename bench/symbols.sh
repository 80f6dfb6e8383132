#!/usr/bin/env bash
# bench/symbols.sh BUILD: symbolization and one-shot dump benchmarks
# (part of make bench).
#
# 1. First-time cost per distinct address and cached lookup cost of the
#    symbolizer (bench/symbench.c), on a large running program: gdb, which
#    maps a large executable, libstdc++, libpython and libc.
# 2. `cprof-attach --dump` against `eu-stack -p` on a 20-thread process and
#    on gdb, interleaved, medians and the ratio; this is also the time from
#    attach to the first sample (attach, stop, copy, name).
# Goals: <= 50 us per distinct address, <= 100 ns cached, dump faster than
# eu-stack.
set -euo pipefail
BUILD=${1:-build}
[[ ${QUICK:-0} == 1 ]] && REPS=${REPS:-3} # make bench QUICK=1
REPS=${REPS:-7}
CC=${CC:-cc}
mkdir -p "$BUILD/bench"
# shellcheck disable=SC2046
$CC -std=gnu11 -O2 -Iinclude -o "$BUILD/bench/symbench" bench/symbench.c \
	"$BUILD/libcprof.a" $(pkg-config --libs libdw libelf libunwind-ptrace \
	libunwind-generic libprotobuf-c zlib) -liberty -pthread
$CC -std=gnu11 -O2 -pthread -o "$BUILD/bench/workload-O2" bench/workload.c 2>/dev/null || true

pids=()
# SIGKILL: gdb ignores SIGTERM while it runs a shell command.
cleanup() {
	for p in "${pids[@]}"; do
		pkill -KILL -P "$p" 2>/dev/null || true
		kill -KILL "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
}
trap cleanup EXIT

median() { sort -g | awk '{v[NR]=$1} END {if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }
now() { date +%s.%N; }

gdb -nx -batch -ex 'shell sleep 600' >/dev/null 2>&1 &
pids+=($!)
gdb_pid=
for _ in $(seq 100); do
	gdb_pid=$(pgrep -n -x gdb -P "${pids[0]}" 2>/dev/null || pgrep -n -x gdb || true)
	[[ -n $gdb_pid ]] && grep -q libc.so /proc/"$gdb_pid"/maps 2>/dev/null && break
	sleep 0.05
done
echo "== 5. symbolization on gdb (pid $gdb_pid; load average $(cut -d' ' -f1-3 /proc/loadavg)) =="
first=(); cached=()
for _ in 1 2 3; do
	out=$("$BUILD/bench/symbench" "$gdb_pid" 20000)
	first+=("$(awk '/^first_us/ {print $2}' <<<"$out")")
	cached+=("$(awk '/^cached_ns/ {print $2}' <<<"$out")")
done
first_med=$(printf '%s\n' "${first[@]}" | median)
cached_med=$(printf '%s\n' "${cached[@]}" | median)
echo "$(awk '/^addresses/' <<<"$out")"
echo "first lookup per distinct address: median ${first_med} us (runs: ${first[*]}); goal <= 50 us"
echo "cached lookup: median ${cached_med} ns (runs: ${cached[*]}); goal <= 100 ns"

# The 20-thread target sleeps (--dump is about where threads are, and 20
# busy threads on a small machine would only measure the CPU queue).
"$BUILD/bench/workload-O2" --forever --threads 20 --depth 10 --sleep >/dev/null 2>&1 &
pids+=($!)
work_pid=$!
sleep 0.5

echo
echo "== 6. one-shot dump vs eu-stack -p ($REPS interleaved runs; the time from attach to a named stack) =="
# Same work on both sides: names only, then names + inlined frames +
# source positions.
compare() { # PID WHAT OURS_ARGS THEIRS_ARGS
	local pid=$1 what=$2 ours_args=$3 theirs_args=$4 ours=() theirs=() i t0 o t
	for i in $(seq "$REPS"); do
		for side in a b; do
			# alternate which tool goes first
			local tool=$side
			(( i % 2 )) || tool=$([[ $side == a ]] && echo b || echo a)
			t0=$(now)
			if [[ $tool == a ]]; then
				# shellcheck disable=SC2086
				"$BUILD/cprof-attach" --dump --no-debuginfod $ours_args "$pid" >/dev/null
				ours+=("$(echo "$(now) - $t0" | bc -l)")
			else
				# shellcheck disable=SC2086
				eu-stack $theirs_args -p "$pid" >/dev/null 2>&1 || true
				theirs+=("$(echo "$(now) - $t0" | bc -l)")
			fi
		done
	done
	o=$(printf '%s\n' "${ours[@]}" | median); t=$(printf '%s\n' "${theirs[@]}" | median)
	printf '%-28s cprof-attach --dump %-16s %7.1f ms   eu-stack %-6s -p %7.1f ms   ratio %.2f (goal < 1)\n' \
		"$what:" "$ours_args" "$(echo "$o*1000" | bc -l)" "$theirs_args" "$(echo "$t*1000" | bc -l)" "$(echo "$o/$t" | bc -l)"
}
compare "$work_pid" "20-thread workload" "--no-inline" ""
compare "$work_pid" "20-thread workload" "--lines" "-i -s"
compare "$gdb_pid" "gdb" "--no-inline" ""
compare "$gdb_pid" "gdb" "--lines" "-i -s"
