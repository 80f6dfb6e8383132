#!/usr/bin/env bash
# bench/run.sh BUILD: the cprof benchmarks (make bench).  See bench/README.md.
#
# Builds bench/workload.c and bench/ptrace_floor.c into BUILD/bench/, then
# measures BUILD/cprof-attach: the time a target thread stays stopped per
# sample (against the bare ptrace round trip), the wall-clock slowdown of a
# fixed amount of work (against perf record), the share of ticks taken at
# 999 Hz and the tracer's peak RSS.  Prints a report and a goal table.
#
# Exit status: 0 every measurement ran (goals met or not), 1 a measurement
# failed (cprof-attach or the workload failed, wrong sums), 2 usage.
# Missing reference tools (perf, /usr/bin/time) are skipped, never fatal.
set -euo pipefail

if [[ $# -gt 1 || ${1:-} == -h || ${1:-} == --help ]]; then
	cat <<'EOF'
Usage: bash bench/run.sh [BUILD]   (default BUILD: build)
Environment (defaults in brackets):
  REPS [7]            repetitions of the slowdown runs (all configs each)
  STOP_REPS [2]       repetitions of the stopped-time runs
  STOP_SECONDS [5]    length of one stopped-time run
  WORK_SECONDS [3]    unprofiled length of the fixed-work run
  WORK [auto]         work units instead of calibrating to WORK_SECONDS
  SLOWDOWN_THREADS [1]  thread counts of the slowdown runs, e.g. "1 2"
  DEPTH [30]          recursion depth of the workload
  MANY_THREADS [8]    threads of the many-thread runs
  RSS_SECONDS [60]    length of the RSS run
  FLOOR_COUNT [2000]  ptrace round trips per floor measurement
  VARIANT [O2]        workload build: O2 (CFI only) or O0 (frame pointers)
  QUICK [0]           1: REPS=3 STOP_REPS=1 STOP_SECONDS=3 WORK_SECONDS=2 RSS_SECONDS=10
EOF
	[[ ${1:-} == -h || ${1:-} == --help ]] && exit 0
	exit 2
fi

BUILD=${1:-build}
# QUICK=1 (make bench QUICK=1): a short look, the README's quick settings
if [[ ${QUICK:-0} == 1 ]]; then
	REPS=${REPS:-3} STOP_REPS=${STOP_REPS:-1} RSS_SECONDS=${RSS_SECONDS:-10}
	STOP_SECONDS=${STOP_SECONDS:-3} WORK_SECONDS=${WORK_SECONDS:-2}
fi
REPS=${REPS:-7}
STOP_REPS=${STOP_REPS:-2}
STOP_SECONDS=${STOP_SECONDS:-5}
WORK_SECONDS=${WORK_SECONDS:-3}
WORK=${WORK:-auto}
SLOWDOWN_THREADS=${SLOWDOWN_THREADS:-1}
DEPTH=${DEPTH:-30}
MANY_THREADS=${MANY_THREADS:-8}
RSS_SECONDS=${RSS_SECONDS:-60}
FLOOR_COUNT=${FLOOR_COUNT:-2000}
VARIANT=${VARIANT:-O2}
CC=${CC:-gcc}

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CPROF=$BUILD/cprof-attach
OUT=$BUILD/bench
WORKLOAD=$OUT/workload-$VARIANT
FLOOR=$OUT/ptrace_floor
FAILURES=0

die() { echo "bench: $*" >&2; exit 1; }
note_failure() { echo "  FAILED: $*"; FAILURES=$((FAILURES + 1)); }

[[ -x $CPROF ]] || die "$CPROF not found: build it first (make), or give the build directory as \$1"
[[ $VARIANT == O2 || $VARIANT == O0 ]] || die "VARIANT must be O2 or O0, not '$VARIANT'"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/cprof-bench.XXXXXX")
RES=$TMP/results
mkdir -p "$RES"

# ---- processes: every child we start is tracked, killed and reaped ---------

TRACKED=()

untrack() {
	local keep=() p
	for p in "${TRACKED[@]}"; do
		[[ $p == "$1" ]] || keep+=("$p")
	done
	TRACKED=("${keep[@]}")
}

is_zombie_or_gone() {
	local stat
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
	stat=${stat##*) }
	[[ ${stat:0:1} == Z ]]
}

# SIGTERM first (cprof-attach detaches cleanly on it, perf writes its
# file), SIGKILL after 2 s, then reap.
stop_pid() {
	local pid=$1 i
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < 40; i++)); do
		is_zombie_or_gone "$pid" && break
		sleep 0.05
	done
	kill -KILL "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	untrack "$pid"
}

# shellcheck disable=SC2317  # called from the EXIT trap
cleanup() {
	local p
	for p in "${TRACKED[@]}"; do
		stop_pid "$p"
	done
	rm -rf "$TMP"
}
# The trap may run inside a function whose stderr is redirected to a file
# (run_tracked ... 2>"$err"), so it writes to a copy of the real stderr.
exec {REAL_STDERR}>&2
trap cleanup EXIT
trap 'echo "bench: interrupted" >&$REAL_STDERR; exit 130' INT TERM HUP

# Run "$@" in the background and wait for it, so a signal to this script
# is handled at once (cleanup stops the command).  Returns its status.
run_tracked() {
	"$@" &
	local pid=$! rc=0
	TRACKED+=("$pid")
	wait "$pid" || rc=$?
	untrack "$pid"
	return "$rc"
}

# Start a --forever workload with THREADS threads; wait for its "ready"
# through a pipe.  Sets FOREVER_PID.
start_forever() {
	local fifo=$TMP/ready.fifo line=""
	rm -f "$fifo"
	mkfifo "$fifo"
	"$WORKLOAD" --forever --threads "$1" --depth "$DEPTH" >"$fifo" &
	FOREVER_PID=$!
	TRACKED+=("$FOREVER_PID")
	exec {READY_FD}<"$fifo"
	read -r -t 10 -u "$READY_FD" line || true
	exec {READY_FD}<&-
	[[ $line == ready ]] || die "workload --forever --threads $1 did not say ready"
}

stop_forever() {
	stop_pid "$FOREVER_PID"
}

# ---- numbers ----------------------------------------------------------------

record() { echo "$2" >>"$RES/$1"; }

# Median of the values recorded under KEY ("nan" if none).
median_of() {
	[[ -s $RES/$1 ]] || { echo nan; return; }
	sort -g "$RES/$1" | awk '{ v[NR] = $1 }
		END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# Smallest value recorded under KEY ("nan" if none).
min_of() {
	[[ -s $RES/$1 ]] || { echo nan; return; }
	sort -g "$RES/$1" | head -n1
}

# calc EXPR [VARS...]: awk arithmetic; any "nan" operand gives "nan".
calc() {
	local expr=$1 a
	shift
	for a in "$@"; do
		[[ $a == nan || -z $a ]] && { echo nan; return; }
	done
	awk -v a="${1:-0}" -v b="${2:-0}" -v c="${3:-0}" "BEGIN { x = $expr; print x }"
}

# shellcheck disable=SC2059  # the format is the point
fmt() { # fmt PRINTF_FORMAT VALUE: "n/a" for nan
	if [[ $2 == nan || -z $2 ]]; then echo n/a; else LC_ALL=C printf "$1" "$2"; fi
}

# met VALUE OP GOAL -> yes / no / n/a
met() {
	[[ $1 == nan || -z $1 || $3 == nan ]] && { echo n/a; return; }
	awk -v a="$1" -v b="$3" -v op="$2" 'BEGIN {
		ok = op == "<=" ? a <= b : a >= b; print ok ? "yes" : "no" }'
}

# ---- build ------------------------------------------------------------------

mkdir -p "$OUT"
WARN=(-std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Werror)
"$CC" "${WARN[@]}" -g -O2 -fomit-frame-pointer -fasynchronous-unwind-tables -pthread \
	"$SRC/workload.c" -o "$OUT/workload-O2"
"$CC" "${WARN[@]}" -g -O0 -fno-omit-frame-pointer -pthread \
	"$SRC/workload.c" -o "$OUT/workload-O0"
"$CC" "${WARN[@]}" -g -O2 "$SRC/ptrace_floor.c" -o "$FLOOR"

# ---- reference tools ----------------------------------------------------------

PERF_OK=0
PERF_NOTE=""
if ! command -v perf >/dev/null 2>&1; then
	PERF_NOTE="perf not installed: skipped"
elif ! perf record -q -e cpu-clock -o "$TMP/probe.data" -- true >/dev/null 2>&1; then
	PERF_NOTE="perf record -e cpu-clock does not work here (perf_event_paranoid=$(cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null || echo ?)): skipped"
else
	PERF_OK=1
fi
TIME_BIN=""
[[ -x /usr/bin/time ]] && /usr/bin/time -f %M -o "$TMP/probe.time" true 2>/dev/null && TIME_BIN=/usr/bin/time

echo "cprof benchmarks: $CPROF ($("$CPROF" --version 2>/dev/null | head -n1 || echo '?'))"
echo "machine: $(nproc) CPUs, Linux $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg) at start"
echo "workload: $WORKLOAD, depth $DEPTH"
[[ -n $PERF_NOTE ]] && echo "$PERF_NOTE"
SECONDS=0

# ---- 1. target stopped time per sample ----------------------------------------

echo
echo "== 1. target stopped per sample (cprof-attach's own figures; $STOP_REPS runs of $STOP_SECONDS s each, medians over runs) =="

# One cprof-attach run on FOREVER_PID; records median, p99, ticks taken.
measure_stop() { # THREADS HZ MODE
	local key=$1.$2.$3 err=$TMP/stop.err line median p99 missed
	if ! run_tracked "$CPROF" -d "$STOP_SECONDS" -F "$2" --unwind "$3" -o /dev/null \
		"$FOREVER_PID" 2>"$err"; then
		note_failure "cprof-attach -F $2 --unwind $3 on $1 threads: $(tail -n1 "$err")"
		return 0
	fi
	line=$(grep 'target stopped per sample:' "$err" || true)
	median=$(sed -n 's/.*median \([0-9.]*\) us, p99 \([0-9.]*\) us.*/\1/p' <<<"$line")
	p99=$(sed -n 's/.*median \([0-9.]*\) us, p99 \([0-9.]*\) us.*/\2/p' <<<"$line")
	missed=$(sed -n 's/.*ticks missed (\([0-9.]*\)%).*/\1/p' "$err")
	if [[ -z $median || -z $p99 || -z $missed ]]; then
		note_failure "no summary from cprof-attach -F $2 --unwind $3: $(tail -n1 "$err")"
		return 0
	fi
	record "stop_med.$key" "$median"
	record "stop_p99.$key" "$p99"
	record "taken.$key" "$(calc '100 - a' "$missed")"
}

STOP_CONFIGS=("99 snapshot" "99 ptrace" "999 snapshot" "999 ptrace")
for ((rep = 0; rep < STOP_REPS; rep++)); do
	for threads in 1 "$MANY_THREADS"; do
		start_forever "$threads"
		if [[ $threads == 1 ]]; then
			if "$FLOOR" "$FOREVER_PID" "$FLOOR_COUNT" 1000 >"$TMP/floor.out" 2>"$TMP/floor.err"; then
				record floor_med "$(awk '/^round_trip_us/ { print $3 }' "$TMP/floor.out")"
				record floor_p99 "$(awk '/^round_trip_us/ { print $5 }' "$TMP/floor.out")"
			else
				note_failure "ptrace_floor: $(tail -n1 "$TMP/floor.err")"
			fi
		fi
		# Rotate the order from one repetition to the next, so slow drift
		# of the machine does not always favour the same configuration.
		for ((k = 0; k < ${#STOP_CONFIGS[@]}; k++)); do
			read -r hz mode <<<"${STOP_CONFIGS[(rep + k) % ${#STOP_CONFIGS[@]}]}"
			measure_stop "$threads" "$hz" "$mode"
		done
		stop_forever
	done
done

FLOOR_MED=$(median_of floor_med)
FLOOR_P99=$(median_of floor_p99)
echo "floor: bare PTRACE_INTERRUPT + waitpid + PTRACE_CONT on a busy thread ($FLOOR_COUNT round trips, 1 ms apart):"
echo "       median $(fmt %.1f "$FLOOR_MED") us, p99 $(fmt %.1f "$FLOOR_P99") us"
echo
printf '%-8s %-7s %-9s %11s %11s %13s %15s %9s\n' \
	threads Hz unwind "median us" "p99 us" "median/floor" "ptrace/snapshot" "taken %"
for threads in 1 "$MANY_THREADS"; do
	for hz in 99 999; do
		for mode in snapshot ptrace; do
			key=$threads.$hz.$mode
			med=$(median_of "stop_med.$key")
			p99=$(median_of "stop_p99.$key")
			vs_floor=$(calc 'a / b' "$med" "$FLOOR_MED")
			if [[ $mode == ptrace ]]; then
				ratio=$(calc 'a / b' "$med" "$(median_of "stop_med.$threads.$hz.snapshot")")
				ratio=$(fmt %.2fx "$ratio")
			else
				ratio=""
			fi
			printf '%-8s %-7s %-9s %11s %11s %13s %15s %9s\n' "$threads" "$hz" "$mode" \
				"$(fmt %.1f "$med")" "$(fmt %.1f "$p99")" "$(fmt %.2fx "$vs_floor")" \
				"$ratio" "$(fmt %.1f "$(median_of "taken.$key")")"
		done
	done
done
echo "(depth $DEPTH; $MANY_THREADS threads share $(nproc) CPUs, so most of them wait for a CPU at any moment)"

# ---- 2. wall-clock slowdown of fixed work ------------------------------------

echo
echo "== 2. wall-clock slowdown of fixed work (workload's own elapsed_ns; $REPS interleaved repetitions) =="

if [[ $WORK == auto ]]; then
	# Calibrate: the fastest of three short runs is the least disturbed.
	best=""
	for _ in 1 2 3; do
		ns=$("$WORKLOAD" --depth "$DEPTH" --work 200 | awk '/^elapsed_ns/ { print $2 }')
		[[ -z $best || $ns -lt $best ]] && best=$ns
	done
	WORK=$(calc 'int(a * 1e9 * 200 / b + 0.5)' "$WORK_SECONDS" "$best")
fi
echo "work: $WORK units per thread (about $WORK_SECONDS s unprofiled)"

CONFIG_NAMES=("unprofiled" "cprof 99 Hz" "cprof 999 Hz" "perf 99 Hz" "perf 999 Hz")

# Run configuration CONFIG with THREADS threads; record its elapsed_ns.
run_config() { # CONFIG THREADS
	local args=(--threads "$2" --depth "$DEPTH" --work "$WORK") out=$TMP/run.out err=$TMP/run.err
	local rc=0 ns
	case $1 in
	0) run_tracked "$WORKLOAD" "${args[@]}" >"$out" 2>"$err" || rc=$? ;;
	1) run_tracked "$CPROF" -q -F 99 -o /dev/null -- "$WORKLOAD" "${args[@]}" >"$out" 2>"$err" || rc=$? ;;
	2) run_tracked "$CPROF" -q -F 999 -o /dev/null -- "$WORKLOAD" "${args[@]}" >"$out" 2>"$err" || rc=$? ;;
	3 | 4)
		[[ $PERF_OK == 1 ]] || return 0
		rm -f "$TMP/perf.data" "$TMP/perf.data.old"
		local hz=99
		[[ $1 == 4 ]] && hz=999
		# perf's own messages go to the error file, which is only shown
		# on a failure; the workload's stdout passes through.
		run_tracked perf record -F "$hz" -g -e cpu-clock -o "$TMP/perf.data" -- \
			"$WORKLOAD" "${args[@]}" >"$out" 2>"$err" || rc=$?
		;;
	esac
	ns=$(awk '/^elapsed_ns/ { print $2 }' "$out")
	if [[ $rc != 0 || -z $ns ]] || grep -q '^FAIL' "$err"; then
		note_failure "${CONFIG_NAMES[$1]}, $2 threads (exit $rc): $(grep -m1 -E 'FAIL|rror|cannot' "$err" || tail -n1 "$err")"
		return 0
	fi
	record "elapsed.$1.$2" "$ns"
}

for threads in $SLOWDOWN_THREADS; do
	for ((rep = 0; rep < REPS; rep++)); do
		for ((k = 0; k < 5; k++)); do
			run_config $(((rep + k) % 5)) "$threads"
		done
	done
done

for threads in $SLOWDOWN_THREADS; do
	base=$(median_of "elapsed.0.$threads")
	spread=$(sort -g "$RES/elapsed.0.$threads" 2>/dev/null |
		awk -v m="$base" 'NR == 1 { lo = $1 } { hi = $1 } END { if (NR) print 100 * (hi - lo) / m; else print "nan" }')
	record "spread.$threads" "$spread"
	echo
	echo "$threads thread(s), depth $DEPTH: unprofiled runs spread $(fmt %.1f "$spread") % of their median (noise level);"
	echo "the fastest run of each config is the least disturbed by other load on the machine"
	printf '%-14s %10s %10s %14s   %10s %10s\n' config "median s" slowdown cprof/perf \
		"fastest s" slowdown
	for c in 0 1 2 3 4; do
		med=$(median_of "elapsed.$c.$threads")
		slow=$(calc '100 * (a / b - 1)' "$med" "$base")
		record "slowdown.$c.$threads" "$slow"
		vs=""
		if [[ $c == 1 || $c == 2 ]]; then
			perf_slow=$(calc '100 * (a / b - 1)' "$(median_of "elapsed.$((c + 2)).$threads")" "$base")
			if [[ $perf_slow == nan ]]; then
				vs="n/a"
			elif awk -v p="$perf_slow" 'BEGIN { exit !(p <= 0.05) }'; then
				vs="n/a (perf ~0)"
			else
				vs=$(fmt %.2fx "$(calc 'a / b' "$slow" "$perf_slow")")
			fi
		fi
		if [[ $c == 0 ]]; then
			slow_text="(base)"
		else
			slow_text=$(fmt %+.2f%% "$slow")
		fi
		fastest=$(min_of "elapsed.$c.$threads")
		if [[ $c == 0 ]]; then
			fast_text="(base)"
		else
			fast_text=$(fmt %+.2f%% "$(calc '100 * (a / b - 1)' "$fastest" "$(min_of "elapsed.0.$threads")")")
		fi
		if [[ $c -ge 3 && $PERF_OK != 1 ]]; then
			printf '%-14s %10s\n' "${CONFIG_NAMES[$c]}" skipped
			continue
		fi
		printf '%-14s %10s %10s %14s   %10s %10s\n' "${CONFIG_NAMES[$c]}" \
			"$(fmt %.3f "$(calc 'a / 1e9' "$med")")" "$slow_text" "$vs" \
			"$(fmt %.3f "$(calc 'a / 1e9' "$fastest")")" "$fast_text"
	done
done

# ---- 3. ticks taken at 999 Hz --------------------------------------------------

echo
echo "== 3. ticks taken at 999 Hz (from the runs of section 1, snapshot unwinding) =="
for threads in 1 "$MANY_THREADS"; do
	echo "$threads thread(s): $(fmt %.1f "$(median_of "taken.$threads.999.snapshot")") % taken (median over $STOP_REPS runs; 100 - missed %)"
done

# ---- 4. tracer RSS ---------------------------------------------------------------

echo
echo "== 4. tracer peak RSS: cprof-attach -F 999 for $RSS_SECONDS s on $MANY_THREADS busy threads =="
start_forever "$MANY_THREADS"
RSS_KB=nan
RSS_HOW=""
if [[ -n $TIME_BIN ]]; then
	if run_tracked "$TIME_BIN" -f %M -o "$TMP/rss.time" "$CPROF" -F 999 -d "$RSS_SECONDS" \
		-o /dev/null "$FOREVER_PID" 2>"$TMP/rss.err"; then
		RSS_KB=$(tail -n1 "$TMP/rss.time")
		RSS_HOW="/usr/bin/time %M"
	else
		note_failure "cprof-attach RSS run: $(tail -n1 "$TMP/rss.err")"
	fi
else
	# No /usr/bin/time: poll the tracer's VmHWM (a high-water mark, so the
	# last reading is the peak, up to the last 0.2 s before it exited).
	"$CPROF" -F 999 -d "$RSS_SECONDS" -o /dev/null "$FOREVER_PID" 2>"$TMP/rss.err" &
	tracer=$!
	TRACKED+=("$tracer")
	while hwm=$(awk '/^VmHWM:/ { print $2 }' "/proc/$tracer/status" 2>/dev/null) && [[ -n $hwm ]]; do
		RSS_KB=$hwm
		sleep 0.2
	done
	rc=0
	wait "$tracer" || rc=$?
	untrack "$tracer"
	[[ $rc == 0 ]] || { note_failure "cprof-attach RSS run: $(tail -n1 "$TMP/rss.err")"; RSS_KB=nan; }
	RSS_HOW="polled /proc/PID/status VmHWM (/usr/bin/time not installed)"
fi
stop_forever
RSS_MB=$(calc 'a / 1024' "$RSS_KB")
echo "peak RSS $(fmt %.1f "$RSS_MB") MB = $(fmt %.2f "$(calc 'a / 10' "$RSS_MB")") x the 10 MB goal ($RSS_HOW)"
grep -h 'samples from' "$TMP/rss.err" 2>/dev/null | sed 's/^/  /' || true

# ---- summary ----------------------------------------------------------------------

echo
echo "== summary ($SECONDS s; load average $(cut -d' ' -f1-3 /proc/loadavg) at the end) =="
printf '%-46s %20s %10s %5s\n' metric measured goal met
row() { printf '%-46s %20s %10s %5s\n' "$1" "$2" "$3" "$4"; }

for hz in 99 999; do
	v=$(median_of "stop_med.1.$hz.snapshot")
	row "median stop, 1 thread, depth $DEPTH, $hz Hz" "$(fmt '%.1f us' "$v")" "<= 15 us" "$(met "$v" '<=' 15)"
done
t1=${SLOWDOWN_THREADS%% *}
s99=$(median_of "slowdown.1.$t1")
s999=$(median_of "slowdown.2.$t1")
row "slowdown, cprof 99 Hz ($t1 thread)" "$(fmt '%+.2f %%' "$s99")" "<= 0.5 %" "$(met "$s99" '<=' 0.5)"
row "slowdown, cprof 999 Hz ($t1 thread)" "$(fmt '%+.2f %%' "$s999")" "<= 3 %" "$(met "$s999" '<=' 3)"
for c in 1 2; do
	hz=99
	[[ $c == 2 ]] && hz=999
	if [[ $PERF_OK == 1 ]]; then
		p=$(median_of "slowdown.$((c + 2)).$t1")
		s=$(median_of "slowdown.$c.$t1")
		row "slowdown, cprof vs perf at $hz Hz" "$(fmt '%+.2f' "$s") vs $(fmt '%+.2f' "$p")" "<= perf" "$(met "$s" '<=' "$p")"
	else
		row "slowdown, cprof vs perf at $hz Hz" skipped "<= perf" n/a
	fi
done
for threads in 1 "$MANY_THREADS"; do
	v=$(median_of "taken.$threads.999.snapshot")
	row "ticks taken, 999 Hz, $threads thread(s)" "$(fmt '%.1f %%' "$v")" ">= 99.5 %" "$(met "$v" '>=' 99.5)"
done
row "tracer RSS, 999 Hz, $MANY_THREADS threads, $RSS_SECONDS s" "$(fmt '%.1f MB' "$RSS_MB")" "<= 10 MB" "$(met "$RSS_MB" '<=' 10)"
echo "(slowdown rows: the unprofiled runs spread $(fmt %.1f "$(median_of "spread.$t1")") % of their median;" \
	"a goal nearer than that is within the noise)"

if ((FAILURES > 0)); then
	echo
	echo "bench: $FAILURES measurement(s) failed; see FAILED lines above" >&2
	exit 1
fi
exit 0
