#!/usr/bin/env bash
# bench/cost.sh [BUILD]: issue 15's goals, each figure beside a reference
# measured in the same invocation (part of make bench).  See
# bench/README.md, "Cost at the ptrace floor: cost.sh".
#
#   1. cprof-attach's own CPU, system calls and context switches per
#      sample (perf stat of cprof-attach -v, 1 busy thread at depth 30,
#      999 Hz) against bench/ptrace_floor's getregs round trip on the same
#      thread, on an idle machine and beside two busy loops;
#   2. ticks taken at 999 Hz with 1, 2 and 8 busy threads and at 99 Hz
#      --wall with 64 and 256 threads (bench/mixthreads.c);
#   3. heap mode per malloc+free pair at depth 30 (fixtures/heap-pairs)
#      against perf uprobes on malloc/free with -g, heaptrack and ltrace,
#      and throughput with 1, 2, 4 allocating threads (fixtures/heap-threads);
#   4. the target's slowdown at 999 and 99 Hz against perf record -g at
#      the same rate (bench/run.sh's method: the workload's own elapsed_ns);
#   5. the worker's RSS at start (bench/rss_start.sh if present) and bytes
#      per distinct stack (bench/stackchurn.c under cprof-attach: RSS growth
#      over distinct stacks; bench/stackmem.c: malloc's count).
# Every tool and build runs interleaved with the others (rotated order per
# repetition); the tables give medians, their spread (min-max) and the load
# average.  BASE=DIR adds DIR/cprof-attach (an older build) to every
# measurement, with new/base ratios.
#
# Exit status: 0 every measurement ran (goals met or not), 1 a measurement
# failed, 2 usage.  A missing reference tool is reported and skipped.
set -uo pipefail
export LC_ALL=C

usage() {
	cat <<'EOF'
Usage: bash bench/cost.sh [BUILD]   (default BUILD: build)
Environment (defaults in brackets; QUICK=1 gives a ~3 minute look):
  BASE [none]        a previous build directory: its cprof-attach measured too
  QUICK [0]          fewer and shorter runs
  GOALS ["1 2 3 4 5"] which goals to measure
  REPS [3]           repetitions of the sampling, heap and slowdown runs
  SECS [3]           length of one sampling run (goals 1, 2)
  FLOOR_COUNT [1000] ptrace_floor round trips (1 ms apart) per measurement
  PAIRS [20000]      malloc+free pairs per heap run (ltrace: ~300 us a pair)
  THREAD_PAIRS [40000] pairs of the 1, 2, 4-thread heap runs (in all)
  WORK_SECONDS [2]   unprofiled length of one slowdown run
  SLOW_REPS [5]      repetitions of the slowdown runs
  CHURN_SECONDS [20] length of the stackchurn run
  CLOCKCOST_HZ [10000] rate of bench/clockcost.c's samples (goal 4)
  CLOCKCOST_TOOL_REPS [7] repetitions of clockcost with the tools themselves (goal 4)
  CONFIGS [goal's]   sampling configurations: d30 d30busy b1 b2 b8 w64 w256,
                     also c999 c99 (chain-O0) m999 w99 (8 busy + 64 sleeping)
  EXTRA [none]       more cprof-attach options for the sampling runs
  OUT [BUILD/bench/cost]  raw results (runs/*.err, *.stat, values.tsv)
EOF
}
[[ ${1:-} == -h || ${1:-} == --help ]] && { usage; exit 0; }
[[ $# -gt 1 ]] && { usage >&2; exit 2; }

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BUILD=${1:-build}
BUILD=${BUILD%/}
BASE=${BASE:-}
BASE=${BASE%/}
QUICK=${QUICK:-0}
if [[ $QUICK == 1 ]]; then
	d_reps=2 d_secs=2 d_floor=500 d_pairs=5000 d_tpairs=10000 d_work=1 d_slow=3 d_churn=8
else
	d_reps=3 d_secs=3 d_floor=1000 d_pairs=20000 d_tpairs=40000 d_work=2 d_slow=5 d_churn=20
fi
GOALS=${GOALS:-1 2 3 4 5}
REPS=${REPS:-$d_reps}
SECS=${SECS:-$d_secs}
FLOOR_COUNT=${FLOOR_COUNT:-$d_floor}
PAIRS=${PAIRS:-$d_pairs}
THREAD_PAIRS=${THREAD_PAIRS:-$d_tpairs}
WORK_SECONDS=${WORK_SECONDS:-$d_work}
SLOW_REPS=${SLOW_REPS:-$d_slow}
CHURN_SECONDS=${CHURN_SECONDS:-$d_churn}
CLOCKCOST_HZ=${CLOCKCOST_HZ:-10000}
CLOCKCOST_TOOL_REPS=${CLOCKCOST_TOOL_REPS:-7}
OUT=${OUT:-$BUILD/bench/cost}
CC=${CC:-gcc}
FAILURES=0

die() { echo "cost.sh: $*" >&2; exit 2; }
note_failure() { echo "  FAILED: $*"; echo "$*" >>"$OUT/failures"; FAILURES=$((FAILURES + 1)); }

[[ -x $BUILD/cprof-attach ]] || die "$BUILD/cprof-attach not found: make BUILD=$BUILD first"
BUILDS=("new=$BUILD")
if [[ -n $BASE ]]; then
	[[ -x $BASE/cprof-attach ]] || die "BASE=$BASE: $BASE/cprof-attach not found"
	BUILDS+=("base=$BASE")
fi
command -v perf >/dev/null || die "perf is needed (perf stat counts the system calls and context switches)"

rm -rf "$OUT"
mkdir -p "$OUT/runs" "$OUT/tmp"
TMP=$OUT/tmp
VALUES=$OUT/values.tsv
: >"$VALUES"
record() { printf '%s\t%s\n' "$1" "$2" >>"$VALUES"; }

# ---- processes: everything started is tracked, killed and reaped -----------

TRACKED=()
PROBES=""
track() { TRACKED+=("$1"); }
stop_pid() {
	local pid=$1 i keep=() p
	kill -TERM "$pid" 2>/dev/null
	for ((i = 0; i < 40; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		[[ $(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null) == Z ]] && break
		sleep 0.05
	done
	kill -KILL "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	for p in "${TRACKED[@]}"; do [[ $p == "$pid" ]] || keep+=("$p"); done
	TRACKED=("${keep[@]}")
}
# shellcheck disable=SC2317  # the EXIT trap
cleanup() {
	local p
	for p in "${TRACKED[@]}"; do stop_pid "$p"; done
	[[ -n $PROBES ]] && perf probe -q -d "$PROBES:*" >/dev/null 2>&1
	rm -rf "$TMP"
}
exec {REAL_STDERR}>&2
trap cleanup EXIT
trap 'echo "cost.sh: interrupted" >&$REAL_STDERR; exit 130' INT TERM HUP

# Run a command in the background, wait for it (signals to this script are
# handled at once); returns its status.
run_tracked() {
	"$@" &
	local pid=$! rc=0
	track "$pid"
	wait "$pid" || rc=$?
	local keep=() p
	for p in "${TRACKED[@]}"; do [[ $p == "$pid" ]] || keep+=("$p"); done
	TRACKED=("${keep[@]}")
	return "$rc"
}

# Order of the builds (or tools) for repetition REP: rotated.
rotate() { # REP ITEMS... -> ROTATED
	local rep=$1 n i
	shift
	n=$#
	ROTATED=()
	local items=("$@")
	for ((i = 0; i < n; i++)); do ROTATED+=("${items[(i + rep) % n]}"); done
}

load() { cut -d' ' -f1 /proc/loadavg; }

# ---- helper programs ---------------------------------------------------------

mkdir -p "$BUILD/bench"
B=$BUILD/bench
WARN=(-std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Werror)
"$CC" "${WARN[@]}" -g -O2 -fomit-frame-pointer -fasynchronous-unwind-tables -pthread \
	"$SRC/workload.c" -o "$B/workload-O2" || die "cannot build workload.c"
"$CC" "${WARN[@]}" -g -O2 "$SRC/ptrace_floor.c" -o "$B/ptrace_floor" || die "cannot build ptrace_floor.c"
"$CC" "${WARN[@]}" -g -O2 -fno-omit-frame-pointer -pthread "$SRC/mixthreads.c" -o "$B/mixthreads" ||
	die "cannot build mixthreads.c"
"$CC" "${WARN[@]}" -g -O2 -fno-omit-frame-pointer -pthread "$SRC/heapbench.c" -o "$B/heapbench" ||
	die "cannot build heapbench.c"
HEAPBENCH=$B/heapbench
"$CC" "${WARN[@]}" -g -O2 "$SRC/ticker.c" -o "$B/ticker" || die "cannot build ticker.c"
HAVE_CLOCKCOST=0
[[ -f $SRC/clockcost.c ]] && "$CC" "${WARN[@]}" -g -O2 -fno-omit-frame-pointer -pthread \
	"$SRC/clockcost.c" -o "$B/clockcost" && HAVE_CLOCKCOST=1
HAVE_CHURN=0
[[ -f $SRC/stackchurn.c ]] && "$CC" -std=gnu11 -D_GNU_SOURCE -g -O2 -fno-omit-frame-pointer \
	"$SRC/stackchurn.c" -o "$B/stackchurn" && HAVE_CHURN=1
PKG_LIBS="$(pkg-config --libs libunwind-ptrace libunwind-generic libdw libelf libprotobuf-c zlib 2>/dev/null) -liberty"
# stackmem against each build's library (the profile code of that build).
# If bench/stackmem.c does not build against it (a newer stackmem.c that
# calls what an older library lacks), its first version (commit 61339a7:
# mallinfo2 only, the same count) is tried.  Sets STACKMEM_FROM.
build_stackmem() { # DIR NAME
	local src=$SRC/stackmem.c
	[[ -f $src && -f $1/libcprof.a ]] || return 1
	for try in 1 2; do
		if [[ $try == 2 ]]; then
			git -C "$SRC" show 61339a7:bench/stackmem.c >"$TMP/stackmem0.c" 2>/dev/null || return 1
			src=$TMP/stackmem0.c
		fi
		# shellcheck disable=SC2086  # PKG_LIBS is a list of flags
		"$CC" -std=gnu11 -D_GNU_SOURCE -O2 -I"$SRC/../include" -I"$SRC/../src" "$src" "$1/libcprof.a" \
			$PKG_LIBS -lpthread -o "$TMP/stackmem.$2" 2>"$TMP/stackmem.$2.err" &&
			{ STACKMEM_FROM=$src; return 0; }
	done
	return 1
}
WORKLOAD=$B/workload-O2
FLOOR=$B/ptrace_floor
MIX=$B/mixthreads

# The system call counts need the tracepoints: tracefs at its usual place
# (a fresh machine may not have it mounted; root mounts it).
if [[ ! -e /sys/kernel/tracing/events ]] && [[ $(id -u) == 0 ]]; then
	mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null &&
		echo "   mounted tracefs on /sys/kernel/tracing (for the system call counts)"
fi
EV=task-clock,context-switches,raw_syscalls:sys_enter
KINDS=(wait4 ppoll epoll_pwait2 ptrace read pread64 rt_sigprocmask process_vm_readv rt_sigtimedwait
	openat close futex clock_nanosleep write)
for k in "${KINDS[@]}"; do EV+=,syscalls:sys_enter_$k; done
if ! perf stat -x, -o "$TMP/probe.stat" -e "$EV" -- true >/dev/null 2>&1; then
	EV=task-clock,context-switches,raw_syscalls:sys_enter
	perf stat -x, -o "$TMP/probe.stat" -e "$EV" -- true >/dev/null 2>&1 ||
		die "perf stat -e $EV does not work here (perf_event_paranoid=$(cat /proc/sys/kernel/perf_event_paranoid))"
fi

# perf stat's value of EVENT in FILE (0 if absent).
stat_value() { awk -F, -v e="$2" '$3 == e && $1 ~ /^[0-9.]+$/ { v = $1 } END { print v + 0 }' "$1"; }

echo "== issue 15: cost at the ptrace floor =="
echo "builds: ${BUILDS[*]}"
for spec in "${BUILDS[@]}"; do
	echo "  ${spec%%=*}: $("${spec#*=}/cprof-attach" --version 2>/dev/null | head -n1)"
done
echo "machine: $(nproc) CPUs, Linux $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg) at start"
echo "goals: $GOALS; REPS=$REPS SECS=$SECS QUICK=$QUICK; raw results in $OUT"
SECONDS=0
record load.start "$(load)"

# ---- goals 1 and 2: sampling runs ---------------------------------------------

BUSY_PIDS=()
start_busy() {
	local i
	for i in 1 2; do
		sh -c 'while :; do :; done' &
		BUSY_PIDS+=($!)
		track $!
	done
}
stop_busy() {
	local p
	for p in "${BUSY_PIDS[@]}"; do stop_pid "$p"; done
	BUSY_PIDS=()
}

start_target() { # CONFIG -> TPID, BUSYTID, ARGS, FLOOR_GAP
	local cfg=$1 fifo=$TMP/ready.fifo line=""
	rm -f "$fifo"
	mkfifo "$fifo"
	case $cfg in
	d30 | d30busy) "$WORKLOAD" --forever --threads 1 --depth 30 >"$fifo" & ;;
	c999 | c99) "$BUILD/fixtures/chain-O0" 3600 >"$fifo" & ;;
	m999 | w99) "$MIX" 8 64 >"$fifo" & ;;
	b1) "$MIX" 1 0 >"$fifo" & ;;
	b2) "$MIX" 2 0 >"$fifo" & ;;
	b8) "$MIX" 8 0 >"$fifo" & ;;
	w64) "$MIX" 8 56 >"$fifo" & ;;
	w256) "$MIX" 8 248 >"$fifo" & ;;
	*) die "unknown configuration $cfg" ;;
	esac
	TPID=$!
	track "$TPID"
	exec {READY_FD}<"$fifo"
	# (the pipe stays open while the target runs: it may print again)
	case $cfg in
	c999 | c99) sleep 0.3 ;; # chain-O0 says nothing
	*)
		read -r -t 10 -u "$READY_FD" line
		[[ $line == ready ]] || note_failure "$cfg: the target did not say ready"
		;;
	esac
	[[ $cfg == d30busy ]] && start_busy
	sleep 0.2
	# The busy thread: the one with the most CPU time.
	BUSYTID=$(for t in /proc/"$TPID"/task/*; do
		echo "$(awk '{ print $14 + $15 }' "$t/stat" 2>/dev/null) ${t##*/}"
	done | sort -n | tail -1 | cut -d' ' -f2)
	FLOOR_GAP=1001
	case $cfg in
	c99) ARGS=(-F 99) FLOOR_GAP=10101 ;;
	w99 | w64 | w256) ARGS=(--wall -F 99) FLOOR_GAP=10101 ;;
	*) ARGS=(-F 999) ;;
	esac
}
stop_target() {
	stop_busy
	stop_pid "$TPID"
	exec {READY_FD}<&-
}

read -ra EXTRA_ARGS <<<"${EXTRA:-}"
sampling_runs() { # CONFIGS... ; FLOOR_CONFIGS: those with a floor measurement
	local rep cfg spec name b tag rc
	for ((rep = 1; rep <= REPS; rep++)); do
		for cfg in "$@"; do
			start_target "$cfg"
			rotate "$rep" "${BUILDS[@]}"
			for spec in "${ROTATED[@]}"; do
				name=${spec%%=*} b=${spec#*=}
				tag=$OUT/runs/$cfg.$name.$rep
				rc=0
				run_tracked perf stat -x, -o "$tag.stat" -e "$EV" -- \
					"$b/cprof-attach" -v "${EXTRA_ARGS[@]}" "${ARGS[@]}" -d "$SECS" -o /dev/null "$TPID" \
					>/dev/null 2>"$tag.err" || rc=$?
				load >"$tag.load"
				if [[ $rc != 0 ]] || ! grep -q 'samples from' "$tag.err"; then
					note_failure "$name cprof-attach ${ARGS[*]} on $cfg (exit $rc): $(tail -n1 "$tag.err")"
					rm -f "$tag.err"
				fi
			done
			if [[ " $TICKER_CONFIGS " == *" $cfg "* ]]; then
				# the machine's own share of missed ticks, beside the
				# same target: a bare timer loop at the same rate
				if "$B/ticker" "${ARGS[-1]}" "$SECS" >"$TMP/ticker.out" 2>&1; then
					printf '%s\t%s\t%s\n' "$cfg" "$rep" "$(cat "$TMP/ticker.out")" >>"$OUT/ticker.tsv"
				else
					note_failure "ticker on $cfg: $(tail -n1 "$TMP/ticker.out")"
				fi
			fi
			if [[ " $FLOOR_CONFIGS " == *" $cfg "* ]]; then
				local cnt=$FLOOR_COUNT
				[[ $FLOOR_GAP == 10101 ]] && cnt=$((cnt / 5))
				# under perf stat too: its system calls per round trip
				if run_tracked perf stat -x, -o "$TMP/floor.stat" -e "$EV" -- \
					"$FLOOR" "$BUSYTID" "$cnt" "$FLOOR_GAP" getregs \
					>"$TMP/floor.out" 2>"$TMP/floor.err"; then
					printf '%s\t%s\t%s sysc_per_round_trip %s\n' "$cfg" "$rep" \
						"$(tr '\n' ' ' <"$TMP/floor.out")" \
						"$(awk -v n="$cnt" -v s="$(stat_value "$TMP/floor.stat" raw_syscalls:sys_enter)" \
							'BEGIN { print s / n }')" >>"$OUT/floor.tsv"
				else
					note_failure "ptrace_floor on $cfg: $(tail -n1 "$TMP/floor.err")"
				fi
			fi
			stop_target
		done
	done
}
: >"$OUT/floor.tsv"
: >"$OUT/ticker.tsv"
TICKER_CONFIGS="b1 b2 b8 w64 w256"

SAMPLING=()
[[ " $GOALS " == *" 1 "* ]] && SAMPLING+=(d30 d30busy)
[[ " $GOALS " == *" 2 "* ]] && SAMPLING+=(b1 b2 b8 w64 w256)
[[ -n ${CONFIGS:-} ]] && read -ra SAMPLING <<<"$CONFIGS"
FLOOR_CONFIGS="d30 d30busy c999 c99 m999 w99 b1"
if ((${#SAMPLING[@]})); then
	echo
	echo "-- sampling runs: ${SAMPLING[*]} ($REPS x $SECS s each per build; load $(cut -d' ' -f1-3 /proc/loadavg))"
	sampling_runs "${SAMPLING[@]}"
	echo "   done in $SECONDS s"
fi

# ---- goal 3: heap mode --------------------------------------------------------

LIBC=""
heap_runs() {
	local tools=(unprofiled cprof)
	[[ -n $BASE ]] && tools+=(base)
	# --heap-method traps (the default is the kernel's uprobes): ptrace
	# stops, a round trip per call and per return.
	tools+=(cproft)
	# perf uprobes on malloc and free, our own group so that nobody else's
	# probes are touched; removed at the end (and by the EXIT trap).
	LIBC=$(ldd "$HEAPBENCH" | awk '/libc\.so/ { print $3; exit }')
	PROBES=cprofbench$$
	UPROBE_EV="$PROBES:malloc,$PROBES:free"
	if [[ -z $LIBC ]]; then
		echo "   perf uprobes: skipped (no libc found in ldd $HEAPBENCH)"
		PROBES=""
	elif ! perf probe -x "$LIBC" -a "$PROBES:malloc=malloc" -a "$PROBES:free=free" >"$TMP/probe.err" 2>&1; then
		# perf probe refuses a second probe at an address that has one:
		# someone else's probes on malloc and free are used as they are
		# (and left in place).
		PROBES=""
		local m fr
		m=$(perf probe -l 2>/dev/null | awk '/on (__GI___libc_malloc|__libc_malloc|malloc)[@+ ]/ && /libc\.so/ { print $1; exit }')
		fr=$(perf probe -l 2>/dev/null | awk '/on (__GI___libc_free|__libc_free|free|cfree)[@+ ]/ && /libc\.so/ { print $1; exit }')
		if [[ -n $m && -n $fr ]]; then
			UPROBE_EV="$m,$fr"
			echo "   perf uprobes: using the probes already defined: $UPROBE_EV"
		else
			echo "   perf uprobes: skipped: perf probe -x $LIBC -a malloc failed: $(grep -v '^ *$' "$TMP/probe.err" | tail -n1)"
			UPROBE_EV=""
		fi
	fi
	if [[ -n $UPROBE_EV ]]; then
		if perf record -q -o "$TMP/u.data" -e "$UPROBE_EV" -g -- "$HEAPBENCH" 10 2 >/dev/null 2>"$TMP/probe.err"; then
			tools+=(uprobes)
		else
			echo "   perf uprobes: skipped: perf record -e $UPROBE_EV fails: $(tail -n1 "$TMP/probe.err")"
		fi
	fi
	if command -v heaptrack >/dev/null; then tools+=(heaptrack); else echo "   heaptrack: not installed, skipped"; fi
	if command -v ltrace >/dev/null; then tools+=(ltrace); else echo "   ltrace: not installed, skipped"; fi
	local rep count tool threads rc n t
	# heap_cmd TOOL: the command line in front of heapbench, in CMD
	heap_cmd() {
		case $1 in
		unprofiled) CMD=() ;;
		cprof) CMD=("$BUILD/cprof-attach" --heap -q -o "$TMP/heap.txt" --) ;;
		base) CMD=("$BASE/cprof-attach" --heap -q -o "$TMP/heap.txt" --) ;;
		cproft) CMD=("$BUILD/cprof-attach" --heap --heap-method traps -q -o "$TMP/heap.txt" --) ;;
		uprobes) CMD=(perf record -q -o "$TMP/u.data" -e "$UPROBE_EV" -g --) ;;
		heaptrack) rm -rf "$TMP/ht"; mkdir -p "$TMP/ht"; CMD=(heaptrack -o "$TMP/ht/hb") ;;
		ltrace) CMD=(ltrace -e malloc+free -o /dev/null) ;;
		esac
	}
	# heap_run TOOL PAIRS THREADS: one run under perf stat (all processes:
	# the tool and the target); sets NS (heapbench's own elapsed_ns).
	heap_run() {
		heap_cmd "$1"
		rc=0
		run_tracked perf stat -x, -o "$TMP/heap.stat" -e task-clock,context-switches,raw_syscalls:sys_enter -- \
			timeout -k 5 300 "${CMD[@]}" "$HEAPBENCH" "$2" 30 "$3" >"$TMP/heap.out" 2>"$TMP/heap.err" </dev/null || rc=$?
		NS=$(awk '/^elapsed_ns/ { print $2 }' "$TMP/heap.out")
		if [[ $rc != 0 || -z $NS ]] || ! grep -qx "${EXPECT[$2.$3]}" "$TMP/heap.out"; then
			note_failure "heap: $1, heapbench $2 30 $3 (exit $rc): $(grep -m1 -iE 'error|fail|cannot' "$TMP/heap.err" || tail -n1 "$TMP/heap.err")"
			return 1
		fi
	}
	declare -gA EXPECT=()
	# unprofiled, the threads' runs make 100 times the pairs: a few
	# milliseconds would measure the scheduler, not malloc
	local upairs=$((THREAD_PAIRS * 100))
	for count in "$PAIRS 1" "1 1" "$THREAD_PAIRS 1" "$THREAD_PAIRS 2" "$THREAD_PAIRS 4" \
		"$upairs 1" "$upairs 2" "$upairs 4"; do
		read -r n t <<<"$count"
		EXPECT[$n.$t]=$("$HEAPBENCH" "$n" 30 "$t" | grep -m1 '^ok ')
	done
	for ((rep = 0; rep < REPS; rep++)); do
		rotate "$rep" "${tools[@]}"
		for tool in "${ROTATED[@]}"; do
			for count in "$PAIRS" 1; do
				heap_run "$tool" "$count" 1 || continue
				[[ $count == 1 ]] || record "heap.ns.$tool" "$NS"
				record "heap.cpu.$tool.$count" "$(stat_value "$TMP/heap.stat" task-clock)"
				record "heap.sysc.$tool.$count" "$(stat_value "$TMP/heap.stat" raw_syscalls:sys_enter)"
				record "heap.csw.$tool.$count" "$(stat_value "$TMP/heap.stat" context-switches)"
			done
		done
		record heap.load "$(load)"
	done
	rm -rf "$TMP/ht" "$TMP/u.data" "$TMP/heap.txt"
	# Pairs per second with 1, 2, 4 allocating threads (THREAD_PAIRS in
	# all): the tracers, unprofiled and perf uprobes (its handler runs in
	# each thread) as references.
	local ttools=(unprofiled cprof)
	[[ -n $BASE ]] && ttools+=(base)
	ttools+=(cproft)
	[[ " ${tools[*]} " == *" uprobes "* ]] && ttools+=(uprobes)
	for ((rep = 0; rep < REPS; rep++)); do
		rotate "$rep" "${ttools[@]}"
		for tool in "${ROTATED[@]}"; do
			for threads in 1 2 4; do
				count=$THREAD_PAIRS
				[[ $tool == unprofiled ]] && count=$upairs
				heap_run "$tool" "$count" "$threads" || continue
				record "hthr.pps.$tool.$threads" "$(awk -v n="$count" -v ns="$NS" 'BEGIN { print n * 1e9 / ns }')"
			done
		done
	done
	rm -rf "$TMP/u.data" "$TMP/heap.txt"
	if [[ -n $PROBES ]]; then
		perf probe -q -d "$PROBES:*" >/dev/null 2>&1 || echo "   could not remove the probes $PROBES:* (perf probe -d '$PROBES:*')"
		PROBES=""
	fi
}
if [[ " $GOALS " == *" 3 "* ]]; then
	echo
	echo "-- heap: heapbench $PAIRS 30 and 1 30, heapbench $THREAD_PAIRS 30 {1,2,4} (load $(cut -d' ' -f1-3 /proc/loadavg))"
	heap_runs
	echo "   done in $SECONDS s"
fi

# ---- goal 4: slowdown (bench/run.sh's section 2, with the base build) ---------

slowdown_runs() {
	local best="" ns work rep c args out=$TMP/run.out err=$TMP/run.err rc
	for _ in 1 2 3; do
		ns=$("$WORKLOAD" --depth 30 --work 100 | awk '/^elapsed_ns/ { print $2 }')
		[[ -z $best || $ns -lt $best ]] && best=$ns
	done
	work=$(awk -v s="$WORK_SECONDS" -v b="$best" 'BEGIN { print int(s * 1e9 * 100 / b + 0.5) }')
	echo "   work: $work units (about $WORK_SECONDS s unprofiled), depth 30, 1 thread"
	local configs=(unprofiled cprof99 cprof999 perf99 perf999)
	[[ -n $BASE ]] && configs+=(base99 base999)
	for ((rep = 0; rep < SLOW_REPS; rep++)); do
		rotate "$rep" "${configs[@]}"
		for c in "${ROTATED[@]}"; do
			args=("$WORKLOAD" --threads 1 --depth 30 --work "$work")
			rc=0
			case $c in
			unprofiled) run_tracked "${args[@]}" >"$out" 2>"$err" || rc=$? ;;
			cprof99 | cprof999) run_tracked "$BUILD/cprof-attach" -q -F "${c#cprof}" -o /dev/null -- "${args[@]}" >"$out" 2>"$err" || rc=$? ;;
			base99 | base999) run_tracked "$BASE/cprof-attach" -q -F "${c#base}" -o /dev/null -- "${args[@]}" >"$out" 2>"$err" || rc=$? ;;
			perf99 | perf999) run_tracked perf record -q -F "${c#perf}" -g -e cpu-clock -o "$TMP/perf.data" -- \
				"${args[@]}" >"$out" 2>"$err" || rc=$? ;;
			esac
			ns=$(awk '/^elapsed_ns/ { print $2 }' "$out")
			if [[ $rc != 0 || -z $ns ]] || grep -q '^FAIL' "$err"; then
				note_failure "slowdown: $c (exit $rc): $(tail -n1 "$err")"
				continue
			fi
			record "slow.$c" "$ns"
			record "slowrep.$rep.$c" "$ns"
			ns=$(awk '/^cpu_ns/ { print $2 }' "$out")
			[[ -n $ns ]] && record "slowcpu.$rep.$c" "$ns"
		done
		record slow.load "$(load)"
	done
	rm -f "$TMP/perf.data" "$TMP/perf.data.old"
}
# The target's CPU per sample, counted where the slowdown's few percent are
# lost in the machine's noise: bench/clockcost.c times fixed work by the
# thread's own CPU clock with no event, with cprof-attach's clock (its
# registers and stack copied at each period), with perf record -g's (a
# call chain) and with perf record --call-graph dwarf's (registers and
# 8 KiB of stack), at CLOCKCOST_HZ, interleaved; the difference over the
# samples, times 99 or 999, is the slowdown at that rate.  Then the tools
# themselves on it at 999 Hz (cprof-attach -F, perf record -g -F): what
# each costs the thread in all, with the events as the tool opens them
# and its other doings (cprof-attach's seize) included.
clockcost_runs() {
	local line
	if "$B/clockcost" "$CLOCKCOST_HZ" 9 300 >"$TMP/clockcost.out" 2>"$TMP/clockcost.err"; then
		while read -r line; do
			record "clockcost.${line% *}" "${line#* }"
		done <"$TMP/clockcost.out"
	else
		note_failure "bench/clockcost.c: $(tail -n1 "$TMP/clockcost.err")"
	fi
	if "$B/clockcost" 999 "$CLOCKCOST_TOOL_REPS" 2000 "$BUILD/cprof-attach" \
		>"$TMP/clocktools.out" 2>"$TMP/clockcost.err"; then
		while read -r line; do
			record "clocktools.${line% *}" "${line#* }"
		done <"$TMP/clocktools.out"
	else
		note_failure "bench/clockcost.c with the tools: $(tail -n1 "$TMP/clockcost.err")"
	fi
}
if [[ " $GOALS " == *" 4 "* ]]; then
	echo
	echo "-- slowdown: $SLOW_REPS interleaved repetitions (load $(cut -d' ' -f1-3 /proc/loadavg))"
	slowdown_runs
	if [[ $HAVE_CLOCKCOST == 1 ]]; then
		echo "   the target's CPU per sample: bench/clockcost $CLOCKCOST_HZ 9 300, then 999 $CLOCKCOST_TOOL_REPS 2000 cprof-attach"
		clockcost_runs
	fi
	echo "   done in $SECONDS s"
fi

# ---- goal 5: memory --------------------------------------------------------------

status_kb() { awk -v f="$2:" '$1 == f { print $2 }' "/proc/$1/status" 2>/dev/null; }

# cprof-attach -F 999 on stackchurn for CHURN_SECONDS: the worker's VmRSS
# every 0.1 s and the distinct stacks of the profile (folded lines).  The
# growth is taken over the second half of the run (after the start-up's
# symbolization), from its last drop of VmRSS (the symbolizer lets go of
# modules and trims the heap now and then, 80d072e) to the last reading,
# over the stacks that came in that time if they come at a steady rate
# (stackchurn makes a new one in most samples).
churn_run() { # NAME DIR
	local name=$1 dir=$2 target attach worker="" i v stacks rc=0 t0 line
	"$B/stackchurn" >/dev/null &
	target=$!
	track "$target"
	sleep 0.3
	"$dir/cprof-attach" -F 999 -d "$CHURN_SECONDS" -q -o "$TMP/churn.folded" "$target" 2>"$TMP/churn.err" &
	attach=$!
	track "$attach"
	t0=$EPOCHREALTIME
	: >"$TMP/churn.rss"
	for ((i = 1; i <= CHURN_SECONDS * 10 + 100; i++)); do
		[[ -z $worker ]] && worker=$(awk '{ print $1 }' "/proc/$attach/task/$attach/children" 2>/dev/null)
		if [[ -n $worker ]]; then
			v=$(status_kb "$worker" VmRSS)
			[[ -n $v ]] && echo "$t0 $EPOCHREALTIME $v" >>"$TMP/churn.rss"
			((i == 20)) && record "churn.hwm2s.$name" "$(status_kb "$worker" VmHWM)"
		fi
		kill -0 "$attach" 2>/dev/null || break
		[[ $(awk '{ print $3 }' "/proc/$attach/stat" 2>/dev/null) == Z ]] && break
		sleep 0.1
	done
	wait "$attach" || rc=$?
	stop_pid "$attach"
	stop_pid "$target"
	if [[ $rc != 0 || ! -s $TMP/churn.folded || ! -s $TMP/churn.rss ]]; then
		note_failure "$name cprof-attach on stackchurn (exit $rc): $(tail -n1 "$TMP/churn.err")"
		return
	fi
	stacks=$(wc -l <"$TMP/churn.folded")
	record "churn.stacks.$name" "$stacks"
	# "bytes_per_stack t_from rss_from rss_last": the readings of the second
	# half of the run, from the last drop of VmRSS in it, if that leaves a
	# fifth of the run.  Only those of the sampling: once the duration is
	# over, the folded output is made (its text, about 230 bytes a stack
	# here, held until written), which is not what the stacks keep.
	line=$(awk -v s="$stacks" -v d="$CHURN_SECONDS" '$2 - $1 > d - 0.2 { next }
		{ t[++NR2] = $2 - $1; r[NR2] = $3 }
		END { n = NR2; tl = t[n]; from = 0
			for (i = 1; i <= n; i++) {
				if (t[i] < tl / 2) continue
				if (!from || r[i] < r[i - 1] - 256) from = i
			}
			if (!from || tl - t[from] < tl / 5) { print "nan", "nan", "nan", r[n]; exit }
			k = s * (tl - t[from]) / tl
			print (k > 0 ? (r[n] - r[from]) * 1024 / k : "nan"), t[from], r[from], r[n] }' "$TMP/churn.rss")
	read -r v i r1 rlast <<<"$line"
	record "churn.bps.$name" "$v"
	record "churn.tfrom.$name" "$i"
	record "churn.rssfrom.$name" "$r1"
	record "churn.rssend.$name" "$rlast"
}

memory_runs() {
	local spec name dir line
	if [[ -x $SRC/rss_start.sh || -f $SRC/rss_start.sh ]]; then
		for spec in "${BUILDS[@]}"; do
			name=${spec%%=*} dir=${spec#*=}
			# bench/rss_start.sh: the worker's VmHWM and VmRSS at the end
			# of a 5 s run at 99 Hz on the workload (debug files as
			# installed).
			if DURATION=5 TARGETS=workload NODEBUG=0 bash "$SRC/rss_start.sh" "$dir" >"$TMP/rss.out" 2>"$TMP/rss.err"; then
				line=$(awk '$1 == "target" { for (i = 1; i <= NF; i++) col[$i] = i; next }
					$1 == "workload" && col["hwm_end"] { print $col["hwm_end"], $col["rss_end"] }' "$TMP/rss.out")
				if [[ $line =~ ^[0-9]+\ [0-9]+$ ]]; then
					record "rss_start.hwmend.$name" "${line% *}"
					record "rss_start.rssend.$name" "${line#* }"
				else
					note_failure "bench/rss_start.sh $dir: no workload line in its output"
				fi
			else
				note_failure "bench/rss_start.sh $dir: $(tail -n1 "$TMP/rss.err")"
			fi
		done
	fi
	if [[ $HAVE_CHURN == 1 ]]; then
		local rep
		for ((rep = 0; rep < (REPS > 1 ? 2 : 1); rep++)); do
			rotate "$rep" "${BUILDS[@]}"
			for spec in "${ROTATED[@]}"; do churn_run "${spec%%=*}" "${spec#*=}"; done
		done
	else
		echo "   bench/stackchurn.c absent or does not build: bytes per stack under cprof-attach skipped"
	fi
	for spec in "${BUILDS[@]}"; do
		name=${spec%%=*} dir=${spec#*=}
		if build_stackmem "$dir" "$name"; then
			# "[SHAPE depth D] distinct N bytes_per_stack B ...", one line per shape
			"$TMP/stackmem.$name" 200000 20 >"$TMP/stackmem.out" 2>&1
			local from="bench/stackmem.c"
			[[ $STACKMEM_FROM == "$SRC/stackmem.c" ]] || from="bench/stackmem.c of 61339a7"
			echo "   stackmem ($name, $from): $(tr '\n' ';' <"$TMP/stackmem.out")"
			line=$(awk '{ shape = $1 == "distinct" ? "random" : $1
				for (i = 1; i < NF; i++) if ($i == "bytes_per_stack") print shape, $(i + 1) }' "$TMP/stackmem.out")
			[[ -n $line ]] || note_failure "stackmem ($name): $(tail -n1 "$TMP/stackmem.out")"
			while read -r shape v; do
				[[ -n $shape ]] && record "stackmem.$shape.$name" "$v"
			done <<<"$line"
		else
			echo "   stackmem: skipped for $name ($(grep -m1 -E 'error|undefined' "$TMP/stackmem.$name.err" 2>/dev/null || echo 'bench/stackmem.c or libcprof.a absent'))"
		fi
	done
}
if [[ " $GOALS " == *" 5 "* ]]; then
	echo
	echo "-- memory: worker RSS at start, bytes per distinct stack (load $(cut -d' ' -f1-3 /proc/loadavg))"
	memory_runs
	echo "   done in $SECONDS s"
fi

record load.end "$(load)"
echo
echo "== issue 15 goals ($SECONDS s; load average $(cut -d' ' -f1-3 /proc/loadavg) at the end) =="
python3 "$SRC/cost_summary.py" "$OUT" "$PAIRS" "$THREAD_PAIRS" || FAILURES=$((FAILURES + 1))

if ((FAILURES > 0)); then
	echo
	echo "cost.sh: $FAILURES measurement(s) failed; see the FAILED lines above" >&2
	exit 1
fi
exit 0
